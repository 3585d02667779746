package httpclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// The tests in this file put an ACPConn through what a daemon can do to
// it, in a synctest bubble (fakenet_test.go): stop answering, die, come
// back without the instance, refuse with 503; and through what its user
// can do: Close from another goroutine while every call blocks, many
// goroutines at once. Each ends with no goroutine of the client left.

const notif = `{"jsonrpc":"2.0","method":"n"}`

// dialBubble dials instance "s" of f's daemon, creating it with a first
// notification (the stream then starts), and reads it in the background.
func dialBubble(t *testing.T, f *fakeACP, opts *ACPOptions) (*ACPConn, *readAll) {
	t.Helper()
	conn, err := f.d.client().DialACP(context.Background(), "s", "fake", opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	ra := readConn(conn)
	if _, err := io.WriteString(conn, notif+"\n"); err != nil {
		t.Fatal(err)
	}
	synctest.Wait()
	return conn, ra
}

// answersTo returns the JSON-RPC error message of the one line answering
// id, failing t unless there is exactly one and it is an error.
func answersTo(t *testing.T, lines []string, id string) string {
	t.Helper()
	var msgs []string
	for _, l := range lines {
		var a rpcAnswer
		if json.Unmarshal([]byte(l), &a) == nil && string(a.ID) == id {
			if a.Error == nil {
				t.Fatalf("request %s answered without an error: %s", id, l)
			}
			msgs = append(msgs, a.Error.Message)
		}
	}
	if len(msgs) != 1 {
		t.Fatalf("request %s answered %d times: %q", id, len(msgs), lines)
	}
	return msgs[0]
}

// TestACPConnDaemonStopsAnswering: a daemon that keeps its connections
// open and answers nothing (stopped, or a dead peer behind a proxy) ends
// the connection with ErrDaemonUnreachable once its stream has been
// silent for 45 s (its heartbeat comes every 15 s): on a stream that falls
// silent, and on a stream that ended and whose reconnect is never
// answered. The pending request gets a JSON-RPC error first, Read then
// the error, and no goroutine of the client is left. Before, the
// reconnect waited for an answer forever.
func TestACPConnDaemonStopsAnswering(t *testing.T) {
	for _, tc := range []struct {
		name string
		stop func(f *fakeACP)
	}{
		{"silent stream", func(f *fakeACP) { f.d.stop() }},
		{"unanswered reconnect", func(f *fakeACP) { f.d.stop(); f.events <- "" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f, d := newFakeACP(t, nil)
				conn, ra := dialBubble(t, f, nil)
				io.WriteString(conn, req1+"\n") // 202: its answer would come on the stream
				time.Sleep(20 * time.Second)    // heartbeats came meanwhile
				stopped := time.Now()
				tc.stop(f)
				within(t, ra.done, 10*time.Minute, "Read after the daemon stopped")
				took := time.Since(stopped)
				lines, err := ra.result()
				errorIs(t, err, ErrDaemonUnreachable)
				errorIs(t, conn.Err(), ErrDaemonUnreachable)
				if msg := answersTo(t, lines, "1"); !strings.Contains(msg, "daemon unreachable") {
					t.Fatalf("pending request answered with %q", msg)
				}
				if took > streamIdleTimeout+time.Second {
					t.Fatalf("failed %v after the daemon stopped, want at most %v", took, streamIdleTimeout)
				}
				d.noClientLeaks(t, "once the connection failed (before Close)")
				if err := conn.Close(); err != nil {
					t.Fatal(err)
				}
				d.noLeaks(t)
			})
		})
	}
}

// TestACPConnDaemonGone: the daemon killed during a turn (a request's
// POST waiting in it, the stream open), and then not coming back (the
// connection ends with ErrDaemonUnreachable after ReconnectTimeout),
// coming back without the instance (ErrInstanceGone at once), or the
// instance deleted by someone else (ErrInstanceGone). The pending request
// is answered once, with the reason; nothing of the client is left.
func TestACPConnDaemonGone(t *testing.T) {
	for _, tc := range []struct {
		name      string
		gone      func(f *fakeACP)
		want      error
		msg       string
		tookLeast time.Duration
	}{
		{"killed", func(f *fakeACP) { f.d.net.kill() }, ErrDaemonUnreachable, "daemon unreachable", 30 * time.Second},
		{"restarted", func(f *fakeACP) { f.d.net.kill(); f.setGone(); f.d.net.revive() }, ErrInstanceGone, "gone", 0},
		{"deleted", func(f *fakeACP) { f.setGone(); f.events <- "" }, ErrInstanceGone, "gone", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f, d := newFakeACP(t, func(w http.ResponseWriter, r *http.Request, body string) {
					if strings.Contains(body, `"id":1`) {
						<-r.Context().Done() // a synchronous request, in the daemon's hands
						return
					}
					w.WriteHeader(http.StatusAccepted)
				})
				conn, ra := dialBubble(t, f, nil)
				io.WriteString(conn, req1+"\n")
				synctest.Wait()
				at := time.Now()
				tc.gone(f)
				within(t, ra.done, 10*time.Minute, "Read after the daemon went")
				took := time.Since(at)
				lines, err := ra.result()
				errorIs(t, err, tc.want)
				if msg := answersTo(t, lines, "1"); !strings.Contains(msg, tc.msg) {
					t.Fatalf("pending request answered with %q", msg)
				}
				if took < tc.tookLeast || took > tc.tookLeast+2*time.Second {
					t.Fatalf("ended %v after, want %v", took, tc.tookLeast)
				}
				d.noClientLeaks(t, "once the connection failed (before Close)")
				conn.Close()
				d.noLeaks(t)
			})
		})
	}
}

// TestDialACPDaemonNeverAnswers: DialACP against a daemon that takes the
// connection and never answers gives up after ReconnectTimeout with
// ErrDaemonUnreachable, not a context error; the caller's context ending
// first gives the context's error, not ErrDaemonUnreachable. Before,
// DialACP waited as long as the caller's context (the bridge's: until a
// signal).
func TestDialACPDaemonNeverAnswers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, d := newFakeACP(t, nil)
		d.stop()
		start := time.Now()
		dialed := make(chan error, 1)
		go func() {
			_, err := d.client().DialACP(context.Background(), "s", "fake", &ACPOptions{ReconnectTimeout: 5 * time.Second})
			dialed <- err
		}()
		err := within(t, dialed, time.Hour, "DialACP against a daemon that never answers")
		errorIs(t, err, ErrDaemonUnreachable)
		if errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("the daemon's silence reads as the caller's deadline: %v", err)
		}
		if took := time.Since(start); took > 5*time.Second+time.Second {
			t.Fatalf("gave up after %v", took)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, err = d.client().DialACP(ctx, "s", "fake", &ACPOptions{ReconnectTimeout: time.Minute})
		errorIs(t, err, context.DeadlineExceeded)
		if errors.Is(err, ErrDaemonUnreachable) {
			t.Fatalf("the caller's deadline reads as the daemon's: %v", err)
		}
		d.noClientLeaks(t, "after DialACP gave up")
		d.noLeaks(t)
	})
}

// TestACPConnCloseUnblocksEverything: Close from another goroutine ends a
// Read waiting for a message, a Write waiting for the daemon to take a
// notification, and a CloseWrite waiting for that Write, at once; with
// DeleteOnClose against a daemon that stopped answering it returns within
// its documented bound (2 s for POSTs in flight, 5 s for the DELETE) with
// the DELETE's error. Nothing of the client is left either way.
func TestACPConnCloseUnblocksEverything(t *testing.T) {
	for _, deleteOnClose := range []bool{false, true} {
		t.Run("DeleteOnClose="+strconv.FormatBool(deleteOnClose), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f, d := newFakeACP(t, func(w http.ResponseWriter, r *http.Request, body string) {
					if strings.Contains(body, `"hang"`) {
						<-r.Context().Done()
						return
					}
					w.WriteHeader(http.StatusAccepted)
				})
				conn, ra := dialBubble(t, f, &ACPOptions{DeleteOnClose: deleteOnClose})
				writeErr, closeWriteErr := make(chan error, 1), make(chan error, 1)
				go func() {
					_, err := io.WriteString(conn, `{"jsonrpc":"2.0","method":"hang"}`+"\n")
					writeErr <- err
				}()
				synctest.Wait()
				go func() { closeWriteErr <- conn.CloseWrite(context.Background()) }()
				synctest.Wait()
				if deleteOnClose {
					d.stop() // the DELETE is not answered either
				}
				start := time.Now()
				err := conn.Close()
				took := time.Since(start)
				if deleteOnClose {
					if err == nil || !strings.Contains(err.Error(), "delete acp instance") {
						t.Fatalf("Close against a stopped daemon: %v", err)
					}
					if took > 7*time.Second+time.Second {
						t.Fatalf("Close took %v", took)
					}
				} else if err != nil || took != 0 {
					t.Fatalf("Close: %v after %v", err, took)
				}
				if err := <-writeErr; err == nil {
					t.Fatal("the blocked Write succeeded after Close")
				}
				if err := <-closeWriteErr; err == nil {
					t.Fatal("the blocked CloseWrite succeeded after Close")
				}
				<-ra.done
				if _, err := ra.result(); err != ErrClosed {
					t.Fatalf("Read after Close: %v", err)
				}
				d.noClientLeaks(t, "after Close")
				d.noLeaks(t)
			})
		})
	}
}

// TestACPConnConcurrentUse: several goroutines write requests at once
// while one reads: every request reaches the daemon once and is answered
// once. Then Close comes from yet another goroutine in the middle of the
// traffic: every call returns, nothing is left. Run it with -race.
func TestACPConnConcurrentUse(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var f *fakeACP
		f, d := newFakeACP(t, func(w http.ResponseWriter, r *http.Request, body string) {
			var m struct {
				ID json.RawMessage `json:"id"`
			}
			if json.Unmarshal([]byte(body), &m) == nil && m.ID != nil {
				select {
				case f.events <- `{"jsonrpc":"2.0","id":` + string(m.ID) + `,"result":{}}`:
				case <-r.Context().Done():
					return
				}
			}
			w.WriteHeader(http.StatusAccepted)
		})
		conn, ra := dialBubble(t, f, nil)
		const writers, each = 4, 50
		var wg sync.WaitGroup
		for w := range writers {
			wg.Go(func() {
				for i := range each {
					if _, err := fmt.Fprintf(conn, `{"jsonrpc":"2.0","id":"%d-%d","method":"m"}`+"\n", w, i); err != nil {
						t.Errorf("write: %v", err)
						return
					}
				}
			})
		}
		wg.Wait()
		synctest.Wait()
		lines, _ := ra.result()
		seen := map[string]int{}
		for _, l := range lines {
			var a rpcAnswer
			json.Unmarshal([]byte(l), &a)
			seen[string(a.ID)]++
		}
		if len(seen) != writers*each || len(f.posted()) != writers*each+1 {
			t.Fatalf("%d requests answered, %d posted", len(seen), len(f.posted()))
		}
		for id, n := range seen {
			if n != 1 {
				t.Fatalf("%s answered %d times", id, n)
			}
		}

		// Close in the middle of the traffic.
		var wrote atomic.Int32
		busy := make(chan struct{})
		var once sync.Once
		for w := range writers {
			wg.Go(func() {
				for i := 0; ; i++ {
					if _, err := fmt.Fprintf(conn, `{"jsonrpc":"2.0","id":"again-%d-%d","method":"m"}`+"\n", w, i); err != nil {
						return
					}
					if wrote.Add(1) == 40 {
						once.Do(func() { close(busy) })
					}
				}
			})
		}
		<-busy
		closed := make(chan error, 1)
		go func() { closed <- conn.Close() }()
		if err := <-closed; err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		<-ra.done
		if _, err := ra.result(); err != ErrClosed {
			t.Fatalf("Read after Close: %v", err)
		}
		d.noClientLeaks(t, "after Close")
		d.noLeaks(t)
	})
}

// TestACPConnOverloaded: a POST the daemon refuses with 503 (overloaded:
// it took nothing) is sent again after its Retry-After, within
// ReconnectTimeout: a notification or a response has no other way to
// reach the agent (a permission answer lost would hang the turn), and a
// request gets its real answer rather than an error. Past the window, a
// request gets a JSON-RPC error carrying the problem and a notification
// is dropped with a warning; the connection goes on.
func TestACPConnOverloaded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var refuse atomic.Int32
		var f *fakeACP
		f, d := newFakeACP(t, func(w http.ResponseWriter, r *http.Request, body string) {
			if refuse.Load() > 0 {
				refuse.Add(-1)
				w.Header().Set("Retry-After", "2")
				w.Header().Set("Content-Type", "application/problem+json")
				w.WriteHeader(http.StatusServiceUnavailable)
				io.WriteString(w, `{"type":"urn:sandbox-agent:error:overloaded","title":"Overloaded","status":503,"detail":"overloaded: busy"}`)
				return
			}
			if strings.Contains(body, `"id":1`) {
				f.events <- resp1
			}
			w.WriteHeader(http.StatusAccepted)
		})
		logs := &logCapture{}
		conn, ra := dialBubble(t, f, &ACPOptions{ReconnectTimeout: 10 * time.Second, Logger: logs.logger()})

		refuse.Store(2)
		start := time.Now()
		io.WriteString(conn, `{"jsonrpc":"2.0","method":"answer"}`+"\n")
		if took := time.Since(start); took != 4*time.Second {
			t.Fatalf("the notification was taken after %v, want 2 × Retry-After", took)
		}
		refuse.Store(2)
		io.WriteString(conn, req1+"\n")
		synctest.Wait()
		time.Sleep(10 * time.Second)
		lines, _ := ra.result()
		if len(lines) != 1 || lines[0] != resp1 {
			t.Fatalf("the request refused twice then taken: %q", lines)
		}
		posted := f.posted()
		if n := strings.Count(strings.Join(posted, "\n"), `"answer"`); n != 3 {
			t.Fatalf("the notification was posted %d times, want 3", n)
		}

		// Past ReconnectTimeout.
		refuse.Store(1000)
		io.WriteString(conn, `{"jsonrpc":"2.0","method":"dropped"}`+"\n")
		io.WriteString(conn, `{"jsonrpc":"2.0","id":2,"method":"m"}`+"\n")
		time.Sleep(30 * time.Second)
		lines, _ = ra.result()
		if msg := answersTo(t, lines, "2"); !strings.Contains(msg, "503 overloaded") {
			t.Fatalf("request past the window answered %q", msg)
		}
		if !strings.Contains(logs.String(), "acp post refused") {
			t.Fatalf("the dropped notification was not logged:\n%s", logs)
		}
		if conn.Err() != nil {
			t.Fatalf("the connection ended: %v", conn.Err())
		}
		conn.Close()
		d.noLeaks(t)
	})
}

// TestACPConnSlowReaderIsNotSilence: a reader that stops reading for
// minutes holds the stream back (the inbox is full, so the connection
// stops reading it), and that silence is the reader's, not the daemon's:
// no reconnect, no ErrDaemonUnreachable, and every event arrives once, in
// order, when it reads again.
func TestACPConnSlowReaderIsNotSilence(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, d := newFakeACP(t, nil)
		logs := &logCapture{}
		conn, err := d.client().DialACP(context.Background(), "s", "fake", &ACPOptions{Logger: logs.logger()})
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		io.WriteString(conn, notif+"\n")
		const n = maxQueued + 500
		go func() {
			for i := range n {
				f.events <- fmt.Sprintf(`{"jsonrpc":"2.0","method":"u","params":{"i":%d}}`, i)
			}
		}()
		time.Sleep(5 * time.Minute) // nobody reads
		ra := readConn(conn)
		time.Sleep(time.Second)
		lines, err := ra.result()
		if err != nil || conn.Err() != nil {
			t.Fatalf("the connection failed: %v", conn.Err())
		}
		if len(lines) != n {
			t.Fatalf("%d lines, want %d", len(lines), n)
		}
		for i, l := range lines {
			if !strings.Contains(l, fmt.Sprintf(`{"i":%d}`, i)) {
				t.Fatalf("line %d: %s", i, l)
			}
		}
		if strings.Contains(logs.String(), "reconnecting") {
			t.Fatalf("a slow reader was taken for a silent daemon:\n%s", logs)
		}
		conn.Close()
		d.noLeaks(t)
	})
}
