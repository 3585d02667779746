package e2e

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-agent-go/sandbox-agent/adapters/httpclient"
	"github.com/sandbox-agent-go/sandbox-agent/e2e/internal/harness"
)

// TestGoClientProcesses drives every typed process call of the Go client
// against the daemon: config, run, create, list, get, logs (base64 and
// text), follow (to the exit event), input, stop, kill, delete, and a
// terminal over its WebSocket (output, input, resize, exit code).
func TestGoClientProcesses(t *testing.T) {
	d := harness.Start(t, harness.Options{Args: []string{"--token", "proc-tok"}})
	c := &httpclient.Client{BaseURL: d.URL, Token: "proc-tok"}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	cfg, err := c.ProcessConfig(ctx)
	if err != nil || cfg.MaxConcurrentProcesses == 0 {
		t.Fatalf("config: %+v %v", cfg, err)
	}
	cfg.MaxOutputBytes = 4
	if got, err := c.SetProcessConfig(ctx, cfg); err != nil || got.MaxOutputBytes != 4 {
		t.Fatalf("set config: %+v %v", got, err)
	}
	run, err := c.RunProcess(ctx, httpclient.ProcessRunRequest{Command: "sh", Args: []string{"-c", "printf abcdefgh; exit 5"}})
	if err != nil || run.Stdout != "abcd" || !run.StdoutTruncated || run.ExitCode == nil || *run.ExitCode != 5 {
		t.Fatalf("run: %+v %v", run, err)
	}

	// A process that echoes its input, followed to its end.
	p, err := c.CreateProcess(ctx, httpclient.ProcessCreateRequest{Command: "sh", Args: []string{"-c", "read l; echo got:$l; echo err >&2"}, Interactive: true})
	if err != nil || p.ID == "" || p.Status != "running" {
		t.Fatalf("create: %+v %v", p, err)
	}
	if list, err := c.ListProcesses(ctx, ""); err != nil || len(list) != 1 || list[0].ID != p.ID {
		t.Fatalf("list: %+v %v", list, err)
	}
	followed := make(chan []httpclient.ProcessLogEvent, 1)
	go func() {
		var evs []httpclient.ProcessLogEvent
		err := c.FollowProcessLogs(ctx, p.ID, httpclient.ProcessLogsQuery{Encoding: httpclient.LogUTF8}, func(ev httpclient.ProcessLogEvent) error {
			evs = append(evs, ev)
			return nil
		})
		if err != nil {
			t.Errorf("follow: %v", err)
		}
		followed <- evs
	}()
	if err := c.SendProcessInput(ctx, p.ID, []byte("hello\n")); err != nil {
		t.Fatalf("input: %v", err)
	}
	evs := <-followed
	var text strings.Builder
	for _, ev := range evs[:len(evs)-1] {
		if ev.Entry == nil {
			t.Fatalf("event before the exit is not an entry: %+v", ev)
		}
		text.WriteString(ev.Entry.Data)
	}
	if last := evs[len(evs)-1]; last.Exit == nil || last.Exit.ExitCode == nil || *last.Exit.ExitCode != 0 {
		t.Fatalf("last event %+v", last)
	}
	if !strings.Contains(text.String(), "got:hello\n") || !strings.Contains(text.String(), "err\n") {
		t.Errorf("followed text %q", text.String())
	}
	logs, err := c.ProcessLogs(ctx, p.ID, httpclient.ProcessLogsQuery{Stream: httpclient.StreamStdout})
	if err != nil || len(logs.Entries) == 0 {
		t.Fatalf("logs: %+v %v", logs, err)
	}
	var out []byte
	for _, e := range logs.Entries {
		b, err := httpclient.DecodeLogData(e)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b...)
	}
	if string(out) != "got:hello\n" {
		t.Errorf("stdout logs %q", out)
	}
	if got, err := c.Process(ctx, p.ID); err != nil || got.Status != "exited" {
		t.Errorf("get: %+v %v", got, err)
	}
	if err := c.DeleteProcess(ctx, p.ID); err != nil {
		t.Errorf("delete: %v", err)
	}
	var prob *httpclient.Problem
	if _, err := c.Process(ctx, p.ID); !errors.As(err, &prob) || prob.Status != 404 {
		t.Errorf("get after delete: %v", err)
	}

	// Stop and kill reach a running process; delete is refused while it runs.
	// It says "ready" once SIGTERM is ignored (a stop before the trap
	// would end it), and sleep inherits the ignored signal.
	sleeper, err := c.CreateProcess(ctx, httpclient.ProcessCreateRequest{Command: "sh", Args: []string{"-c", "trap '' TERM; echo ready; exec sleep 600"}})
	if err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, 10*time.Second, "the sleeper to ignore SIGTERM", func() bool {
		logs, err := c.ProcessLogs(ctx, sleeper.ID, httpclient.ProcessLogsQuery{Encoding: httpclient.LogUTF8})
		for _, e := range logs.Entries {
			if err == nil && strings.Contains(e.Data, "ready") {
				return true
			}
		}
		return false
	})
	if err := c.DeleteProcess(ctx, sleeper.ID); !errors.As(err, &prob) || prob.Status != 409 {
		t.Errorf("delete while running: %v", err)
	}
	if got, err := c.StopProcess(ctx, sleeper.ID, 200*time.Millisecond); err != nil || got.Status != "running" {
		t.Errorf("stop of a process ignoring SIGTERM: %+v %v", got, err)
	}
	if got, err := c.KillProcess(ctx, sleeper.ID, 10*time.Second); err != nil || got.Status != "exited" || got.Signal != "SIGKILL" {
		t.Errorf("kill: %+v %v", got, err)
	}

	// A terminal.
	sh, err := c.CreateProcess(ctx, httpclient.ProcessCreateRequest{Command: "sh", TTY: true, Interactive: true})
	if err != nil {
		t.Fatal(err)
	}
	term, err := c.ConnectTerminal(ctx, sh.ID)
	if err != nil {
		t.Fatalf("terminal: %v", err)
	}
	defer term.Close()
	if err := c.ResizeProcessTerminal(ctx, sh.ID, 100, 40); err != nil {
		t.Fatalf("resize over REST: %v", err)
	}
	if _, err := term.Write([]byte("stty size\n")); err != nil {
		t.Fatal(err)
	}
	readUntil(t, term, "40 100")
	if err := term.Resize(120, 50); err != nil {
		t.Fatal(err)
	}
	if _, err := term.Write([]byte("stty size; exit 7\n")); err != nil {
		t.Fatal(err)
	}
	readUntil(t, term, "50 120")
	if _, err := io.Copy(io.Discard, term); err != nil {
		t.Fatalf("read to the exit: %v", err)
	}
	if code, exited := term.ExitCode(); !exited || code == nil || *code != 7 {
		t.Errorf("terminal exit %v %v", code, exited)
	}

	// A process without a terminal refuses the socket.
	plain, err := c.CreateProcess(ctx, httpclient.ProcessCreateRequest{Command: "sleep", Args: []string{"30"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.ConnectTerminal(ctx, plain.ID); err == nil {
		t.Error("a terminal to a process without one")
	}
	_, _ = c.KillProcess(ctx, plain.ID, time.Second)
}

// readUntil reads r until want has appeared.
func readUntil(t *testing.T, r io.Reader, want string) {
	t.Helper()
	var seen bytes.Buffer
	buf := make([]byte, 4096)
	for !strings.Contains(seen.String(), want) {
		n, err := r.Read(buf)
		seen.Write(buf[:n])
		if err != nil {
			t.Fatalf("reading for %q: %v; got %q", want, err, seen.String())
		}
	}
}
