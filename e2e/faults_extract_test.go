package e2e

// The fault suite, extraction part (issue 20): deep archives cost what
// shallow ones do, the depth is capped, and a client that leaves stops the
// work, for upload-batch and for agent installs.

import (
	"archive/tar"
	"bytes"
	"cmp"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sandbox-agent-go/sandbox-agent/e2e/internal/harness"
)

// tarOf writes headers (and the bodies given for regular files) as a tar.
func tarOf(t testing.TB, entries ...tarHeader) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := e.h
		if h.Typeflag == tar.TypeReg {
			h.Size = int64(len(e.body))
		}
		h.Mode = cmp.Or(h.Mode, 0o644)
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(tw, e.body); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

type tarHeader struct {
	h    tar.Header
	body string
}

func dirEntry(name string) tarHeader {
	return tarHeader{h: tar.Header{Name: name, Typeflag: tar.TypeDir}}
}
func fileEntry(name, body string) tarHeader {
	return tarHeader{h: tar.Header{Name: name, Typeflag: tar.TypeReg}, body: body}
}
func linkEntry(name, target string, typ byte) tarHeader {
	return tarHeader{h: tar.Header{Name: name, Typeflag: typ, Linkname: target}}
}

// nested is the path of n nested directories named d: "d/d/.../d".
func nested(n int) string { return strings.TrimSuffix(strings.Repeat("d/", n), "/") }

// deepArchive is the tar of 500 nested directories (an entry
// each, 850 KiB), with a file at every level, links at the bottom that
// climb to the top and through each other, and a hard link from the bottom
// to the top.
func deepArchive(t testing.TB) []byte {
	var es []tarHeader
	for i := 1; i <= 500; i++ {
		es = append(es, dirEntry(nested(i)+"/"), fileEntry(fmt.Sprintf("%s/level", nested(i)), fmt.Sprint(i)))
	}
	bottom := nested(500)
	es = append(es,
		fileEntry("top.txt", "top"),
		linkEntry(bottom+"/to-top", strings.Repeat("../", 500)+"top.txt", tar.TypeSymlink),
		linkEntry("bottom", bottom, tar.TypeSymlink),
		linkEntry("via-bottom", "bottom/to-top", tar.TypeSymlink),
		linkEntry(bottom+"/hard-top", "top.txt", tar.TypeLink),
	)
	return tarOf(t, es...)
}

// checkDeep verifies what deepArchive left in dir.
func checkDeep(t *testing.T, dir string) {
	t.Helper()
	levels := 0
	for p := dir; ; levels++ {
		fi, err := os.Lstat(filepath.Join(p, "d"))
		if err != nil || !fi.IsDir() {
			break
		}
		p = filepath.Join(p, "d")
		if b, err := os.ReadFile(filepath.Join(p, "level")); err != nil || string(b) != fmt.Sprint(levels+1) {
			t.Fatalf("level %d: %q, %v", levels+1, b, err)
		}
	}
	if levels != 500 {
		t.Errorf("%d nested directories, want 500", levels)
	}
	for _, p := range []string{nested(500) + "/to-top", "via-bottom", nested(500) + "/hard-top"} {
		if b, err := os.ReadFile(filepath.Join(dir, p)); err != nil || string(b) != "top" {
			t.Errorf("%s: %q, %v", p[max(0, len(p)-20):], b, err)
		}
	}
}

// TestFaultDeepUpload: the 500-deep tar (88 s of one core on
// main) and its 200 empty files at depth 200 land whole, on the host and
// under --fs-root, and again into the tree they made (a merge of every
// level). No time is asserted: the daemon's CPU time is logged.
func TestFaultDeepUpload(t *testing.T) {
	t.Parallel()
	deep := deepArchive(t)
	var files []tarHeader
	for i := range 200 {
		files = append(files, fileEntry(fmt.Sprintf("%s/f%03d", nested(200), i), ""))
	}
	flat := tarOf(t, files...)
	for _, backend := range []string{"os", "fs-root"} {
		t.Run(backend, func(t *testing.T) {
			home := t.TempDir()
			base, args := home, []string(nil)
			if backend == "fs-root" {
				base = filepath.Join(home, "root")
				if err := os.Mkdir(base, 0o755); err != nil {
					t.Fatal(err)
				}
				args = []string{"--fs-root", base}
			}
			d := harness.Start(t, harness.Options{Home: home, Args: args})
			pid := d.Cmd.Process.Pid
			for round := range 2 {
				cpu := processCPU(t, pid)
				st, _, body := d.Do("POST", "/v1/fs/upload-batch?path=deep", deep, "Content-Type", "application/x-tar")
				if st != 200 {
					t.Fatalf("round %d: %d %s", round, st, body)
				}
				checkDeep(t, filepath.Join(base, "deep"))
				t.Logf("%s: %d KiB, 500 levels deep, round %d (%s): daemon CPU %v", backend, len(deep)>>10, round, map[int]string{0: "new target", 1: "merged into itself"}[round], processCPU(t, pid)-cpu)
			}
			cpu := processCPU(t, pid)
			if st, _, body := d.Do("POST", "/v1/fs/upload-batch?path=flat", flat, "Content-Type", "application/x-tar"); st != 200 {
				t.Fatalf("200 files at depth 200: %d %s", st, body)
			}
			entries, err := os.ReadDir(filepath.Join(base, "flat", nested(200)))
			if err != nil || len(entries) != 200 {
				t.Fatalf("%d files at depth 200, %v", len(entries), err)
			}
			t.Logf("%s: %d KiB, 200 empty files at depth 200: daemon CPU %v", backend, len(flat)>>10, processCPU(t, pid)-cpu)
			noStage(t, home)
		})
	}
}

// TestFaultExtractDepthLimit: an entry one element deeper than
// --max-extract-depth (1024 by default; a 4095-byte path holds 2048) is
// 400 with the limit in the detail and leaves nothing; one at the limit
// lands. A limit below 1 does not start.
func TestFaultExtractDepthLimit(t *testing.T) {
	t.Parallel()
	one := func(depth int) []byte { return tarOf(t, fileEntry(strings.Repeat("a/", depth-1)+"f", "x")) }
	for _, tc := range []struct {
		args  []string
		limit int
	}{{nil, 1024}, {[]string{"--max-extract-depth", "100"}, 100}} {
		t.Run(fmt.Sprint(tc.limit), func(t *testing.T) {
			d := harness.Start(t, harness.Options{Args: tc.args})
			st, h, body := d.Do("POST", "/v1/fs/upload-batch?path=over", one(tc.limit+1), "Content-Type", "application/x-tar")
			p := problemOf(t, st, h, body)
			want := fmt.Sprintf("%d path elements deep, past the limit of %d", tc.limit+1, tc.limit)
			if st != 400 || p["type"] != "urn:sandbox-agent:error:invalid_request" || !strings.Contains(p["detail"].(string), want) {
				t.Errorf("one past the limit: %d %s", st, body)
			}
			if _, err := os.Stat(filepath.Join(d.Home, "over")); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the refused upload left its target: %v", err)
			}
			if st, _, body := d.Do("POST", "/v1/fs/upload-batch?path=at", one(tc.limit), "Content-Type", "application/x-tar"); st != 200 {
				t.Errorf("at the limit: %d %s", st, body)
			}
			noStage(t, d.Home)
		})
	}
	out, err := exec.Command(harness.Binary, "server", "--port", "0", "--max-extract-depth", "0").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "--max-extract-depth must be at least 1") {
		t.Errorf("--max-extract-depth 0: %v: %s", err, out)
	}
}

// countingWriter counts the bytes written through it.
type countingWriter struct {
	w io.Writer
	n *atomic.Int64
}

func (c countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n.Add(int64(n))
	return n, err
}

// TestFaultUploadDisconnectStops: a client streams an endless archive of
// deep directories full of files, leaves once the daemon is well into it,
// and the work stops: the stage is removed (Upload has returned; nothing
// of it runs on), no target appears, the daemon's CPU time from the
// client leaving to the stage going is bounded (the socket buffers' worth
// of entries; on main each entry at this depth cost up to 0.2 s, and the
// work went on for a minute), and the daemon is idle after. The bound is
// in CPU time, not wall time: a loaded machine slows it, never fails it.
func TestFaultUploadDisconnectStops(t *testing.T) {
	t.Parallel()
	d := harness.Start(t, harness.Options{})
	pid := d.Cmd.Process.Pid
	pr, pw := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", d.URL+"/v1/fs/upload-batch?path=gone", pr)
	req.Header.Set("Content-Type", "application/x-tar")
	done := make(chan struct{})
	go func() {
		defer close(done)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	var sent atomic.Int64
	written := make(chan struct{})
	go func() {
		defer close(written)
		tw := tar.NewWriter(countingWriter{pw, &sent})
		for s := 0; ; s++ {
			dir := fmt.Sprintf("s%d", s)
			for level := range 400 {
				if level > 0 {
					dir += "/d"
				}
				if tw.WriteHeader(&tar.Header{Name: dir + "/", Typeflag: tar.TypeDir, Mode: 0o755}) != nil {
					return
				}
				for i := range 50 {
					if tw.WriteHeader(&tar.Header{Name: fmt.Sprintf("%s/f%02d", dir, i), Typeflag: tar.TypeReg, Mode: 0o644}) != nil {
						return
					}
				}
			}
		}
	}()
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
	// Well into it: 24 MiB sent, more than the socket buffers hold, so
	// the daemon has extracted a good part.
	harness.Eventually(t, 120*time.Second, "the extraction is under way", func() bool { return stages() == 1 && sent.Load() > 24<<20 })
	cpu := processCPU(t, pid)
	cancel()
	pw.CloseWithError(errors.New("the client left"))
	<-done
	<-written
	harness.Eventually(t, 60*time.Second, "the stage is removed after the client left", func() bool { return stages() == 0 })
	used := processCPU(t, pid) - cpu
	if used > 10*time.Second {
		t.Errorf("the daemon worked %v (CPU) after the client left", used)
	}
	if _, err := os.Stat(filepath.Join(d.Home, "gone")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the abandoned upload left its target: %v", err)
	}
	// Idle after: a one-second measuring window (not a synchronisation:
	// the stage is gone, so the extraction has returned).
	cpu = processCPU(t, pid)
	<-time.After(time.Second)
	if idle := processCPU(t, pid) - cpu; idle > 200*time.Millisecond {
		t.Errorf("the daemon used %v of CPU in the second after", idle)
	}
	noStage(t, d.Home)
	t.Logf("client left after %d MiB: daemon CPU %v until the stage was removed", sent.Load()>>20, used)
}

// TestFaultInstallCancelled: `sandbox-agent install-agent` interrupted (SIGINT)
// while it unpacks a 60,000-entry agent archive stops at once, removes
// what it unpacked and writes no launcher. (In the daemon, installs
// outlive the client that asked on purpose: a half-finished install helps
// nobody; the extractor stops on their context all the same.)
func TestFaultInstallCancelled(t *testing.T) {
	t.Parallel()
	script := "#!/bin/sh\nwhile read -r line; do :; done\n"
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	dir := "pkg"
	for level := range 300 {
		if level > 0 {
			dir += "/d"
		}
		must(t, tw.WriteHeader(&tar.Header{Name: dir + "/", Typeflag: tar.TypeDir, Mode: 0o755}))
		for i := range 199 {
			must(t, tw.WriteHeader(&tar.Header{Name: fmt.Sprintf("%s/f%03d", dir, i), Typeflag: tar.TypeReg, Mode: 0o644}))
		}
	}
	must(t, tw.WriteHeader(&tar.Header{Name: "bin/slow-agent", Typeflag: tar.TypeReg, Mode: 0o755, Size: int64(len(script))}))
	_, _ = io.WriteString(tw, script)
	must(t, tw.Close())
	must(t, gz.Close())
	reg := newACPRegistry(t, "")
	reg.setFile("slow.tar.gz", buf.Bytes())
	target := `{"archive":"` + reg.URL + `/files/slow.tar.gz","cmd":"./bin/slow-agent"}`
	reg.setDoc(`{"agents":[{"id":"slow-agent","version":"1.0.0","distribution":{"binary":{` +
		`"linux-x86_64":` + target + `,"linux-aarch64":` + target + `}}}]}`)

	home := t.TempDir()
	data := filepath.Join(home, ".local", "share")
	cmd := exec.Command(harness.Binary, "install-agent", "slow-agent")
	cmd.Env = append(os.Environ(), "HOME="+home, "XDG_DATA_HOME="+data)
	cmd.Env = append(cmd.Env, reg.env()...)
	var out harness.LockedBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	must(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			<-exited
		}
	}()
	bin := filepath.Join(data, "sandbox-agent", "bin")
	store := filepath.Join(bin, "packages", "slow-agent")
	unpacked := func() int {
		dists, _ := filepath.Glob(filepath.Join(store, "*", "dist", "pkg"))
		if len(dists) == 0 {
			return 0
		}
		ents, _ := os.ReadDir(dists[0])
		return len(ents)
	}
	if !harness.WaitUntil(20*time.Second, func() bool { return unpacked() > 100 }) {
		var tree []string
		_ = filepath.WalkDir(home, func(p string, d fs.DirEntry, err error) error {
			if len(tree) < 40 {
				tree = append(tree, p)
			}
			return nil
		})
		t.Fatalf("the unpack did not start:\n%s\n%s", out.String(), strings.Join(tree, "\n"))
	}
	must(t, cmd.Process.Signal(os.Interrupt))
	var err error
	select {
	case err = <-exited:
	case <-time.After(60 * time.Second):
		t.Fatalf("install still running 60 s after SIGINT:\n%s", out.String())
	}
	if err == nil {
		t.Fatalf("the interrupted install succeeded:\n%s", out.String())
	}
	if stamps, _ := os.ReadDir(store); len(stamps) != 0 {
		t.Errorf("the interrupted install left %d directories in %s", len(stamps), store)
	}
	if _, err := os.Stat(filepath.Join(bin, "agent_processes", "slow-agent-acp")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a launcher was written: %v", err)
	}
	t.Logf("install interrupted while unpacking: %v; CPU %v", err, cmd.ProcessState.UserTime()+cmd.ProcessState.SystemTime())
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
