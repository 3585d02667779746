package e2e

// The fault suite, files part: hostile archives, a full disk, a FIFO where
// a config file should be, and the small fs answers of issue 11. Each test
// logs the daemon's peak RSS (VmHWM) and the disk used by its target, the
// figures docs/limits.md quotes.

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandbox-agent-go/sandbox-agent/e2e/internal/harness"
)

// diskUse is the space the files under dir take on disk (allocated blocks,
// so holes cost nothing and written zeros do; a file with several hard
// links counts once, as du does).
func diskUse(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	seen := map[[2]uint64]bool{}
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return nil
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			key := [2]uint64{uint64(st.Dev), st.Ino}
			if !seen[key] {
				seen[key] = true
				n += st.Blocks * 512
			}
		}
		return nil
	})
	return n
}

// peakRSS is the daemon's VmHWM in KiB.
func peakRSS(t *testing.T, d *harness.Daemon) int64 {
	return statusKiB(t, d.Cmd.Process.Pid, "VmHWM")
}

// sparseTar is what `tar --sparse` makes of a file of logical bytes that
// is all hole but a few bytes at the end: a 10 KiB archive.
func sparseTar(t *testing.T, logical int64, format string) []byte {
	t.Helper()
	if _, err := exec.LookPath("tar"); err != nil {
		t.Fatal("this test needs GNU tar to build a sparse archive: apt-get install tar")
	}
	dir := t.TempDir()
	p := filepath.Join(dir, "sparse.bin")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("end"), logical-3); err != nil {
		t.Fatal(err)
	}
	f.Close()
	args := []string{"--sparse", "-cf", "-", "-C", dir, "sparse.bin"}
	if format != "" {
		args = append([]string{"--format=" + format}, args...)
	}
	out, err := exec.Command("tar", args...).Output()
	if err != nil {
		t.Fatalf("tar --sparse: %v", err)
	}
	if len(out) > 1<<20 {
		t.Fatalf("sparse archive is %d bytes: this tar does not write sparse entries", len(out))
	}
	return out
}

// problemOf decodes a problem body.
func problemOf(t *testing.T, st int, h http.Header, body []byte) map[string]any {
	t.Helper()
	var p map[string]any
	if h.Get("Content-Type") != "application/problem+json" || json.Unmarshal(body, &p) != nil {
		t.Fatalf("not a problem: %d %q %s", st, h.Get("Content-Type"), body)
	}
	return p
}

func limitBytes(p map[string]any) int64 {
	d, _ := p["details"].(map[string]any)
	f, _ := d["limitBytes"].(float64)
	return int64(f)
}

// noStage fails if an extraction stage or upload temporary is left under dir.
func noStage(t *testing.T, dir string) {
	t.Helper()
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && (strings.HasPrefix(d.Name(), ".sandbox-agent-stage-") || strings.HasPrefix(d.Name(), ".sandbox-agent-upload-")) {
			t.Errorf("left behind: %s", p)
		}
		return nil
	})
}

// TestFaultSparseUpload: a 10 KiB tar holding a sparse file of 20 GiB (the
// issue's case) or 2 GiB. On main it wrote the whole logical size (even
// with --max-upload 1 MiB, which counted request bytes); now the logical
// size is counted before a byte is written, and a sparse entry under the
// limits is refused.
func TestFaultSparseUpload(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		logical   int64
		format    string
		args      []string
		status    int
		limit     int64
		detailHas string
	}{
		{name: "20 GiB, default limits", logical: 20 << 30, status: 413, limit: 8 << 30, detailHas: "expands to more than"},
		{name: "20 GiB, max-upload 1 MiB", logical: 20 << 30, args: []string{"--max-upload", "1048576"}, status: 413, limit: 1 << 20, detailHas: "expands to more than"},
		{name: "2 GiB, max-extract 1 GiB", logical: 2 << 30, args: []string{"--max-extract", "1073741824"}, status: 413, limit: 1 << 30, detailHas: "expands to more than"},
		{name: "2 GiB, default limits, gnu", logical: 2 << 30, format: "gnu", status: 400, detailHas: "sparse files are not supported"},
		{name: "2 GiB, default limits, pax", logical: 2 << 30, format: "posix", status: 400, detailHas: "sparse files are not supported"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			archive := sparseTar(t, tc.logical, tc.format)
			d := harness.Start(t, harness.Options{Args: tc.args})
			before := diskUse(t, d.Home)
			st, h, body := d.Do("POST", "/v1/fs/upload-batch?path=sp", archive, "Content-Type", "application/x-tar")
			if st != tc.status {
				t.Fatalf("status %d, want %d: %s", st, tc.status, body)
			}
			p := problemOf(t, st, h, body)
			if !strings.Contains(p["detail"].(string), tc.detailHas) {
				t.Errorf("detail %q lacks %q", p["detail"], tc.detailHas)
			}
			if tc.limit != 0 && limitBytes(p) != tc.limit {
				t.Errorf("details.limitBytes = %d, want %d: %s", limitBytes(p), tc.limit, body)
			}
			used := diskUse(t, d.Home) - before
			if used > 1<<20 {
				t.Errorf("the upload took %d bytes of disk", used)
			}
			if _, err := os.Stat(filepath.Join(d.Home, "sp")); !os.IsNotExist(err) {
				t.Errorf("target created: %v", err)
			}
			noStage(t, d.Home)
			t.Logf("attack: %d-byte tar, %d GiB sparse entry: %d, peak RSS %d KiB, disk used %d KiB", len(archive), tc.logical>>30, st, peakRSS(t, d), used>>10)
		})
	}
}

// TestFaultUploadAllOrNothing: a refused archive leaves nothing, whether
// the target existed or not, the refusal came from a name, a limit or a
// client that went away.
func TestFaultUploadAllOrNothing(t *testing.T) {
	t.Parallel()
	d := harness.Start(t, harness.Options{Args: []string{"--max-extract", "1000"}})
	bad := tarball(t, [3]string{"ok1", "one", ""}, [3]string{"ok2", "two", ""}, [3]string{"../bad", "x", ""})

	st, h, body := d.Do("POST", "/v1/fs/upload-batch?path=fresh/deep", bad, "Content-Type", "application/x-tar")
	if p := problemOf(t, st, h, body); st != 400 || !strings.Contains(p["detail"].(string), `tar entry "../bad"`) {
		t.Fatalf("ok1, ok2, ../bad: %d %s", st, body)
	}
	if _, err := os.Stat(filepath.Join(d.Home, "fresh")); !os.IsNotExist(err) {
		t.Errorf("refused upload created its target's parents: %v", err)
	}

	existing := filepath.Join(d.Home, "existing")
	if err := os.MkdirAll(existing, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(existing, "ok1"), []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	snapshot := func() string {
		var b strings.Builder
		_ = filepath.WalkDir(existing, func(p string, de fs.DirEntry, err error) error {
			c, _ := os.ReadFile(p)
			b.WriteString(p + "=" + string(c) + "\n")
			return nil
		})
		return b.String()
	}
	want := snapshot()
	for _, tc := range []struct {
		name    string
		archive []byte
		status  int
	}{
		{"bad name", bad, 400},
		{"over --max-extract after two good entries", tarball(t, [3]string{"ok1", "one", ""}, [3]string{"sub/ok2", "two", ""}, [3]string{"big", strings.Repeat("x", 1001), ""}), 413},
		{"link chain", tarball(t, [3]string{"d1/d2/", "", ""}, [3]string{"d1/d2/up", "", ".."}, [3]string{"l", "", "d1/d2/up/../.."}, [3]string{"ok2", "two", ""}), 400},
	} {
		st, _, body := d.Do("POST", "/v1/fs/upload-batch?path=existing", tc.archive, "Content-Type", "application/x-tar")
		if st != tc.status {
			t.Errorf("%s: %d %s", tc.name, st, body)
		}
		if got := snapshot(); got != want {
			t.Errorf("%s: target changed:\n%s\nwant\n%s", tc.name, got, want)
		}
	}

	// A client that goes away half-way: the stage is removed.
	pr, pw := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "POST", d.URL+"/v1/fs/upload-batch?path=gone", pr)
	req.Header.Set("Content-Type", "application/x-tar")
	done := make(chan struct{})
	go func() {
		defer close(done)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	tw := tar.NewWriter(pw)
	_ = tw.WriteHeader(&tar.Header{Name: "ok1", Mode: 0o644, Size: 3})
	_, _ = tw.Write([]byte("one"))
	_ = tw.WriteHeader(&tar.Header{Name: "half", Mode: 0o644, Size: 500})
	_, _ = tw.Write([]byte(strings.Repeat("y", 100)))
	stages := func() int {
		n := 0
		ents, _ := os.ReadDir(d.Home)
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), ".sandbox-agent-stage-") {
				n++
			}
		}
		return n
	}
	harness.Eventually(t, 5*time.Second, "stage appears", func() bool { return stages() == 1 })
	cancel()
	pw.CloseWithError(io.ErrClosedPipe)
	<-done
	harness.Eventually(t, 5*time.Second, "stage removed after disconnect", func() bool { return stages() == 0 })
	if _, err := os.Stat(filepath.Join(d.Home, "gone")); !os.IsNotExist(err) {
		t.Errorf("disconnected upload created its target: %v", err)
	}
	noStage(t, d.Home)

	// And a good archive still lands, merged into what is there.
	good := tarball(t, [3]string{"ok2", "two", ""}, [3]string{"sub/", "", ""}, [3]string{"sub/x", "x", ""})
	if st, _, body := d.Do("POST", "/v1/fs/upload-batch?path=existing", good, "Content-Type", "application/x-tar"); st != 200 {
		t.Fatalf("good upload: %d %s", st, body)
	}
	for p, c := range map[string]string{"ok1": "mine", "ok2": "two", "sub/x": "x"} {
		if b, _ := os.ReadFile(filepath.Join(existing, p)); string(b) != c {
			t.Errorf("%s = %q, want %q", p, b, c)
		}
	}
	noStage(t, d.Home)
	t.Logf("all or nothing: refused archives and a disconnect left nothing; peak RSS %d KiB, disk used %d KiB (after the good upload)", peakRSS(t, d), diskUse(t, d.Home)>>10)
}

// TestFaultConfigFIFO: a FIFO where a directory's mcp.json should be. On
// main the GET hung, holding the one lock of every config directory.
func TestFaultConfigFIFO(t *testing.T) {
	t.Parallel()
	d := harness.Start(t, harness.Options{})
	stuck := filepath.Join(d.Home, "stuck")
	if err := os.MkdirAll(filepath.Join(stuck, ".sandbox-agent", "config"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(stuck, ".sandbox-agent", "config", "mcp.json"), 0o644); err != nil {
		t.Fatal(err)
	}
	good := filepath.Join(d.Home, "good")
	if st, _, body := d.Do("PUT", "/v1/config/mcp?directory="+q(good)+"&mcpName=m", []byte(`{"type":"local","command":"c"}`), "Content-Type", "application/json"); st != 204 {
		t.Fatalf("put good: %d %s", st, body)
	}

	client := &http.Client{Timeout: 5 * time.Second}
	type answer struct {
		st   int
		ct   string
		body string
		took time.Duration
		err  error
	}
	get := func(dir string) <-chan answer {
		ch := make(chan answer, 1)
		go func() {
			start := time.Now()
			resp, err := client.Get(d.URL + "/v1/config/mcp?directory=" + q(dir) + "&mcpName=m")
			if err != nil {
				ch <- answer{err: err, took: time.Since(start)}
				return
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			ch <- answer{st: resp.StatusCode, ct: resp.Header.Get("Content-Type"), body: string(b), took: time.Since(start)}
		}()
		return ch
	}
	fifo, other := get(stuck), get(good)
	a := <-fifo
	if a.err != nil {
		t.Fatalf("GET of the FIFO's directory: %v after %v", a.err, a.took)
	}
	if a.st != 400 || a.ct != "application/problem+json" || !strings.Contains(a.body, "not a regular file") {
		t.Errorf("GET of the FIFO's directory: %d %s %v (after %v)", a.st, a.body, a.err, a.took)
	}
	b := <-other
	if b.err != nil || b.st != 200 {
		t.Errorf("GET of another directory: %d %s %v (after %v)", b.st, b.body, b.err, b.took)
	}
	t.Logf("FIFO config: GET %d after %v, other directory %d after %v; peak RSS %d KiB", a.st, a.took, b.st, b.took, peakRSS(t, d))
	if st, _, body := d.Do("PUT", "/v1/config/mcp?directory="+q(stuck)+"&mcpName=m", []byte(`{"type":"local","command":"c"}`), "Content-Type", "application/json"); st != 400 {
		t.Errorf("PUT into the FIFO's directory: %d %s", st, body)
	}
	// The FIFO is still there, untouched, and the daemon still answers.
	if fi, err := os.Lstat(filepath.Join(stuck, ".sandbox-agent", "config", "mcp.json")); err != nil || fi.Mode()&fs.ModeNamedPipe == 0 {
		t.Errorf("FIFO replaced: %v %v", fi, err)
	}
	if st, _, _ := d.Do("GET", "/v1/health", nil); st != 200 {
		t.Errorf("health: %d", st)
	}
}

// TestFaultConfigDirectoryFIFO: a FIFO (or a file) where the config
// directory should be is the client's mistake: 400 invalid_request naming
// it, at once, for every config route; it was a 502.
func TestFaultConfigDirectoryFIFO(t *testing.T) {
	t.Parallel()
	d := harness.Start(t, harness.Options{})
	fifo := filepath.Join(d.Home, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(d.Home, "file"), "x")
	json := []string{"Content-Type", "application/json"}
	for _, dir := range []string{fifo, filepath.Join(d.Home, "file"), fifo + "/sub"} {
		for _, c := range []struct {
			method, route, body string
		}{
			{"GET", "/v1/config/mcp?mcpName=m&directory=", ""},
			{"PUT", "/v1/config/mcp?mcpName=m&directory=", `{"type":"local","command":"c"}`},
			{"DELETE", "/v1/config/mcp?mcpName=m&directory=", ""},
			{"GET", "/v1/config/skills?skillName=s&directory=", ""},
			{"PUT", "/v1/config/skills?skillName=s&directory=", `{"sources":[{"type":"github","source":"a/b"}]}`},
		} {
			var body []byte
			if c.body != "" {
				body = []byte(c.body)
			}
			st, h, b := d.Do(c.method, c.route+q(dir), body, json...)
			p := problemOf(t, st, h, b)
			named := strings.TrimSuffix(dir, "/sub")
			if st != 400 || p["type"] != "urn:sandbox-agent:error:invalid_request" || !strings.Contains(string(b), named+" is not a directory") {
				t.Errorf("%s %s%s: %d %s", c.method, c.route, dir, st, b)
			}
		}
	}
	if fi, err := os.Lstat(fifo); err != nil || fi.Mode()&fs.ModeNamedPipe == 0 {
		t.Errorf("FIFO replaced: %v %v", fi, err)
	}
}

// TestFaultMinFree: with --min-free larger than any disk, the filesystem
// is "full": every write stops with 507 and leaves nothing.
func TestFaultMinFree(t *testing.T) {
	t.Parallel()
	reg := newACPRegistry(t, "")
	reg.setFile("shell-agent-linux.tar.gz", shellAgentTarGz(t))
	target := `{"archive":"` + reg.URL + `/files/shell-agent-linux.tar.gz","cmd":"./bin/shell-agent"}`
	reg.setDoc(`{"agents":[{"id":"shell-agent","version":"0.9.0","distribution":{"binary":{` +
		`"linux-x86_64":` + target + `,"linux-aarch64":` + target + `}}}]}`)
	d := harness.Start(t, harness.Options{Args: []string{"--min-free", strconv.FormatInt(1<<62, 10)}, Env: reg.env()})
	before := diskUse(t, d.Home)

	check := func(what string, st int, h http.Header, body []byte) {
		t.Helper()
		p := problemOf(t, st, h, body)
		if st != 507 || p["type"] != "urn:sandbox-agent:error:insufficient_storage" {
			t.Errorf("%s: %d %s", what, st, body)
		}
	}
	st, h, body := d.Do("PUT", "/v1/fs/file?path=f.txt", []byte("0123456789"))
	check("PUT", st, h, body)
	st, h, body = d.Do("POST", "/v1/fs/upload-batch?path=up", tarball(t, [3]string{"a", "a", ""}), "Content-Type", "application/x-tar")
	check("upload-batch", st, h, body)
	st, h, body = d.Do("POST", "/v1/agents/shell-agent/install", []byte("{}"), "Content-Type", "application/json")
	check("install", st, h, body)
	for _, p := range []string{"f.txt", "up"} {
		if _, err := os.Stat(filepath.Join(d.Home, p)); !os.IsNotExist(err) {
			t.Errorf("%s exists after 507: %v", p, err)
		}
	}
	_ = filepath.WalkDir(d.Home, func(p string, de fs.DirEntry, err error) error {
		if err == nil && !de.IsDir() {
			t.Errorf("file left after 507: %s", p)
		}
		return nil
	})
	noStage(t, d.Home)
	t.Logf("min-free: PUT, upload-batch and install all 507; peak RSS %d KiB, disk used %d KiB", peakRSS(t, d), (diskUse(t, d.Home)-before)>>10)
}

// TestFaultMinFreeWhileWriting: the floor is crossed half-way through a
// streamed PUT (no Content-Length), so only the periodic check can see it:
// the write stops with 507 and its temporary file is removed.
//
// The floor is set 64 MiB below the free space of a filesystem the whole
// machine shares: when another process frees space meanwhile (a build
// cache trimmed, a test's files removed), the 1 GiB write can end above
// the floor and be accepted, rightly. That is told apart from a daemon
// that missed the floor by the free space after the write, and tried
// again.
func TestFaultMinFreeWhileWriting(t *testing.T) {
	t.Parallel()
	const room = 64 << 20
	for attempt := 1; ; attempt++ {
		home := t.TempDir()
		floor := freeBytes(t, home) - room
		d := harness.Start(t, harness.Options{Home: home, Args: []string{"--min-free", strconv.FormatInt(floor, 10)}})
		st, body, n := streamedPut(t, d.URL+"/v1/fs/file?path=fill.bin", 1<<30)
		if st == 200 && freeBytes(t, home) >= floor && attempt < 3 {
			t.Logf("attempt %d: the free space stayed above the floor after writing %d MiB (another process freed space); again", attempt, n>>20)
			d.Stop()
			continue
		}
		if st != 507 || !strings.Contains(body, "insufficient_storage") {
			t.Fatalf("streamed PUT past the floor: %d %s (sent %d MiB)", st, body, n>>20)
		}
		if _, err := os.Stat(filepath.Join(home, "fill.bin")); !os.IsNotExist(err) {
			t.Errorf("fill.bin exists: %v", err)
		}
		noStage(t, home)
		t.Logf("streamed PUT stopped after about %d MiB sent (floor %d MiB below free); peak RSS %d KiB, disk used %d KiB", n>>20, room>>20, peakRSS(t, d), diskUse(t, home)>>10)
		return
	}
}

// freeBytes is the space unprivileged users may still use on dir's
// filesystem.
func freeBytes(t *testing.T, dir string) int64 {
	t.Helper()
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	return int64(st.Bavail) * int64(st.Bsize)
}

// streamedPut PUTs up to max bytes to url without a Content-Length, in
// 1 MiB writes, and returns the answer and how much was sent.
func streamedPut(t *testing.T, url string, max int64) (int, string, int64) {
	t.Helper()
	pr, pw := io.Pipe()
	sent := make(chan int64, 1)
	go func() {
		chunk := bytes.Repeat([]byte{'z'}, 1<<20)
		var n int64
		for n < max {
			if _, err := pw.Write(chunk); err != nil {
				break
			}
			n += int64(len(chunk))
		}
		pw.Close()
		sent <- n
	}()
	req, _ := http.NewRequest("PUT", url, pr)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	pr.CloseWithError(io.ErrClosedPipe)
	return resp.StatusCode, string(body), <-sent
}

// TestFaultFSSmall: the small fs answers of issue 11.
func TestFaultFSSmall(t *testing.T) {
	t.Parallel()
	d := harness.Start(t, harness.Options{})
	if st, _, body := d.Do("PUT", "/v1/fs/file?path=ten.txt", []byte("0123456789")); st != 200 {
		t.Fatalf("put: %d %s", st, body)
	}

	t.Run("unsatisfiable ranges are 416", func(t *testing.T) {
		for _, rng := range []string{"bytes=-0", "bytes=10-", "bytes=10-20", "bytes=-0,20-30"} {
			st, h, body := d.Do("GET", "/v1/fs/file?path=ten.txt", nil, "Range", rng)
			problemOf(t, st, h, body)
			if st != 416 || h.Get("Content-Range") != "bytes */10" {
				t.Errorf("%s: %d %q %s", rng, st, h.Get("Content-Range"), body)
			}
		}
		st, h, body := d.Do("GET", "/v1/fs/file?path=ten.txt", nil, "Range", "bytes=-3")
		if st != 206 || string(body) != "789" || h.Get("Content-Range") != "bytes 7-9/10" {
			t.Errorf("bytes=-3: %d %q %s", st, h.Get("Content-Range"), body)
		}
		// The ranges that overlap are served alone.
		st, h, body = d.Do("GET", "/v1/fs/file?path=ten.txt", nil, "Range", "bytes=-0,0-1")
		if st != 206 || string(body) != "01" || h.Get("Content-Range") != "bytes 0-1/10" {
			t.Errorf("bytes=-0,0-1: %d %q %s", st, h.Get("Content-Range"), body)
		}
	})

	t.Run("invalid ranges are ignored", func(t *testing.T) {
		// RFC 9110 section 14.2: an invalid ranges-specifier, or a unit
		// the server does not know, is ignored: the whole file, 200.
		for _, rng := range []string{"bytes=2-1", "bytes=5-2,0-1", "bytes=x-", "bytes=-", "bytes=", "bytes=+1-2", "bytes=0 - 1", "bytes=1", "items=0-1", "bytes 0-1"} {
			st, h, body := d.Do("GET", "/v1/fs/file?path=ten.txt", nil, "Range", rng)
			if st != 200 || string(body) != "0123456789" || h.Get("Content-Range") != "" {
				t.Errorf("%q: %d %q %s", rng, st, h.Get("Content-Range"), body)
			}
		}
		// Valid shapes ServeContent alone would refuse or misread.
		for rng, want := range map[string]string{"Bytes=2-4": "234", "bytes=8-99": "89", "bytes=0-1,,": "01", "bytes=007-007": "7"} {
			st, _, body := d.Do("GET", "/v1/fs/file?path=ten.txt", nil, "Range", rng)
			if st != 206 || string(body) != want {
				t.Errorf("%q: %d %s, want 206 %s", rng, st, body, want)
			}
		}
	})

	t.Run("missing paths are 404 not_found", func(t *testing.T) {
		for _, c := range []struct{ method, path string }{
			{"GET", "/v1/fs/file?path=nope"}, {"GET", "/v1/fs/stat?path=nope"},
			{"GET", "/v1/fs/entries?path=nope"}, {"DELETE", "/v1/fs/entry?path=nope"},
		} {
			st, h, body := d.Do(c.method, c.path, nil)
			p := problemOf(t, st, h, body)
			if st != 404 || p["type"] != "urn:sandbox-agent:error:not_found" || !strings.Contains(p["detail"].(string), "path not found: "+d.Home+"/nope") {
				t.Errorf("%s %s: %d %s", c.method, c.path, st, body)
			}
		}
	})

	t.Run("too-long names are 400", func(t *testing.T) {
		long := strings.Repeat("n", 300)
		for _, p := range []string{long, "dir/" + long + "/x", strings.Repeat("d/", 2100)} {
			st, h, body := d.Do("PUT", "/v1/fs/file?path="+q(p), []byte("x"))
			problemOf(t, st, h, body)
			if st != 400 || !strings.Contains(string(body), "too long") {
				t.Errorf("PUT %d-byte path: %d %s", len(p), st, body)
			}
		}
		st, h, body := d.Do("POST", "/v1/fs/upload-batch?path=up", tarball(t, [3]string{long, "x", ""}), "Content-Type", "application/x-tar")
		problemOf(t, st, h, body)
		if st != 400 || !strings.Contains(string(body), "too long") {
			t.Errorf("tar entry with a %d-byte name: %d %s", len(long), st, body)
		}
	})

	t.Run("every 413 has details.limitBytes", func(t *testing.T) {
		big := []byte(`{"from":"` + strings.Repeat("a", 2<<20) + `","to":"b"}`)
		st, h, body := d.Do("POST", "/v1/fs/move", big, "Content-Type", "application/json")
		p := problemOf(t, st, h, body)
		if st != 413 || limitBytes(p) != 1<<20 {
			t.Errorf("move: %d %s", st, body[:min(len(body), 300)])
		}
	})

	t.Run("symlinks are flagged in listings", func(t *testing.T) {
		dir := filepath.Join(d.Home, "links")
		_ = os.MkdirAll(filepath.Join(dir, "sub"), 0o755)
		_ = os.Symlink("sub", filepath.Join(dir, "dirlink"))
		_ = os.Symlink("../ten.txt", filepath.Join(dir, "filelink"))
		st, _, body := d.Do("GET", "/v1/fs/entries?path=links", nil)
		var entries []map[string]any
		if st != 200 || json.Unmarshal(body, &entries) != nil || len(entries) != 3 {
			t.Fatalf("entries: %d %s", st, body)
		}
		for _, e := range entries {
			link := e["name"] != "sub"
			wantType := "file"
			if !link {
				wantType = "directory"
			}
			if e["entryType"] != wantType || (e["symlink"] == true) != link || (!link && e["symlink"] != nil) {
				t.Errorf("entry %v", e)
			}
		}
	})

	t.Run("deleting the fs root is refused", func(t *testing.T) {
		root := t.TempDir()
		r := harness.Start(t, harness.Options{Args: []string{"--fs-root", root}})
		for _, p := range []string{root, ".", "/"} {
			st, h, body := r.Do("DELETE", "/v1/fs/entry?recursive=true&path="+q(p), nil)
			problemOf(t, st, h, body)
			if st < 400 || st > 499 {
				t.Errorf("DELETE %s: %d %s", p, st, body)
			}
		}
		if _, err := os.Stat(root); err != nil {
			t.Errorf("root gone: %v", err)
		}
		st, h, body := r.Do("PUT", "/v1/fs/file?path="+q(strings.Repeat("r", 300)), []byte("x"))
		problemOf(t, st, h, body)
		if st != 400 {
			t.Errorf("too-long name under --fs-root: %d %s", st, body)
		}
	})

	t.Run("memory directories have size 0", func(t *testing.T) {
		m := harness.Start(t, harness.Options{Args: []string{"--fs", "memory"}})
		if st, _, body := m.Do("POST", "/v1/fs/mkdir?path=a/b", nil); st != 200 {
			t.Fatalf("mkdir: %d %s", st, body)
		}
		st, _, body := m.Do("GET", "/v1/fs/entries?path=a", nil)
		if st != 200 || !strings.Contains(string(body), `"entryType":"directory","size":0`) {
			t.Errorf("entries: %d %s", st, body)
		}
		st, _, body = m.Do("GET", "/v1/fs/stat?path=a", nil)
		if st != 200 || !strings.Contains(string(body), `"size":0`) {
			t.Errorf("stat: %d %s", st, body)
		}
	})
}

// TestFaultInstallArchiveLinkChain: an agent archive from the registry
// whose links, each harmless alone, chain out of the install directory
// (d1/d2/up -> .. resolves to d1, so l -> d1/d2/up/d2/up/../../.. is
// lexically "d1/d2" but resolves two levels above the archive's
// directory, next to the install's own directory). On main
// the installer's own extractor wrote l/escaped.txt next to the install;
// now the install fails and nothing is written.
func TestFaultInstallArchiveLinkChain(t *testing.T) {
	t.Parallel()
	script := "#!/bin/sh\nwhile read -r line; do :; done\n"
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, h := range []tar.Header{
		{Name: "bin/", Typeflag: tar.TypeDir, Mode: 0o755},
		{Name: "bin/chain-agent", Typeflag: tar.TypeReg, Mode: 0o755, Size: int64(len(script))},
		{Name: "d1/", Typeflag: tar.TypeDir, Mode: 0o755},
		{Name: "d1/d2/", Typeflag: tar.TypeDir, Mode: 0o755},
		{Name: "d1/d2/up", Typeflag: tar.TypeSymlink, Linkname: ".."},
		{Name: "l", Typeflag: tar.TypeSymlink, Linkname: "d1/d2/up/d2/up/../../.."},
		{Name: "l/escaped.txt", Typeflag: tar.TypeReg, Mode: 0o644, Size: 7},
	} {
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
		switch h.Name {
		case "bin/chain-agent":
			tw.Write([]byte(script))
		case "l/escaped.txt":
			tw.Write([]byte("escaped"))
		}
	}
	tw.Close()
	gz.Close()
	reg := newACPRegistry(t, "")
	reg.setFile("chain.tar.gz", buf.Bytes())
	target := `{"archive":"` + reg.URL + `/files/chain.tar.gz","cmd":"./bin/chain-agent"}`
	reg.setDoc(`{"agents":[{"id":"chain-agent","version":"1.0.0","distribution":{"binary":{` +
		`"linux-x86_64":` + target + `,"linux-aarch64":` + target + `}}}]}`)
	d := harness.Start(t, harness.Options{Env: reg.env()})
	st, h, body := d.Do("POST", "/v1/agents/chain-agent/install", []byte("{}"), "Content-Type", "application/json")
	p := problemOf(t, st, h, body)
	details, _ := p["details"].(map[string]any)
	stderr, _ := details["stderr"].(string)
	if st != 500 || p["type"] != "urn:sandbox-agent:error:install_failed" || !(strings.Contains(stderr, "symbolic link") || strings.Contains(stderr, "leaves the destination")) {
		t.Errorf("install: %d %s", st, body)
	}
	_ = filepath.WalkDir(d.Home, func(p string, de fs.DirEntry, err error) error {
		if err == nil && de.Name() == "escaped.txt" {
			t.Errorf("written outside the archive's directory: %s", p)
		}
		return nil
	})
	t.Logf("link-chain agent archive: %d; peak RSS %d KiB, disk used %d KiB", st, peakRSS(t, d), diskUse(t, d.Home)>>10)
}

// TestFaultHardLinkAmplification: one 512 KiB file and 200 hard links to
// it (a 620 KiB tar). On main each link was a copy: 100 MiB written. Now
// they are hard links: nothing is written again, and --max-extract 1 MiB
// is not reached.
func TestFaultHardLinkAmplification(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	body := bytes.Repeat([]byte("h"), 512<<10)
	tw.WriteHeader(&tar.Header{Name: "big", Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(body))})
	tw.Write(body)
	for i := range 200 {
		tw.WriteHeader(&tar.Header{Name: "link" + strconv.Itoa(i), Typeflag: tar.TypeLink, Linkname: "big"})
	}
	tw.Close()
	d := harness.Start(t, harness.Options{Args: []string{"--max-extract", "1048576"}})
	before := diskUse(t, d.Home)
	st, _, resp := d.Do("POST", "/v1/fs/upload-batch?path=hl", buf.Bytes(), "Content-Type", "application/x-tar")
	if st != 200 {
		t.Fatalf("upload: %d %s", st, resp)
	}
	var first, last syscall.Stat_t
	if err := syscall.Stat(filepath.Join(d.Home, "hl", "big"), &first); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Stat(filepath.Join(d.Home, "hl", "link199"), &last); err != nil {
		t.Fatal(err)
	}
	if first.Ino != last.Ino {
		t.Errorf("link199 is a copy, not a hard link")
	}
	used := diskUse(t, d.Home) - before
	if used > 2<<20 {
		t.Errorf("the upload took %d bytes of disk", used)
	}
	t.Logf("hard-link attack: %d-byte tar, 200 links to a 512 KiB file: %d, peak RSS %d KiB, disk used %d KiB", buf.Len(), st, peakRSS(t, d), used>>10)
}

// TestFaultPutNonRegular: a PUT or an upload-batch replaces a regular file,
// never a FIFO, a socket or a device sitting at the path (for a PUT, named
// or behind a link). It was a 200: the new file was renamed over it, so a
// PUT to /dev/null
// (the daemon runs as root in a sandbox) put a regular file in place of
// the device, and every process on the box then wrote into that file.
// The device here is the test's own (mknod, root only), never the host's.
func TestFaultPutNonRegular(t *testing.T) {
	t.Parallel()
	d := harness.Start(t, harness.Options{})
	dir := filepath.Join(d.Home, "odd")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("fifo", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	paths := []string{fifo, filepath.Join(dir, "link")}
	null := filepath.Join(dir, "null")
	if syscall.Mknod(null, syscall.S_IFCHR|0o666, 1<<8|3) == nil { // major 1, minor 3: a null device
		paths = append(paths, null)
	}
	for _, p := range paths {
		st, h, b := d.Do("PUT", "/v1/fs/file?path="+q(p), []byte("x"))
		if problemOf(t, st, h, b); st != 400 || !strings.Contains(string(b), "path is not a file") {
			t.Errorf("PUT %s: %d %s", p, st, b)
		}
	}
	// An upload-batch entry of that name is refused the same way, and
	// the upload is all or nothing.
	for _, name := range []string{"fifo", "null"}[:len(paths)-1] {
		tb := tarball(t, [3]string{"fresh", "new", ""}, [3]string{name, "data", ""})
		st, h, b := d.Do("POST", "/v1/fs/upload-batch?path="+q(dir), tb, "Content-Type", "application/x-tar")
		if problemOf(t, st, h, b); st != 400 || !strings.Contains(string(b), "a FIFO, socket or device of that name exists") {
			t.Errorf("upload-batch over %s: %d %s", name, st, b)
		}
		if _, err := os.Lstat(filepath.Join(dir, "fresh")); !os.IsNotExist(err) {
			t.Errorf("upload-batch over %s: fresh: %v", name, err)
		}
	}
	// A move with overwrite is refused over them too.
	src := filepath.Join(dir, "src")
	if err := os.WriteFile(src, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{fifo, null}[:len(paths)-1] {
		body, _ := json.Marshal(map[string]any{"from": src, "to": p, "overwrite": true})
		st, h, b := d.Do("POST", "/v1/fs/move", body, "Content-Type", "application/json")
		if problemOf(t, st, h, b); st != 400 || !strings.Contains(string(b), "path is not a file") {
			t.Errorf("move over %s: %d %s", p, st, b)
		}
	}
	if _, err := os.Stat(src); err != nil {
		t.Errorf("the source of a refused move: %v", err)
	}
	if fi, err := os.Lstat(fifo); err != nil || fi.Mode()&fs.ModeNamedPipe == 0 {
		t.Errorf("FIFO replaced: %v %v", fi, err)
	}
	if len(paths) == 3 {
		if fi, err := os.Lstat(null); err != nil || fi.Mode()&fs.ModeCharDevice == 0 {
			t.Errorf("device replaced: %v %v", fi, err)
		}
	}
}

// TestFaultFSProcFiles: files of /proc report a size of 0 and cannot seek
// to their end, which http.ServeContent needs: GET /v1/fs/file of
// /proc/version was a text/plain 500 "seeker can't seek". Such a file is
// streamed whole (200, no ranges), as a read of it would give it.
func TestFaultFSProcFiles(t *testing.T) {
	t.Parallel()
	want, err := os.ReadFile("/proc/version")
	if err != nil || len(want) == 0 {
		t.Skip("no /proc/version:", err)
	}
	d := harness.Start(t, harness.Options{})
	for _, rng := range []string{"", "bytes=0-3"} {
		var h []string
		if rng != "" {
			h = []string{"Range", rng}
		}
		st, hd, b := d.Do("GET", "/v1/fs/file?path=/proc/version", nil, h...)
		if st != 200 || string(b) != string(want) || hd.Get("Content-Type") != "application/octet-stream" {
			t.Errorf("GET /proc/version (Range %q): %d %q %q", rng, st, hd.Get("Content-Type"), b)
		}
	}
	if st, _, b := d.Do("HEAD", "/v1/fs/file?path=/proc/version", nil); st != 200 || len(b) != 0 {
		t.Errorf("HEAD /proc/version: %d %q", st, b)
	}
}

// A move with overwrite to another filesystem fails (the kernel's rename
// cannot cross one: 502 "invalid cross-device link") and leaves both
// sides as they were; the destination was removed before the rename was
// tried, so a failed move destroyed it. /dev/shm is a tmpfs where the
// machine has one apart from the home directory's filesystem.
func TestFaultMoveAcrossFilesystemsKeepsBoth(t *testing.T) {
	t.Parallel()
	shm, err := os.MkdirTemp("/dev/shm", "sandbox-agent-e2e-")
	if err != nil {
		t.Skip("no /dev/shm:", err)
	}
	t.Cleanup(func() { os.RemoveAll(shm) })
	d := harness.Start(t, harness.Options{})
	var a, b syscall.Stat_t
	if syscall.Stat(shm, &a) != nil || syscall.Stat(d.Home, &b) != nil || a.Dev == b.Dev {
		t.Skip("/dev/shm is on the home directory's filesystem here")
	}
	for _, kind := range []string{"dir", "file"} {
		src, dst := filepath.Join(shm, kind), filepath.Join(d.Home, "target-"+kind)
		if kind == "dir" {
			for _, p := range []string{filepath.Join(src, "new.txt"), filepath.Join(dst, "keep.txt")} {
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(kind), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		} else {
			_ = os.WriteFile(src, []byte("new"), 0o644)
			_ = os.WriteFile(dst, []byte("keep"), 0o644)
		}
		body, _ := json.Marshal(map[string]any{"from": src, "to": dst, "overwrite": true})
		st, h, resp := d.Do("POST", "/v1/fs/move", body, "Content-Type", "application/json")
		if problemOf(t, st, h, resp); st != 502 || !strings.Contains(string(resp), "cross-device") {
			t.Errorf("%s: %d %s", kind, st, resp)
		}
		keep := dst
		if kind == "dir" {
			keep = filepath.Join(dst, "keep.txt")
		}
		if _, err := os.Stat(keep); err != nil {
			t.Errorf("%s: the destination after a failed move: %v", kind, err)
		}
		if _, err := os.Stat(src); err != nil {
			t.Errorf("%s: the source after a failed move: %v", kind, err)
		}
		if left, _ := filepath.Glob(filepath.Join(d.Home, ".target-*")); len(left) > 0 {
			t.Errorf("%s: left behind: %v", kind, left)
		}
	}
}

// TestFaultHugeListing: listing a directory of 60 000 long names (what an
// agent can make in seconds) is answered whole, in the directory's order
// past 10 000 entries, without holding the listing: before, the daemon
// built every entry and the whole JSON at once (300 000 names: 804 MB of
// RSS). A client that leaves in the middle costs no descriptor, nor does
// one that stays and reads nothing, past --stream-write-timeout.
func TestFaultHugeListing(t *testing.T) {
	t.Parallel()
	d := harness.Start(t, harness.Options{Args: []string{"--stream-write-timeout", "1s"}})
	pid := d.Cmd.Process.Pid
	dir := t.TempDir()
	const n = 60000
	pad := strings.Repeat("x", 200)
	for i := range n {
		f, err := os.Create(filepath.Join(dir, strconv.Itoa(i)+pad))
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	before := statusKiB(t, pid, "VmRSS")
	fdsBefore := openFDs(t, pid)

	resp, err := http.Get(d.URL + "/v1/fs/entries?path=" + dir)
	if err != nil {
		t.Fatal(err)
	}
	var entries []struct {
		Name, Path, EntryType string
	}
	err = json.NewDecoder(resp.Body).Decode(&entries)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("listing: %d %v", resp.StatusCode, err)
	}
	seen := make(map[string]bool, n)
	for _, e := range entries {
		if seen[e.Name] || e.Path != filepath.Join(dir, e.Name) || e.EntryType != "file" {
			t.Fatalf("entry %+v (seen before: %v)", e, seen[e.Name])
		}
		seen[e.Name] = true
	}
	if len(seen) != n {
		t.Fatalf("%d entries, want %d", len(seen), n)
	}
	peak := logPeakRSS(t, d, "listing 60 000 long names")
	// The JSON alone is 27 MB; holding it and the entries took 160 MB.
	if grew := peak - before; grew > 64<<10 {
		t.Errorf("peak RSS grew by %d KiB over the listing; it is held somewhere", grew)
	}

	// A reader that leaves after the first bytes.
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", d.URL+"/v1/fs/entries?path="+dir, nil)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(resp.Body, make([]byte, 4096)); err != nil {
		t.Fatal(err)
	}
	cancel()
	resp.Body.Close()
	deadline := time.Now().Add(10 * time.Second)
	for openFDs(t, pid) > fdsBefore && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if got := openFDs(t, pid); got > fdsBefore {
		t.Errorf("%d descriptors open after the reader left, %d before", got, fdsBefore)
	}

	// A reader that stays and takes nothing: the 27 MB answer fills the
	// sockets' buffers, the write stalls, and the daemon drops it.
	conn, err := net.Dial("tcp", strings.TrimPrefix(d.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte("GET /v1/fs/entries?path=" + dir + " HTTP/1.1\r\nHost: " + strings.TrimPrefix(d.URL, "http://") + "\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, 20*time.Second, "the daemon drops a listing nobody reads", func() bool {
		return openFDs(t, pid) <= fdsBefore && strings.Contains(d.Logs(), "listing cut short")
	})
}
