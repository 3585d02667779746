package e2e

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-agent-go/sandbox-agent/e2e/internal/harness"
	"github.com/sandbox-agent-go/sandbox-agent/e2e/internal/proc"
)

func wsURL(d *harness.Daemon, agent string) string {
	return "ws" + strings.TrimPrefix(d.URL, "http") + "/acp/" + agent
}

// wsConnect opens a WebSocket connection and initializes it.
func wsConnect(t *testing.T, d *harness.Daemon) (*wsClient, string) {
	t.Helper()
	return wsConnectTo(t, d, "mock")
}

func wsConnectTo(t *testing.T, d *harness.Daemon, agent string) (*wsClient, string) {
	t.Helper()
	c, err := dialWS(t, wsURL(d, agent))
	if err != nil {
		t.Fatal(err)
	}
	if c.Resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade: %d", c.Resp.StatusCode)
	}
	id := c.Resp.Header.Get("Acp-Connection-Id")
	if id == "" {
		t.Fatal("101 without Acp-Connection-Id")
	}
	c.send(t, stdInit)
	if got := c.readText(t, 10*time.Second); !strings.Contains(got, `"id":1`) {
		t.Fatalf("initialize: %s", got)
	}
	return c, id
}

func listed(t *testing.T, d *harness.Daemon, id string) bool {
	t.Helper()
	_, _, b := d.Do(http.MethodGet, "/v1/acp", nil)
	return strings.Contains(string(b), `"serverId":"`+id+`"`)
}

// waitUnlisted waits until id is no longer listed under /v1/acp.
func waitUnlisted(t *testing.T, d *harness.Daemon, id string, within time.Duration) {
	t.Helper()
	if !harness.WaitUntil(within, func() bool { return !listed(t, d, id) }) {
		t.Fatalf("connection %s still listed after %v", id, within)
	}
}

// TestACPStdWebSocketProtocol: the rules of the socket itself.
func TestACPStdWebSocketProtocol(t *testing.T) {
	t.Parallel()
	d := harness.Start(t, harness.Options{})
	t.Run("first message must be initialize", func(t *testing.T) {
		c, err := dialWS(t, wsURL(d, "mock"))
		if err != nil || c.Resp.StatusCode != 101 {
			t.Fatalf("upgrade: %v", err)
		}
		id := c.Resp.Header.Get("Acp-Connection-Id")
		if !listed(t, d, id) {
			t.Error("the connection exists from the upgrade on, listed under /v1/acp")
		}
		c.send(t, `{"jsonrpc":"2.0","id":1,"method":"session/new","params":{}}`)
		_, _, err = c.read(10 * time.Second)
		var ce *errClosed
		if !errors.As(err, &ce) || ce.code != 1002 {
			t.Fatalf("read: %v, want close 1002", err)
		}
		waitUnlisted(t, d, id, 10*time.Second)
	})
	t.Run("binary ignored, bad frames answered, session works", func(t *testing.T) {
		c, id := wsConnect(t, d)
		if err := c.writeFrame(0x2, []byte(`{"jsonrpc":"2.0","id":9,"method":"session/new","params":{"cwd":"/","mcpServers":[]}}`)); err != nil {
			t.Fatal(err)
		}
		c.send(t, `{not json`)
		if got := c.readText(t, 10*time.Second); !strings.Contains(got, `"code":-32700`) || !strings.Contains(got, `"id":null`) {
			t.Fatalf("parse error reply: %s", got)
		}
		c.send(t, `[{"jsonrpc":"2.0","id":3,"method":"x"}]`)
		if got := c.readText(t, 10*time.Second); !strings.Contains(got, `"code":-32600`) || !strings.Contains(got, "batches") {
			t.Fatalf("batch reply: %s", got)
		}
		c.send(t, stdInit)
		if got := c.readText(t, 10*time.Second); !strings.Contains(got, `"id":1`) || !strings.Contains(got, "not allowed") {
			t.Fatalf("second initialize reply: %s", got)
		}
		c.send(t, `{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/","mcpServers":[]}}`)
		got := c.readText(t, 10*time.Second)
		var res struct {
			ID     int                        `json:"id"`
			Result struct{ SessionID string } `json:"result"`
		}
		if json.Unmarshal([]byte(got), &res) != nil || res.ID != 2 || res.Result.SessionID == "" {
			t.Fatalf("session/new over WebSocket: %s (the binary frame must have been ignored)", got)
		}
		c.send(t, `{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":"`+res.Result.SessionID+`","prompt":[{"type":"text","text":"stream 300"}]}}`)
		for i := 1; i <= 300; i++ {
			if got := c.readText(t, 10*time.Second); !strings.Contains(got, `"mock: chunk `+strconv.Itoa(i)+`"`) {
				t.Fatalf("update %d: %s", i, got)
			}
		}
		if got := c.readText(t, 10*time.Second); !strings.Contains(got, `"stopReason":"end_turn"`) {
			t.Fatalf("end of turn: %s", got)
		}
		c.Close() // disconnect ends the connection
		waitUnlisted(t, d, id, 10*time.Second)
	})
}

// TestACPStdWebSocketDeletedThroughV1: deleting the connection through
// /v1/acp/{id} while its WebSocket is open closes the socket and stops the
// agent.
func TestACPStdWebSocketDeletedThroughV1(t *testing.T) {
	t.Parallel()
	d := harness.Start(t, harness.Options{})
	c, id := wsConnect(t, d)
	_, _, b := d.Do(http.MethodGet, "/v1/acp", nil)
	var list struct {
		Servers []struct {
			ServerID string `json:"serverId"`
			PID      int    `json:"pid"`
		} `json:"servers"`
	}
	if err := json.Unmarshal(b, &list); err != nil || len(list.Servers) != 1 || list.Servers[0].ServerID != id {
		t.Fatalf("listing: %s", b)
	}
	pid := list.Servers[0].PID
	if st, _, _ := d.Do(http.MethodDelete, "/v1/acp/"+id, nil); st != http.StatusNoContent {
		t.Fatalf("DELETE /v1/acp/%s: %d", id, st)
	}
	for {
		_, _, err := c.read(10 * time.Second)
		var ce *errClosed
		if errors.As(err, &ce) {
			if ce.code != 1000 {
				t.Errorf("close code %d (%s), want 1000", ce.code, ce.reason)
			}
			break
		}
		if err != nil {
			t.Fatalf("socket after DELETE: %v, want a close frame", err)
		}
	}
	if proc.Alive(pid) {
		t.Errorf("agent pid %d still alive after DELETE", pid)
	}
	if listed(t, d, id) {
		t.Error("connection still listed")
	}
}

// TestACPStdWebSocketSlowReader: a client that stops reading while its
// agent floods it costs the daemon no more than the replay budget (the
// event log is the only buffer), is cut, and slows nobody else down.
func TestACPStdWebSocketSlowReader(t *testing.T) {
	t.Parallel()
	d := harness.Start(t, harness.Options{Args: harness.WithTestAgent(t, "--replay-bytes", "1048576", "--stream-write-timeout", "3s")})
	pid := d.Cmd.Process.Pid
	rssBefore := statusKiB(t, pid, "VmRSS")

	// Another connection works normally meanwhile.
	fast, fastID := wsConnect(t, d)
	var res struct {
		Result struct{ SessionID string } `json:"result"`
	}
	fast.send(t, `{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/","mcpServers":[]}}`)
	if err := json.Unmarshal([]byte(fast.readText(t, 10*time.Second)), &res); err != nil {
		t.Fatal(err)
	}
	// The test agent floods: 3 000 000 notifications (~130 MB with the
	// log's per-event charge) that the client never reads.
	slow, slowID := wsConnectTo(t, d, "test")
	slow.send(t, `{"jsonrpc":"2.0","method":"burst","params":{"n":3000000}}`)

	fast.send(t, `{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":"`+res.Result.SessionID+`","prompt":[{"type":"text","text":"stream 2000"}]}}`)
	for i := 1; i <= 2000; i++ {
		if got := fast.readText(t, 20*time.Second); !strings.Contains(got, `"mock: chunk `+strconv.Itoa(i)+`"`) {
			t.Fatalf("healthy client, update %d: %s", i, got)
		}
	}

	// The stalled connection is cut and its instance ended.
	waitUnlisted(t, d, slowID, 60*time.Second)
	if !listed(t, d, fastID) {
		t.Error("the healthy connection was ended too")
	}
	peak := statusKiB(t, pid, "VmHWM")
	t.Logf("daemon RSS before %d KiB, peak %d KiB", rssBefore, peak)
	if grew := peak - rssBefore; grew > 48<<10 {
		t.Errorf("daemon peak RSS grew by %d KiB with a 1 MiB replay budget; the stalled reader is buffered somewhere", grew)
	}
	// What the stalled client does read ends with the close frame.
	for {
		_, _, err := slow.read(10 * time.Second)
		var ce *errClosed
		if errors.As(err, &ce) {
			if ce.code != 1008 || !strings.Contains(ce.reason, "dropped") && !strings.Contains(ce.reason, "timed out") {
				t.Errorf("close %d %q, want 1008 for a reader too far behind", ce.code, ce.reason)
			}
			t.Logf("stalled client closed: %d %s", ce.code, ce.reason)
			break
		}
		if err != nil {
			t.Logf("stalled client: %v (connection dropped before the close frame)", err)
			break
		}
	}
}

// TestACPStdWebSocketStalledWriter: a client that stops reading, with the
// agent well within the replay budget, is cut once one write has made no
// progress for --stream-write-timeout.
func TestACPStdWebSocketStalledWriter(t *testing.T) {
	t.Parallel()
	d := harness.Start(t, harness.Options{Args: harness.WithTestAgent(t, "--replay-bytes", "134217728", "--stream-write-timeout", "2s")})
	c, id := wsConnectTo(t, d, "test")
	big := `{"jsonrpc":"2.0","method":"echo","params":{"pad":"` + strings.Repeat("x", 1<<20) + `"}}`
	for i := 0; i < 24; i++ { // 24 MiB echoed back: more than the socket buffers hold
		if err := c.writeFrame(0x1, []byte(big)); err != nil {
			if i < 4 {
				t.Fatalf("send %d: %v", i, err)
			}
			break // already cut: the daemon stopped reading this socket too
		}
	}
	start := time.Now()
	waitUnlisted(t, d, id, 30*time.Second)
	t.Logf("cut %v after the last send", time.Since(start).Round(time.Millisecond))
	// The close is logged as the connection ends, which may come just
	// after the instance is unlisted.
	waitLog(t, d, "write timed out")
}
