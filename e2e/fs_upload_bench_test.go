package e2e

import (
	"archive/tar"
	"bytes"
	"fmt"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/sandbox-agent-go/sandbox-agent/e2e/internal/harness"
)

// The cost of upload-batch by the shape of the archive, through the daemon
// (its os.Root views, as users get them). Each upload goes to a fresh
// target, so the figures are the extraction and one rename into place.
//
//	go test ./e2e -run '^$' -bench 'BenchmarkUpload' -benchtime 3x
//
// UPLOAD_BENCH_BEFORE=/path/to/an/older/sandbox-agent runs the same
// uploads against that build too, interleaved with this one, and reports
// its figures beside (metrics named before-...).

// spines is an archive of n spines of depth directories, each directory
// holding one empty file: 2 × n × depth entries whatever the depth, in
// the order tar writes a tree (a directory, then what it holds).
func spines(tb testing.TB, n, depth int) (archive []byte, entries int) {
	tb.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for s := range n {
		dir := fmt.Sprintf("s%d", s)
		for level := range depth {
			if level > 0 {
				dir += "/d"
			}
			for _, h := range []*tar.Header{
				{Name: dir + "/", Typeflag: tar.TypeDir, Mode: 0o755},
				{Name: dir + "/f", Typeflag: tar.TypeReg, Mode: 0o644},
			} {
				if err := tw.WriteHeader(h); err != nil {
					tb.Fatal(err)
				}
				entries++
			}
		}
	}
	if err := tw.Close(); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes(), entries
}

// uploadLeg is one daemon the benchmark uploads to, with the wall time
// and the daemon's CPU time (user and system, from /proc) each shape took:
// on a loaded machine the CPU time is the steadier of the two.
type uploadLeg struct {
	name      string
	d         *harness.Daemon
	n         int
	secs, cpu map[string]float64
}

func uploadLegs(b *testing.B) []*uploadLeg {
	legs := []*uploadLeg{{name: "", d: harness.Start(b, harness.Options{Args: []string{"--log-level", "warn"}}), secs: map[string]float64{}, cpu: map[string]float64{}}}
	if before := os.Getenv("UPLOAD_BENCH_BEFORE"); before != "" {
		legs = append(legs, &uploadLeg{name: "before-", d: harness.Start(b, harness.Options{Binary: before, Args: []string{"--log-level", "warn"}}), secs: map[string]float64{}, cpu: map[string]float64{}})
	}
	return legs
}

// upload posts archive to a fresh target and adds the time it took to
// shape's totals.
func (l *uploadLeg) upload(b *testing.B, shape string, archive []byte) {
	l.n++
	cpu := processCPU(b, l.d.Cmd.Process.Pid)
	req, _ := http.NewRequest("POST", fmt.Sprintf("%s/v1/fs/upload-batch?path=up%d", l.d.URL, l.n), bytes.NewReader(archive))
	req.Header.Set("Content-Type", "application/x-tar")
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	resp.Body.Close()
	l.secs[shape] += time.Since(start).Seconds()
	l.cpu[shape] += (processCPU(b, l.d.Cmd.Process.Pid) - cpu).Seconds()
	if resp.StatusCode != 200 {
		b.Fatalf("%supload: %d", l.name, resp.StatusCode)
	}
	// Remove it outside the timing, so the disk holds one copy at a time.
	if err := os.RemoveAll(fmt.Sprintf("%s/up%d", l.d.Home, l.n)); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkUploadDepth uploads the same number of entries at depth 10
// (50 spines) and at depth 500 (one spine), interleaved, and reports the
// time per entry of each: flat when the two are about the same. (The
// issue's 500-deep tar took 88 s of one core.)
func BenchmarkUploadDepth(b *testing.B) {
	shallow, n10 := spines(b, 50, 10)
	deep, n500 := spines(b, 1, 500)
	if n10 != n500 {
		b.Fatalf("%d entries against %d", n10, n500)
	}
	legs := uploadLegs(b)
	for b.Loop() {
		for _, l := range legs {
			l.upload(b, "10", shallow)
			l.upload(b, "500", deep)
		}
	}
	for _, l := range legs {
		for _, depth := range []string{"10", "500"} {
			b.ReportMetric(l.secs[depth]*1e9/float64(l.n/2*n10), l.name+"ns/entry-depth"+depth)
			b.ReportMetric(l.cpu[depth]*1e9/float64(l.n/2*n10), l.name+"cpu-ns/entry-depth"+depth)
		}
	}
}

// BenchmarkUpload100k uploads 100,000 entries: flat (empty files in one
// directory) and nested (a spine 500 deep, each directory holding 199
// empty files), and reports the time per entry.
func BenchmarkUpload100k(b *testing.B) {
	for _, shape := range []string{"flat", "nested"} {
		b.Run(shape, func(b *testing.B) {
			var buf bytes.Buffer
			tw := tar.NewWriter(&buf)
			entries := 0
			add := func(h *tar.Header) {
				if err := tw.WriteHeader(h); err != nil {
					b.Fatal(err)
				}
				entries++
			}
			if shape == "flat" {
				for i := range 100_000 {
					add(&tar.Header{Name: fmt.Sprintf("f%06d", i), Typeflag: tar.TypeReg, Mode: 0o644})
				}
			} else {
				dir := "d"
				for range 500 {
					add(&tar.Header{Name: dir + "/", Typeflag: tar.TypeDir, Mode: 0o755})
					for i := range 199 {
						add(&tar.Header{Name: fmt.Sprintf("%s/f%03d", dir, i), Typeflag: tar.TypeReg, Mode: 0o644})
					}
					dir += "/d"
				}
			}
			if err := tw.Close(); err != nil {
				b.Fatal(err)
			}
			archive := buf.Bytes()
			legs := uploadLegs(b)
			for b.Loop() {
				for _, l := range legs {
					l.upload(b, shape, archive)
				}
			}
			for _, l := range legs {
				b.ReportMetric(l.secs[shape]*1e9/float64(l.n*entries), l.name+"ns/entry")
				b.ReportMetric(l.cpu[shape]*1e9/float64(l.n*entries), l.name+"cpu-ns/entry")
				b.ReportMetric(float64(len(archive))/float64(entries), "archive-bytes/entry")
			}
		})
	}
}
