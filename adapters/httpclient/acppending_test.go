package httpclient

import (
	"strings"
	"testing"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
)

// queued is what the inbox holds now, one line each.
func queued(t *testing.T, in *inbox) []string {
	t.Helper()
	buf := make([]byte, 1<<16)
	n, _, err := in.take(buf)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(buf[:n]), "\n"), "\n")
}

func frame(t *testing.T, s string) domain.Frame {
	t.Helper()
	f, err := domain.ParseFrame([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// A POST's 200 body with its event id goes to the reader at once when the
// stream has passed every event before it, and its stream copy is then
// dropped; when an earlier event is still to come, it waits for the
// stream, so the agent's order holds either way. Without an event id it
// always waits.
func TestHeldAnswerDeliveredInStreamOrder(t *testing.T) {
	in := newInbox()
	tbl := newPendingTable(in)
	req1 := frame(t, `{"jsonrpc":"2.0","id":1,"method":"a"}`)
	resp1 := `{"jsonrpc":"2.0","id":1,"result":{}}`
	note := `{"jsonrpc":"2.0","method":"n"}`

	// Caught up: event 1 (a notification) read; the answer is event 2.
	tbl.add(req1)
	tbl.deliver(frame(t, note), []byte(note), 1)
	tbl.hold(req1, []byte(resp1), 2)
	if got := queued(t, in); len(got) != 2 || got[0] != note || got[1] != resp1 {
		t.Fatalf("caught up: %q", got)
	}
	tbl.deliver(frame(t, resp1), []byte(resp1), 2) // the stream's copy
	if got, _, _ := in.take(make([]byte, 64)); got != 0 {
		t.Fatal("the stream's copy was delivered too")
	}

	// Behind: the answer is event 5, the stream has read up to 2.
	req2 := frame(t, `{"jsonrpc":"2.0","id":2,"method":"a"}`)
	resp2 := `{"jsonrpc":"2.0","id":2,"result":{}}`
	tbl.add(req2)
	tbl.hold(req2, []byte(resp2), 5)
	if got, _, _ := in.take(make([]byte, 64)); got != 0 {
		t.Fatal("delivered before the events before it")
	}
	tbl.deliver(frame(t, note), []byte(note), 3)
	tbl.passed(4) // a line that is not JSON, dropped
	tbl.deliver(frame(t, resp2), []byte(resp2), 5)
	if got := queued(t, in); len(got) != 2 || got[0] != note || got[1] != resp2 {
		t.Fatalf("behind: %q", got)
	}

	// No event id (an older daemon): held for the stream, even caught up.
	req3 := frame(t, `{"jsonrpc":"2.0","id":3,"method":"a"}`)
	resp3 := `{"jsonrpc":"2.0","id":3,"result":{}}`
	tbl.add(req3)
	tbl.hold(req3, []byte(resp3), 0)
	if got, _, _ := in.take(make([]byte, 64)); got != 0 {
		t.Fatal("delivered without an event id")
	}
	tbl.deliver(frame(t, resp3), []byte(resp3), 6)
	if got := queued(t, in); len(got) != 1 || got[0] != resp3 {
		t.Fatalf("no event id: %q", got)
	}
}
