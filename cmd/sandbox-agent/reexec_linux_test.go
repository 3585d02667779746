package main

import (
	"os"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"
)

// TestHandedToken: the new image reads the token from the memfd the old
// one left, closes it and removes the variable naming it; anything else
// in that variable is refused.
func TestHandedToken(t *testing.T) {
	fd, err := unix.MemfdCreate("test-token", 0)
	if err != nil {
		t.Skip("no memfd:", err)
	}
	if _, err := unix.Pwrite(fd, []byte("tok-from-memfd"), 0); err != nil {
		t.Fatal(err)
	}
	t.Setenv(tokenFDEnv, strconv.Itoa(fd))
	tok, ok, err := handedToken()
	if err != nil || !ok || tok != "tok-from-memfd" {
		t.Fatalf("handedToken = %q, %v, %v", tok, ok, err)
	}
	if _, set := os.LookupEnv(tokenFDEnv); set {
		t.Error("the variable stayed")
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err != unix.EBADF {
		t.Errorf("the descriptor stayed open: %v", err)
	}

	for _, v := range []string{"x", "1", "-5"} {
		t.Setenv(tokenFDEnv, v)
		if _, ok, err := handedToken(); !ok || err == nil {
			t.Errorf("%s=%q: %v %v", tokenFDEnv, v, ok, err)
		}
	}
	// handedToken closes what it is given: a raw descriptor, not an
	// *os.File that would close its number again.
	dir, err := unix.Open(t.TempDir(), unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(tokenFDEnv, strconv.Itoa(dir))
	if _, _, err := handedToken(); err == nil {
		t.Error("a directory's descriptor was taken for the token")
	}
	os.Unsetenv(tokenFDEnv)
	if _, ok, err := handedToken(); ok || err != nil {
		t.Errorf("no variable: %v %v", ok, err)
	}
}
