package main

import (
	"io"
	"net"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// pollableStdio returns the bridge's stdin and stdout as files the Go
// runtime waits on with its poller, when they are pipes or sockets (as an
// editor's are), and reports whether both are.
//
// Why: os.Stdin and os.Stdout are blocking descriptors, so a read waiting
// for the editor holds a thread in the kernel, and the goroutines the
// bridge wakes for every message (the answer reader, the stream reader)
// run on other threads, handed over between CPUs. With both polled the
// whole bridge runs on one thread (GOMAXPROCS 1), which took
// 5-15 µs off every round trip on a 2-CPU machine.
//
// The descriptors' own file descriptions are left as they are: a pipe is
// reopened through /proc/self/fd as a new, non-blocking description, so
// whoever shares the original (a shell, a sibling) sees no change. A
// socket (Node's child_process uses socketpairs) goes through
// net.FileConn, which makes its duplicate non-blocking as Go does for any
// socket it is given. Anything else (a terminal, a file) is left blocking.
func pollableStdio(stdin io.Reader, stdout io.Writer) (io.Reader, io.Writer, bool) {
	in, inOK := pollable(stdin, unix.O_RDONLY)
	out, outOK := pollable(stdout, unix.O_WRONLY)
	return in.(io.Reader), out.(io.Writer), inOK && outOK
}

func pollable(std any, mode int) (any, bool) {
	f, ok := std.(*os.File)
	if !ok {
		return std, false
	}
	var st unix.Stat_t
	if unix.Fstat(int(f.Fd()), &st) != nil {
		return std, false
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFIFO:
		fd, err := unix.Open("/proc/self/fd/"+strconv.Itoa(int(f.Fd())), mode|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
		if err != nil {
			return std, false
		}
		// A non-blocking descriptor: os.NewFile registers it with the
		// poller.
		return os.NewFile(uintptr(fd), f.Name()), true
	case unix.S_IFSOCK:
		c, err := net.FileConn(f)
		if err != nil {
			return std, false
		}
		return c, true
	}
	return std, false
}
