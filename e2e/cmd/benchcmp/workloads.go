package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/sandbox-agent-go/sandbox-agent/adapters/httpclient"
	"github.com/sandbox-agent-go/sandbox-agent/e2e/internal/proc"
)

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

// benchExtras measures the rows run once, after the rounds.
func benchExtras(ctx context.Context, c config, t *target, src, work string) (*figures, error) {
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
	var durs []time.Duration
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

// httpStream is a daemon's instance for the streaming runs, its event
// stream open and read by burst.
type httpStream struct {
	t      *target
	id     string
	sid    string
	resp   *http.Response
	r      *httpclient.SSEReader
	cancel context.CancelFunc
}

// openHTTPStream starts instance id with a session and opens its stream.
// The instance is left running; close ends the stream.
func openHTTPStream(ctx context.Context, t *target, id string) (*httpStream, error) {
	if _, err := mustPost(ctx, t, id, "?agent=mock", initMsg); err != nil {
		return nil, err
	}
	b, err := mustPost(ctx, t, id, "", newSessionMsg("s"))
	if err != nil {
		return nil, err
	}
	sid, err := sessionID(b)
	if err != nil {
		return nil, err
	}
	sctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	req, _ := http.NewRequestWithContext(sctx, "GET", t.url+"/v1/acp/"+id, nil)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := client.Do(req)
	if err != nil {
		cancel()
		return nil, err
	}
	if resp.StatusCode != 200 {
		resp.Body.Close()
		cancel()
		return nil, fmt.Errorf("stream: %d", resp.StatusCode)
	}
	return &httpStream{t: t, id: id, sid: sid, resp: resp, r: httpclient.NewSSEReader(resp.Body, 0), cancel: cancel}, nil
}

func (s *httpStream) close() {
	s.resp.Body.Close()
	s.cancel()
}

// burst asks for n updates (prompt k) and counts the distinct ones that
// arrive before the turn's answer (on the stream for both daemons; the
// reference answers the POST only when the turn ends), adding them and
// the time from the prompt to the last update to f.
func (s *httpStream) burst(ctx context.Context, k, n int, f *streamFigures) error {
	id := "prompt-" + strconv.Itoa(k)
	postErr := make(chan error, 1)
	start := time.Now()
	go func() {
		st, b, err := post(ctx, s.t, s.id, "", promptMsg(id, s.sid, n))
		if err == nil && st != 200 && st != 202 {
			err = fmt.Errorf("prompt: %d %s", st, b)
		}
		postErr <- err
	}()
	seen := make([]bool, n+1)
	got := 0
	var last time.Time
	marker := []byte(`mock: chunk `)
	end := []byte(`"id":"` + id + `"`)
	for {
		ev, err := s.r.Next()
		if err != nil {
			return fmt.Errorf("stream ended after %d updates: %w", got, err)
		}
		line := ev.Data
		if i := bytes.Index(line, marker); i >= 0 {
			rest := line[i+len(marker):]
			j := bytes.IndexByte(rest, '"')
			c, _ := strconv.Atoi(string(rest[:max(j, 0)]))
			if c >= 1 && c <= n && !seen[c] {
				seen[c] = true
				got++
				last = time.Now()
			}
			continue
		}
		if bytes.Contains(line, []byte(`_adapter/replay_gap`)) {
			f.gaps++
			continue
		}
		if bytes.Contains(line, end) && bytes.Contains(line, []byte(`stopReason`)) {
			break
		}
	}
	if err := <-postErr; err != nil {
		return err
	}
	f.add(got, n, start, last)
	return nil
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
