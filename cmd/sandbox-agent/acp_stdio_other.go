//go:build !linux

package main

import "io"

// pollableStdio is wired up on Linux only; see acp_stdio_linux.go.
func pollableStdio(stdin io.Reader, stdout io.Writer) (io.Reader, io.Writer, bool) {
	return stdin, stdout, false
}
