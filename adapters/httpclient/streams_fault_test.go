package httpclient

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/coder/websocket"
)

// The tests in this file put the package's other long calls through a
// daemon that stops answering, dies, or ends the call, and their callers'
// contexts and Close: event streams (StreamACP, FollowProcessLogs), the
// terminal WebSocket, a file download whose body is never read. Each runs
// in a synctest bubble (fakenet_test.go) and ends with no goroutine of the
// client left.

// sseDaemon serves an event stream at every GET: what the test sends on
// out (raw SSE text; "" ends the stream), a heartbeat every 15 s.
func sseDaemon(t *testing.T) (*bubbleDaemon, chan string) {
	out := make(chan string, 16)
	var d *bubbleDaemon
	d = startBubbleDaemon(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		heartbeat := time.NewTicker(15 * time.Second)
		defer heartbeat.Stop()
		for {
			var s string
			select {
			case s = <-out:
				if s == "" {
					return
				}
			case <-heartbeat.C:
				s = ": heartbeat\n\n"
			case <-r.Context().Done():
				return
			}
			if !d.wait(r) {
				return
			}
			io.WriteString(w, s)
			w.(http.Flusher).Flush()
		}
	})
	return d, out
}

const (
	logEvent  = "event: log\nid: 1\ndata: {\"sequence\":1,\"stream\":\"stdout\",\"data\":\"aGk=\",\"encoding\":\"base64\"}\n\n"
	exitEvent = "event: exit\ndata: {\"id\":\"p\",\"status\":\"exited\",\"exitCode\":3}\n\n"
	acpEvent  = "event: message\nid: 1\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"x\"}\n\n"
)

// streamCalls are the event streams of the package, each started on ctx
// and calling fn per event.
var streamCalls = []struct {
	name  string
	event string
	call  func(ctx context.Context, c *Client, fn func()) error
}{
	{"StreamACP", acpEvent, func(ctx context.Context, c *Client, fn func()) error {
		return c.StreamACP(ctx, "s", "", func(ACPEvent) error { fn(); return nil })
	}},
	{"FollowProcessLogs", logEvent, func(ctx context.Context, c *Client, fn func()) error {
		return c.FollowProcessLogs(ctx, "p", ProcessLogsQuery{}, func(ProcessLogEvent) error { fn(); return nil })
	}},
}

// TestStreamsEnd: an event stream call ends, with an error saying why,
// when the daemon stops answering (45 s of silence, on a stream open or
// not yet answered: ErrDaemonUnreachable), is killed (the stream cut
// short), or ends the stream (nil for the ACP stream; for a followed log
// without its exit event, io.ErrUnexpectedEOF, since the caller would
// otherwise take the log for complete), and with exactly ctx.Err() when
// the caller's context ends. A callback slower than 45 s is not the
// daemon's silence. No goroutine of the client is left.
func TestStreamsEnd(t *testing.T) {
	for _, call := range streamCalls {
		for _, tc := range []struct {
			name   string
			before func(d *bubbleDaemon, out chan string) // before the call
			during func(d *bubbleDaemon, out chan string, cancel context.CancelFunc)
			want   func(t *testing.T, err error, took time.Duration)
		}{
			{"silent", nil, func(d *bubbleDaemon, _ chan string, _ context.CancelFunc) { d.stop() }, wantSilent},
			{"unanswered", func(d *bubbleDaemon, _ chan string) { d.stop() }, nil, wantSilent},
			{"killed", nil, func(d *bubbleDaemon, _ chan string, _ context.CancelFunc) { d.net.kill() }, func(t *testing.T, err error, _ time.Duration) {
				if err == nil || errors.Is(err, context.Canceled) {
					t.Fatalf("err = %v, want the cut", err)
				}
			}},
			{"cancelled", nil, func(_ *bubbleDaemon, _ chan string, cancel context.CancelFunc) { cancel() }, func(t *testing.T, err error, _ time.Duration) {
				if err != context.Canceled {
					t.Fatalf("err = %v, want ctx.Err()", err)
				}
			}},
			{"ended", nil, func(_ *bubbleDaemon, out chan string, _ context.CancelFunc) { out <- "" }, func(t *testing.T, err error, _ time.Duration) {
				if call.name == "StreamACP" && err != nil || call.name == "FollowProcessLogs" && !errors.Is(err, io.ErrUnexpectedEOF) {
					t.Fatalf("err = %v", err)
				}
			}},
		} {
			t.Run(call.name+"/"+tc.name, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					d, out := sseDaemon(t)
					if tc.before != nil {
						tc.before(d, out)
					}
					ctx, cancel := context.WithCancel(context.Background())
					defer cancel()
					got := make(chan struct{}, 10)
					done := make(chan error, 1)
					go func() { done <- call.call(ctx, d.client(), func() { got <- struct{}{} }) }()
					if tc.during != nil {
						out <- call.event
						within(t, got, time.Minute, "the first event")
						time.Sleep(20 * time.Second) // a heartbeat came
					}
					start := time.Now()
					if tc.during != nil {
						tc.during(d, out, cancel)
					}
					err := within(t, done, 10*time.Minute, "the call's end")
					tc.want(t, err, time.Since(start))
					d.noClientLeaks(t, "after the call returned")
					d.noLeaks(t)
				})
			})
		}
	}
}

func wantSilent(t *testing.T, err error, took time.Duration) {
	t.Helper()
	if !errors.Is(err, ErrDaemonUnreachable) || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want ErrDaemonUnreachable", err)
	}
	if took > streamIdleTimeout {
		t.Fatalf("ended %v after the daemon stopped", took)
	}
}

// TestStreamsSlowCallback: the time a callback takes is not the daemon's
// silence, and a followed log that ends with its exit event is complete.
func TestStreamsSlowCallback(t *testing.T) {
	for _, call := range streamCalls {
		t.Run(call.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				d, out := sseDaemon(t)
				out <- call.event
				var n int
				err := call.call(context.Background(), d.client(), func() {
					n++
					if n == 1 {
						d.stop() // no heartbeat while the callback runs
						time.Sleep(2 * streamIdleTimeout)
						d.cont()
						out <- call.event
						out <- exitEvent
						out <- ""
					}
				})
				if err != nil || n != 3 { // the two events, then the exit
					t.Fatalf("err = %v after %d events", err, n)
				}
				d.noLeaks(t)
			})
		})
	}
}

// TestOpenFileBodyLeftUnread: a download whose body the caller never
// reads holds its connection until the caller closes the body or its
// context ends, then nothing is left; a WriteFile whose daemon never
// answers, with a body reader that never ends, returns the context's
// error once it ends, and net/http closes the caller's body.
func TestOpenFileBodyLeftUnread(t *testing.T) {
	for _, tc := range []string{"closed", "cancelled", "write cancelled"} {
		t.Run(tc, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				d := startBubbleDaemon(t, func(w http.ResponseWriter, r *http.Request) {
					if r.Method == http.MethodPut {
						io.Copy(io.Discard, r.Body)
						return
					}
					w.Header().Set("Content-Length", "1048576")
					w.WriteHeader(http.StatusOK)
					io.WriteString(w, "first bytes")
					w.(http.Flusher).Flush()
					<-r.Context().Done()
				})
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				c := d.client()
				switch tc {
				case "closed", "cancelled":
					body, err := c.OpenFile(ctx, "f", 0, -1)
					if err != nil {
						t.Fatal(err)
					}
					if tc == "closed" {
						body.Close()
					} else {
						cancel()
					}
				case "write cancelled":
					pr, pw := io.Pipe()
					done := make(chan error, 1)
					go func() { _, err := c.WriteFile(ctx, "f", pr); done <- err }()
					pw.Write([]byte("some"))
					synctest.Wait() // the request waits for more of the body
					cancel()
					if err := within(t, done, time.Minute, "WriteFile after cancel"); !errors.Is(err, context.Canceled) {
						t.Fatalf("WriteFile: %v", err)
					}
					if _, err := pw.Write([]byte("more")); err == nil {
						t.Fatal("the caller's body was not closed")
					}
				}
				d.noClientLeaks(t, "once the body was let go")
				d.noLeaks(t)
			})
		})
	}
}

// terminalDaemon serves a terminal WebSocket: "ready", then what serve
// does with the connection; the connection is dropped at shutdown.
func terminalDaemon(t *testing.T, serve func(ws *websocket.Conn, gone <-chan struct{})) *bubbleDaemon {
	var d *bubbleDaemon
	d = startBubbleDaemon(t, func(w http.ResponseWriter, r *http.Request) {
		ws, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer ws.CloseNow()
		ws.SetReadLimit(1 << 20)
		ws.Write(context.Background(), websocket.MessageText, []byte(`{"type":"ready"}`))
		serve(ws, d.gone)
	})
	return d
}

// TestTerminalClose: Close from another goroutine ends a Read waiting for
// output and a Write the daemon does not take, promptly with a daemon that
// answers the close, within about 5 s with one that stopped answering;
// both then return an error wrapping net.ErrClosed, and ExitCode does not
// claim the process exited. Before, Close waited for the blocked Write
// forever, and a Read after Close returned io.EOF with the process
// "exited". A daemon killed mid-Read is an error, not io.EOF; the exit
// frame then a normal close is io.EOF with the code.
func TestTerminalClose(t *testing.T) {
	for _, tc := range []struct {
		name  string
		serve func(ws *websocket.Conn, gone <-chan struct{})
		at    func(d *bubbleDaemon, term *Terminal) // from another goroutine
		want  func(t *testing.T, readErr, writeErr error, term *Terminal, took time.Duration)
	}{
		{"healthy", func(ws *websocket.Conn, _ <-chan struct{}) {
			for {
				if _, _, err := ws.Read(context.Background()); err != nil {
					return
				}
			}
		}, func(_ *bubbleDaemon, term *Terminal) { term.Close() }, wantClosed(0)},
		{"stopped", func(_ *websocket.Conn, gone <-chan struct{}) { <-gone }, func(_ *bubbleDaemon, term *Terminal) { term.Close() }, wantClosed(10 * time.Second)},
		{"killed", func(_ *websocket.Conn, gone <-chan struct{}) { <-gone }, func(d *bubbleDaemon, _ *Terminal) { d.net.kill() }, func(t *testing.T, readErr, _ error, term *Terminal, _ time.Duration) {
			if readErr == nil || readErr == io.EOF {
				t.Fatalf("Read after the daemon died: %v", readErr)
			}
			if _, exited := term.ExitCode(); exited {
				t.Fatal("ExitCode says the process exited")
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				d := terminalDaemon(t, tc.serve)
				term, err := d.client().ConnectTerminal(context.Background(), "p")
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { term.Close() })
				readErr, writeErr := make(chan error, 1), make(chan error, 1)
				go func() { _, err := term.Read(make([]byte, 10)); readErr <- err }()
				go func() { _, err := term.Write(make([]byte, 1<<20)); writeErr <- err }()
				synctest.Wait()
				start := time.Now()
				closed := make(chan struct{})
				go func() { tc.at(d, term); close(closed) }()
				within(t, closed, time.Hour, "Close")
				took := time.Since(start)
				rerr := within(t, readErr, time.Hour, "the blocked Read")
				var werr error
				if tc.name != "healthy" {
					werr = within(t, writeErr, time.Hour, "the blocked Write")
				}
				tc.want(t, rerr, werr, term, took)
				term.Close()
				d.noClientLeaks(t, "after Close")
				d.noLeaks(t)
			})
		})
	}
}

func wantClosed(bound time.Duration) func(t *testing.T, readErr, writeErr error, term *Terminal, took time.Duration) {
	return func(t *testing.T, readErr, writeErr error, term *Terminal, took time.Duration) {
		t.Helper()
		if took > bound {
			t.Fatalf("Close took %v, want at most %v", took, bound)
		}
		if !errors.Is(readErr, net.ErrClosed) {
			t.Fatalf("Read after Close: %v", readErr)
		}
		if writeErr != nil && !errors.Is(writeErr, net.ErrClosed) {
			t.Fatalf("Write after Close: %v", writeErr)
		}
		if _, exited := term.ExitCode(); exited {
			t.Fatal("ExitCode says the process exited after Close")
		}
		if _, err := term.Read(make([]byte, 1)); !errors.Is(err, net.ErrClosed) {
			t.Fatalf("a later Read: %v", err)
		}
		if _, err := term.Write([]byte("x")); !errors.Is(err, net.ErrClosed) {
			t.Fatalf("a later Write: %v", err)
		}
	}
}

// TestTerminalExit: output, then the exit frame and a normal close: Read
// returns the output, then io.EOF, and ExitCode the code (from another
// goroutine too).
func TestTerminalExit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := terminalDaemon(t, func(ws *websocket.Conn, _ <-chan struct{}) {
			ws.Write(context.Background(), websocket.MessageBinary, []byte("bye\r\n"))
			ws.Write(context.Background(), websocket.MessageText, []byte(`{"type":"exit","exitCode":3}`))
			ws.Close(websocket.StatusNormalClosure, "")
		})
		term, err := d.client().ConnectTerminal(context.Background(), "p")
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		wg.Go(func() {
			for { // ExitCode may be asked while Read runs
				if _, exited := term.ExitCode(); exited {
					return
				}
				time.Sleep(time.Millisecond)
			}
		})
		out, err := io.ReadAll(term)
		wg.Wait()
		if code, exited := term.ExitCode(); string(out) != "bye\r\n" || err != nil || !exited || code == nil || *code != 3 {
			t.Fatalf("read %q, %v; exit %v %v", out, err, code, exited)
		}
		term.Close()
		d.noClientLeaks(t, "after Close")
		d.noLeaks(t)
	})
}
