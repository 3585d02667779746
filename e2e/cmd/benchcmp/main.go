// Command benchcmp runs the same workloads, in one run, against this
// daemon, the reference server (Sandbox Agent 0.4.2, npm
// @sandbox-agent/cli-linux-x64) and the agent spoken to over direct stdio,
// and prints a Markdown table with ratios. Both daemons run the same agent:
// this repository's mock (`sandbox-agent mock-agent-process`), installed as
// the launcher file both of them honour.
//
//	go run ./e2e/cmd/benchcmp            (or: just bench-compare)
//
// Workloads: request round trip (p50, p99); a 100 000-update burst
// (throughput, events lost); first request of a new instance, spawn
// included; idle RSS and RSS per live instance; 200 instances started
// concurrently; a 1 GiB file PUT and GET against a plain file copy.
//
// The run is bounded (-timeout) and cleans up after itself: both daemons
// run in their own process groups with a parent-death signal; the
// reference, whose DELETE and SIGINT hang while an agent lives, is stopped
// with SIGKILL to its group; at the end every process still running a
// binary of the run's scratch directory is killed, and the directory is
// removed.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sandbox-agent-go/sandbox-agent/adapters/httpclient"
	"github.com/sandbox-agent-go/sandbox-agent/e2e/internal/proc"
)

const refPackage = "@sandbox-agent/cli-linux-x64@0.4.2"

type config struct {
	timeout     time.Duration
	cache       string
	ref         string
	roundTrips  int
	burst       int
	burstRuns   int
	firsts      int
	perInstance int
	concurrent  int
	fileBytes   int64
	out         string
}

func main() {
	var c config
	flag.DurationVar(&c.timeout, "timeout", 20*time.Minute, "bound on the whole run")
	flag.StringVar(&c.cache, "cache", defaultCache(), "where the reference server is installed with npm")
	flag.StringVar(&c.ref, "ref", "", "reference server binary (default: e2e/node_modules, else installed into -cache)")
	flag.IntVar(&c.roundTrips, "round-trips", 2000, "requests for the round-trip figures")
	flag.IntVar(&c.burst, "burst", 100000, "updates in one streaming burst")
	flag.IntVar(&c.burstRuns, "burst-runs", 3, "bursts per target (median throughput, worst loss)")
	flag.IntVar(&c.firsts, "first-requests", 20, "fresh instances for the first-request latency")
	flag.IntVar(&c.perInstance, "rss-instances", 50, "live instances for the RSS-per-instance figure")
	flag.IntVar(&c.concurrent, "concurrent", 200, "instances started at once")
	flag.Int64Var(&c.fileBytes, "file-bytes", 1<<30, "size of the file PUT and GET")
	flag.StringVar(&c.out, "out", "", "also write the table to this file")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	if err := run(ctx, c); err != nil {
		fmt.Fprintln(os.Stderr, "benchcmp:", err)
		os.Exit(1)
	}
}

func defaultCache() string {
	dir, err := os.UserCacheDir()
	if err != nil {
		dir = os.TempDir()
	}
	return filepath.Join(dir, "sandbox-agent-benchcmp")
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}

func run(ctx context.Context, c config) error {
	root, err := moduleRoot()
	if err != nil {
		return err
	}
	work, err := os.MkdirTemp("", "benchcmp-")
	if err != nil {
		return err
	}
	defer func() {
		proc.KillUnder(work)
		os.RemoveAll(work)
	}()

	bin := filepath.Join(work, "bin", "sandbox-agent")
	logf("building sandbox-agent")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/sandbox-agent")
	build.Dir, build.Stdout, build.Stderr = root, os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return fmt.Errorf("build: %w", err)
	}
	ref := c.ref
	if ref == "" {
		if ref, err = referenceBinary(ctx, root, c.cache); err != nil {
			return err
		}
	}
	version, _ := exec.CommandContext(ctx, ref, "--version").Output()
	logf("reference: %s (%s)", ref, strings.TrimSpace(string(version)))

	src := filepath.Join(work, "src.bin")
	if err := writePattern(src, c.fileBytes); err != nil {
		return err
	}

	results := map[string]*figures{}
	direct, err := benchDirect(ctx, c, bin)
	if err != nil {
		return fmt.Errorf("direct stdio: %w", err)
	}
	results["direct"] = direct
	for _, kind := range []string{"ours", "reference"} {
		t, err := startTarget(ctx, kind, work, bin, ref)
		if err != nil {
			return fmt.Errorf("start %s: %w", kind, err)
		}
		f, err := benchDaemon(ctx, c, t, src, work)
		t.stop()
		if err != nil {
			return fmt.Errorf("%s: %w", kind, err)
		}
		results[kind] = f
	}
	copyRate, err := plainCopy(src, filepath.Join(work, "copy.bin"), false)
	if err != nil {
		return err
	}
	table := render(c, results, copyRate, strings.TrimSpace(string(version)))
	fmt.Print(table)
	if c.out != "" {
		return os.WriteFile(c.out, []byte(table), 0o644)
	}
	return nil
}

func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", errors.New("run benchcmp from inside the sandbox-agent module")
	}
	return filepath.Dir(mod), nil
}

// referenceBinary finds the reference server: the copy the e2e npm
// install may already hold, else one installed into cache with npm.
func referenceBinary(ctx context.Context, root, cache string) (string, error) {
	const rel = "node_modules/@sandbox-agent/cli-linux-x64/bin/sandbox-agent"
	for _, p := range []string{filepath.Join(root, "e2e", rel), filepath.Join(cache, rel)} {
		if fi, err := os.Stat(p); err == nil && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	logf("installing %s into %s", refPackage, cache)
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return "", err
	}
	ictx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ictx, "npm", "install", "--no-save", "--no-audit", "--no-fund", "--prefix", cache, refPackage)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("npm install %s: %w", refPackage, err)
	}
	p := filepath.Join(cache, rel)
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("npm install %s left no binary: %w", refPackage, err)
	}
	return p, nil
}

// figures are one target's results; zero means not measured.
type figures struct {
	rttP50, rttP99     time.Duration
	burstRate          float64 // updates per second, median of runs
	burstLost          int     // worst run
	burstGaps          int     // replay-gap frames seen, all runs
	firstP50, firstP99 time.Duration
	idleRSS            int64 // KiB
	perInstanceRSS     int64 // KiB of daemon RSS per live instance
	concWall           time.Duration
	concFailed         int
	concP99            time.Duration // one request to each of the instances at once
	concRSS            int64         // KiB after the concurrent instances
	putRate, getRate   float64       // MB/s
	putErr, getErr     string
	fileRSSGrowth      int64 // KiB, peak during the transfers
}

// ---- targets ----------------------------------------------------------

type target struct {
	kind  string
	url   string
	cmd   *exec.Cmd
	done  chan struct{}
	home  string
	async bool // answers session/prompt with 202
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// cleanEnv is the environment without anything that would move the
// daemons' data directories or reach a registry.
func cleanEnv(home string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "HOME", "XDG_DATA_HOME", "XDG_CONFIG_HOME", "SANDBOX_AGENT_TOKEN":
			continue
		}
		env = append(env, kv)
	}
	return append(env, "HOME="+home, "SANDBOX_AGENT_ACP_REGISTRY_URL=http://127.0.0.1:9/registry.json")
}

func startTarget(ctx context.Context, kind, work, bin, ref string) (*target, error) {
	home := filepath.Join(work, kind+"-home")
	launchers := filepath.Join(home, ".local", "share", "sandbox-agent", "bin", "agent_processes")
	if err := os.MkdirAll(launchers, 0o755); err != nil {
		return nil, err
	}
	script := "#!/bin/sh\nexec " + bin + " mock-agent-process \"$@\"\n"
	if err := os.WriteFile(filepath.Join(launchers, "mock-acp"), []byte(script), 0o755); err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	p := strconv.Itoa(port)
	var cmd *exec.Cmd
	if kind == "ours" {
		cmd = exec.Command(bin, "server", "--no-telemetry", "--host", "127.0.0.1", "--port", p, "--log-level", "warn")
	} else {
		cmd = exec.Command(ref, "server", "--no-telemetry", "-H", "127.0.0.1", "-p", p)
	}
	cmd.Env = cleanEnv(home)
	if kind != "ours" {
		cmd.Env = append(cmd.Env, "SANDBOX_AGENT_LOG_STDOUT=1")
	}
	cmd.Dir = home
	logFile, err := os.Create(filepath.Join(work, kind+".log"))
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	t := &target{kind: kind, url: "http://127.0.0.1:" + p, cmd: cmd, done: make(chan struct{}), home: home, async: kind == "ours"}
	go func() { _ = cmd.Wait(); logFile.Close(); close(t.done) }()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if resp, err := http.Get(t.url + "/v1/health"); err == nil {
			resp.Body.Close()
			logf("%s listening at %s (pid %d)", kind, t.url, cmd.Process.Pid)
			return t, nil
		}
		select {
		case <-t.done:
			return nil, fmt.Errorf("%s exited at start; see its log", kind)
		case <-time.After(50 * time.Millisecond):
		}
	}
	t.stop()
	return nil, fmt.Errorf("%s did not start within 20 s", kind)
}

// stop ends the daemon and everything in its process group. Ours gets
// SIGTERM (it stops its agents); the reference hangs on SIGINT while an
// agent lives, so it gets SIGKILL, as does anything left in the group.
func (t *target) stop() {
	pgid := t.cmd.Process.Pid
	if t.kind == "ours" {
		_ = t.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-t.done:
		case <-time.After(10 * time.Second):
		}
	}
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	<-t.done
}

func (t *target) pid() int { return t.cmd.Process.Pid }

// ---- HTTP helpers -----------------------------------------------------

var client = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 512, MaxConnsPerHost: 0}}

func post(ctx context.Context, t *target, id, query, msg string) (int, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "POST", t.url+"/v1/acp/"+id+query, strings.NewReader(msg))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

func mustPost(ctx context.Context, t *target, id, query, msg string) ([]byte, error) {
	st, b, err := post(ctx, t, id, query, msg)
	if err != nil {
		return nil, err
	}
	if st != 200 {
		return nil, fmt.Errorf("POST %s: %d %s", id, st, b)
	}
	return b, nil
}

const initMsg = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}`

func newSessionMsg(id string) string {
	return `{"jsonrpc":"2.0","id":"` + id + `","method":"session/new","params":{"cwd":"/tmp","mcpServers":[]}}`
}

func promptMsg(id, sid string, n int) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%q,"method":"session/prompt","params":{"sessionId":%q,"prompt":[{"type":"text","text":"stream %d"}]}}`, id, sid, n)
}

func sessionID(b []byte) (string, error) {
	var r struct {
		Result struct{ SessionID string } `json:"result"`
	}
	if err := json.Unmarshal(b, &r); err != nil || r.Result.SessionID == "" {
		return "", fmt.Errorf("session/new answered %s", b)
	}
	return r.Result.SessionID, nil
}

func del(t *target, id string) {
	if t.kind != "ours" {
		return // the reference's DELETE hangs while the agent lives
	}
	req, _ := http.NewRequest("DELETE", t.url+"/v1/acp/"+id, nil)
	if resp, err := client.Do(req); err == nil {
		resp.Body.Close()
	}
}

func percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	i := int(float64(len(s)-1) * p)
	return s[i]
}

// statusKiB reads a field of /proc/<pid>/status; 0 when it cannot.
func statusKiB(pid int, field string) int64 {
	n, _ := proc.StatusKiB(pid, field)
	return n
}

// settledRSS is pid's VmRSS once it has stopped moving (two readings 250 ms
// apart within 64 KiB, for at most 10 s): a garbage-collected daemon hands
// freed memory back to the OS gradually after a busy phase, and a reading
// taken meanwhile would charge that release to whatever is measured next.
func settledRSS(pid int) int64 {
	last := statusKiB(pid, "VmRSS")
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		time.Sleep(250 * time.Millisecond)
		now := statusKiB(pid, "VmRSS")
		if d := now - last; d >= -64 && d <= 64 {
			return now
		}
		last = now
	}
	return last
}

// ---- workloads against a daemon --------------------------------------

func benchDaemon(ctx context.Context, c config, t *target, src, work string) (*figures, error) {
	f := &figures{}
	f.idleRSS = settledRSS(t.pid())

	// RSS per live instance, first: later phases leave freed heap behind
	// that new instances would reuse unseen by RSS.
	logf("%s: %d live instances", t.kind, c.perInstance)
	for i := range c.perInstance {
		if _, err := mustPost(ctx, t, "live-"+strconv.Itoa(i), "?agent=mock", initMsg); err != nil {
			return nil, err
		}
	}
	f.perInstanceRSS = (settledRSS(t.pid()) - f.idleRSS) / int64(c.perInstance)
	for i := range c.perInstance {
		del(t, "live-"+strconv.Itoa(i))
	}

	// Round trip.
	logf("%s: %d round trips", t.kind, c.roundTrips)
	if _, err := mustPost(ctx, t, "rtt", "?agent=mock", initMsg); err != nil {
		return nil, err
	}
	var durs []time.Duration
	for i := range c.roundTrips {
		msg := `{"jsonrpc":"2.0","id":` + strconv.Itoa(100+i) + `,"method":"bench/ping","params":{}}`
		start := time.Now()
		if _, err := mustPost(ctx, t, "rtt", "", msg); err != nil {
			return nil, err
		}
		durs = append(durs, time.Since(start))
	}
	f.rttP50, f.rttP99 = percentile(durs, 0.50), percentile(durs, 0.99)
	del(t, "rtt")

	// Burst.
	var rates []float64
	for run := range c.burstRuns {
		logf("%s: burst %d of %d updates", t.kind, run+1, c.burst)
		r, lost, gaps, err := burstOverHTTP(ctx, t, fmt.Sprintf("burst-%d", run), c.burst)
		if err != nil {
			return nil, err
		}
		rates = append(rates, r)
		f.burstLost = max(f.burstLost, lost)
		f.burstGaps += gaps
	}
	slices.Sort(rates)
	f.burstRate = rates[len(rates)/2]

	// First request of a new instance, spawn included.
	logf("%s: %d first requests", t.kind, c.firsts)
	durs = durs[:0]
	for i := range c.firsts {
		id := "first-" + strconv.Itoa(i)
		start := time.Now()
		if _, err := mustPost(ctx, t, id, "?agent=mock", initMsg); err != nil {
			return nil, err
		}
		durs = append(durs, time.Since(start))
		del(t, id)
	}
	f.firstP50, f.firstP99 = percentile(durs, 0.50), percentile(durs, 0.99)

	// Concurrent instances.
	logf("%s: %d concurrent instances", t.kind, c.concurrent)
	var wg sync.WaitGroup
	var mu sync.Mutex
	start := time.Now()
	for i := range c.concurrent {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := mustPost(ctx, t, "conc-"+strconv.Itoa(i), "?agent=mock", initMsg); err != nil {
				mu.Lock()
				f.concFailed++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	f.concWall = time.Since(start)
	durs = durs[:0]
	for i := range c.concurrent {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := time.Now()
			_, err := mustPost(ctx, t, "conc-"+strconv.Itoa(i), "", `{"jsonrpc":"2.0","id":2,"method":"bench/ping","params":{}}`)
			mu.Lock()
			if err != nil {
				f.concFailed++
			} else {
				durs = append(durs, time.Since(s))
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	f.concP99 = percentile(durs, 0.99)
	f.concRSS = statusKiB(t.pid(), "VmRSS")
	for i := range c.concurrent {
		del(t, "conc-"+strconv.Itoa(i))
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}

	// Files.
	logf("%s: %d MiB PUT and GET", t.kind, c.fileBytes>>20)
	fileFigures(ctx, t, f, src, filepath.Join(t.home, "up.bin"), filepath.Join(work, t.kind+"-down.bin"), c.fileBytes)
	return f, ctx.Err()
}

// burstOverHTTP opens a stream, asks for n updates and counts the distinct
// ones that arrive before the turn's answer (on the stream for both
// daemons; the reference answers the POST only when the turn ends).
func burstOverHTTP(ctx context.Context, t *target, id string, n int) (rate float64, lost, gaps int, err error) {
	if _, err := mustPost(ctx, t, id, "?agent=mock", initMsg); err != nil {
		return 0, 0, 0, err
	}
	b, err := mustPost(ctx, t, id, "", newSessionMsg("s"))
	if err != nil {
		return 0, 0, 0, err
	}
	sid, err := sessionID(b)
	if err != nil {
		return 0, 0, 0, err
	}
	sctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	req, _ := http.NewRequestWithContext(sctx, "GET", t.url+"/v1/acp/"+id, nil)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := client.Do(req)
	if err != nil {
		return 0, 0, 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return 0, 0, 0, fmt.Errorf("stream: %d", resp.StatusCode)
	}
	postErr := make(chan error, 1)
	start := time.Now()
	go func() {
		st, b, err := post(sctx, t, id, "", promptMsg("prompt", sid, n))
		if err == nil && st != 200 && st != 202 {
			err = fmt.Errorf("prompt: %d %s", st, b)
		}
		postErr <- err
	}()
	seen := make([]bool, n+1)
	got := 0
	var last time.Time
	r := httpclient.NewSSEReader(resp.Body, 0)
	marker := []byte(`mock: chunk `)
	for {
		ev, err := r.Next()
		if err != nil {
			return 0, 0, 0, fmt.Errorf("stream ended after %d updates: %w", got, err)
		}
		line := ev.Data
		if i := bytes.Index(line, marker); i >= 0 {
			rest := line[i+len(marker):]
			j := bytes.IndexByte(rest, '"')
			k, _ := strconv.Atoi(string(rest[:max(j, 0)]))
			if k >= 1 && k <= n && !seen[k] {
				seen[k] = true
				got++
				last = time.Now()
			}
			continue
		}
		if bytes.Contains(line, []byte(`_adapter/replay_gap`)) {
			gaps++
			continue
		}
		if bytes.Contains(line, []byte(`"prompt"`)) && bytes.Contains(line, []byte(`stopReason`)) {
			break
		}
	}
	if err := <-postErr; err != nil {
		return 0, 0, 0, err
	}
	del(t, id)
	if last.IsZero() {
		return 0, n, gaps, nil
	}
	return float64(got) / last.Sub(start).Seconds(), n - got, gaps, nil
}

func fileFigures(ctx context.Context, t *target, f *figures, src, dst, down string, size int64) {
	before := settledRSS(t.pid())
	peak := before
	stopSampling := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			peak = max(peak, statusKiB(t.pid(), "VmRSS"))
			select {
			case <-stopSampling:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	defer func() {
		close(stopSampling)
		<-sampled
		f.fileRSSGrowth = peak - before
		os.Remove(dst)
		os.Remove(down)
	}()

	fctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	in, err := os.Open(src)
	if err != nil {
		f.putErr = err.Error()
		return
	}
	defer in.Close()
	req, _ := http.NewRequestWithContext(fctx, "PUT", t.url+"/v1/fs/file?path="+url.QueryEscape(dst), in)
	req.ContentLength = size
	req.Header.Set("Content-Type", "application/octet-stream")
	start := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		f.putErr = shortErr(err)
		f.getErr = "no file"
		return
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	resp.Body.Close()
	took := time.Since(start)
	fi, statErr := os.Stat(dst)
	switch {
	case resp.StatusCode != 200:
		f.putErr = fmt.Sprintf("%d %s", resp.StatusCode, firstLine(body))
	case statErr != nil || fi.Size() != size:
		f.putErr = "stored size differs"
	default:
		f.putRate = float64(size) / 1e6 / took.Seconds()
	}
	if f.putErr != "" {
		// Still measure GET: put the file in place on disk.
		if _, err := plainCopy(src, dst, true); err != nil {
			f.getErr = "no file"
			return
		}
	}

	out, err := os.Create(down)
	if err != nil {
		f.getErr = err.Error()
		return
	}
	defer out.Close()
	req, _ = http.NewRequestWithContext(fctx, "GET", t.url+"/v1/fs/file?path="+url.QueryEscape(dst), nil)
	start = time.Now()
	resp, err = client.Do(req)
	if err != nil {
		f.getErr = shortErr(err)
		return
	}
	n, err := io.Copy(out, resp.Body)
	resp.Body.Close()
	took = time.Since(start)
	switch {
	case resp.StatusCode != 200:
		f.getErr = fmt.Sprintf("status %d", resp.StatusCode)
	case err != nil:
		f.getErr = shortErr(err)
	case n != size:
		f.getErr = fmt.Sprintf("%d of %d bytes", n, size)
	default:
		f.getRate = float64(size) / 1e6 / took.Seconds()
	}
}

func shortErr(err error) string {
	s := err.Error()
	if len(s) > 60 {
		s = s[:60] + "…"
	}
	return s
}

func firstLine(b []byte) string {
	s, _, _ := strings.Cut(string(b), "\n")
	if len(s) > 60 {
		s = s[:60] + "…"
	}
	return s
}

// ---- direct stdio -----------------------------------------------------

type stdio struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Reader
}

func startStdio(bin string) (*stdio, error) {
	cmd := exec.Command(bin, "mock-agent-process")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return &stdio{cmd: cmd, in: in, out: bufio.NewReaderSize(out, 1<<20)}, nil
}

func (s *stdio) close() {
	s.in.Close()
	done := make(chan struct{})
	go func() { _ = s.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		<-done
	}
}

// call writes msg and reads lines until the response carrying idField;
// it calls each earlier line with on.
func (s *stdio) call(msg, idField string, on func([]byte)) ([]byte, error) {
	if _, err := io.WriteString(s.in, msg+"\n"); err != nil {
		return nil, err
	}
	for {
		line, err := s.out.ReadSlice('\n')
		if err != nil {
			return nil, err
		}
		if bytes.Contains(line, []byte(idField)) && !bytes.Contains(line, []byte(`"method"`)) {
			return append([]byte(nil), line...), nil
		}
		if on != nil {
			on(line)
		}
	}
}

func benchDirect(ctx context.Context, c config, bin string) (*figures, error) {
	f := &figures{}
	logf("direct stdio: round trips, bursts, first requests")
	s, err := startStdio(bin)
	if err != nil {
		return nil, err
	}
	defer s.close()
	if _, err := s.call(initMsg, `"id":1`, nil); err != nil {
		return nil, err
	}
	var durs []time.Duration
	for i := range c.roundTrips {
		id := strconv.Itoa(100 + i)
		start := time.Now()
		if _, err := s.call(`{"jsonrpc":"2.0","id":`+id+`,"method":"bench/ping","params":{}}`, `"id":`+id+`,`, nil); err != nil {
			return nil, err
		}
		durs = append(durs, time.Since(start))
	}
	f.rttP50, f.rttP99 = percentile(durs, 0.5), percentile(durs, 0.99)

	b, err := s.call(newSessionMsg("s"), `"id":"s"`, nil)
	if err != nil {
		return nil, err
	}
	sid, err := sessionID(b)
	if err != nil {
		return nil, err
	}
	var rates []float64
	for range c.burstRuns {
		got := 0
		start := time.Now()
		if _, err := s.call(promptMsg("prompt", sid, c.burst), `"id":"prompt"`, func(line []byte) {
			if bytes.Contains(line, []byte("mock: chunk ")) {
				got++
			}
		}); err != nil {
			return nil, err
		}
		rates = append(rates, float64(got)/time.Since(start).Seconds())
		f.burstLost = max(f.burstLost, c.burst-got)
	}
	slices.Sort(rates)
	f.burstRate = rates[len(rates)/2]

	durs = durs[:0]
	for range c.firsts {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		start := time.Now()
		p, err := startStdio(bin)
		if err != nil {
			return nil, err
		}
		_, err = p.call(initMsg, `"id":1`, nil)
		durs = append(durs, time.Since(start))
		p.close()
		if err != nil {
			return nil, err
		}
	}
	f.firstP50, f.firstP99 = percentile(durs, 0.5), percentile(durs, 0.99)
	return f, nil
}

// ---- files ------------------------------------------------------------

func writePattern(p string, size int64) error {
	f, err := os.Create(p)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	block := make([]byte, 1<<20)
	for i := range block {
		block[i] = byte(i*7 + i/251)
	}
	for left := size; left > 0; {
		n := min(left, int64(len(block)))
		if _, err := w.Write(block[:n]); err != nil {
			f.Close()
			return err
		}
		block[0]++
		left -= n
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// plainCopy is the baseline of the file figures: io.Copy between two files
// on the same disk (no fsync, like the daemons).
func plainCopy(src, dst string, keep bool) (float64, error) {
	in, err := os.Open(src)
	if err != nil {
		return 0, err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return 0, err
	}
	if !keep {
		defer os.Remove(dst)
	}
	defer out.Close()
	start := time.Now()
	n, err := io.Copy(out, in)
	if err != nil {
		return 0, err
	}
	return float64(n) / 1e6 / time.Since(start).Seconds(), nil
}

// ---- report -----------------------------------------------------------

func ms(d time.Duration) string {
	if d == 0 {
		return "–"
	}
	return strconv.FormatFloat(float64(d.Microseconds())/1000, 'f', 2, 64) + " ms"
}

func mib(kib int64) string { return strconv.FormatFloat(float64(kib)/1024, 'f', 1, 64) + " MiB" }

func ratio(ours, ref float64) string {
	if ours == 0 || ref == 0 {
		return "–"
	}
	return strconv.FormatFloat(ours/ref, 'f', 2, 64) + "×"
}

func rate(v float64, unit, errText string) string {
	if errText != "" {
		return "failed: " + errText
	}
	if v == 0 {
		return "–"
	}
	return strconv.FormatFloat(v, 'f', 0, 64) + " " + unit
}

func render(c config, r map[string]*figures, copyRate float64, refVersion string) string {
	o, ref, d := r["ours"], r["reference"], r["direct"]
	var b strings.Builder
	fmt.Fprintf(&b, "| workload | this daemon | reference (%s) | direct stdio / plain copy | ours ÷ reference |\n", refVersion)
	b.WriteString("|---|---|---|---|---|\n")
	row := func(name, ours, refv, direct, rat string) {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", name, ours, refv, direct, rat)
	}
	dur := func(x time.Duration) float64 { return float64(x) }
	row(fmt.Sprintf("request round trip p50 (%d requests)", c.roundTrips), ms(o.rttP50), ms(ref.rttP50), ms(d.rttP50), ratio(dur(o.rttP50), dur(ref.rttP50)))
	row("request round trip p99", ms(o.rttP99), ms(ref.rttP99), ms(d.rttP99), ratio(dur(o.rttP99), dur(ref.rttP99)))
	row(fmt.Sprintf("streaming throughput (%d-update burst, median of %d)", c.burst, c.burstRuns),
		rate(o.burstRate, "updates/s", ""), rate(ref.burstRate, "updates/s", ""), rate(d.burstRate, "updates/s", ""), ratio(o.burstRate, ref.burstRate))
	lost := func(f *figures) string {
		s := strconv.Itoa(f.burstLost)
		if f.burstGaps > 0 {
			s += fmt.Sprintf(" (%d gap frames)", f.burstGaps)
		}
		return s
	}
	row("events lost in a burst (worst run)", lost(o), lost(ref), lost(d), "")
	row(fmt.Sprintf("first request incl. spawn p50 (%d instances)", c.firsts), ms(o.firstP50), ms(ref.firstP50), ms(d.firstP50), ratio(dur(o.firstP50), dur(ref.firstP50)))
	row("first request incl. spawn p99", ms(o.firstP99), ms(ref.firstP99), ms(d.firstP99), ratio(dur(o.firstP99), dur(ref.firstP99)))
	row("idle daemon RSS", mib(o.idleRSS), mib(ref.idleRSS), "", ratio(float64(o.idleRSS), float64(ref.idleRSS)))
	kib := func(v int64) string { return strconv.FormatInt(v, 10) + " KiB" }
	row(fmt.Sprintf("daemon RSS per live instance (%d live)", c.perInstance), kib(o.perInstanceRSS), kib(ref.perInstanceRSS), "", ratio(float64(o.perInstanceRSS), float64(ref.perInstanceRSS)))
	conc := func(f *figures) string {
		return fmt.Sprintf("%s wall, %d failed", ms(f.concWall), f.concFailed)
	}
	row(fmt.Sprintf("%d instances started at once", c.concurrent), conc(o), conc(ref), "", ratio(dur(o.concWall), dur(ref.concWall)))
	row(fmt.Sprintf("… then one request to each at once, p99"), ms(o.concP99), ms(ref.concP99), "", ratio(dur(o.concP99), dur(ref.concP99)))
	row(fmt.Sprintf("… daemon RSS with %d live instances", c.concurrent), mib(o.concRSS), mib(ref.concRSS), "", ratio(float64(o.concRSS), float64(ref.concRSS)))
	size := fmt.Sprintf("%d MiB", c.fileBytes>>20)
	row("file PUT "+size, rate(o.putRate, "MB/s", o.putErr), rate(ref.putRate, "MB/s", ref.putErr), rate(copyRate, "MB/s", ""), ratio(o.putRate, ref.putRate))
	row("file GET "+size, rate(o.getRate, "MB/s", o.getErr), rate(ref.getRate, "MB/s", ref.getErr), rate(copyRate, "MB/s", ""), ratio(o.getRate, ref.getRate))
	row("daemon peak RSS growth during PUT+GET", mib(o.fileRSSGrowth), mib(ref.fileRSSGrowth), "", "")
	return b.String()
}
