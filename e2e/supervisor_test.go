package e2e

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandbox-agent-go/sandbox-agent/e2e/internal/harness"
	"github.com/sandbox-agent-go/sandbox-agent/e2e/internal/proc"
)

// uniqueSleep is a sleep argument no other process on the machine uses:
// it names the sleep in /proc.
func uniqueSleep() string {
	return strconv.Itoa(4_000_000 + rand.IntN(1_000_000))
}

// sleepers lists the live processes whose command line is "sleep ARG".
func sleepers(arg string) []int {
	want := []byte("sleep\x00" + arg + "\x00")
	var out []int
	for _, p := range proc.All() {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(p.PID) + "/cmdline")
		if err == nil && bytes.Equal(b, want) && !p.Dead() {
			out = append(out, p.PID)
		}
	}
	return out
}

// escapeScripts are the shells whose child leaves the leader's group and
// session: plainly (setsid), and double-forked (its parent exits at once,
// so it is no descendant of the leader by lineage). Each ends by exec'ing
// a sleep of its own, unless a tail replaces that.
var escapeScripts = map[string]string{
	"setsid":     "setsid sleep %s & ",
	"doublefork": "(setsid sleep %s &); ",
}

// waitFor waits until a process "sleep arg" is running.
func waitFor(t *testing.T, arg string) int {
	t.Helper()
	var pids []int
	harness.Eventually(t, 10*time.Second, "sleep "+arg+" running", func() bool {
		pids = sleepers(arg)
		return len(pids) > 0
	})
	return pids[0]
}

// waitEscaped waits until pid leads a session of its own, out of the
// leader's group: setsid runs a moment after its pid is known.
func waitEscaped(t *testing.T, pid, leader int) {
	t.Helper()
	harness.Eventually(t, 10*time.Second, fmt.Sprintf("pid %d out of group %d", pid, leader), func() bool {
		pgid, err := syscall.Getpgid(pid)
		sid, _, errno := syscall.RawSyscall(syscall.SYS_GETSID, uintptr(pid), 0, 0)
		return err == nil && errno == 0 && pgid == pid && int(sid) == pid && pgid != leader
	})
}

// noSurvivors fails unless no "sleep arg" is running within limit.
func noSurvivors(t *testing.T, limit time.Duration, what string, args ...string) {
	t.Helper()
	var left []int
	if !harness.WaitUntil(limit, func() bool {
		left = left[:0]
		for _, a := range args {
			left = append(left, sleepers(a)...)
		}
		return len(left) == 0
	}) {
		t.Fatalf("%s: still running %v later: %v", what, limit, left)
	}
}

// What a process starts does not survive it: a setsid child and a
// double-forked one, on pipes and on a terminal, go with kill, stop, and
// the leader's own exit (then DELETE), and with the /run timeout.
func TestProcessEscapeesDie(t *testing.T) {
	d := harness.Start(t, harness.Options{Args: []string{"--log-level", "info"}})
	for shape, prefix := range escapeScripts {
		for _, tty := range []bool{false, true} {
			for _, end := range []string{"kill", "stop", "exit then DELETE"} {
				name := fmt.Sprintf("%s %s tty=%v", shape, end, tty)
				t.Run(name, func(t *testing.T) {
					esc, leader := uniqueSleep(), uniqueSleep()
					script := fmt.Sprintf(prefix, esc) + "exec sleep " + leader
					if end == "exit then DELETE" {
						script = fmt.Sprintf(prefix, esc) + "read line; exit 0"
					}
					p := createProcess(t, d, map[string]any{"command": "sh", "args": []string{"-c", script}, "tty": tty})
					waitEscaped(t, waitFor(t, esc), *p.PID)
					var got procInfo
					switch end {
					case "kill", "stop":
						if st, b := d.JSONDo("POST", "/v1/processes/"+p.ID+"/"+end+"?waitMs=5000", nil, &got); st != 200 || got.Status != "exited" {
							t.Fatalf("%s: %d %s", end, st, b)
						}
					default:
						if st, b := d.JSONDo("POST", "/v1/processes/"+p.ID+"/input", map[string]any{"data": "bye\n", "encoding": "utf8"}, nil); st != 200 {
							t.Fatalf("input: %d %s", st, b)
						}
						harness.Eventually(t, 10*time.Second, "the leader exited", func() bool {
							d.JSONDo("GET", "/v1/processes/"+p.ID, nil, &got)
							return got.Status == "exited"
						})
						// Exited means its whole tree is gone already.
						if left := sleepers(esc); len(left) > 0 {
							t.Fatalf("the leader exited, sleep %s still runs: %v", esc, left)
						}
						if st, _, b := d.Do("DELETE", "/v1/processes/"+p.ID, nil); st != 204 {
							t.Fatalf("DELETE: %d %s", st, b)
						}
					}
					noSurvivors(t, 2*time.Second, end, esc, leader)
				})
			}
		}
		t.Run(shape+" run timeout", func(t *testing.T) {
			esc, leader := uniqueSleep(), uniqueSleep()
			var r runResult
			st, b := d.JSONDo("POST", "/v1/processes/run", map[string]any{
				"command": "sh", "args": []string{"-c", fmt.Sprintf(prefix, esc) + "exec sleep " + leader}, "timeoutMs": 1500,
			}, &r)
			if st != 200 || !r.TimedOut {
				t.Fatalf("run: %d %s", st, b)
			}
			noSurvivors(t, 2*time.Second, "after the run's timeout", esc, leader)
		})
	}
}

// The daemon SIGKILLed with live processes (pipes and terminal, each with
// a double-forked setsid child) and live agents (with a setsid and a
// double-forked grandchild): nothing of them, and not the supervisor,
// survives.
func TestFaultNoSurvivorsOfProcesses(t *testing.T) {
	d := harness.Start(t, harness.Options{Args: harness.WithTestAgent(t, "--log-level", "info")})
	var args []string
	var pids []int
	for _, tty := range []bool{false, true} {
		esc, leader := uniqueSleep(), uniqueSleep()
		p := createProcess(t, d, map[string]any{"command": "sh", "args": []string{"-c", fmt.Sprintf(escapeScripts["doublefork"], esc) + "exec sleep " + leader}, "tty": tty})
		pids = append(pids, waitFor(t, esc), *p.PID)
		args = append(args, esc, leader)
	}
	for i, method := range []string{"spawn-setsid", "spawn-doublefork"} {
		id := "a" + strconv.Itoa(i)
		if st, b := d.Post("/v1/acp/"+id+"?agent=test", initMsg); st != 200 {
			t.Fatalf("bootstrap: %d %s", st, b)
		}
		s := d.Stream("/v1/acp/" + id)
		d.Post("/v1/acp/"+id, `{"jsonrpc":"2.0","method":"`+method+`"}`)
		pids = append(pids, spawnedPID(t, s), d.Server(id).PID)
		s.Close()
	}
	sup := supervisorOf(d.Cmd.Process.Pid)
	if sup == 0 {
		t.Fatal("no supervisor under the daemon")
	}
	// The sub-supervisors too: each must see its tree gone and exit.
	pids = append(pids, descendants(d.Cmd.Process.Pid)...)
	for _, p := range pids {
		if !proc.Alive(p) {
			t.Fatalf("pid %d not running before the kill (all: %v)", p, pids)
		}
	}
	if err := d.Cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-d.Done()
	waitGone(t, 3*time.Second, pids...)
	noSurvivors(t, time.Second, "after the daemon's SIGKILL", args...)
}

// An agent's double-forked grandchild goes with it: on DELETE and on the
// agent's own exit.
func TestAgentDoubleForkDies(t *testing.T) {
	d := harness.Start(t, harness.Options{Args: harness.WithTestAgent(t, "--stop-grace", "500ms", "--log-level", "info")})
	for _, end := range []string{"DELETE", "own exit"} {
		t.Run(end, func(t *testing.T) {
			id := strings.ReplaceAll(end, " ", "-")
			if st, b := d.Post("/v1/acp/"+id+"?agent=test", initMsg); st != 200 {
				t.Fatalf("bootstrap: %d %s", st, b)
			}
			s := d.Stream("/v1/acp/" + id)
			d.Post("/v1/acp/"+id, `{"jsonrpc":"2.0","method":"spawn-doublefork"}`)
			gc := spawnedPID(t, s)
			s.Close()
			agent := d.Server(id).PID
			waitEscaped(t, gc, agent)
			if end == "DELETE" {
				if st, _, _ := d.Do("DELETE", "/v1/acp/"+id, nil); st != 204 {
					t.Fatalf("DELETE: %d", st)
				}
			} else {
				d.Post("/v1/acp/"+id, `{"jsonrpc":"2.0","method":"exit","params":{"code":0}}`)
			}
			waitGone(t, 2*time.Second, agent, gc)
		})
	}
}
