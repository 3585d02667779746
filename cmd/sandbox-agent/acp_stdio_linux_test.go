package main

import (
	"io"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// Pipes and sockets become polled descriptors that carry the same bytes;
// the original pipe's description stays blocking (a shell sharing it sees
// no change); a regular file is left alone.
func TestPollableStdio(t *testing.T) {
	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer inR.Close()
	defer inW.Close()
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	outF, peer := os.NewFile(uintptr(pair[0]), "stdout"), os.NewFile(uintptr(pair[1]), "peer")
	defer outF.Close()
	defer peer.Close()
	// os.Pipe's descriptors are non-blocking already; make the read end
	// what a child inherits.
	if err := syscall.SetNonblock(int(inR.Fd()), false); err != nil {
		t.Fatal(err)
	}
	if err := syscall.SetNonblock(pair[0], false); err != nil {
		t.Fatal(err)
	}
	in, out, ok := pollableStdio(inR, outF)
	if !ok {
		t.Fatal("a pipe and a socket were not both made pollable")
	}
	if _, isConn := out.(net.Conn); !isConn {
		t.Fatalf("stdout socket is %T", out)
	}
	if fl, _ := unix.FcntlInt(inR.Fd(), unix.F_GETFL, 0); fl&unix.O_NONBLOCK != 0 {
		t.Fatal("the inherited pipe description was made non-blocking")
	}
	inW.Write([]byte("ping\n"))
	buf := make([]byte, 5)
	if _, err := io.ReadFull(in, buf); err != nil || string(buf) != "ping\n" {
		t.Fatalf("stdin: %q %v", buf, err)
	}
	inW.Close()
	if n, err := in.Read(buf); n != 0 || err != io.EOF {
		t.Fatalf("stdin after the writer closed: %d %v", n, err)
	}
	out.Write([]byte("pong\n"))
	if _, err := io.ReadFull(peer, buf); err != nil || string(buf) != "pong\n" {
		t.Fatalf("stdout: %q %v", buf, err)
	}

	file, err := os.Create(filepath.Join(t.TempDir(), "f"))
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	if in, _, ok := pollableStdio(file, outF); ok || in != io.Reader(file) {
		t.Fatalf("a regular file: %T %v", in, ok)
	}
}
