package e2e

// The daemon in a small sandbox whose resources run out, as a hostile
// agent or a careless client would make them: file descriptors, processes,
// disk, sizes given as the largest number. Each test checks that the
// daemon does not hang or die, answers what ran out (503 overloaded with
// details.resource), keeps answering the routes that do not need it, and
// recovers once it is free again.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sandbox-agent-go/sandbox-agent/e2e/internal/harness"
	"github.com/sandbox-agent-go/sandbox-agent/e2e/internal/proc"
)

// problemBody is the part of a problem the exhaustion tests read.
type problemBody struct {
	Type    string         `json:"type"`
	Status  int            `json:"status"`
	Detail  string         `json:"detail"`
	Details map[string]any `json:"details"`
}

// wantExhausted fails unless an answer is the 503 of a resource that ran
// out: overloaded, Retry-After, details.resource naming it.
func wantExhausted(t *testing.T, what string, st int, h http.Header, body []byte, resource string) problemBody {
	t.Helper()
	var p problemBody
	if err := json.Unmarshal(body, &p); err != nil {
		t.Fatalf("%s: %d %s", what, st, body)
	}
	if st != 503 || p.Type != "urn:sandbox-agent:error:overloaded" || p.Details["resource"] != resource || h.Get("Retry-After") == "" {
		t.Fatalf("%s: want 503 overloaded of %s with Retry-After, got %d %s (Retry-After %q)", what, resource, st, body, h.Get("Retry-After"))
	}
	return p
}

// startSleep starts `sleep 1000` as a managed process: its id, or the
// refusal.
func startSleep(d *harness.Daemon) (id string, st int, h http.Header, body []byte) {
	st, h, body = d.Do("POST", "/v1/processes", []byte(`{"command":"sleep","args":["1000"]}`), "Content-Type", "application/json")
	if st == 200 {
		var p struct{ ID string }
		_ = json.Unmarshal(body, &p)
		id = p.ID
	}
	return id, st, h, body
}

// rawHealth opens a connection, asks for /v1/health and reads the
// answer's status line and body; the connection stays open (keep-alive)
// for the caller to hold.
func rawHealth(t *testing.T, d *harness.Daemon, timeout time.Duration) (net.Conn, int, string) {
	t.Helper()
	c, err := net.DialTimeout("tcp", strings.TrimPrefix(d.URL, "http://"), timeout)
	if err != nil {
		t.Fatal(err)
	}
	_ = c.SetDeadline(time.Now().Add(timeout))
	if _, err := c.Write([]byte("GET /v1/health HTTP/1.1\r\nHost: localhost\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		c.Close()
		return nil, -1, err.Error()
	}
	var b bytes.Buffer
	_, _ = b.ReadFrom(resp.Body)
	resp.Body.Close()
	_ = c.SetDeadline(time.Time{})
	return c, resp.StatusCode, b.String()
}

// A daemon whose open-file limit is 64. Processes are started until the
// descriptors would run out: the start is refused 503 naming them (it was
// a 502 "pipe2: too many open files"), an agent's too, nothing half-made
// is left, and /v1/health, listings and files still answer (starts keep
// an eighth of the table free). The daemon does not spin, and once the
// processes are gone agents and processes start again and the
// descriptors are back where they were. Connections cannot take the table
// either: --max-conns follows it (half), so the 33rd connection is told
// 503 at once rather than queued unanswered.
func TestFaultDescriptorsRunOut(t *testing.T) {
	t.Parallel()
	d := harness.Start(t, harness.Options{Prlimit: []string{"--nofile=64:64"}, Args: harness.WithTestAgent(t, "--log-level", "info")})
	pid := d.Cmd.Process.Pid
	if !strings.Contains(d.Logs(), "max_conns=32") {
		t.Fatalf("--max-conns not derived from the open-file limit of 64:\n%s", d.Logs())
	}
	http.DefaultClient.CloseIdleConnections()
	fds0 := openFDs(t, pid)

	var ids []string
	for len(ids) < 64 {
		id, st, h, b := startSleep(d)
		if st == 200 {
			ids = append(ids, id)
			continue
		}
		p := wantExhausted(t, "process start", st, h, b, "file_descriptors")
		if p.Details["limit"] != float64(64) || !strings.Contains(p.Detail, "out of file descriptors") {
			t.Fatalf("refusal does not name the limit: %s", b)
		}
		break
	}
	if len(ids) == 0 || len(ids) == 64 {
		t.Fatalf("%d processes started under an open-file limit of 64", len(ids))
	}
	t.Logf("%d processes started, then 503; the daemon holds %d descriptors", len(ids), openFDs(t, pid))

	// An agent cannot start either, and is not left half-made.
	st, h, b := d.Do("POST", "/v1/acp/fd?agent=test", []byte(initMsg), "Content-Type", "application/json")
	wantExhausted(t, "agent start", st, h, b, "file_descriptors")
	if s := d.Servers(); len(s) != 0 {
		t.Fatalf("a refused agent start left %+v", s)
	}
	var list struct{ Processes []struct{ ID, Status string } }
	if st, b := d.JSONDo("GET", "/v1/processes", nil, &list); st != 200 || len(list.Processes) != len(ids) {
		t.Fatalf("processes: %d, %d listed, want %d: %s", st, len(list.Processes), len(ids), b)
	}

	// What needs no new process still answers.
	if st, _, b := d.Do("GET", "/v1/health", nil); st != 200 {
		t.Fatalf("health: %d %s", st, b)
	}
	f := filepath.Join(t.TempDir(), "f.txt")
	if st, _, b := d.Do("PUT", "/v1/fs/file?path="+f, []byte("still here")); st != 200 {
		t.Fatalf("PUT: %d %s", st, b)
	}
	if st, _, b := d.Do("GET", "/v1/fs/file?path="+f, nil); st != 200 || string(b) != "still here" {
		t.Fatalf("GET: %d %s", st, b)
	}

	// Nothing spins while the table is nearly full.
	cpu0 := processCPU(t, pid)
	time.Sleep(2 * time.Second)
	if used := processCPU(t, pid) - cpu0; used > time.Second {
		t.Fatalf("the daemon used %v of CPU in 2 s with its descriptors nearly all taken", used)
	}

	// Free them: agents and processes start again.
	for _, id := range ids {
		if st, _, b := d.Do("POST", "/v1/processes/"+id+"/kill?waitMs=5000", nil); st != 200 {
			t.Fatalf("kill %s: %d %s", id, st, b)
		}
		if st, _, b := d.Do("DELETE", "/v1/processes/"+id, nil); st != 204 {
			t.Fatalf("delete %s: %d %s", id, st, b)
		}
	}
	if st, b := d.Post("/v1/acp/fd?agent=test", initMsg); st != 200 {
		t.Fatalf("agent start after the processes are gone: %d %s", st, b)
	}
	id, st, _, b := startSleep(d)
	if st != 200 {
		t.Fatalf("process start after the processes are gone: %d %s", st, b)
	}
	d.Do("POST", "/v1/processes/"+id+"/kill?waitMs=5000", nil)
	d.Do("DELETE", "/v1/processes/"+id, nil)
	if st, _, _ := d.Do("DELETE", "/v1/acp/fd", nil); st != 204 {
		t.Fatalf("DELETE agent: %d", st)
	}
	harness.Eventually(t, 5*time.Second, "descriptors back to where they were", func() bool {
		http.DefaultClient.CloseIdleConnections()
		return openFDs(t, pid) <= fds0
	})

	// Connections: at most half the table, the next told so at once.
	var held []net.Conn
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	for {
		c, st, body := rawHealth(t, d, 5*time.Second)
		if st == 200 {
			held = append(held, c)
			if len(held) > 32 {
				t.Fatalf("%d connections served under --max-conns 32", len(held))
			}
			continue
		}
		if st != 503 || !strings.Contains(body, "--max-conns") {
			t.Fatalf("connection %d: %d %s", len(held)+1, st, body)
		}
		if c != nil {
			c.Close()
		}
		break
	}
	if len(held) < 30 {
		t.Fatalf("only %d connections served before 503", len(held))
	}
	for _, c := range held {
		c.Close()
	}
	held = nil
	harness.Eventually(t, 5*time.Second, "health once the connections are closed", func() bool {
		c, st, _ := rawHealth(t, d, 5*time.Second)
		if c != nil {
			c.Close()
		}
		return st == 200
	})
}

// With --max-conns set past what the open-file limit allows, connections
// take every descriptor. The connection accept() then fails for is
// answered 503 naming the descriptors (the listener keeps one in
// reserve), not left in the kernel's queue with its client waiting: it
// used to time out. Accept does not spin meanwhile, and the daemon serves
// again once connections close.
func TestFaultDescriptorReserve(t *testing.T) {
	t.Parallel()
	d := harness.Start(t, harness.Options{Prlimit: []string{"--nofile=64:64"}, Args: []string{"--max-conns", "1000", "--log-level", "info"}})
	pid := d.Cmd.Process.Pid
	var held []net.Conn
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	var body string
	for {
		c, st, b := rawHealth(t, d, 5*time.Second)
		if st == 200 {
			held = append(held, c)
			if len(held) > 64 {
				t.Fatalf("%d connections under an open-file limit of 64", len(held))
			}
			continue
		}
		if c != nil {
			c.Close()
		}
		if st != 503 {
			t.Fatalf("connection %d once the table is full: %d %s (it waits unanswered without the reserve)", len(held)+1, st, b)
		}
		body = b
		break
	}
	var p problemBody
	if err := json.Unmarshal([]byte(body), &p); err != nil || p.Details["resource"] != "file_descriptors" || !strings.Contains(p.Detail, "out of file descriptors") {
		t.Fatalf("answer on the reserve: %s", body)
	}
	t.Logf("%d connections held, then: %s", len(held), p.Detail)

	// More clients meanwhile: each is answered, and the CPU stays idle.
	cpu0 := processCPU(t, pid)
	for range 5 {
		c, st, b := rawHealth(t, d, 5*time.Second)
		if c != nil {
			c.Close()
		}
		if st != 503 {
			t.Fatalf("another connection while the table is full: %d %s", st, b)
		}
	}
	time.Sleep(2 * time.Second)
	if used := processCPU(t, pid) - cpu0; used > time.Second {
		t.Fatalf("the daemon used %v of CPU in 2 s with its descriptor table full", used)
	}
	for _, c := range held {
		c.Close()
	}
	held = nil
	harness.Eventually(t, 5*time.Second, "health once the connections are closed", func() bool {
		c, st, _ := rawHealth(t, d, 5*time.Second)
		if c != nil {
			c.Close()
		}
		return st == 200
	})
	if st, b := d.JSONDo("POST", "/v1/processes/run", map[string]any{"command": "echo", "args": []string{"ok"}}, nil); st != 200 {
		t.Fatalf("a run once the table is free: %d %s", st, b)
	}
}

// userTasks counts the processes and threads of uid: what RLIMIT_NPROC
// counts.
func userTasks(uid int) int { return userCount(uid, true) }

// userCount counts the processes of uid, or their threads too.
func userCount(uid int, threads bool) int {
	n := 0
	for _, p := range proc.All() {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(p.PID) + "/status")
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) > 1 && f[0] == "Uid:" {
				if f[1] == strconv.Itoa(uid) {
					if !threads {
						n++
					} else if ents, err := os.ReadDir("/proc/" + strconv.Itoa(p.PID) + "/task"); err == nil {
						n += len(ents)
					}
				}
				break
			}
		}
	}
	return n
}

// A daemon that is not root, with an RLIMIT_NPROC of 60, runs a fork bomb
// as a process: the same user, so its processes used to take every slot
// the limit counts, and the daemon's next thread could not be made (the
// Go runtime aborts: "pthread_create failed"), killing the daemon and
// everything it ran. Now what the daemon starts is held to the limit less
// a reserve (44 here): the bomb stops there, the daemon keeps serving
// through a burst that makes it start threads, a start is refused 503
// naming processes, a kill ends the bomb whole, and the daemon's exit
// leaves nothing of the user's.
func TestFaultForkBombOfTheDaemonsUser(t *testing.T) {
	u := newRunAsUser(t)
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash for the fork bomb")
	}
	dir := openDir(t)
	bin := copyExe(t, harness.Binary, dir)
	d := harness.Start(t, harness.Options{
		Binary: bin, Home: u.home, Prlimit: []string{"--nproc=60:60"},
		Credential: &syscall.Credential{Uid: uint32(u.uid), Gid: uint32(u.gid)},
		Args:       []string{"--log-level", "info"},
	})
	if uid := uidOf(t, d.Cmd.Process.Pid); uid != u.uid {
		t.Fatalf("the daemon runs as uid %d, want %d", uid, u.uid)
	}
	var bomb struct{ ID string }
	if st, b := d.JSONDo("POST", "/v1/processes", map[string]any{"command": bash, "args": []string{"-c", "while :; do sleep 1000 & done"}}, &bomb); st != 200 {
		t.Fatalf("bomb: %d %s", st, b)
	}
	harness.Eventually(t, 20*time.Second, "the bomb at its limit", func() bool { return userTasks(u.uid) >= 40 })
	var leader struct{ PID int }
	d.JSONDo("GET", "/v1/processes/"+bomb.ID, nil, &leader)
	if lim, _ := os.ReadFile("/proc/" + strconv.Itoa(leader.PID) + "/limits"); !strings.Contains(string(lim), "Max processes             44                   44") {
		t.Fatalf("the bomb's limits:\n%s", lim)
	}

	// A burst of requests that block in system calls (writes, listings):
	// the runtime makes threads for them.
	big := bytes.Repeat([]byte("x"), 2<<20)
	listed := "/usr/lib"
	var wg sync.WaitGroup
	var mu sync.Mutex
	failures := 0
	client := &http.Client{Timeout: 30 * time.Second}
	for i := range 30 {
		wg.Add(2)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequest("PUT", d.URL+"/v1/fs/file?path="+filepath.Join(u.home, fmt.Sprintf("f%d", i)), bytes.NewReader(big))
			if resp, err := client.Do(req); err != nil || resp.StatusCode != 200 {
				mu.Lock()
				failures++
				mu.Unlock()
			} else {
				resp.Body.Close()
			}
		}()
		go func() {
			defer wg.Done()
			if resp, err := client.Get(d.URL + "/v1/fs/entries?path=" + listed); err != nil || resp.StatusCode != 200 {
				mu.Lock()
				failures++
				mu.Unlock()
			} else {
				resp.Body.Close()
			}
		}()
	}
	wg.Wait()
	select {
	case <-d.Done():
		t.Fatalf("the daemon died under the bomb:\n%s", harness.Tail(d.Logs(), 40))
	default:
	}
	if failures != 0 {
		t.Fatalf("%d of 60 requests failed under the bomb", failures)
	}
	if st, _, b := d.Do("GET", "/v1/health", nil); st != 200 {
		t.Fatalf("health under the bomb: %d %s", st, b)
	}
	_, st, h, b := startSleep(d)
	wantExhausted(t, "process start under the bomb", st, h, b, "processes")

	// A kill ends the bomb whole; then starts work again.
	if st, b := d.JSONDo("POST", "/v1/processes/"+bomb.ID+"/kill?waitMs=10000", nil, nil); st != 200 {
		t.Fatalf("kill the bomb: %d %s", st, b)
	}
	// What is left of the user's: the daemon and its supervisor.
	harness.Eventually(t, 10*time.Second, "the bomb's processes gone", func() bool { return userCount(u.uid, false) == 2 })
	id, st, _, b := startSleep(d)
	if st != 200 {
		t.Fatalf("start once the bomb is gone: %d %s", st, b)
	}
	// The daemon's exit leaves nothing of the user's.
	d.Stop()
	harness.Eventually(t, 5*time.Second, "nothing of the user left once the daemon stopped", func() bool { return userTasks(u.uid) == 0 })
	_ = id
}

// Sizes given as the largest number are "no limit", not a wrap: every
// ACP POST, PUT and WebSocket message used to panic (500) with
// --max-acp-body or --max-upload at 9223372036854775807, and huge
// budgets summed to a Go soft limit of 500 MiB. Values below one are
// refused at start (exit 2).
func TestFaultHugeLimitFlags(t *testing.T) {
	t.Parallel()
	max := strconv.FormatInt(math.MaxInt64, 10)
	d := harness.Start(t, harness.Options{Args: []string{"--max-acp-body", max, "--max-upload", max,
		"--inflight-bytes", max, "--replay-total", max, "--process-log-total", max, "--log-level", "info"}})
	if st, b := d.Post("/v1/acp/huge?agent=mock", initMsg); st != 200 {
		t.Fatalf("ACP POST: %d %s", st, b)
	}
	f := filepath.Join(t.TempDir(), "f")
	if st, _, b := d.Do("PUT", "/v1/fs/file?path="+f, []byte("hello")); st != 200 {
		t.Fatalf("PUT: %d %s", st, b)
	}
	if st, b := d.JSONDo("POST", "/v1/processes/run", map[string]any{"command": "echo", "args": []string{"x"}}, nil); st != 200 {
		t.Fatalf("run: %d %s", st, b)
	}
	if got := d.Metrics()[`sandbox_agent_memory_limit_bytes{limit="go_soft_limit"}`]; got != float64(math.MaxInt64) {
		t.Fatalf("Go soft limit %v with budgets of MaxInt64, want none (%v)", got, float64(math.MaxInt64))
	}
	for _, flag := range []string{"--inflight-bytes", "--replay-total", "--process-log-total", "--max-acp-body", "--max-conns", "--max-instances"} {
		for _, v := range []string{"0", "-1"} {
			out, err := exec.Command(harness.Binary, "server", "--port", "0", flag, v).CombinedOutput()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), flag) {
				t.Errorf("%s %s: %v %s", flag, v, err, out)
			}
		}
	}
}

// smallTmpfs mounts a tmpfs of size bytes on a fresh directory, or skips
// the test, saying why, where mounting is not allowed (not root, no
// CAP_SYS_ADMIN). It is unmounted at cleanup, after the daemons started
// later have stopped (cleanups run last first).
func smallTmpfs(t *testing.T, size int) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a small tmpfs")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+strconv.Itoa(size), "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs: %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	return dir
}

// fillDisk writes a file into dir until its filesystem is full; it
// returns the file, to be removed to free the space.
func fillDisk(t *testing.T, dir string) string {
	t.Helper()
	p := filepath.Join(dir, "filler")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 64<<10)
	for {
		if _, err := f.Write(chunk); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			return p
		}
	}
}

// Full disks. The replay spool (--replay-dir on a 1 MiB tmpfs) with an
// agent writing 3 MB of events: the file fails, the instance keeps its
// replay in memory, and a reader from the start gets every event, no gap.
// The OpenCode sessions database on a full disk: creating a session is
// 507 saying the database is full (it was a 500 "internal error"), a turn
// still runs and ends with an error saying the database lacks part of it
// (it used to finish clean over parts no listing would show), and once
// space is freed sessions are made again. An upload onto the full disk is
// 507 too, also with --min-free 0 (it was 502).
func TestFaultDiskFull(t *testing.T) {
	spool := smallTmpfs(t, 1<<20)
	dbDisk := smallTmpfs(t, 512<<10)
	home := t.TempDir()
	state := filepath.Join(home, "testagent")
	if err := os.MkdirAll(state, 0o755); err != nil {
		t.Fatal(err)
	}
	d := harness.Start(t, harness.Options{Home: home, Args: harness.WithTestAgent(t, "--replay-dir", spool,
		"--opencode-db", filepath.Join(dbDisk, "opencode.db"), "--min-free", "0", "--log-level", "info")})

	// The replay spool.
	if st, b := d.Post("/v1/acp/r?agent=test", initMsg); st != 200 {
		t.Fatalf("bootstrap: %d %s", st, b)
	}
	const events = 300
	if st, b := d.Post("/v1/acp/r", fmt.Sprintf(`{"jsonrpc":"2.0","method":"bigline","params":{"n":10000,"count":%d}}`, events)); st != 202 {
		t.Fatalf("bigline: %d %s", st, b)
	}
	harness.Eventually(t, 20*time.Second, "the spool's warning", func() bool {
		return strings.Contains(d.Logs(), "replay spill file failed")
	})
	s := d.Stream("/v1/acp/r")
	got := 0
	for got < events {
		ev := s.NextWithin(t, 20*time.Second)
		if strings.Contains(ev.Data, "replay_gap") {
			t.Fatalf("a gap after %d events with the spool's disk full: %s", got, ev.Data)
		}
		if strings.Contains(ev.Data, `"method":"big"`) {
			got++
		}
	}
	s.Close()

	// The sessions database.
	var ses struct{ ID string }
	if st, b := d.JSONDo("POST", "/opencode/session", map[string]any{}, &ses); st != 200 {
		t.Fatalf("create: %d %s", st, b)
	}
	filler := fillDisk(t, dbDisk)
	st, _, b := d.Do("POST", "/opencode/session", []byte(`{}`), "Content-Type", "application/json")
	if st != 507 || !strings.Contains(string(b), "sessions database is full") {
		t.Fatalf("create on a full disk: %d %s", st, b)
	}
	var m struct {
		Info struct {
			Error *struct {
				Name string
				Data struct{ Message string }
			}
		}
	}
	body := map[string]any{"model": map[string]string{"providerID": "mock", "modelID": "default"}, "parts": []any{map[string]string{"type": "text", "text": "hello"}}}
	if st, b := d.JSONDo("POST", "/opencode/session/"+ses.ID+"/message", body, &m); st != 200 {
		t.Fatalf("prompt on a full disk: %d %s", st, b)
	} else if m.Info.Error == nil || !strings.Contains(m.Info.Error.Data.Message, "sessions database") {
		t.Fatalf("a turn the database could not keep ended without saying so: %s", b)
	}
	// With --min-free 0 the write itself fails: 507 all the same (it was
	// 502 "no space left on device"), and nothing is left.
	upload := filepath.Join(dbDisk, "upload")
	st, _, b = d.Do("PUT", "/v1/fs/file?path="+upload, bytes.Repeat([]byte("x"), 256<<10))
	if st != 507 || !strings.Contains(string(b), "the disk is full") {
		t.Fatalf("upload onto a full disk: %d %s", st, b)
	}
	if _, err := os.Stat(upload); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a refused upload left %s: %v", upload, err)
	}

	// Space again: sessions are made, turns end clean.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if st, b := d.JSONDo("POST", "/opencode/session", map[string]any{}, &ses); st != 200 {
		t.Fatalf("create once space is freed: %d %s", st, b)
	}
	m.Info.Error = nil
	if st, b := d.JSONDo("POST", "/opencode/session/"+ses.ID+"/message", body, &m); st != 200 || m.Info.Error != nil {
		t.Fatalf("prompt once space is freed: %d %s", st, b)
	}
	if st, _, _ := d.Do("GET", "/v1/health", nil); st != 200 {
		t.Fatalf("health: %d", st)
	}
}
