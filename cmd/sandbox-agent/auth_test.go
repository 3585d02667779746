package main

import (
	"bytes"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/sandbox-agent-go/sandbox-agent/adapters/fsys"
	"github.com/sandbox-agent-go/sandbox-agent/app/authz"
)

// A daemon reachable from the network without a token says so, loudly
// (tested here rather than by listening on a public address).
func TestWarnIfExposed(t *testing.T) {
	for _, tt := range []struct {
		name   string
		addr   net.Addr
		tokens *authz.Tokens
		warn   bool
	}{
		{"public, no token", &net.TCPAddr{IP: net.IPv4zero, Port: 2468}, authz.NewTokens(), true},
		{"public, token", &net.TCPAddr{IP: net.IPv4zero, Port: 2468}, authz.NewTokens("t"), false},
		{"loopback, no token", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 2468}, authz.NewTokens(), false},
		{"ipv6 loopback", &net.TCPAddr{IP: net.IPv6loopback, Port: 2468}, authz.NewTokens(), false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			warnIfExposed(slog.New(slog.NewTextHandler(&buf, nil)), tt.addr, tt.tokens, false)
			if got := strings.Contains(buf.String(), "NO TOKEN"); got != tt.warn {
				t.Errorf("warned %v: %s", got, buf.String())
			}
		})
	}
}

// -O '*' without a token says so, loudly: every web page could use the
// daemon through the user's browser.
func TestWarnOpenCORS(t *testing.T) {
	for _, tt := range []struct {
		name    string
		origins []string
		tokens  *authz.Tokens
		warn    bool
	}{
		{"any origin, no token", []string{"https://a.example", "*"}, authz.NewTokens(), true},
		{"any origin, token", []string{"*"}, authz.NewTokens("t"), false},
		{"listed origins, no token", []string{"https://a.example"}, authz.NewTokens(), false},
		{"no CORS", nil, authz.NewTokens(), false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			warnOpenCORS(slog.New(slog.NewTextHandler(&buf, nil)), tt.origins, tt.tokens, false)
			if got := strings.Contains(buf.String(), "NO TOKEN"); got != tt.warn {
				t.Errorf("warned %v: %s", got, buf.String())
			}
		})
	}
}

func TestStartTokens(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	ctx, sec := t.Context(), fsys.NewSecrets()
	t.Setenv(tokenEnv, "from-env")
	tk, src, stop, err := startTokens(ctx, "from-env", true, "", sec, nil, log)
	if err != nil || src != "env" || !tk.Check("Bearer from-env") {
		t.Fatalf("env: %v %q", err, src)
	}
	stop()
	if _, ok := os.LookupEnv(tokenEnv); ok {
		t.Error("the token stayed in the environment, for children to inherit")
	}
	file := filepath.Join(t.TempDir(), "tokens")
	os.WriteFile(file, []byte("a\nb\n"), 0o600)
	tk, src, stop, err = startTokens(ctx, "", false, file, sec, nil, log)
	if err != nil || src != "token-file" || !tk.Check("Bearer b") {
		t.Fatalf("file: %v %q", err, src)
	}
	stop()
	if why := sec.Secret(file, true); why != whatTokenFile {
		t.Errorf("the token file is not among the daemon's secrets: %q", why)
	}
	if _, _, _, err := startTokens(ctx, "x", false, file, sec, nil, log); err == nil {
		t.Error("--token with --token-file accepted")
	}
	os.WriteFile(file, []byte("# nothing\n"), 0o600)
	if _, _, _, err := startTokens(ctx, "", false, file, sec, nil, log); err == nil {
		t.Error("an empty token file accepted")
	}
	// A FIFO (no writer will ever come) is refused at once.
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := startTokens(ctx, "", false, fifo, sec, nil, log); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("a FIFO token file: %v", err)
	}
	tk, src, _, _ = startTokens(ctx, "", false, "", sec, nil, log)
	if tk.Configured() || src != "" {
		t.Errorf("no source: %q", src)
	}
}
