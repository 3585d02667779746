package e2e

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandbox-agent-go/sandbox-agent/adapters/httpclient"
	"github.com/sandbox-agent-go/sandbox-agent/e2e/internal/harness"
	"github.com/sandbox-agent-go/sandbox-agent/e2e/internal/proc"
)

type procInfo struct {
	ID       string `json:"id"`
	Status   string `json:"status"`
	PID      *int   `json:"pid"`
	ExitCode *int   `json:"exitCode"`
	Signal   string `json:"signal"`
	Cwd      string `json:"cwd"`
}

type runResult struct {
	ExitCode        *int   `json:"exitCode"`
	Signal          string `json:"signal"`
	TimedOut        bool   `json:"timedOut"`
	Stdout          string `json:"stdout"`
	Stderr          string `json:"stderr"`
	StdoutTruncated bool   `json:"stdoutTruncated"`
	StderrTruncated bool   `json:"stderrTruncated"`
	DurationMs      int64  `json:"durationMs"`
}

func createProcess(t *testing.T, d *harness.Daemon, req map[string]any) procInfo {
	t.Helper()
	var p procInfo
	if st, b := d.JSONDo("POST", "/v1/processes", req, &p); st != 200 {
		t.Fatalf("create: %d %s", st, b)
	}
	return p
}

func processLogs(t *testing.T, d *harness.Daemon, id string) string {
	t.Helper()
	var logs struct {
		Entries []struct {
			Data string `json:"data"`
		} `json:"entries"`
	}
	if st, b := d.JSONDo("GET", "/v1/processes/"+id+"/logs", nil, &logs); st != 200 {
		t.Fatalf("logs: %d %s", st, b)
	}
	var sb strings.Builder
	for _, e := range logs.Entries {
		raw, err := base64.StdEncoding.DecodeString(e.Data)
		if err != nil {
			t.Fatal(err)
		}
		sb.Write(raw)
	}
	return sb.String()
}

// treeScript starts two grandchildren in the background and prints their
// pids, then waits; it ignores SIGTERM when trapTerm is set.
func treeScript(trapTerm bool) string {
	s := "sleep 300 & a=$!; sh -c 'sleep 300' & b=$!; echo pids $a $b; wait"
	if trapTerm {
		s = "trap '' TERM; " + s
	}
	return s
}

func treePIDs(t *testing.T, d *harness.Daemon, id string) []int {
	t.Helper()
	var line string
	harness.Eventually(t, 10*time.Second, "tree started", func() bool {
		line = processLogs(t, d, id)
		return strings.HasPrefix(line, "pids ") && strings.HasSuffix(line, "\n")
	})
	var pids []int
	for _, f := range strings.Fields(strings.TrimPrefix(line, "pids ")) {
		n, err := strconv.Atoi(f)
		if err != nil {
			t.Fatal(err)
		}
		pids = append(pids, n)
	}
	return pids
}

// TestProcessTreeKilled checks that stop, kill and daemon shutdown end a
// process's whole tree, not just its leader.
func TestProcessTreeKilled(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		trapTerm bool
		end      func(t *testing.T, d *harness.Daemon, id string)
		signal   string
	}{
		{"stop", false, func(t *testing.T, d *harness.Daemon, id string) {
			var p procInfo
			if st, b := d.JSONDo("POST", "/v1/processes/"+id+"/stop?waitMs=5000", nil, &p); st != 200 || p.Status != "exited" {
				t.Fatalf("stop: %d %s", st, b)
			}
		}, "SIGTERM"},
		{"kill", true, func(t *testing.T, d *harness.Daemon, id string) {
			var p procInfo
			if st, b := d.JSONDo("POST", "/v1/processes/"+id+"/kill?waitMs=5000", nil, &p); st != 200 || p.Status != "exited" {
				t.Fatalf("kill: %d %s", st, b)
			}
		}, "SIGKILL"},
		{"shutdown", true, func(t *testing.T, d *harness.Daemon, id string) {
			start := time.Now()
			d.Stop()
			// The grace period is 3 s (--stop-grace); then SIGKILL.
			if el := time.Since(start); el > 6*time.Second {
				t.Errorf("shutdown took %v", el)
			}
		}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := harness.Start(t, harness.Options{})
			p := createProcess(t, d, map[string]any{"command": "sh", "args": []string{"-c", treeScript(tc.trapTerm)}})
			pids := append(treePIDs(t, d, p.ID), *p.PID)
			for _, pid := range pids {
				if !proc.Alive(pid) {
					t.Fatalf("pid %d not running before the test", pid)
				}
			}
			tc.end(t, d, p.ID)
			harness.Eventually(t, 5*time.Second, "whole tree gone", func() bool {
				for _, pid := range pids {
					if proc.Alive(pid) {
						return false
					}
				}
				return true
			})
			if len(liveGroupMembers(*p.PID)) != 0 {
				t.Errorf("group %d still has members", *p.PID)
			}
			if tc.signal != "" {
				var got procInfo
				d.JSONDo("GET", "/v1/processes/"+p.ID, nil, &got)
				if got.Signal != tc.signal || got.ExitCode != nil {
					t.Errorf("ended with %+v, want signal %s", got, tc.signal)
				}
			}
		})
	}
}

// TestProcessRunTimeoutAndTruncation: a run past its timeout is killed as a
// group and says so; output past maxOutputBytes is cut and flagged.
func TestProcessRunTimeoutAndTruncation(t *testing.T) {
	t.Parallel()
	d := harness.Start(t, harness.Options{})
	var r runResult
	start := time.Now()
	st, b := d.JSONDo("POST", "/v1/processes/run", map[string]any{
		"command": "sh", "args": []string{"-c", "sleep 300 & echo started; wait"}, "timeoutMs": 300,
	}, &r)
	if st != 200 || !r.TimedOut || r.ExitCode != nil || r.Signal != "SIGKILL" || r.Stdout != "started\n" {
		t.Fatalf("timeout run: %d %s", st, b)
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Errorf("a 300 ms run took %v", el)
	}

	st, b = d.JSONDo("POST", "/v1/processes/run", map[string]any{
		"command": "sh", "args": []string{"-c", "head -c 3000000 /dev/zero; head -c 10 /dev/zero >&2"}, "maxOutputBytes": 1000,
	}, &r)
	if st != 200 || len(r.Stdout) != 1000 || !r.StdoutTruncated || len(r.Stderr) != 10 || r.StderrTruncated || r.ExitCode == nil || *r.ExitCode != 0 {
		t.Fatalf("truncated run: %d stdout %d bytes (trunc %v) stderr %d (trunc %v) exit %v", st, len(r.Stdout), r.StdoutTruncated, len(r.Stderr), r.StderrTruncated, r.ExitCode)
	}

	// One past the configured maximum: the request's own cap is lowered.
	d.JSONDo("POST", "/v1/processes/config", map[string]any{
		"maxConcurrentProcesses": 2, "defaultRunTimeoutMs": 1000, "maxRunTimeoutMs": 1000,
		"maxOutputBytes": 64, "maxLogBytesPerProcess": 1 << 20, "maxInputBytesPerRequest": 1024,
	}, nil)
	st, b = d.JSONDo("POST", "/v1/processes/run", map[string]any{
		"command": "sh", "args": []string{"-c", "head -c 65 /dev/zero"}, "maxOutputBytes": 1 << 20,
	}, &r)
	if st != 200 || len(r.Stdout) != 64 || !r.StdoutTruncated {
		t.Fatalf("run above the configured cap: %d %s", st, b)
	}
	// Two live processes are the cap: the third is refused with 429.
	a := createProcess(t, d, map[string]any{"command": "sleep", "args": []string{"300"}})
	c := createProcess(t, d, map[string]any{"command": "sleep", "args": []string{"300"}})
	st, b = d.JSONDo("POST", "/v1/processes/run", map[string]any{"command": "true"}, nil)
	if p := parseProblem(t, b); st != 429 || p.Type != "urn:sandbox-agent:error:too_many_requests" {
		t.Fatalf("third process: %d %s", st, b)
	}
	for _, p := range []procInfo{a, c} {
		d.JSONDo("POST", "/v1/processes/"+p.ID+"/kill?waitMs=5000", nil, nil)
	}
	if st, b := d.JSONDo("POST", "/v1/processes/run", map[string]any{"command": "true"}, nil); st != 200 {
		t.Fatalf("after the kills: %d %s", st, b)
	}
}

// TestProcessCwdConfined: under --fs-root a process's cwd resolves like a
// /v1/fs path and cannot leave the root, by path or by link.
func TestProcessCwdConfined(t *testing.T) {
	t.Parallel()
	r := newRootRig(t)
	d := harness.Start(t, harness.Options{Args: []string{"--fs-root", r.root}})
	run := func(cwd any) (int, runResult, []byte) {
		var res runResult
		body := map[string]any{"command": "pwd"}
		if cwd != nil {
			body["cwd"] = cwd
		}
		st, b := d.JSONDo("POST", "/v1/processes/run", body, &res)
		return st, res, b
	}
	if st, res, b := run(nil); st != 200 || res.Stdout != r.root+"\n" {
		t.Fatalf("default cwd: %d %s", st, b)
	}
	if st, res, b := run("inside"); st != 200 || res.Stdout != filepath.Join(r.root, "inside")+"\n" {
		t.Fatalf("relative cwd: %d %s", st, b)
	}
	for _, cwd := range []string{r.parent, "/", "/etc", "../", "inside/../..", filepath.Join(r.root, "dir-link"), "dir-link", r.root + "-secret", filepath.Join(r.root, "nope")} {
		st, _, b := run(cwd)
		if st != 400 {
			t.Errorf("cwd %q: %d %s", cwd, st, b)
		}
		if strings.Contains(string(b), "SECRET") {
			t.Errorf("cwd %q leaked: %s", cwd, b)
		}
	}
	// Managed processes obey the same rule.
	if st, b := d.JSONDo("POST", "/v1/processes", map[string]any{"command": "pwd", "cwd": r.parent}, nil); st != 400 {
		t.Errorf("create outside the root: %d %s", st, b)
	}
	r.untouched(t)
}

// TestProcessFloodBounded: a process writing as fast as it can keeps at
// most maxLogBytesPerProcess of output, readers learn of the evicted part,
// and the daemon's memory stays flat.
func TestProcessFloodBounded(t *testing.T) {
	t.Parallel()
	d := harness.Start(t, harness.Options{})
	const logCap = 1 << 20
	d.JSONDo("POST", "/v1/processes/config", map[string]any{
		"maxConcurrentProcesses": 8, "defaultRunTimeoutMs": 30000, "maxRunTimeoutMs": 30000,
		"maxOutputBytes": 1 << 20, "maxLogBytesPerProcess": logCap, "maxInputBytesPerRequest": 1024,
	}, nil)
	p := createProcess(t, d, map[string]any{"command": "sh", "args": []string{"-c", "exec cat /dev/zero"}})
	daemonPID := d.Cmd.Process.Pid
	// A follower that reads nothing at first, then everything.
	resp, err := http.Get(d.URL + "/v1/processes/" + p.ID + "/logs?follow=true&stream=stdout")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var rss []int64
	for i := 0; i < 10; i++ {
		time.Sleep(200 * time.Millisecond)
		rss = append(rss, statusKiB(t, daemonPID, "VmRSS"))
	}
	var spawned float64
	m := d.Metrics()
	spawned = harness.MetricSum(m, "sandbox_agent_process_log_bytes")
	if spawned > logCap+64<<10 {
		t.Errorf("log holds %v bytes, cap %d", spawned, logCap)
	}
	// Read the stream: the reader's early position was evicted, so a gap
	// event must come before live entries (within 2 500 events: the 10 000
	// lines this once read line by line, four to a log event).
	sr := httpclient.NewSSEReader(resp.Body, 0)
	sawGap := false
	for i := 0; i < 2500 && !sawGap; i++ {
		ev, err := sr.Next()
		if err != nil {
			t.Fatal(err)
		}
		sawGap = ev.Event == "gap"
	}
	if !sawGap {
		t.Error("no gap event for a reader that fell behind the log")
	}
	resp.Body.Close()
	// Memory: flat after the first samples (the log is full from the start).
	first, last := rss[2], rss[len(rss)-1]
	if last > first+16<<10 {
		t.Errorf("daemon RSS grew from %d KiB to %d KiB while a process flooded", first, last)
	}
	t.Logf("RSS KiB: %v", rss)
	d.JSONDo("POST", "/v1/processes/"+p.ID+"/kill?waitMs=5000", nil, nil)
}

// TestProcessRunCyclesLeakNothing: a thousand runs (and a few managed
// processes) leave no descriptor, goroutine or zombie behind.
func TestProcessRunCyclesLeakNothing(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("1000 processes")
	}
	d := harness.Start(t, harness.Options{})
	pid := d.Cmd.Process.Pid
	// Client connections hold a descriptor and goroutines in the daemon:
	// every measurement starts without idle ones.
	goroutines := func() float64 {
		http.DefaultClient.CloseIdleConnections()
		return d.Metrics()["go_goroutines"]
	}
	fds := func() int {
		http.DefaultClient.CloseIdleConnections()
		return openFDs(t, pid)
	}
	// Warm up: the HTTP client's connections and the runtime's threads.
	for i := 0; i < 20; i++ {
		d.JSONDo("POST", "/v1/processes/run", map[string]any{"command": "true"}, nil)
	}
	http.DefaultClient.CloseIdleConnections()
	time.Sleep(200 * time.Millisecond) // the daemon notices the closed connections
	fds0, g0 := fds(), goroutines()
	var wg sync.WaitGroup
	errs := make(chan string, 1000)
	workers := runtime.NumCPU() * 2
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := w; i < 1000; i += workers {
				var r runResult
				st, b := d.JSONDo("POST", "/v1/processes/run", map[string]any{"command": "sh", "args": []string{"-c", "echo " + strconv.Itoa(i) + "; true"}}, &r)
				if st != 200 || r.Stdout != fmt.Sprintf("%d\n", i) || r.ExitCode == nil || *r.ExitCode != 0 {
					errs <- fmt.Sprintf("run %d: %d %s", i, st, b)
					return
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatal(e)
	}
	// Managed processes too, including a terminal, created and deleted.
	for i := 0; i < 20; i++ {
		p := createProcess(t, d, map[string]any{"command": "sh", "args": []string{"-c", "echo x"}, "tty": i%2 == 0})
		harness.Eventually(t, 10*time.Second, "process exits", func() bool {
			var got procInfo
			d.JSONDo("GET", "/v1/processes/"+p.ID, nil, &got)
			return got.Status == "exited"
		})
		if st, b := d.JSONDo("DELETE", "/v1/processes/"+p.ID, nil, nil); st != 204 {
			t.Fatalf("delete: %d %s", st, b)
		}
	}
	if !harness.WaitUntil(5*time.Second, func() bool { return fds() <= fds0 }) {
		t.Errorf("descriptors: %d before, %d after:\n%s", fds0, fds(), fdLinks(pid))
	}
	harness.Eventually(t, 5*time.Second, "goroutines back", func() bool { return goroutines() <= g0 })
	if z := zombieChildren(pid); len(z) != 0 {
		t.Errorf("zombies: %v", z)
	}
	m := d.Metrics()
	if got := harness.MetricSum(m, "sandbox_agent_process_exits_total", `code="0"`); got < 1020 {
		t.Errorf("exits with code 0 counted: %v", got)
	}
	if got := harness.MetricSum(m, "sandbox_agent_processes", `state="running"`); got != 0 {
		t.Errorf("running processes: %v", got)
	}
}

// TestProcessesLifecycle: deleting ACP instances leaves processes alone;
// errors are problems; the token guards the WebSocket like every route.
func TestProcessesLifecycle(t *testing.T) {
	t.Parallel()
	// The token comes from the environment, and an operator copied it
	// into another variable: neither reaches a process.
	d := harness.Start(t, harness.Options{Args: harness.WithTestAgent(t), Env: []string{"SANDBOX_AGENT_TOKEN=tok", "COPY_OF_TOKEN=tok"}})
	auth := []string{"Authorization", "Bearer tok", "Content-Type", "application/json"}
	st, _, b := d.Do("POST", "/v1/processes", []byte(`{"command":"sleep","args":["300"]}`), auth...)
	if st != 200 {
		t.Fatalf("create: %d %s", st, b)
	}
	var p procInfo
	_ = json.Unmarshal(b, &p)
	// No token, wrong token: 401 problems; the access_token query works
	// only for the terminal socket.
	if st, _, _ := d.Do("GET", "/v1/processes", nil); st != 401 {
		t.Errorf("no token: %d", st)
	}
	if st, _, _ := d.Do("GET", "/v1/processes?access_token=tok", nil); st != 401 {
		t.Errorf("access_token outside the socket route: %d", st)
	}
	up := []string{"Connection", "Upgrade", "Upgrade", "websocket", "Sec-WebSocket-Version", "13", "Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="}
	if st, _, b := d.Do("GET", "/v1/processes/"+p.ID+"/terminal/ws?access_token=tok", nil, up...); st != 409 {
		t.Errorf("socket route with access_token, non-tty process: %d %s", st, b)
	}
	st, _, b = d.Do("POST", "/v1/processes", []byte(`{"command":"sh","tty":true}`), auth...)
	var tp procInfo
	if err := json.Unmarshal(b, &tp); st != 200 || err != nil {
		t.Fatalf("create tty: %d %s", st, b)
	}
	if st, h, b := d.Do("GET", "/v1/processes/"+tp.ID+"/terminal/ws", nil, auth...); st != 400 || h.Get("Content-Type") != "application/problem+json" {
		t.Errorf("plain GET of the socket route: %d %s", st, b)
	}
	// The query's token counts on the terminal's route, upgrade or not,
	// as the reference reads it: the plain GET gets the route's answer.
	if st, h, b := d.Do("GET", "/v1/processes/"+tp.ID+"/terminal/ws?access_token=tok", nil); st != 400 || h.Get("Content-Type") != "application/problem+json" {
		t.Errorf("plain GET of the socket route, token in the query: %d %s", st, b)
	}
	// A handshake the WebSocket library would refuse in text/plain is a
	// problem, as every other error.
	bad := []string{"Connection", "Upgrade", "Upgrade", "websocket", "Sec-WebSocket-Version", "8", "Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="}
	if st, h, b := d.Do("GET", "/v1/processes/"+tp.ID+"/terminal/ws?access_token=tok", nil, bad...); st != 400 || h.Get("Content-Type") != "application/problem+json" {
		t.Errorf("upgrade with Sec-WebSocket-Version 8: %d %s %s", st, h.Get("Content-Type"), b)
	}
	if st, h, b := d.Do("GET", "/v1/processes/"+tp.ID+"/terminal/ws?access_token=tok", nil, up[:6]...); st != 400 || h.Get("Content-Type") != "application/problem+json" {
		t.Errorf("upgrade without Sec-WebSocket-Key: %d %s %s", st, h.Get("Content-Type"), b)
	}
	if st, _, b := d.Do("GET", "/v1/processes/"+tp.ID+"/terminal/ws?access_token=tok", nil, append(up, "Origin", "https://evil.example")...); st != 403 {
		t.Errorf("cross-origin upgrade: %d %s", st, b)
	}
	d.Do("POST", "/v1/processes/"+tp.ID+"/kill?waitMs=5000", nil, auth...)
	// An ACP instance comes and goes; the process stays.
	d.Do("POST", "/v1/acp/s1?agent=mock", []byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`), auth...)
	d.Do("DELETE", "/v1/acp/s1", nil, auth...)
	st, _, b = d.Do("GET", "/v1/processes/"+p.ID, nil, auth...)
	if st != 200 || !strings.Contains(string(b), `"status":"running"`) {
		t.Fatalf("after DELETE of an ACP instance: %d %s", st, b)
	}
	if !proc.Alive(*p.PID) {
		t.Fatal("process died with the ACP instance")
	}
	// Malformed input is a problem, never a 500.
	for _, tc := range []struct {
		method, path, body string
		status             int
	}{
		{"POST", "/v1/processes", `{"command":""}`, 400},
		{"POST", "/v1/processes", `{"command":"x\u0000y"}`, 400},
		{"POST", "/v1/processes", `{"command":"sh","env":{"A=B":"c"}}`, 400},
		{"POST", "/v1/processes", `not json`, 400},
		{"POST", "/v1/processes/" + p.ID + "/input", `{"data":"%%%"}`, 400},
		{"POST", "/v1/processes/" + p.ID + "/input", `{"data":"eA==","encoding":"rot13"}`, 400},
		{"POST", "/v1/processes/" + p.ID + "/terminal/resize", `{"cols":65536,"rows":10}`, 422},
		{"GET", "/v1/processes/" + p.ID + "/logs?since=abc", ``, 400},
		{"POST", "/v1/processes/proc_999/stop", ``, 404},
		{"DELETE", "/v1/processes/" + p.ID, ``, 409},
	} {
		var body []byte
		if tc.body != "" {
			body = []byte(tc.body)
		}
		st, h, b := d.Do(tc.method, tc.path, body, auth...)
		if st != tc.status || h.Get("Content-Type") != "application/problem+json" {
			t.Errorf("%s %s %s: %d %s %s", tc.method, tc.path, tc.body, st, h.Get("Content-Type"), b)
		}
	}
	// A process gets stdin, stdout and stderr, and no other descriptor of
	// the daemon's (not even those the daemon inherited).
	st, _, b = d.Do("POST", "/v1/processes/run", []byte(`{"command":"sh","args":["-c","exec ls /proc/self/fd"]}`), auth...)
	if st != 200 || !strings.Contains(string(b), `"stdout":"0\n1\n2\n3\n"`) {
		t.Errorf("descriptors of a process (3 is ls's own): %d %s", st, b)
	}
	// The environment holds none of the daemon's secrets.
	st, _, b = d.Do("POST", "/v1/processes/run", []byte(`{"command":"env"}`), auth...)
	if st != 200 || strings.Contains(string(b), "COPY_OF_TOKEN") || strings.Contains(string(b), "SANDBOX_AGENT_TOKEN") || !strings.Contains(string(b), "PATH=") {
		t.Errorf("env: %d %s", st, b)
	}
}

// fdLinks lists what pid's descriptors point at, for failure messages.
func fdLinks(pid int) string {
	fds, _ := proc.FDs(pid)
	var sb strings.Builder
	for _, fd := range fds {
		sb.WriteString(fd.Num + " -> " + fd.Target + "\n")
	}
	return sb.String()
}

// TestProcessesReadOnlyToken: with the readonly policy, a read-only token
// lists processes and reads their logs, but cannot start, signal, write
// to or delete them, nor open a terminal, even with ?access_token=.
func TestProcessesReadOnlyToken(t *testing.T) {
	t.Parallel()
	d := policyDaemon(t, "readonly", `{"readOnly": ["viewer"]}`)
	st, b := call(d, "writer", "POST", "/v1/processes", `{"command":"sh","tty":true}`, jsonCT...)
	if st != 200 {
		t.Fatalf("writer creates: %d %s", st, b)
	}
	var sh procInfo
	_, _, raw := d.Do("GET", "/v1/processes", nil, "Authorization", "Bearer writer")
	var list struct{ Processes []procInfo }
	_ = json.Unmarshal(raw, &list)
	if len(list.Processes) != 1 {
		t.Fatalf("list: %s", raw)
	}
	sh = list.Processes[0]
	ws := "/v1/processes/" + sh.ID + "/terminal/ws"
	up := []string{"Connection", "Upgrade", "Upgrade", "websocket", "Sec-WebSocket-Version", "13", "Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="}
	check(t, d, []policyCheck{
		{name: "viewer lists", token: "viewer", method: "GET", path: "/v1/processes", status: 200},
		{name: "viewer gets", token: "viewer", method: "GET", path: "/v1/processes/" + sh.ID, status: 200},
		{name: "viewer reads logs", token: "viewer", method: "GET", path: "/v1/processes/" + sh.ID + "/logs", status: 200},
		{name: "viewer reads config", token: "viewer", method: "GET", path: "/v1/processes/config", status: 200},
		{name: "nor start", token: "viewer", method: "POST", path: "/v1/processes", body: `{"command":"true"}`, headers: jsonCT, status: 403},
		{name: "nor run", token: "viewer", method: "POST", path: "/v1/processes/run", body: `{"command":"true"}`, headers: jsonCT, status: 403},
		{name: "nor write input", token: "viewer", method: "POST", path: "/v1/processes/" + sh.ID + "/input", body: `{"data":"eA=="}`, headers: jsonCT, status: 403},
		{name: "nor resize", token: "viewer", method: "POST", path: "/v1/processes/" + sh.ID + "/terminal/resize", body: `{"cols":80,"rows":24}`, headers: jsonCT, status: 403},
		{name: "nor stop", token: "viewer", method: "POST", path: "/v1/processes/" + sh.ID + "/stop", status: 403},
		{name: "nor kill", token: "viewer", method: "POST", path: "/v1/processes/" + sh.ID + "/kill", status: 403},
		{name: "nor delete", token: "viewer", method: "DELETE", path: "/v1/processes/" + sh.ID, status: 403},
		{name: "nor set config", token: "viewer", method: "POST", path: "/v1/processes/config", body: `{}`, headers: jsonCT, status: 403},
		{name: "nor open the terminal", token: "viewer", method: "GET", path: ws, headers: up, status: 403},
		{name: "nor with access_token", method: "GET", path: ws + "?access_token=viewer", headers: up, status: 403},
	})
	if st, b := call(d, "writer", "POST", "/v1/processes/"+sh.ID+"/kill?waitMs=5000", ""); st != 200 {
		t.Errorf("writer kills: %d %s", st, b)
	}
}
