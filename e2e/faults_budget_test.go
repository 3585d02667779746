package e2e

// The fault suite, budgets part (issue 20): every byte a client can make
// the daemon hold is charged before it is held (WebSocket messages,
// process input, process logs), HTTP/2 streams count against the
// connection limit, and a POST runs on what the auth chain judged. Each
// memory test asserts the daemon's peak RSS (VmHWM) stays under the
// README's memory bound for the flags it runs with.

import (
	"strings"
	"testing"
	"time"

	"github.com/sandbox-agent-go/sandbox-agent/e2e/internal/harness"
)

// One h2c connection, 240 PUT streams whose bodies stall, opened at once
// without regard for the server's stream limit (issue 20: all 240 in
// flight, 253 descriptors; each PUT opens a temporary file). With
// --max-conns 5 the connection and 4 streams are served; every other
// stream is answered 503 at once (it opens no file) or refused by the
// protocol's own stream limit (100 a connection); the 4 are cut by
// --read-idle-timeout as an HTTP/1.1 body would be (408); the daemon's
// descriptors stay bounded throughout.
func TestFaultH2Streams(t *testing.T) {
	d := harness.Start(t, harness.Options{Args: []string{"--max-conns", "5", "--read-idle-timeout", "2s", "--log-level", "info"}})
	pid := d.Cmd.Process.Pid
	addr := strings.TrimPrefix(d.URL, "http://")
	fds0 := openFDs(t, pid)
	c := dialH2(t, addr)
	const streams = 240
	start := time.Now()
	for i := range streams {
		c.request(uint32(2*i+1), "PUT", addr, "/v1/fs/file?path=h2-"+itoa(i), []byte("x"), false)
	}
	maxFDs := fds0
	answered := func(m map[uint32]h2Stream) bool {
		maxFDs = max(maxFDs, openFDs(t, pid))
		n := 0
		for _, s := range m {
			if s.ended || s.reset != 0 {
				n++
			}
		}
		return n == streams
	}
	if !c.wait(30*time.Second, answered) {
		t.Fatalf("not every stream was answered: %v", summarize(c.snapshot()))
	}
	sum := summarize(c.snapshot())
	t.Logf("answers after %v: %v; descriptors %d before, at most %d during", time.Since(start).Round(time.Millisecond), sum, fds0, maxFDs)
	if sum["408"] > 4 || sum["408"] == 0 || sum["408"]+sum["503"]+sum["refused"] != streams {
		t.Fatalf("answers %v, want at most 4 served (408 once stalled) and the rest 503 or refused", sum)
	}
	if maxFDs > fds0+8 {
		t.Fatalf("descriptors grew from %d to %d under %d stalled streams", fds0, maxFDs, streams)
	}
	// Nothing is held: a stream on the same connection is served.
	c.request(2*streams+1, "GET", addr, "/v1/health", nil, true)
	if !c.wait(10*time.Second, func(m map[uint32]h2Stream) bool { return m[2*streams+1].ended }) {
		t.Fatal("health after the attack: no answer")
	}
	if s := c.snapshot()[2*streams+1]; !strings.Contains(string(s.body), `"ok"`) {
		t.Fatalf("health after the attack: %q", s.body)
	}
	logPeakRSS(t, d, "after 240 stalled h2c streams")
}

// summarize counts streams by outcome: the problem status, "refused" for
// a stream reset before any answer, "other".
func summarize(m map[uint32]h2Stream) map[string]int {
	out := map[string]int{}
	for _, s := range m {
		switch {
		case s.status() != 0:
			out[itoa(s.status())]++
		case s.reset != 0 && !s.headers:
			out["refused"]++
		case !s.ended:
			out["open"]++
		default:
			out["other"]++
		}
	}
	return out
}

func itoa(i int) string {
	const digits = "0123456789"
	if i < 10 {
		return digits[i : i+1]
	}
	return itoa(i/10) + digits[i%10:i%10+1]
}
