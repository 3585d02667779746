package main

import (
	"bufio"
	"io"
	"os"
	"time"
)

func writePattern(p string, size int64) error {
	f, err := os.Create(p)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	block := make([]byte, 1<<20)
	for i := range block {
		block[i] = byte(i*7 + i/251)
	}
	for left := size; left > 0; {
		n := min(left, int64(len(block)))
		if _, err := w.Write(block[:n]); err != nil {
			f.Close()
			return err
		}
		block[0]++
		left -= n
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// plainCopy is the baseline of the file figures: io.Copy between two files
// on the same disk (no fsync, like the daemons).
func plainCopy(src, dst string, keep bool) (float64, error) {
	in, err := os.Open(src)
	if err != nil {
		return 0, err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return 0, err
	}
	if !keep {
		defer os.Remove(dst)
	}
	defer out.Close()
	start := time.Now()
	n, err := io.Copy(out, in)
	if err != nil {
		return 0, err
	}
	return float64(n) / 1e6 / time.Since(start).Seconds(), nil
}
