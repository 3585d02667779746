//go:build linux

package daemon

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The test binary is also the fake daemon: started with FAKE_DAEMON set,
// it plays the part named there instead of running the tests.
//
//	serve     answer GET /v1/health on FAKE_DAEMON_ADDR, exit on SIGTERM
//	stubborn  as serve, but ignore SIGTERM; and start a grandchild
//	exit      print to stderr and exit 3 at once
//	silent    never answer; start a grandchild
func TestMain(m *testing.M) {
	switch os.Getenv("FAKE_DAEMON") {
	case "":
		os.Exit(m.Run())
	case "exit":
		fmt.Fprintln(os.Stderr, "fake daemon: listen: address already in use")
		os.Exit(3)
	case "silent":
		grandchild()
		select {}
	case "stubborn":
		signal.Ignore(syscall.SIGTERM)
		grandchild()
		serve()
	case "serve":
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
		defer stop()
		go serve()
		<-ctx.Done()
		os.Exit(0)
	}
}

func serve() {
	ln, err := net.Listen("tcp", os.Getenv("FAKE_DAEMON_ADDR"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println("fake daemon listening")
	_ = http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{"status":"ok"}`))
	}))
}

// grandchild starts a sleep in the daemon's process group and writes its
// pid to FAKE_DAEMON_GRANDCHILD.
func grandchild() {
	c := exec.Command("sleep", "300")
	if err := c.Start(); err != nil {
		os.Exit(1)
	}
	_ = os.WriteFile(os.Getenv("FAKE_DAEMON_GRANDCHILD"), []byte(strconv.Itoa(c.Process.Pid)), 0o600)
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

type fixture struct {
	t     *testing.T
	dir   string
	port  int
	grand string // where a fake writes its grandchild's pid
}

func newFixture(t *testing.T) *fixture {
	f := &fixture{t: t, dir: t.TempDir(), port: freePort(t)}
	f.grand = filepath.Join(f.dir, "grandchild.pid")
	return f
}

// daemon is a Daemon whose program is this test binary playing mode.
func (f *fixture) daemon(mode, version string, tweak ...func(*Config)) *Daemon {
	f.t.Helper()
	exe, err := os.Executable()
	if err != nil {
		f.t.Fatal(err)
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(f.port))
	cfg := Config{
		StateDir: filepath.Join(f.dir, "state"),
		Host:     "127.0.0.1",
		Port:     f.port,
		Version:  version,
		Exe:      exe,
		Args:     []string{"-test.run=^$"},
		Env:      append(os.Environ(), "FAKE_DAEMON="+mode, "FAKE_DAEMON_ADDR="+addr, "FAKE_DAEMON_GRANDCHILD="+f.grand),
		Dir:      f.dir,
		Health: func(ctx context.Context) error {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/v1/health", nil)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return err
			}
			resp.Body.Close()
			return nil
		},
		StartLimit: 10 * time.Second,
		StopLimit:  5 * time.Second,
	}
	for _, tw := range tweak {
		tw(&cfg)
	}
	d, err := New(cfg)
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() {
		// Whatever a test left, nothing outlives it: the group of a
		// recorded process that leads one (a daemon does), and never
		// pid 1 or below (kill(-1) is every process there is).
		if r, err := d.files.readRecord(); err == nil && r.PID > 1 {
			if pgid, err := syscall.Getpgid(r.PID); err == nil && pgid == r.PID {
				_ = syscall.Kill(-r.PID, syscall.SIGKILL)
			}
		}
		if b, err := os.ReadFile(f.grand); err == nil {
			if pid, _ := strconv.Atoi(string(b)); pid > 0 {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
	return d
}

// alive: pid exists and has not exited (a zombie has).
func alive(pid int) bool {
	_, gone, err := identify(pid)
	return err == nil && !gone
}

func (f *fixture) grandchildPID() int {
	f.t.Helper()
	var pid int
	waitFor(f.t, "the grandchild's pid", func() bool {
		b, err := os.ReadFile(f.grand)
		pid, _ = strconv.Atoi(string(b))
		return err == nil && pid > 0
	})
	return pid
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func TestStartStatusStop(t *testing.T) {
	f := newFixture(t)
	d := f.daemon("serve", "1.0.0")
	ctx := context.Background()

	if st, err := d.Status(ctx); err != nil || st.Running || st.Stale != "" {
		t.Fatalf("before start: %+v %v", st, err)
	}
	res, err := d.Start(ctx, false)
	if err != nil || res.Outcome != Started {
		t.Fatalf("start: %+v %v", res, err)
	}
	pid := res.State.Record.PID
	if !alive(pid) || !exists(d.files.Pid) || !exists(d.files.Record) {
		t.Fatalf("started pid %d: alive %v, files %v %v", pid, alive(pid), exists(d.files.Pid), exists(d.files.Record))
	}
	if b, _ := os.ReadFile(d.files.Pid); string(b) != strconv.Itoa(pid)+"\n" {
		t.Errorf("pid file %q", b)
	}
	if b, _ := os.ReadFile(d.files.Log); !strings.Contains(string(b), "fake daemon listening") {
		t.Errorf("log %q", b)
	}
	// Its own session and process group.
	if sid, _ := syscall.Getpgid(pid); sid != pid {
		t.Errorf("process group %d, want %d", sid, pid)
	}
	for _, p := range []string{d.files.Pid, d.files.Record, d.files.Log, filepath.Dir(d.files.Pid)} {
		if fi, err := os.Stat(p); err != nil || fi.Mode().Perm()&0o077 != 0 {
			t.Errorf("%s: %v %v (want owner-only)", p, fi.Mode(), err)
		}
	}

	st, err := d.Status(ctx)
	if err != nil || !st.Running || st.Health != nil || st.Record.PID != pid || st.Record.Version != "1.0.0" || st.Record.URL != d.URL() {
		t.Fatalf("status: %+v %v", st, err)
	}
	// Again: nothing new.
	res, err = d.Start(ctx, false)
	if err != nil || res.Outcome != AlreadyRunning || res.State.Record.PID != pid {
		t.Fatalf("second start: %+v %v", res, err)
	}
	res, err = d.Start(ctx, true)
	if err != nil || res.Outcome != AlreadyRunning || res.State.Record.PID != pid {
		t.Fatalf("--upgrade, same version: %+v %v", res, err)
	}

	res, err = d.Stop(ctx)
	if err != nil || res.Outcome != Stopped || res.Killed || res.Old.PID != pid {
		t.Fatalf("stop: %+v %v", res, err)
	}
	if alive(pid) || exists(d.files.Pid) || exists(d.files.Record) || !exists(d.files.Log) {
		t.Errorf("after stop: alive %v, pid file %v, record %v, log %v", alive(pid), exists(d.files.Pid), exists(d.files.Record), exists(d.files.Log))
	}
	if res, err := d.Stop(ctx); err != nil || res.Outcome != NotRunning {
		t.Errorf("second stop: %+v %v", res, err)
	}
}

func TestStartUpgrade(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	old, err := f.daemon("serve", "0.0.1").Start(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	d := f.daemon("serve", "1.0.0")
	res, err := d.Start(ctx, false)
	if err != nil || res.Outcome != AlreadyRunning || res.State.Record.Version != "0.0.1" {
		t.Fatalf("without --upgrade: %+v %v", res, err)
	}
	res, err = d.Start(ctx, true)
	if err != nil || res.Outcome != Replaced || res.Old.PID != old.State.Record.PID || res.State.Record.Version != "1.0.0" {
		t.Fatalf("--upgrade: %+v %v", res, err)
	}
	if alive(old.State.Record.PID) {
		t.Error("the old daemon still runs")
	}
	if st, _ := d.Status(ctx); !st.Running || st.Record.PID != res.State.Record.PID {
		t.Errorf("status: %+v", st)
	}
	if _, err := d.Stop(ctx); err != nil {
		t.Fatal(err)
	}
}

// A daemon that exits at once: the error carries its log; nothing is left.
func TestStartExits(t *testing.T) {
	f := newFixture(t)
	d := f.daemon("exit", "1.0.0")
	_, err := d.Start(context.Background(), false)
	if err == nil || !strings.Contains(err.Error(), "exited while starting (exit status 3)") || !strings.Contains(err.Error(), "address already in use") {
		t.Fatalf("err = %v", err)
	}
	if exists(d.files.Pid) || exists(d.files.Record) {
		t.Error("pid file left")
	}
}

// A daemon that never answers is stopped, with its process group, once
// the start limit passes.
func TestStartNeverAnswers(t *testing.T) {
	f := newFixture(t)
	d := f.daemon("silent", "1.0.0", func(c *Config) { c.StartLimit = 500 * time.Millisecond })
	var progress strings.Builder
	d.cfg.Progress = &progress
	_, err := d.Start(context.Background(), false)
	if err == nil || !strings.Contains(err.Error(), "did not answer") {
		t.Fatalf("err = %v", err)
	}
	grand := f.grandchildPID()
	waitFor(t, "the grandchild to be killed", func() bool { return !alive(grand) })
	if exists(d.files.Pid) || exists(d.files.Record) {
		t.Error("pid file left")
	}
	if !strings.Contains(progress.String(), "starting the daemon at "+d.URL()) {
		t.Errorf("progress: %q", progress.String())
	}
}

// A daemon that ignores SIGTERM is killed, with its process group, after
// the stop limit.
func TestStopKillsAfterLimit(t *testing.T) {
	f := newFixture(t)
	d := f.daemon("stubborn", "1.0.0", func(c *Config) { c.StopLimit = 300 * time.Millisecond })
	res, err := d.Start(context.Background(), false)
	if err != nil {
		t.Fatal(err)
	}
	grand := f.grandchildPID()
	res, err = d.Stop(context.Background())
	if err != nil || res.Outcome != Stopped || !res.Killed {
		t.Fatalf("stop: %+v %v", res, err)
	}
	if alive(res.Old.PID) {
		t.Error("the daemon is alive after stop")
	}
	// SIGKILL went to its process group; the grandchild dies of it too
	// (a signal is delivered after kill returns: wait for it).
	waitFor(t, "the grandchild to be killed", func() bool { return !alive(grand) })
}

// A pid file whose process is gone, or whose pid is another process now,
// is reported stale and removed by stop, which signals nothing.
func TestStalePidFile(t *testing.T) {
	f := newFixture(t)
	d := f.daemon("serve", "1.0.0")
	ctx := context.Background()

	// Gone: a process that has exited and been reaped.
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	if err := d.files.writeRecord(Record{PID: gone.Process.Pid, StartTicks: 1, Version: "1.0.0"}); err != nil {
		t.Fatal(err)
	}
	st, err := d.Status(ctx)
	if err != nil || st.Running || !strings.Contains(st.Stale, "is gone") {
		t.Fatalf("gone: %+v %v", st, err)
	}
	res, err := d.Stop(ctx)
	if err != nil || res.Outcome != NotRunning || res.RemovedStale == "" || exists(d.files.Pid) || exists(d.files.Record) {
		t.Fatalf("stop of a gone pid: %+v %v", res, err)
	}

	// Reused: a live process that is not the one recorded.
	other := exec.Command("sleep", "300")
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { other.Process.Kill(); other.Wait() }()
	id, _, err := identify(other.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.files.writeRecord(Record{PID: other.Process.Pid, StartTicks: id.startTicks + 1, BootID: id.bootID, Version: "1.0.0"}); err != nil {
		t.Fatal(err)
	}
	st, err = d.Status(ctx)
	if err != nil || st.Running || !strings.Contains(st.Stale, "another process") {
		t.Fatalf("reused: %+v %v", st, err)
	}
	if res, err := d.Stop(ctx); err != nil || res.Outcome != NotRunning || exists(d.files.Record) {
		t.Fatalf("stop of a reused pid: %+v %v", res, err)
	}
	if !alive(other.Process.Pid) {
		t.Fatal("stop signalled a process that is not the daemon")
	}

	// Another boot: the same pid and start time mean nothing.
	if err := d.files.writeRecord(Record{PID: other.Process.Pid, StartTicks: id.startTicks, BootID: "another-boot", Version: "1.0.0"}); err != nil {
		t.Fatal(err)
	}
	if st, _ := d.Status(ctx); st.Running || !strings.Contains(st.Stale, "restarted") {
		t.Errorf("other boot: %+v", st)
	}
	// A pid file without its record, and a record that is not JSON.
	_ = os.Remove(d.files.Record)
	if st, _ := d.Status(ctx); st.Running || !strings.Contains(st.Stale, "no record") {
		t.Errorf("pid file alone: %+v", st)
	}
	if err := os.WriteFile(d.files.Record, []byte("{garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	if st, _ := d.Status(ctx); st.Running || st.Stale == "" {
		t.Errorf("garbage record: %+v", st)
	}
	// start takes the address over, cleaning up.
	res, err = d.Start(ctx, false)
	if err != nil || res.Outcome != Started || res.RemovedStale == "" {
		t.Fatalf("start over a stale pid file: %+v %v", res, err)
	}
	if !alive(other.Process.Pid) {
		t.Fatal("start signalled a process that is not the daemon")
	}
	if _, err := d.Stop(ctx); err != nil {
		t.Fatal(err)
	}
}

// An address another process holds: start says so and starts nothing.
func TestStartAddressTaken(t *testing.T) {
	f := newFixture(t)
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(f.port)))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	d := f.daemon("serve", "1.0.0")
	_, err = d.Start(context.Background(), false)
	if err == nil || !strings.Contains(err.Error(), "already in use by another process") {
		t.Fatalf("err = %v", err)
	}
	if exists(d.files.Pid) || exists(d.files.Log) {
		t.Error("a daemon was started")
	}
}

// Starts at once leave one daemon: the others find it running.
func TestConcurrentStarts(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	var wg sync.WaitGroup
	results := make([]Result, 4)
	errs := make([]error, 4)
	for i := range results {
		d := f.daemon("serve", "1.0.0")
		wg.Go(func() { results[i], errs[i] = d.Start(ctx, false) })
	}
	wg.Wait()
	started, pids := 0, map[int]bool{}
	for i, r := range results {
		if errs[i] != nil {
			t.Fatalf("start %d: %v", i, errs[i])
		}
		if r.Outcome == Started {
			started++
		}
		pids[r.State.Record.PID] = true
	}
	if started != 1 || len(pids) != 1 {
		t.Errorf("%d started, pids %v", started, pids)
	}
	if _, err := f.daemon("serve", "1.0.0").Stop(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestFilesAndStateDir(t *testing.T) {
	f := FilesFor("/s", "::1", 2468)
	if f.Pid != "/s/daemon---1-2468.pid" || f.Record != "/s/daemon---1-2468.json" || f.Log != "/s/daemon---1-2468.log" {
		t.Errorf("files %+v", f)
	}
	if f := FilesFor("/s", "127.0.0.1", 80); f.Pid != "/s/daemon-127-0-0-1-80.pid" {
		t.Errorf("files %+v", f)
	}
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	for _, c := range []struct {
		xdg, want string
	}{
		{"", "/home/u/.local/state/sandbox-agent/daemon"},
		{"relative/dir", "/home/u/.local/state/sandbox-agent/daemon"},
		{"/xdg/state", "/xdg/state/sandbox-agent/daemon"},
	} {
		if got := StateDir(env(map[string]string{"XDG_STATE_HOME": c.xdg}), "/home/u"); got != c.want {
			t.Errorf("XDG_STATE_HOME=%q: %s, want %s", c.xdg, got, c.want)
		}
	}
	if _, err := New(Config{StateDir: t.TempDir(), Port: 0}); err == nil {
		t.Error("port 0 accepted")
	}
}

// A canceled start stops what it started.
func TestStartCanceled(t *testing.T) {
	f := newFixture(t)
	d := f.daemon("silent", "1.0.0")
	ctx, cancel := context.WithCancelCause(context.Background())
	writes := 0
	d.cfg.Progress = writerFunc(func(p []byte) (int, error) {
		// The second line is the first "waiting ..." (the daemon has run
		// for a second).
		if writes++; writes == 2 {
			cancel(errors.New("interrupted by the test"))
		}
		return len(p), nil
	})
	_, err := d.Start(ctx, false)
	if err == nil || !strings.Contains(err.Error(), "interrupted by the test") {
		t.Fatalf("err = %v", err)
	}
	grand := f.grandchildPID()
	waitFor(t, "the grandchild to be killed", func() bool { return !alive(grand) })
	if exists(d.files.Pid) {
		t.Error("pid file left")
	}
}

type writerFunc func([]byte) (int, error)

func (w writerFunc) Write(p []byte) (int, error) { return w(p) }

// A record or pid file that is not a regular file (a FIFO someone put
// there) is stale, reported at once: status, stop and start blocked in
// open(2) forever, deaf to SIGTERM.
func TestRecordNotRegular(t *testing.T) {
	f := newFixture(t)
	d := f.daemon("serve", "1.0.0")
	ctx := context.Background()
	if err := os.MkdirAll(filepath.Dir(d.files.Record), 0o700); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{d.files.Record, d.files.Pid} {
		if err := syscall.Mkfifo(p, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan State, 1)
	go func() {
		st, err := d.Status(ctx)
		if err != nil {
			t.Error(err)
		}
		done <- st
	}()
	select {
	case st := <-done:
		if st.Running || !strings.Contains(st.Stale, "not a regular file") {
			t.Errorf("a FIFO record: %+v", st)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("status blocked on a FIFO record")
	}
	if res, err := d.Stop(ctx); err != nil || res.Outcome != NotRunning || exists(d.files.Record) || exists(d.files.Pid) {
		t.Fatalf("stop over a FIFO record: %+v %v", res, err)
	}
}
