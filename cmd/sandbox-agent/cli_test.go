package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/sandbox-agent-go/sandbox-agent/app/acp"
)

// commandPaths walks the command tree and returns the argument path of
// every command a user can call (the root is the empty path), so a new
// command is covered by the tests below without editing them.
func commandPaths(t *testing.T) map[string]*cobra.Command {
	t.Helper()
	out := map[string]*cobra.Command{}
	var walk func(c *cobra.Command, path []string)
	walk = func(c *cobra.Command, path []string) {
		if c.Hidden {
			return
		}
		out[strings.Join(path, " ")] = c
		for _, sub := range c.Commands() {
			walk(sub, append(append([]string{}, path...), sub.Name()))
		}
	}
	walk(newRootCmd(), nil)
	if len(out) < 10 {
		t.Fatalf("only %d commands found: %v", len(out), out)
	}
	return out
}

// buildCLI builds the sandbox-agent binary once per test run.
func buildCLI(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "sandbox-agent")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

type result struct {
	code           int
	stdout, stderr string
}

func runBinary(t *testing.T, bin string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	// A token in the environment must never show up in help text.
	cmd.Env = append(os.Environ(), "SANDBOX_AGENT_TOKEN=s3cret-in-env", "HOME="+t.TempDir())
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	return result{code, out.String(), errb.String()}
}

func runInProcess(args ...string) result {
	return runInProcessCtx(context.Background(), args...)
}

// runInProcessCtx runs a command line with ctx; a cancelled one makes a
// command that wrongly accepted its arguments end at once (the server stops
// as soon as it has started) instead of hanging the test.
func runInProcessCtx(ctx context.Context, args ...string) result {
	var out, errb bytes.Buffer
	err := run(ctx, args, strings.NewReader(""), &out, &errb)
	return result{exitCode(err, &errb), out.String(), errb.String()}
}

func split(path string, more ...string) []string {
	return append(strings.Fields(path), more...)
}

// Every command, in process and in the built binary: --help and -h print
// its usage on stdout and exit 0; an unknown flag, an unknown subcommand
// (groups) or too many arguments (leaves) print the error and the usage on
// stderr and exit 2.
func TestCLIEveryCommand(t *testing.T) {
	bin := buildCLI(t)
	paths := commandPaths(t)
	// The reference's commands are all there (and so checked below).
	for _, want := range []string{"server", "api", "install-agent", "credentials extract", "credentials extract-env", "daemon start", "daemon stop", "daemon status"} {
		if paths[want] == nil {
			t.Errorf("no command %q", want)
		}
	}
	for path, c := range paths {
		name := strings.TrimSpace("sandbox-agent " + path)
		t.Run(name, func(t *testing.T) {
			checkHelp := func(how string, r result) {
				t.Helper()
				if r.code != 0 || r.stderr != "" || !strings.Contains(r.stdout, "Usage:\n  "+name+" ") && !strings.Contains(r.stdout, "Usage:\n  "+name+"\n") {
					t.Errorf("%s --help: exit %d, stderr %q, stdout:\n%s", how, r.code, r.stderr, r.stdout)
				}
				if strings.Contains(r.stdout, "s3cret-in-env") {
					t.Errorf("%s --help prints the token from the environment:\n%s", how, r.stdout)
				}
			}
			checkHelp("in process", runInProcess(split(path, "--help")...))
			checkHelp("in process -h", runInProcess(split(path, "-h")...))
			checkHelp("binary", runBinary(t, bin, split(path, "--help")...))

			checkUsage := func(what string, r result, want string) {
				t.Helper()
				if r.code != 2 || r.stdout != "" || !strings.Contains(r.stderr, "Usage:") || !strings.Contains(r.stderr, want) {
					t.Errorf("%s: exit %d, stdout %q, stderr:\n%s", what, r.code, r.stdout, r.stderr)
				}
			}
			checkUsage("unknown flag", runBinary(t, bin, split(path, "--no-such-flag")...), "unknown flag: --no-such-flag")
			checkUsage("unknown flag in process", runInProcess(split(path, "--no-such-flag")...), "unknown flag: --no-such-flag")
			switch {
			case c.HasAvailableSubCommands():
				checkUsage("unknown subcommand", runBinary(t, bin, split(path, "no-such-command")...), `unknown command "no-such-command"`)
				// A typo of a subcommand (two letters swapped) is named.
				sub := firstSubcommand(c)
				typo := sub[:1] + sub[2:3] + sub[1:2] + sub[3:]
				checkUsage("mistyped subcommand "+typo, runInProcess(split(path, typo)...), `(did you mean "`+sub+`"?)`)
			case c.Annotations[anyArgs] == "":
				checkUsage("too many arguments", runBinary(t, bin, split(path, "x1", "x2", "x3", "x4", "x5", "x6")...), "x")
			}
			// A flag with one letter missing is named too.
			c.Flags().VisitAll(func(f *pflag.Flag) {
				if len(f.Name) < 5 || f.Hidden || f.Name == "help" {
					return
				}
				typo := f.Name[:2] + f.Name[3:]
				r := runInProcess(split(path, "--"+typo)...)
				if r.code != 2 || !strings.Contains(r.stderr, "(did you mean --") {
					t.Errorf("--%s: exit %d, stderr:\n%s", typo, r.code, r.stderr)
				}
			})
			// Every numeric flag: a value that does not parse, and one below
			// its minimum, are usage errors, never a daemon started with it.
			done, cancel := context.WithCancel(context.Background())
			cancel()
			c.Flags().VisitAll(func(f *pflag.Flag) {
				var below string
				switch f.Value.Type() {
				case "int", "int64", "int32":
					below = "-2"
					if m := f.Annotations[flagMin]; len(m) > 0 {
						n, _ := strconv.Atoi(m[0])
						below = strconv.Itoa(n - 1)
					}
				case "duration":
					below = "-1s"
					if m := f.Annotations[flagMin]; len(m) > 0 && m[0] != "0" {
						below = "0s"
					}
				default:
					return
				}
				for _, v := range []string{"not-a-number", below} {
					args := split(path, "--"+f.Name+"="+v)
					if path == "server" {
						args = append(args, "--port", "0")
					}
					checkUsage("--"+f.Name+"="+v, runInProcessCtx(done, args...), "--"+f.Name)
				}
			})
		})
	}
}

// firstSubcommand is the name of c's first visible subcommand of four
// letters or more (long enough to be mistyped and still recognised).
func firstSubcommand(c *cobra.Command) string {
	for _, s := range c.Commands() {
		if s.IsAvailableCommand() && len(s.Name()) >= 4 {
			return s.Name()
		}
	}
	return "help"
}

// Flags reach each command wherever they stand among the arguments, and a
// subcommand does not accept another's flags.
func TestCLIFlagsPerCommand(t *testing.T) {
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"api", "acp", "close", "s1", "--ids"}, 2, "unknown flag: --ids"},
		{[]string{"api", "acp", "close", "--agent", "mock", "s1"}, 2, "unknown flag: --agent"},
		{[]string{"api", "acp", "post"}, 2, "missing <server_id>"},
		{[]string{"api", "agents", "get"}, 2, "missing <agent>"},
		{[]string{"policy", "test", "x"}, 2, "missing CASES"},
		{[]string{"policy", "test"}, 2, "missing POLICY and CASES"},
		{[]string{"install-agent"}, 2, "missing <agent>"},
		{[]string{"server", "--policy", "x.wasm,fail=sometimes"}, 2, "fail"},
		{[]string{"server", "--log-format", "loud", "--port", "0"}, 2, "--log-format"},
		{[]string{"server", "--policy-recheck", "10ms", "--port", "0"}, 2, "--policy-recheck must be 0 or at least 1s, got 10ms"},
		{[]string{"server", "--policy-recheck", "-1s", "--port", "0"}, 2, "--policy-recheck must be at least 0s, got -1s"},
		{[]string{"server", "extra"}, 2, `unexpected argument "extra"`},
		{[]string{}, 2, "missing command"},
		{[]string{"no-such-command"}, 2, `unknown command "no-such-command"`},
		{[]string{"help", "no-such-command"}, 2, "unknown help topic"},
		{[]string{"server", "--token-header", "Authorization"}, 2, "Authorization is always read"},
		{[]string{"server", "--token-header", "X Bad"}, 2, `--token-header "X Bad" is not a valid header name`},
		{[]string{"server", "--token-header", "host"}, 2, "a header proxies and HTTP itself use"},
		{[]string{"server", "--token-header", "x-request-id"}, 2, "a header the daemon reads or answers for another purpose"},
		{[]string{"server", "--token-header", "Sec-WebSocket-Protocol"}, 2, "for another purpose"},
		{[]string{"sevrer"}, 2, `unknown command "sevrer" (did you mean "server"?)`},
		{[]string{"server", "-p", "notaport"}, 2, `--port must be a number from 0 to 65535, got "notaport"`},
		{[]string{"server", "--port", "65536"}, 2, "--port must be a number"},
		{[]string{"server", "--prot", "1"}, 2, "unknown flag: --prot (did you mean --port?)"},
		{[]string{"api", "agents", "list", "--format", "yaml", "-e", "http://127.0.0.1:1"}, 2, `invalid argument "yaml" for "--format" flag: must be auto, pretty, compact`},
	} {
		r := runInProcess(c.args...)
		if r.code != c.code || !strings.Contains(r.stderr, c.want) {
			t.Errorf("%q: exit %d, want %d with %q; stderr:\n%s", c.args, r.code, c.code, c.want, r.stderr)
		}
	}
}

// The official SDK's local launcher passes server --host H --port P
// --token T; short flags and repeatable values parse as before, and the
// defaults come from the option structs.
func TestServerFlags(t *testing.T) {
	var f serverFlags
	fs := pflag.NewFlagSet("server", pflag.ContinueOnError)
	f.register(fs)
	if err := fs.Parse([]string{"-H", "0.0.0.0", "-p", "9", "-t", "tok", "-n", "-O", "http://a", "-O", "http://b,http://c",
		"-M", "GET", "-A", "X-A", "-C", "--stop-grace", "1s"}); err != nil {
		t.Fatal(err)
	}
	f.applyEnv(fs)
	if f.host != "0.0.0.0" || f.port != "9" || f.token != "tok" || !f.noToken || !f.corsCreds ||
		strings.Join(f.corsOrigins, " ") != "http://a http://b http://c" || f.corsMethods[0] != "GET" || f.corsHdr[0] != "X-A" || f.stopGrace != time.Second {
		t.Errorf("parsed %+v", f)
	}

	var g serverFlags
	fs = pflag.NewFlagSet("server", pflag.ContinueOnError)
	g.register(fs)
	t.Setenv("SANDBOX_AGENT_TOKEN", "from-env")
	if err := fs.Parse([]string{"--host", "h", "--port", "1", "--token", "T"}); err != nil {
		t.Fatal(err)
	}
	g.applyEnv(fs)
	if g.host != "h" || g.port != "1" || g.token != "T" {
		t.Errorf("launcher flags: %+v", g)
	}
	fs = pflag.NewFlagSet("server", pflag.ContinueOnError)
	var h serverFlags
	h.register(fs)
	_ = fs.Parse(nil)
	h.applyEnv(fs)
	d := acp.DefaultOptions()
	if h.token != "from-env" || h.host != "127.0.0.1" || h.port != "2468" || h.replayBytes != d.ReplayBytes ||
		h.maxFrame != d.MaxFrameBytes || h.stopGrace != d.StopGrace || h.stdinWriteTimeout != d.WriteTimeout || h.asyncMethods != "session/prompt" {
		t.Errorf("defaults: %+v", h)
	}
}

func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"--version"}, {"-V"}, {"version"}} {
		r := runInProcess(args...)
		if r.code != 0 || !strings.HasPrefix(r.stdout, "sandbox-agent "+version+"\ncommit: ") || !strings.Contains(r.stdout, "\ngo: go") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", args, r.code, r.stdout, r.stderr)
		}
	}
}

// The README names every command a user can run, so a newcomer reading it
// learns of each (it once omitted acp and version): every runnable command
// appears in backquotes in README.md or a page of docs/, its last word
// possibly among alternatives ("api acp post|stream|close|list").
func TestREADMEListsEveryCommand(t *testing.T) {
	var text []byte
	docs, _ := filepath.Glob("../../docs/*.md")
	for _, f := range append([]string{"../../README.md"}, docs...) {
		b, err := os.ReadFile(f)
		if err != nil && f == "../../README.md" {
			t.Fatal(err)
		}
		text = append(text, b...)
	}
	named := map[string]bool{}
	spans := strings.Split(strings.ReplaceAll(string(text), "\n", " "), "`")
	for i := 1; i < len(spans); i += 2 {
		words := strings.Fields(spans[i])
		if len(words) == 0 {
			continue
		}
		head := strings.Join(words[:len(words)-1], " ")
		for _, alt := range strings.Split(words[len(words)-1], "|") {
			named[strings.TrimSpace(head+" "+alt)] = true
		}
	}
	for path, c := range commandPaths(t) {
		if path == "" || !c.Runnable() || c.HasAvailableSubCommands() {
			continue
		}
		if !named[path] && !named["sandbox-agent "+path] {
			t.Errorf("README.md does not name the command %q", path)
		}
	}
}

// docs/cli.md names every flag of every command, with its default: each
// "## " section's heading names commands in backquotes ("`daemon
// start|stop|status`"; `sandbox-agent` is the root), and for each flag of
// those commands a table row's first cell names it ("`-p/--port`" when it
// has a shorthand) and the row holds its default as --help prints it, in
// backquotes for a word, or in the manual's units ("32 MiB", "30 s", "10
// min"). A flag added without its row, or a default changed without the
// manual, fails here.
func TestCLIDocNamesEveryFlag(t *testing.T) {
	b, err := os.ReadFile("../../docs/cli.md")
	if err != nil {
		t.Fatal(err)
	}
	sections := map[string][]string{} // command path -> the section's table rows
	var heads []string
	for _, part := range strings.Split("\n"+string(b), "\n## ")[1:] {
		head, body, _ := strings.Cut(part, "\n")
		var rows []string
		for _, line := range strings.Split(body, "\n") {
			if strings.HasPrefix(line, "| `") {
				rows = append(rows, line)
			}
		}
		spans := strings.Split(head, "`")
		for i := 1; i < len(spans); i += 2 {
			words := strings.Fields(spans[i])
			if len(words) == 0 {
				continue
			}
			prefix := strings.Join(words[:len(words)-1], " ")
			for _, alt := range strings.Split(words[len(words)-1], "|") {
				path := strings.TrimSpace(prefix + " " + alt)
				if path == "sandbox-agent" {
					path = ""
				}
				sections[path] = rows
				heads = append(heads, path)
			}
		}
	}
	if len(sections) < 10 {
		t.Fatalf("docs/cli.md: only %d commands in section headings: %q", len(sections), heads)
	}
	for path, c := range commandPaths(t) {
		rows, ok := sections[path]
		c.Flags().VisitAll(func(f *pflag.Flag) {
			if f.Hidden || f.Name == "help" {
				return
			}
			if !ok {
				t.Errorf("docs/cli.md has no section for %q, which has the flag --%s", path, f.Name)
				return
			}
			name := "--" + f.Name
			if f.Shorthand != "" {
				name = "-" + f.Shorthand + "/--" + f.Name
			}
			named := regexp.MustCompile("`" + regexp.QuoteMeta(name) + "[` ]")
			var row string
			for _, r := range rows {
				if first := strings.SplitN(r, "|", 3)[1]; named.MatchString(first) {
					row = r
					break
				}
			}
			if row == "" {
				t.Errorf("docs/cli.md, section of %q: no table row names `%s`", path, name)
				return
			}
			if want := defaultForms(f); want != nil && !containsAny(row, want) {
				t.Errorf("docs/cli.md, row of %s %s: the default %q (one of %q) is not in %q", path, name, f.DefValue, want, row)
			}
		})
	}
}

// defaultForms are the ways docs/cli.md may write a flag's default, or nil
// when there is nothing to check: no default (empty, off, 0), one computed
// at run time (shown as -1 or 0) or one that depends on the user ($HOME).
func defaultForms(f *pflag.Flag) []string {
	v := f.DefValue
	switch {
	case v == "" || v == "false" || v == "0" || v == "0s" || v == "-1" || v == "[]" || filepath.IsAbs(v):
		return nil
	case f.Value.Type() == "duration":
		d, err := time.ParseDuration(v)
		if err != nil {
			return []string{v}
		}
		forms := []string{v}
		for _, u := range []struct {
			d    time.Duration
			name string
		}{{time.Second, "s"}, {time.Minute, "min"}, {time.Hour, "h"}} {
			if d%u.d == 0 {
				forms = append(forms, strconv.FormatInt(int64(d/u.d), 10)+" "+u.name)
			}
		}
		return forms
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		forms := []string{v}
		for _, u := range []struct {
			n    int64
			name string
		}{{1 << 20, "MiB"}, {1 << 30, "GiB"}} {
			if n >= u.n && n%u.n == 0 {
				forms = append(forms, strconv.FormatInt(n/u.n, 10)+" "+u.name)
			}
		}
		return forms
	}
	return []string{"`" + v + "`"}
}

func containsAny(s string, subs []string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// The first error a newcomer meets is often a port taken by a daemon from
// an earlier try: it exits 1 and says how to find it and what to do.
func TestServerPortInUse(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r := runInProcessCtx(ctx, "server", "--port", port, "--opencode-db", "memory", "--log-level", "error")
	for _, want := range []string{"127.0.0.1:" + port + " is already in use", "daemon status --host 127.0.0.1 --port " + port, "--port 0"} {
		if r.code != 1 || !strings.Contains(r.stderr, want) {
			t.Errorf("exit %d, want 1 with %q; stderr:\n%s", r.code, want, r.stderr)
		}
	}
}

// A client command run before any daemon (a closed port, a name that does
// not resolve) exits 1 and says how to start one or name another; one
// refused for its token says how to give it.
func TestClientErrorsSayWhatToDo(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, args := range [][]string{
		{"api", "agents", "list", "-e", closed},
		{"api", "acp", "post", "s1", "--agent", "mock", "-e", "http://no-such-host.invalid:2468", `{"jsonrpc":"2.0","method":"x"}`},
		{"api", "acp", "list", "-e", closed},
		{"acp", "--agent", "mock", "-e", closed, "--reconnect-timeout", "10ms"},
	} {
		r := runInProcessCtx(ctx, args...)
		if r.code != 1 || !strings.Contains(r.stderr, `start one ("sandbox-agent server"`) || !strings.Contains(r.stderr, "--endpoint or $SANDBOX_AGENT_ENDPOINT") {
			t.Errorf("%q: exit %d, want 1 with what to do; stderr:\n%s", args, r.code, r.stderr)
		}
	}
	// A daemon that answers: a refused token says where the token goes;
	// another error is not dressed up as either.
	status := http.StatusUnauthorized
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(status)
		fmt.Fprintf(w, `{"type":"urn:sandbox-agent:error:%s","status":%d,"detail":"no"}`,
			map[int]string{401: "token_invalid", 500: "internal"}[status], status)
	})}
	ln, err = net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	defer srv.Close()
	t.Setenv("SANDBOX_AGENT_TOKEN", "")
	up := "http://" + ln.Addr().String()
	for args, flag := range map[string]string{"api agents list -e " + up: "-t/--token", "acp --agent mock -e " + up: "--token-file FILE"} {
		r := runInProcessCtx(ctx, strings.Fields(args)...)
		if r.code != 1 || !strings.Contains(r.stderr, "set $SANDBOX_AGENT_TOKEN to the daemon's token (or give it with "+flag+")") {
			t.Errorf("%s, a 401: exit %d; stderr:\n%s", args, r.code, r.stderr)
		}
	}
	status = http.StatusInternalServerError
	r := runInProcessCtx(ctx, "api", "agents", "list", "-e", up)
	if r.code != 1 || strings.Contains(r.stderr, "start one") || strings.Contains(r.stderr, "SANDBOX_AGENT_TOKEN") {
		t.Errorf("a daemon's 500: exit %d; stderr:\n%s", r.code, r.stderr)
	}
}

// daemon status with no daemon says how to start one; with something else
// listening there (a server run in a terminal) it says status cannot see it,
// rather than only "not running" while a server answers.
func TestDaemonStatusNotRunningSaysWhatToDo(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, busy, _ := net.SplitHostPort(ln.Addr().String())
	defer ln.Close()
	free, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, closed, _ := net.SplitHostPort(free.Addr().String())
	free.Close()
	for port, want := range map[string]string{
		closed: `note: "sandbox-agent daemon start --host 127.0.0.1 --port ` + closed + `" starts one`,
		busy:   "note: something else listens at http://127.0.0.1:" + busy,
	} {
		r := runInProcess("daemon", "status", "--port", port)
		if r.code != 3 || !strings.Contains(r.stdout, "status: not running\n") || !strings.Contains(r.stdout, want) {
			t.Errorf("port %s: exit %d, want 3 with %q; stdout:\n%s\nstderr:\n%s", port, r.code, want, r.stdout, r.stderr)
		}
	}
}

// The clients' token files (acp --token-file, --router-token-file) are read
// as the daemon reads its own: a FIFO, a directory or a file over 1 MiB is
// refused at once (a FIFO blocked the bridge forever, deaf to SIGTERM; a
// huge file became a header Go refuses to send, retried as "daemon not
// reachable" until --reconnect-timeout), a file with no token is an error
// (it connected without one), and a server's token file (comments, one
// token a line) sends its first token rather than the whole file.
func TestClientTokenFiles(t *testing.T) {
	t.Setenv("SANDBOX_AGENT_TOKEN", "")
	t.Setenv("SANDBOX_AGENT_ROUTER_TOKEN", "")
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	huge := filepath.Join(dir, "huge")
	if err := os.WriteFile(huge, bytes.Repeat([]byte("a"), 2<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	comments := filepath.Join(dir, "comments")
	if err := os.WriteFile(comments, []byte("# no token here\n\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tokens := filepath.Join(dir, "tokens")
	if err := os.WriteFile(tokens, []byte("# the daemon's tokens\nfirst-token\nsecond-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var seen []string
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Get("Authorization"))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprint(w, `{"type":"urn:sandbox-agent:error:token_invalid","status":401,"detail":"no"}`)
	})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	defer srv.Close()
	up := "http://" + ln.Addr().String()
	commands := map[string][]string{
		"--token-file":        {"acp", "--agent", "mock", "-e", up, "--reconnect-timeout", "1m"},
		"--router-token-file": {"api", "agents", "list", "-e", up, "--sandbox-id", "s1"},
	}
	run := func(args ...string) result {
		t.Helper()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		done := make(chan result, 1)
		go func() { done <- runInProcessCtx(ctx, args...) }()
		select {
		case r := <-done:
			return r
		case <-time.After(20 * time.Second):
			t.Fatalf("%q still running after 20 s", args)
			return result{}
		}
	}
	for flag, args := range commands {
		for _, bad := range []string{fifo, dir, huge, comments} {
			r := run(append(args, flag, bad)...)
			if r.code != 1 || !strings.Contains(r.stderr, flag) || !strings.Contains(r.stderr, bad) || strings.Contains(r.stderr, "not reachable") {
				t.Errorf("%s %s: exit %d, want 1 naming the flag and the file; stderr:\n%s", flag, filepath.Base(bad), r.code, r.stderr)
			}
		}
		mu.Lock()
		seen = nil
		mu.Unlock()
		r := run(append(args, flag, tokens)...)
		mu.Lock()
		got := seen
		mu.Unlock()
		if r.code != 1 || len(got) == 0 || got[0] != "Bearer first-token" {
			t.Errorf("%s with a server's token file: exit %d, Authorization sent %q, want \"Bearer first-token\"; stderr:\n%s", flag, r.code, got, r.stderr)
		}
	}
}

// A token no HTTP header can carry (a control character, a space) is an
// error at once, naming where it came from, in every command that sends or
// checks one. It was taken: the server started with a token no client could
// send, the acp bridge waited out --reconnect-timeout and then said no
// daemon answers, daemon status said something else listens there.
func TestTokensThatCannotBeSent(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	t.Setenv("SANDBOX_AGENT_TOKEN", "")
	t.Setenv("SANDBOX_AGENT_ROUTER_TOKEN", "")
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusUnauthorized)
	})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	defer srv.Close()
	up := "http://" + ln.Addr().String()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	const bad = "sec\nret"
	cases := []struct {
		env  string   // the variable holding bad, or none: -t bad
		args []string // the command
		want int      // exit code
		name string   // what the message names
	}{
		{"", []string{"server", "-p", "0", "-t", bad}, 2, "--token"},
		{"SANDBOX_AGENT_TOKEN", []string{"server", "-p", "0"}, 1, "$SANDBOX_AGENT_TOKEN"},
		{"", []string{"daemon", "status", "-p", port, "-t", bad}, 2, "--token"},
		{"SANDBOX_AGENT_TOKEN", []string{"daemon", "status", "-p", port}, 1, "$SANDBOX_AGENT_TOKEN"},
		{"", []string{"api", "agents", "list", "-e", up, "-t", bad}, 2, "--token"},
		{"SANDBOX_AGENT_TOKEN", []string{"api", "agents", "list", "-e", up}, 1, "$SANDBOX_AGENT_TOKEN"},
		{"SANDBOX_AGENT_ROUTER_TOKEN", []string{"api", "agents", "list", "-e", up, "--sandbox-id", "s1"}, 1, "$SANDBOX_AGENT_ROUTER_TOKEN"},
		{"SANDBOX_AGENT_TOKEN", []string{"acp", "--agent", "mock", "-e", up, "--reconnect-timeout", "1m"}, 1, "$SANDBOX_AGENT_TOKEN"},
		{"SANDBOX_AGENT_ROUTER_TOKEN", []string{"acp", "--agent", "mock", "-e", up, "--sandbox-id", "s1", "--reconnect-timeout", "1m"}, 1, "$SANDBOX_AGENT_ROUTER_TOKEN"},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args[:2], " ")+" "+tc.env, func(t *testing.T) {
			if tc.env != "" {
				t.Setenv(tc.env, bad)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			r := runInProcessCtx(ctx, tc.args...)
			if r.code != tc.want || !strings.Contains(r.stderr, tc.name) || !strings.Contains(r.stderr, "control character") || strings.Contains(r.stderr, "sec\nret") {
				t.Errorf("exit %d, want %d naming %s, without the token; stderr:\n%s", r.code, tc.want, tc.name, r.stderr)
			}
		})
	}
}
