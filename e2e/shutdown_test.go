package e2e

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sandbox-agent-go/sandbox-agent/e2e/internal/harness"
	"github.com/sandbox-agent-go/sandbox-agent/e2e/internal/proc"
)

// uploadFiles is how many files the abandoned upload's stage holds: enough
// that removing it takes the daemon a moment.
const uploadFiles = 3000

// shutdownLoad is what loadForShutdown left running in a daemon.
type shutdownLoad struct {
	pids    []int    // every process under the daemon, and the escapees
	sleeps  []string // "sleep ARG" of the processes' leaders and escapees
	streams []*harness.Stream
	sockets []*wsClient
	pending []<-chan postResult
	install <-chan postResult
	upload  chan error
	body    *io.PipeWriter // the upload's body, never ended
}

// loadForShutdown puts the daemon under several kinds of load at once:
// agents busy with a pending request (one ignoring SIGTERM, one with a
// setsid grandchild), SSE streams on them, the standard ACP WebSocket, a
// /v1/processes process on pipes and one on a terminal (each ignoring
// SIGTERM, each with a setsid child ignoring it too, the terminal one
// attached over its WebSocket), an install whose download trickles, and
// an upload-batch whose body stops halfway.
func loadForShutdown(t *testing.T, d *harness.Daemon, downloads *atomic.Int64) *shutdownLoad {
	t.Helper()
	l := &shutdownLoad{upload: make(chan error, 1)}
	for i, method := range []string{"ignore-term", "spawn-setsid"} {
		id := fmt.Sprintf("busy-%d", i)
		if st, b := d.Post("/v1/acp/"+id+"?agent=test", initMsg); st != 200 {
			t.Fatalf("bootstrap %s: %d %s", id, st, b)
		}
		s := d.Stream("/v1/acp/" + id)
		d.Post("/v1/acp/"+id, `{"jsonrpc":"2.0","method":"`+method+`"}`)
		if method == "ignore-term" {
			s.Until(t, 5*time.Second, harness.HasMethod("ignoring-term"))
		} else {
			l.pids = append(l.pids, spawnedPID(t, s))
		}
		l.streams = append(l.streams, s)
		l.pending = append(l.pending, postAsync(context.Background(), d, "/v1/acp/"+id, `{"jsonrpc":"2.0","id":2,"method":"hang"}`))
	}
	ws, _ := wsConnect(t, d)
	l.sockets = append(l.sockets, ws)

	for _, tty := range []bool{false, true} {
		esc, leader := uniqueSleep(), uniqueSleep()
		// trap '' TERM: the shell and both sleeps ignore SIGTERM.
		script := fmt.Sprintf("trap '' TERM; setsid sleep %s & sleep %s; echo", esc, leader)
		p := createProcess(t, d, map[string]any{"command": "sh", "args": []string{"-c", script}, "tty": tty})
		waitEscaped(t, waitFor(t, esc), *p.PID)
		waitFor(t, leader)
		l.sleeps = append(l.sleeps, esc, leader)
		if tty {
			c, err := dialWS(t, "ws"+strings.TrimPrefix(d.URL, "http")+"/v1/processes/"+p.ID+"/terminal/ws")
			if err != nil || c.Resp.StatusCode != http.StatusSwitchingProtocols {
				t.Fatalf("terminal socket: %v %v", err, c.Resp)
			}
			l.sockets = append(l.sockets, c)
		}
	}

	l.install = postAsync(context.Background(), d, "/v1/agents/trickle/install", `{}`)
	harness.Eventually(t, 10*time.Second, "the download under way", func() bool { return downloads.Load() > 0 })

	pr, pw := io.Pipe()
	req, _ := http.NewRequest("POST", d.URL+"/v1/fs/upload-batch?path=half", pr)
	req.Header.Set("Content-Type", "application/x-tar")
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == 200 {
				err = fmt.Errorf("the half upload answered 200")
			}
		}
		l.upload <- err
	}()
	tw := tar.NewWriter(pw)
	for i := range uploadFiles {
		body := strings.Repeat("x", 1000)
		_ = tw.WriteHeader(&tar.Header{Name: fmt.Sprintf("f%04d", i), Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(body))})
		_, _ = tw.Write([]byte(body))
	}
	_ = tw.Flush()
	// The body never ends (pw stays open): the extraction waits for more.
	l.body = pw
	t.Cleanup(func() { pw.Close() })
	harness.Eventually(t, 10*time.Second, "the upload's stage holds its files", func() bool {
		ents, _ := os.ReadDir(d.Home)
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), ".sandbox-agent-stage-") {
				files, _ := os.ReadDir(filepath.Join(d.Home, e.Name()))
				return len(files) == uploadFiles
			}
		}
		return false
	})

	for _, p := range l.pids {
		if !proc.Alive(p) {
			t.Fatalf("pid %d not running before the signal", p)
		}
	}
	l.pids = append(l.pids, descendants(d.Cmd.Process.Pid)...)
	return l
}

// TestShutdownUnderLoad: SIGTERM, SIGINT twice, and SIGTERM then SIGKILL,
// each sent to the daemon alone while it is under every kind of load at
// once (loadForShutdown). The daemon exits (within --stop-grace plus 2 s
// after SIGTERM), no process it started and no descendant of one, setsid
// ones and ones ignoring SIGTERM included, survives; every SSE stream and
// WebSocket ends instead of hanging its client; the pending requests, the
// install and the upload end without success; the upload's stage and the
// install leave nothing a next start would take for done (no stage, no
// target, no launcher), and a next start on the same home lists the agent
// as not installed.
func TestShutdownUnderLoad(t *testing.T) {
	const grace = time.Second
	for _, tc := range []struct {
		name    string
		signals []syscall.Signal
	}{
		{"SIGTERM", []syscall.Signal{syscall.SIGTERM}},
		{"SIGINT twice", []syscall.Signal{syscall.SIGINT, syscall.SIGINT}},
		{"SIGTERM then SIGKILL", []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var downloads atomic.Int64
			srv := hostileDownloads(t, map[string]string{"trickle": "trickle.tar.gz"}, func(w http.ResponseWriter, r *http.Request) {
				// A gzip header's worth, then nothing until the client leaves.
				downloads.Add(1)
				w.Header().Set("Content-Length", "1000000")
				_, _ = w.Write([]byte{0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3})
				w.(http.Flusher).Flush()
				<-r.Context().Done()
			})
			home := t.TempDir()
			opts := harness.Options{
				Home: home,
				Args: harness.WithTestAgent(t, "--stop-grace", grace.String(), "--log-level", "info"),
				Env:  []string{"SANDBOX_AGENT_ACP_REGISTRY_URL=" + srv.URL + "/registry.json"},
			}
			d := harness.Start(t, opts)
			l := loadForShutdown(t, d, &downloads)

			start := time.Now()
			for i, sig := range tc.signals {
				if i > 0 {
					// The second signal lands mid-shutdown, as a second
					// Ctrl-C or a supervisor's SIGKILL would.
					harness.Eventually(t, 5*time.Second, "the daemon shutting down", func() bool {
						return strings.Contains(d.Logs(), "shutting down")
					})
				}
				if err := d.Cmd.Process.Signal(sig); err != nil {
					t.Fatal(err)
				}
			}
			select {
			case <-d.Done():
			case <-time.After(15 * time.Second):
				t.Fatalf("daemon still running 15 s after %v", tc.signals)
			}
			took := time.Since(start)
			t.Logf("daemon exited %v after %v (grace %v): %v", took, tc.signals, grace, d.Cmd.ProcessState)
			// The contract is grace + 2 s; a second of slack for a loaded machine.
			if took > grace+3*time.Second {
				t.Errorf("exit took %v, want under grace + 2 s", took)
			}
			if tc.name == "SIGTERM" {
				if code := d.Cmd.ProcessState.ExitCode(); code != 0 {
					t.Errorf("exit code %d after SIGTERM", code)
				}
			}

			waitGone(t, 3*time.Second, l.pids...)
			noSurvivors(t, time.Second, "after the daemon's exit", l.sleeps...)
			for i, s := range l.streams {
				ended := make(chan struct{})
				go func() {
					defer close(ended)
					for {
						if _, err := s.Next(); err != nil {
							return
						}
					}
				}()
				select {
				case <-ended:
				case <-time.After(5 * time.Second):
					t.Errorf("SSE stream %d still open 5 s after the daemon exited", i)
					s.Close()
				}
			}
			for i, c := range l.sockets {
				for {
					// An error (close frame, EOF, reset) is the end; a
					// timeout would be a socket left hanging.
					if _, _, err := c.read(5 * time.Second); err != nil {
						if strings.Contains(err.Error(), "timeout") {
							t.Errorf("WebSocket %d still open after the daemon exited: %v", i, err)
						}
						break
					}
				}
				c.conn.Close()
			}
			for i, ch := range l.pending {
				if r := waitResult(t, ch, 5*time.Second, "pending POST at shutdown"); r.st == 200 {
					t.Errorf("pending %d answered 200: %s", i, r.body)
				}
			}
			r := waitResult(t, l.install, 5*time.Second, "install at shutdown")
			// After SIGTERM the install is stopped and says so before the
			// daemon exits (not held until the shutdown deadline, its
			// connection then cut).
			if tc.name == "SIGTERM" && (r.st != 500 || !strings.Contains(string(r.body), "install_failed")) {
				t.Errorf("the install in progress at SIGTERM: %d %s", r.st, r.body)
			}
			if r.st == 200 {
				t.Errorf("the install in progress answered 200: %s", r.body)
			}
			// Go's client returns only once its body's writer does (it
			// waits for its write loop): a real upload's source would
			// fail to write to the closed socket; this one is told.
			l.body.CloseWithError(errors.New("the daemon is gone"))
			select {
			case err := <-l.upload:
				if err != nil && strings.Contains(err.Error(), "200") {
					t.Error(err)
				}
			case <-time.After(5 * time.Second):
				t.Error("the upload's client still waits 5 s after the daemon exited")
			}

			if tc.name == "SIGTERM" {
				// A daemon killed outright (SIGKILL, a second SIGINT)
				// cannot remove the stage; a stage is never taken for an
				// upload's result.
				noStage(t, home)
			}
			if _, err := os.Stat(filepath.Join(home, "half")); !os.IsNotExist(err) {
				t.Errorf("the abandoned upload left its target: %v", err)
			}
			bin := filepath.Join(home, ".local", "share", "sandbox-agent", "bin")
			if _, err := os.Stat(filepath.Join(bin, "agent_processes", "trickle")); !os.IsNotExist(err) {
				t.Errorf("the abandoned install left a launcher: %v", err)
			}
			// A partial download may stay in its own stamp directory (the
			// next install of the agent prunes it), but no manifest.
			if _, err := os.Stat(filepath.Join(bin, "packages", "trickle", "manifest.json")); !os.IsNotExist(err) {
				t.Errorf("the abandoned install left a manifest: %v", err)
			}

			// A next start on the same home takes nothing for installed.
			d2 := harness.Start(t, opts)
			var agent struct {
				Installed bool `json:"installed"`
			}
			if st, b := d2.JSONDo("GET", "/v1/agents/trickle", nil, &agent); st != 200 || agent.Installed {
				t.Errorf("after the restart, trickle: %d %s", st, b)
			}
		})
	}
}
