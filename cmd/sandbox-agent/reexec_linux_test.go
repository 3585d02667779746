package main

import (
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/spf13/pflag"
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
	t.Setenv(tokenFromEnv, "flag")
	tok, fromFlag, ok, err := handedToken()
	if err != nil || !ok || tok != "tok-from-memfd" || !fromFlag {
		t.Fatalf("handedToken = %q, %v, %v, %v", tok, fromFlag, ok, err)
	}
	if _, set := os.LookupEnv(tokenFDEnv); set {
		t.Error("the variable stayed")
	}
	if _, set := os.LookupEnv(tokenFromEnv); set {
		t.Error("the source's variable stayed")
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err != unix.EBADF {
		t.Errorf("the descriptor stayed open: %v", err)
	}

	for _, v := range []string{"x", "1", "-5"} {
		t.Setenv(tokenFDEnv, v)
		if _, _, ok, err := handedToken(); !ok || err == nil {
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
	if _, _, _, err := handedToken(); err == nil {
		t.Error("a directory's descriptor was taken for the token")
	}
	os.Unsetenv(tokenFDEnv)
	if _, _, ok, err := handedToken(); ok || err != nil {
		t.Errorf("no variable: %v %v", ok, err)
	}
}

// TestWithoutTokenFlag: every way pflag reads --token off a server command
// line is taken off with its value, and nothing else is: a value that
// looks like the flag stays another flag's, "--" ends the flags, and a
// line this cannot read for certain is refused (kept whole by the caller).
func TestWithoutTokenFlag(t *testing.T) {
	cases := []struct {
		line, want string // space-separated; want "!" when refused
	}{
		{"sa server --token s3 --port 1", "sa server --port 1"},
		{"sa server --token=s3 --port 1", "sa server --port 1"},
		{"sa server -t s3", "sa server"},
		{"sa server -ts3 -p 1", "sa server -p 1"},
		{"sa server -t=s3", "sa server"},
		{"sa server -nt s3 -H h", "sa server -n -H h"},
		{"sa server -nts3", "sa server -n"},
		{"sa server --token a --token b", "sa server"},
		{"sa server --host --token --token s3", "sa server --host --token"},
		{"sa server -H -t -t s3", "sa server -H -t"},
		{"sa server -p1 -n", "sa server -p1 -n"},
		{"sa --log-level info server -t s3 -- --token x", "sa --log-level info server -- --token x"},
		{"sa server --no-token=true -t s3", "sa server --no-token=true"},
		{"sa server --bogus -t s3", "!"},
		{"sa server -n? -t s3", "!"},
	}
	for _, c := range cases {
		fs := newServerCmd().Flags()
		args := strings.Fields(c.line)
		if err := fs.Parse(args[1:]); err != nil && c.want != "!" {
			t.Fatalf("%q does not parse: %v", c.line, err)
		}
		got, ok := withoutFlag(args, fs, "token")
		if c.want == "!" {
			if ok {
				t.Errorf("%q: read as %q, want refused", c.line, got)
			}
			continue
		}
		if !ok || !slices.Equal(got, strings.Fields(c.want)) {
			t.Errorf("%q: %q, %v; want %q", c.line, got, ok, c.want)
			continue
		}
		// The line left parses to the same flags, the token not given.
		again := newServerCmd().Flags()
		if err := again.Parse(got[1:]); err != nil {
			t.Errorf("%q left %q, which does not parse: %v", c.line, got, err)
			continue
		}
		if again.Changed("token") {
			t.Errorf("%q left the token in %q", c.line, got)
		}
		fs.VisitAll(func(f *pflag.Flag) {
			if f.Name != "token" && again.Lookup(f.Name).Value.String() != f.Value.String() {
				t.Errorf("%q: --%s was %q, is %q after", c.line, f.Name, f.Value, again.Lookup(f.Name).Value)
			}
		})
	}
}
