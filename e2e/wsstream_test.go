package e2e

import (
	"crypto/rand"
	be "encoding/binary"
	"time"
)

// sendLarge writes one text frame of prefix, n bytes of fill, then suffix,
// masked and written in 64 KiB pieces: a test can send a message of tens
// of megabytes from each of many clients without holding it. It stops at
// the first write error (the server closed the socket, as it must past a
// limit) and returns it with how many payload bytes were written.
func (c *wsClient) sendLarge(prefix string, fill byte, n int, suffix string) (int, error) {
	total := len(prefix) + n + len(suffix)
	hdr := []byte{0x80 | 0x1, 0x80 | 127}
	hdr = be.BigEndian.AppendUint64(hdr, uint64(total))
	var mask [4]byte
	_, _ = rand.Read(mask[:])
	hdr = append(hdr, mask[:]...)
	_ = c.conn.SetWriteDeadline(time.Now().Add(30 * time.Second))
	if _, err := c.conn.Write(hdr); err != nil {
		return 0, err
	}
	buf := make([]byte, 64<<10)
	pos := 0 // payload bytes written, for the mask
	write := func(p []byte) error {
		for i, b := range p {
			p[i] = b ^ mask[(pos+i)%4]
		}
		_ = c.conn.SetWriteDeadline(time.Now().Add(30 * time.Second))
		_, err := c.conn.Write(p)
		pos += len(p)
		return err
	}
	if err := write(append(buf[:0], prefix...)); err != nil {
		return pos, err
	}
	for left := n; left > 0; {
		k := min(left, len(buf))
		for i := range k {
			buf[i] = fill
		}
		if err := write(buf[:k]); err != nil {
			return pos, err
		}
		left -= k
	}
	return pos, write(append(buf[:0], suffix...))
}
