package main

import (
	"context"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/pflag"

	"github.com/sandbox-agent-go/sandbox-agent/adapters/fsys"
	"github.com/sandbox-agent-go/sandbox-agent/adapters/httpapi"
	"github.com/sandbox-agent-go/sandbox-agent/app/authz"
)

// authFlags are the server's token and browser-safety flags beyond
// --token: --token-file, --token-header, --health-public and
// --allowed-host.
type authFlags struct {
	tokenFile    string
	allowedHosts stringList
	tokenHeader  string
	healthPublic bool
}

func (a *authFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&a.tokenHeader, "token-header", "", "also take the bearer token from this request `HEADER` (checked before Authorization; a bare token or \"Bearer <token>\"), for a router that drops Authorization, e.g. X-Sandbox-Agent-Token behind agent-sandbox's sandbox-router")
	fs.BoolVar(&a.healthPublic, "health-public", false, "serve GET /v1/health without the token (and without policies), for probes")
	fs.StringVar(&a.tokenFile, "token-file", "", "read the bearer tokens from `FILE`, one per line ('#' comments); reloaded on SIGHUP. Preferred over --token, which other local users can see in ps")
	fs.Var(&a.allowedHosts, "allowed-host", "also accept this `NAME` in the Host header on a loopback listener (repeatable; localhost, 127.0.0.1 and [::1] always are)")
}

// tokenEnv names the environment variable holding the token. The daemon
// removes it from its own environment once read (and, on Linux, from the
// environment the kernel shows in /proc/PID/environ: reexec_linux.go), so
// no child process (agents, installers) inherits it.
const tokenEnv = "SANDBOX_AGENT_TOKEN"

// maxTokenFile caps a token file (fsys.ReadRegular: larger is refused).
const maxTokenFile = 1 << 20

// startTokens builds the built-in check's tokens from --token-file, or
// the token of --token or SANDBOX_AGENT_TOKEN (fromEnv says which; the
// variable is read into the flag's value by applyEnv). --token together
// with --token-file is refused; the variable is ignored when a file is
// given. A token file is read now (missing or empty is an error) and
// again on every SIGHUP until ctx ends; a reload that fails keeps the
// tokens in use, logs why and counts in reloads. The file read is one of
// the daemon's secrets. stop ends the reload goroutine.
func startTokens(ctx context.Context, token string, fromEnv bool, file string, secrets *fsys.Secrets, reloads *httpapi.Reloads, log *slog.Logger) (tokens *authz.Tokens, source string, stop func(), err error) {
	_ = os.Unsetenv(tokenEnv)
	stop = func() {}
	switch {
	case token != "" && !fromEnv && file != "":
		return nil, "", nil, usagef("--token and --token-file cannot be combined; put every token in the file")
	case file != "":
		if abs, err := filepath.Abs(file); err == nil {
			file = abs
		}
		list, fi, err := readTokenFile(ctx, file)
		if err != nil {
			return nil, "", nil, err
		}
		tokens = authz.NewTokens(list...)
		secrets.SetFiles("tokens", []fsys.SecretFile{{Path: file, Read: fi, What: whatTokenFile}})
		stop = reloadTokensOnHUP(ctx, file, tokens, secrets, reloads, log)
		return tokens, "token-file", stop, nil
	case token != "" && fromEnv:
		if err := checkToken(token, "$"+tokenEnv); err != nil {
			return nil, "", nil, err
		}
		return authz.NewTokens(token), "env", stop, nil
	case token != "":
		if err := checkToken(token, "--token"); err != nil {
			return nil, "", nil, err
		}
		return authz.NewTokens(token), "flag", stop, nil
	}
	return authz.NewTokens(), "", stop, nil
}

const whatTokenFile = "its token file"

// checkToken refuses a token no header can carry (authz.CheckToken),
// naming where it came from: a flag's value is a usage error (exit 2), a
// variable's an error (exit 1). The token itself is never printed.
func checkToken(tok, from string) error {
	if tok == "" {
		return nil
	}
	if err := authz.CheckToken(tok); err != nil {
		if strings.HasPrefix(from, "-") {
			return usagef("%s: %v", from, err)
		}
		return fmt.Errorf("%s: %w", from, err)
	}
	return nil
}

// readClientToken is the token a client (acp, api) sends, from the file its
// flag names: read and checked as the daemon reads its --token-file (a
// regular file of at most maxTokenFile bytes, so a FIFO cannot block it and
// a huge file is refused, not sent as a header), the first token of it, so
// the daemon's own token file works too.
func readClientToken(ctx context.Context, flag, path string) (string, error) {
	b, _, err := fsys.ReadRegular(ctx, path, maxTokenFile)
	if err != nil {
		return "", fmt.Errorf("%s: %w", flag, err)
	}
	list, err := authz.ParseTokenFile(b)
	if err != nil {
		return "", fmt.Errorf("%s %s: %w", flag, path, err)
	}
	return list[0], nil
}

// readTokenFile reads and parses a token file: a regular file of at most
// maxTokenFile bytes, read within fsys.ReadTimeout (fsys.ReadRegular).
func readTokenFile(ctx context.Context, path string) ([]string, fs.FileInfo, error) {
	b, fi, err := fsys.ReadRegular(ctx, path, maxTokenFile)
	if err != nil {
		return nil, nil, fmt.Errorf("--token-file: %w", err)
	}
	list, err := authz.ParseTokenFile(b)
	if err != nil {
		return nil, nil, fmt.Errorf("--token-file %s: %w", path, err)
	}
	return list, fi, nil
}

func reloadTokensOnHUP(ctx context.Context, file string, tokens *authz.Tokens, secrets *fsys.Secrets, reloads *httpapi.Reloads, log *slog.Logger) func() {
	return onSIGHUP(ctx, func(ctx context.Context) {
		list, fi, err := readTokenFile(ctx, file)
		if err != nil {
			reloads.Count("tokens", err)
			log.Error("reloading the token file failed; keeping the previous tokens", "err", err)
			return
		}
		tokens.Set(list)
		secrets.SetFiles("tokens", []fsys.SecretFile{{Path: file, Read: fi, What: whatTokenFile}})
		log.Info("token file reloaded", "tokens", len(list))
		// Counted once in effect: the open streams are judged again then,
		// and those of a token taken out end.
		reloads.Count("tokens", nil)
	})
}

// isLoopback reports whether a listener only accepts local connections.
func isLoopback(addr net.Addr) bool {
	tcp, ok := addr.(*net.TCPAddr)
	return ok && tcp.IP.IsLoopback()
}

// warnIfExposed logs, loudly, that a daemon reachable from the network
// runs without a token.
func warnIfExposed(log *slog.Logger, addr net.Addr, tokens *authz.Tokens, policies bool) {
	if isLoopback(addr) || tokens.Configured() {
		return
	}
	msg := "NO TOKEN on a non-loopback address: anyone who can reach " + addr.String() +
		" can run agents and read and write files as this user. Set --token-file FILE or " + tokenEnv
	if policies {
		msg += " (unless an auth policy refuses every request it does not authenticate)"
	}
	log.Warn("!!! "+msg+" !!!", "addr", addr.String())
}

// warnOpenCORS logs, loudly, that -O '*' without a token lets every web
// page the user opens drive the daemon through their browser: CORS then
// allows any origin to send state-changing requests and read the answers.
func warnOpenCORS(log *slog.Logger, origins []string, tokens *authz.Tokens, policies bool) {
	if !slices.Contains(origins, "*") || tokens.Configured() {
		return
	}
	msg := "--cors-allow-origin '*' with NO TOKEN: any web page opened in a browser that can reach this daemon can run agents and " +
		"read and write files through it. Set a token (--token-file FILE or " + tokenEnv + ") or list the origins you trust"
	if policies {
		msg += " (unless an auth policy refuses every request it does not authenticate)"
	}
	log.Warn("!!! " + msg + " !!!")
}

// checkTokenHeader refuses a --token-header that cannot name a header the
// token could safely come in: not a valid field name, one a proxy or
// net/http rewrites, or Authorization itself (always read).
func checkTokenHeader(name string) error {
	if name == "" {
		return nil
	}
	canon := http.CanonicalHeaderKey(name)
	switch {
	case !validHeaderName(name):
		return usagef("--token-header %q is not a valid header name", name)
	case canon == "Authorization":
		return usagef("--token-header: Authorization is always read; name another header")
	case canon == "Host" || canon == "Cookie" || canon == "Connection" || canon == "Upgrade" || canon == "Content-Length" ||
		canon == "Transfer-Encoding" || canon == "Te" || canon == "Trailer" || canon == "Proxy-Authorization" || canon == "Keep-Alive":
		return usagef("--token-header %q is a header proxies and HTTP itself use; name another header", name)
	case daemonHeaders[canon] || strings.HasPrefix(canon, "Sec-") || strings.HasPrefix(canon, "Access-Control-"):
		return usagef("--token-header %q is a header the daemon reads or answers for another purpose; name another header", name)
	}
	return nil
}

// daemonHeaders are the headers the daemon reads for a meaning of their
// own or sends back: a token in one would be misread, or echoed and logged
// (X-Request-Id comes back on every answer and names the request in the
// log). The Sec- and Access-Control- families are refused with them.
var daemonHeaders = map[string]bool{
	"X-Request-Id": true, "Origin": true, "Referer": true, "Content-Type": true, "Accept": true,
	"Last-Event-Id": true, "Sandbox-Agent-Event-Id": true, "Acp-Connection-Id": true, "Acp-Session-Id": true,
}

// validHeaderName reports whether name is an RFC 9110 field name (a token).
func validHeaderName(name string) bool {
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return name != ""
}
