package e2e

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-agent-go/sandbox-agent/e2e/internal/harness"
)

// BenchmarkFSLargeFile PUTs and GETs one large file (2 GiB; FS_BENCH_BYTES
// overrides) through the daemon and reports, per direction, throughput next
// to a plain io.Copy between two files on the same disk, and how much the
// daemon's resident memory grew at its peak (goal: under 64 MiB, i.e. the
// body is streamed, never buffered).
//
//	go test ./e2e -run '^$' -bench BenchmarkFSLargeFile -benchtime 1x
func BenchmarkFSLargeFile(b *testing.B) {
	size := int64(2 << 30)
	if v := os.Getenv("FS_BENCH_BYTES"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			b.Fatalf("FS_BENCH_BYTES: %v", err)
		}
		size = n
	}
	dir := b.TempDir()
	src := filepath.Join(dir, "src.bin")
	writePattern(b, src, size)

	d := startBenchDaemon(b, dir)
	baseRSS := statusKiB(b, d.pid, "VmRSS")

	var putSecs, getSecs, copySecs float64
	runs := 0
	for b.Loop() {
		runs++
		// PUT: the client streams the file from disk.
		f, err := os.Open(src)
		if err != nil {
			b.Fatal(err)
		}
		req, _ := http.NewRequest("PUT", d.url+"/v1/fs/file?path="+url.QueryEscape(filepath.Join(dir, "up.bin")), f)
		req.ContentLength = size
		req.Header.Set("Content-Type", "application/octet-stream")
		start := time.Now()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		putSecs += time.Since(start).Seconds()
		f.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(body), fmt.Sprintf(`"bytesWritten":%d`, size)) {
			b.Fatalf("PUT: %d %s", resp.StatusCode, body)
		}

		// GET: the client streams the answer to a file.
		out, err := os.Create(filepath.Join(dir, "down.bin"))
		if err != nil {
			b.Fatal(err)
		}
		start = time.Now()
		resp, err = http.Get(d.url + "/v1/fs/file?path=" + url.QueryEscape(filepath.Join(dir, "up.bin")))
		if err != nil {
			b.Fatal(err)
		}
		n, err := io.Copy(out, resp.Body)
		resp.Body.Close()
		getSecs += time.Since(start).Seconds()
		out.Close()
		if err != nil || n != size || resp.StatusCode != 200 {
			b.Fatalf("GET: %d bytes, %v, status %d", n, err, resp.StatusCode)
		}

		// The baseline: io.Copy from one file to another (neither side
		// fsyncs; the daemon does not either).
		in, _ := os.Open(src)
		cp, _ := os.Create(filepath.Join(dir, "copy.bin"))
		start = time.Now()
		if _, err := io.Copy(cp, in); err != nil {
			b.Fatal(err)
		}
		copySecs += time.Since(start).Seconds()
		in.Close()
		cp.Close()
		_ = os.Remove(filepath.Join(dir, "copy.bin"))
		_ = os.Remove(filepath.Join(dir, "down.bin"))
	}
	peak := statusKiB(b, d.pid, "VmHWM")
	mb := float64(size) / 1e6 * float64(runs)
	b.ReportMetric(mb/putSecs, "put-MB/s")
	b.ReportMetric(mb/getSecs, "get-MB/s")
	b.ReportMetric(mb/copySecs, "io.Copy-MB/s")
	b.ReportMetric(float64(peak-baseRSS)/1024, "peak-RSS-growth-MiB")
	b.ReportMetric(float64(peak)/1024, "peak-RSS-MiB")
}

// writePattern fills p with size bytes of a non-repeating-looking pattern.
func writePattern(b *testing.B, p string, size int64) {
	b.Helper()
	f, err := os.Create(p)
	if err != nil {
		b.Fatal(err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	block := make([]byte, 1<<20)
	for i := range block {
		block[i] = byte(i*7 + i/251)
	}
	for left := size; left > 0; {
		n := min(left, int64(len(block)))
		if _, err := w.Write(block[:n]); err != nil {
			b.Fatal(err)
		}
		block[0]++ // vary blocks a little
		left -= n
	}
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
}

type benchDaemon struct {
	url string
	pid int
}

// startBenchDaemon runs the binary quietly with HOME=home.
func startBenchDaemon(b *testing.B, home string) benchDaemon {
	d := harness.Start(b, harness.Options{Home: home, Args: []string{"--log-level", "warn"}})
	return benchDaemon{url: d.URL, pid: d.Cmd.Process.Pid}
}
