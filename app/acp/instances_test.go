package acp

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
	"github.com/sandbox-agent-go/sandbox-agent/ports/porttest"
)

// acpRig is a real Instances on a fake runner whose agents are played by
// rpcAgent: "echo" requests are answered at once with their params, "hold"
// requests and "session/prompt" wait for the test (on held), and every line
// the agent reads is recorded.
type acpRig struct {
	s      *Instances
	runner *porttest.FakeRunner
	held   chan domain.Frame // requests waiting for an answer from the test
	// stubborn agents keep running when stdin ends (they must be killed).
	stubborn bool

	mu    sync.Mutex
	lines map[*porttest.FakeProcess][]string // stdin lines per process
}

func newACPRig(t *testing.T, opts Options) *acpRig {
	t.Helper()
	r := &acpRig{held: make(chan domain.Frame, 1024), lines: map[*porttest.FakeProcess][]string{}}
	r.runner = &porttest.FakeRunner{Agent: r.agent}
	r.s = NewInstances(opts, r.runner, porttest.LaunchAny)
	t.Cleanup(func() { r.s.Close(context.Background()) }) //nolint:errcheck // idempotent
	return r
}

func (r *acpRig) agent(_ domain.LaunchSpec, p *porttest.FakeProcess) {
	in := bufio.NewReader(p.AgentStdin)
	for {
		line, err := in.ReadBytes('\n')
		if len(line) > 0 {
			r.mu.Lock()
			r.lines[p] = append(r.lines[p], string(line))
			r.mu.Unlock()
			if f, perr := domain.ParseFrame(bytes.TrimSuffix(line, []byte("\n"))); perr == nil && f.Kind == domain.FrameRequest {
				switch f.Method {
				case "echo":
					say(p, fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"echo":%s}}`, f.ID, paramsOf(f)))
				case "hold", "session/prompt":
					r.held <- f
				}
			}
		}
		if err != nil {
			if !r.stubborn {
				p.Exit(porttest.ExitCode(0))
			}
			return
		}
	}
}

// paramsOf returns the raw params of f, or null.
func paramsOf(f domain.Frame) string {
	i := bytes.Index(f.Data, []byte(`"params":`))
	if i < 0 {
		return "null"
	}
	rest := f.Data[i+len(`"params":`):]
	return string(rest[:len(rest)-1]) // params is the last key in the tests' frames
}

// say writes one line to the agent's stdout; it returns once the instance
// has read it.
func say(p *porttest.FakeProcess, line string) {
	_, _ = io.WriteString(p.AgentStdout, line+"\n")
}

func (r *acpRig) proc(t *testing.T, i int) *porttest.FakeProcess {
	t.Helper()
	ps := r.runner.Processes()
	if len(ps) <= i {
		t.Fatalf("%d processes started, want more than %d", len(ps), i)
	}
	return ps[i]
}

func (r *acpRig) stdinLines(p *porttest.FakeProcess) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.lines[p]...)
}

func frame(t *testing.T, s string) domain.Frame {
	t.Helper()
	f, err := domain.ParseFrame([]byte(s))
	if err != nil {
		t.Fatalf("ParseFrame(%s): %v", s, err)
	}
	return f
}

func req(id any, method string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%v,"method":%q,"params":{"id":%q}}`, id, method, fmt.Sprint(id))
}

func (r *acpRig) post(t *testing.T, ctx context.Context, id, agent, body string) ([]byte, error) {
	t.Helper()
	return r.s.Post(ctx, PostRequest{ServerID: id, Agent: agent, HasAgent: agent != "", Frame: frame(t, body)})
}

// mustPost posts and fails the test on an error.
func (r *acpRig) mustPost(t *testing.T, id, agent, body string) []byte {
	t.Helper()
	resp, err := r.post(t, context.Background(), id, agent, body)
	if err != nil {
		t.Fatalf("Post %s: %v", body, err)
	}
	return resp
}

// nextHeld returns the next request the agent holds.
func (r *acpRig) nextHeld(t *testing.T) domain.Frame {
	t.Helper()
	select {
	case f := <-r.held:
		return f
	case <-time.After(20 * time.Second):
		t.Fatal("the agent never received the held request")
		return domain.Frame{}
	}
}

// collect reads events from a new cursor on id until one satisfies stop.
func collect(t *testing.T, s *Instances, id string, stop func(Event) bool) []Event {
	t.Helper()
	c, err := s.Subscribe(id, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var all []Event
	for {
		evs, gap, err := c.Read(ctx, nil, 100, time.Minute)
		if err != nil || gap != nil {
			t.Fatalf("read: %+v %v (so far %s)", gap, err, dataOf(all))
		}
		for _, e := range evs {
			all = append(all, e)
			if stop(e) {
				return all
			}
		}
	}
}

func dataOf(evs []Event) string {
	var b strings.Builder
	for _, e := range evs {
		fmt.Fprintf(&b, "%d:%s\n", e.Seq, e.Data)
	}
	return b.String()
}

func contains(sub string) func(Event) bool {
	return func(e Event) bool { return bytes.Contains(e.Data, []byte(sub)) }
}

func wantKind(t *testing.T, err error, k domain.Kind, msg string) *domain.Error {
	t.Helper()
	e, ok := domain.AsError(err)
	if !ok || e.Kind != k {
		t.Fatalf("err = %v, want kind %s", err, k)
	}
	// msg is the message, or for errors about an agent or id, that subject.
	got := e.Msg
	got = cmp.Or(got, e.Agent+e.SessionID)
	if msg != "" && got != msg {
		t.Errorf("msg = %q, want %q", got, msg)
	}
	return e
}

const note = `{"jsonrpc":"2.0","method":"session/cancel","params":{}}`

func TestBootstrapErrors(t *testing.T) {
	notInstalled := &domain.Error{Kind: domain.KindAgentNotInstalled, Msg: "claude", Agent: "claude"}
	spawnErr := errors.New("exec: \"claude-acp\": executable file not found in $PATH")
	outOfFDs := domain.Exhausted(domain.ResourceFileDescriptors, 64, "cannot start the agent process: the daemon is out of file descriptors")
	tests := []struct {
		name      string
		req       PostRequest
		launchErr error
		startErr  error
		kind      domain.Kind
		msg       string
		same      error // the error must wrap this one
	}{
		{name: "first POST without agent", req: PostRequest{ServerID: "s"}, kind: domain.KindInvalidRequest,
			msg: "missing required 'agent' query parameter for first POST to /v1/acp/s"},
		{name: "empty agent", req: PostRequest{ServerID: "s", HasAgent: true}, kind: domain.KindUnsupportedAgent},
		{name: "server id with a slash", req: PostRequest{ServerID: "a/b", Agent: "mock", HasAgent: true}, kind: domain.KindInvalidRequest,
			msg: "server id must be 1 to 512 bytes of valid UTF-8 with no '/' or NUL"},
		{name: "server id too long", req: PostRequest{ServerID: strings.Repeat("x", 513), Agent: "mock", HasAgent: true}, kind: domain.KindInvalidRequest},
		{name: "agent id with a slash", req: PostRequest{ServerID: "s", Agent: "../x", HasAgent: true}, kind: domain.KindUnsupportedAgent, msg: "../x"},
		{name: "launcher error passes through", req: PostRequest{ServerID: "s", Agent: "claude", HasAgent: true},
			launchErr: notInstalled, kind: domain.KindAgentNotInstalled, msg: "claude", same: notInstalled},
		{name: "spawn failure", req: PostRequest{ServerID: "s", Agent: "claude", HasAgent: true}, startErr: spawnErr,
			kind: domain.KindStreamError, msg: "failed to start agent process: " + spawnErr.Error(), same: spawnErr},
		// The runner says which resource ran out: a 503 the client may
		// retry, not a 502.
		{name: "spawn out of descriptors", req: PostRequest{ServerID: "s", Agent: "claude", HasAgent: true}, startErr: outOfFDs,
			kind: domain.KindOverloaded, msg: outOfFDs.Msg, same: outOfFDs},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			launched := 0
			runner := &porttest.FakeRunner{StartErr: func(domain.LaunchSpec) error { return tt.startErr }}
			s := NewInstances(Options{}, runner, porttest.LaunchFunc(func(ctx context.Context, agent string) (domain.LaunchSpec, error) {
				launched++
				if tt.launchErr != nil {
					return domain.LaunchSpec{}, tt.launchErr
				}
				return porttest.LaunchAny(ctx, agent)
			}))
			defer s.Close(context.Background()) //nolint:errcheck // test cleanup
			tt.req.Frame = frame(t, note)
			_, err := s.Post(context.Background(), tt.req)
			e := wantKind(t, err, tt.kind, tt.msg)
			if tt.same != nil && !errors.Is(err, tt.same) {
				t.Errorf("err %v does not wrap %v", err, tt.same)
			}
			if tt.kind == domain.KindUnsupportedAgent && e.Agent != tt.req.Agent {
				t.Errorf("agent extension %q", e.Agent)
			}
			if tt.launchErr == nil && tt.startErr == nil && launched != 0 {
				t.Errorf("launcher called for a request rejected up front")
			}
			// Nothing was registered: the id is still unknown.
			if l := s.List(); len(l) != 0 {
				t.Errorf("List = %+v", l)
			}
			if _, err := s.Subscribe("s", nil); !domain.IsKind(err, domain.KindSessionNotFound) {
				t.Errorf("Subscribe: %v", err)
			}
			if n := len(runner.Processes()); n != 0 {
				t.Errorf("%d processes started", n)
			}
		})
	}
}

// A failed bootstrap leaves the id free: the next POST tries again.
func TestBootstrapRetryAfterSpawnFailure(t *testing.T) {
	fail := true
	runner := &porttest.FakeRunner{StartErr: func(domain.LaunchSpec) error {
		if fail {
			return errors.New("no such file")
		}
		return nil
	}}
	s := NewInstances(Options{}, runner, porttest.LaunchAny)
	defer s.Close(context.Background()) //nolint:errcheck // test cleanup
	req := PostRequest{ServerID: "s", Agent: "a", HasAgent: true, Frame: frame(t, note)}
	if _, err := s.Post(context.Background(), req); !domain.IsKind(err, domain.KindStreamError) {
		t.Fatalf("first: %v", err)
	}
	fail = false
	if _, err := s.Post(context.Background(), req); err != nil {
		t.Fatalf("retry: %v", err)
	}
	if l := s.List(); len(l) != 1 || l[0].ServerID != "s" || l[0].Agent != "a" {
		t.Errorf("List = %+v", l)
	}
}

func TestBootstrapConflict(t *testing.T) {
	r := newACPRig(t, Options{})
	r.mustPost(t, "s", "a", note)
	_, err := r.post(t, context.Background(), "s", "b", note)
	msg := "server 's' already exists for agent 'a'; requested 'b'"
	wantKind(t, err, domain.KindConflict, msg)
	// The same agent, or none, reuses the instance.
	r.mustPost(t, "s", "a", note)
	r.mustPost(t, "s", "", note)
	// Another id may run the same agent, in its own process.
	r.mustPost(t, "t", "a", note)
	if n := len(r.runner.Processes()); n != 2 {
		t.Errorf("%d processes, want 2", n)
	}
}

// Concurrent first POSTs to one id create exactly one instance; every one
// of them is forwarded to it.
func TestConcurrentBootstrap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		launches := 0
		r := &acpRig{held: make(chan domain.Frame, 16), lines: map[*porttest.FakeProcess][]string{}}
		r.runner = &porttest.FakeRunner{Agent: r.agent}
		r.s = NewInstances(Options{}, r.runner, porttest.LaunchFunc(func(ctx context.Context, agent string) (domain.LaunchSpec, error) {
			launches++
			<-release // a slow install
			return porttest.LaunchAny(ctx, agent)
		}))
		defer r.s.Close(context.Background()) //nolint:errcheck // test cleanup

		const n = 16
		errs := make(chan error, n)
		for i := range n {
			go func() {
				body := fmt.Sprintf(`{"jsonrpc":"2.0","method":"n","params":{"i":%d}}`, i)
				_, err := r.s.Post(context.Background(), PostRequest{ServerID: "s", Agent: "a", HasAgent: true, Frame: frame(t, body)})
				errs <- err
			}()
		}
		synctest.Wait() // every POST is waiting for the one bootstrap
		if launches != 1 {
			t.Fatalf("%d launches while bootstrapping", launches)
		}
		close(release)
		for range n {
			if err := <-errs; err != nil {
				t.Errorf("Post: %v", err)
			}
		}
		if got := len(r.runner.Processes()); got != 1 {
			t.Fatalf("%d processes started", got)
		}
		synctest.Wait() // the agent has read every line
		if got := len(r.stdinLines(r.proc(t, 0))); got != n {
			t.Errorf("agent read %d lines, want %d", got, n)
		}
	})
}

func TestPostForwardsBytes(t *testing.T) {
	r := newACPRig(t, Options{})
	bodies := []string{
		note,
		`{}`,
		`{"jsonrpc":"2.0","id":"agent-req-1","result":{"outcome":{"outcome":"selected"}}}`,
		` {"method" : "x", "params":{"text":"é \u00e9 \n"}} `,
	}
	for _, b := range bodies {
		if resp, err := r.post(t, context.Background(), "s", "a", b); err != nil || resp != nil {
			t.Fatalf("Post %s = %q, %v; want nil, nil (202)", b, resp, err)
		}
	}
	// Multi-line bodies are compacted to one line; nothing else changes.
	multi := "{\n  \"jsonrpc\": \"2.0\",\n  \"method\": \"m\"\n}"
	r.mustPost(t, "s", "", multi)
	r.mustPost(t, "s", "", req(1, "echo")) // a sync round trip: everything before it was read
	want := append(append([]string(nil), bodies...), `{"jsonrpc":"2.0","method":"m"}`, req(1, "echo"))
	got := r.stdinLines(r.proc(t, 0))
	if len(got) != len(want) {
		t.Fatalf("agent read %d lines: %q", len(got), got)
	}
	for i := range want {
		if got[i] != want[i]+"\n" {
			t.Errorf("line %d = %q, want %q", i, got[i], want[i]+"\n")
		}
	}
}

func TestSyncRequestExactBytes(t *testing.T) {
	r := newACPRig(t, Options{})
	ctx := context.Background()
	r.mustPost(t, "s", "a", note)
	p := r.proc(t, 0)
	answer := ` {"id": 1 ,"result":{"x":"é\u00e9","n":1.0e0},  "jsonrpc":"2.0"}`
	done := make(chan []byte, 1)
	go func() {
		resp, err := r.post(t, ctx, "s", "", req(1, "hold"))
		if err != nil {
			t.Errorf("Post: %v", err)
		}
		done <- resp
	}()
	r.nextHeld(t)
	say(p, `{"jsonrpc":"2.0","method":"session/update","params":{}}`)
	say(p, answer)
	if got, want := string(<-done), strings.TrimSpace(answer); got != want {
		t.Errorf("response %q, want %q", got, want)
	}
	// The response is on the stream too, after the update, in stdout order.
	evs := collect(t, r.s, "s", contains(`"result"`))
	if len(evs) != 2 || evs[0].Seq != 1 || evs[1].Seq != 2 || string(evs[1].Data) != strings.TrimSpace(answer) {
		t.Errorf("stream:\n%s", dataOf(evs))
	}
	if got := string(r.mustPost(t, "s", "", req(`"x"`, "echo"))); got != `{"jsonrpc":"2.0","id":"x","result":{"echo":{"id":"\"x\""}}}` {
		t.Errorf("echo %s", got)
	}
}

func TestAsyncRequest(t *testing.T) {
	r := newACPRig(t, Options{AsyncMethods: map[string]bool{"session/prompt": true}})
	resp, err := r.post(t, context.Background(), "s", "a", req(9, "session/prompt"))
	if err != nil || resp != nil {
		t.Fatalf("Post = %q, %v; want 202", resp, err)
	}
	held := r.nextHeld(t)
	if l := r.s.List(); l[0].PendingRequests != 1 {
		t.Errorf("pending %d", l[0].PendingRequests)
	}
	// Async requests are in flight too: the id is taken until answered.
	_, err = r.post(t, context.Background(), "s", "", req(9, "echo"))
	wantKind(t, err, domain.KindConflict, "")
	answer := fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"stopReason":"end_turn"}}`, held.ID)
	say(r.proc(t, 0), answer)
	evs := collect(t, r.s, "s", contains("end_turn"))
	if got := string(evs[len(evs)-1].Data); got != answer {
		t.Errorf("stream got %s", got)
	}
	if l := r.s.List(); l[0].PendingRequests != 0 {
		t.Errorf("pending after the answer %d", l[0].PendingRequests)
	}
}

// Requests an agent never answers cannot pile up: past MaxPendingRequests
// waiting on one instance, or MaxPendingIDBytes of their ids, a request is
// refused with 429 and never reaches the agent; an answer frees a place.
// An asynchronous request keeps a copy of its id, not the POST's body.
func TestPendingRequestsBounded(t *testing.T) {
	r := newACPRig(t, Options{AsyncMethods: map[string]bool{"session/prompt": true}})
	r.mustPost(t, "s", "a", note)
	for i := range MaxPendingRequests {
		if _, err := r.post(t, context.Background(), "s", "", req(i, "session/prompt")); err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
	}
	_, err := r.post(t, context.Background(), "s", "", req(MaxPendingRequests, "session/prompt"))
	if e := wantKind(t, err, domain.KindTooManyRequests, ""); e.Limit != MaxPendingRequests {
		t.Errorf("limit %d", e.Limit)
	}
	// A synchronous request is refused the same, without waiting.
	_, err = r.post(t, context.Background(), "s", "", req(`"sync"`, "echo"))
	wantKind(t, err, domain.KindTooManyRequests, "")
	if l := r.s.List(); l[0].PendingRequests != MaxPendingRequests {
		t.Errorf("pending %d", l[0].PendingRequests)
	}
	held := r.nextHeld(t)
	say(r.proc(t, 0), fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{}}`, held.ID))
	collect(t, r.s, "s", func(e Event) bool { return strings.Contains(string(e.Data), `"result":{}`) })
	if _, err := r.post(t, context.Background(), "s", "", req(MaxPendingRequests, "session/prompt")); err != nil {
		t.Fatalf("after an answer: %v", err)
	}
	// The agent records a line before it holds the request: once it has
	// held every one left (the 1023 and the one accepted now), it has
	// recorded every line it was sent.
	for range MaxPendingRequests {
		r.nextHeld(t)
	}
	lines := r.stdinLines(r.proc(t, 0))
	var again, sync int
	for _, l := range lines {
		if strings.Contains(l, fmt.Sprintf(`"id":%d,`, MaxPendingRequests)) {
			again++
		}
		if strings.Contains(l, `"id":"sync"`) {
			sync++
		}
	}
	if len(lines) != 2+MaxPendingRequests || again != 1 || sync != 0 {
		t.Errorf("the agent read %d lines (want %d), request %d %d times (want once: the refused try never reached it), the refused synchronous one %d times",
			len(lines), 2+MaxPendingRequests, MaxPendingRequests, again, sync)
	}

	// The ids' bytes: a few long ids fill the table as well; an id longer
	// than the whole allowance is a bad request.
	r2 := newACPRig(t, Options{AsyncMethods: map[string]bool{"session/prompt": true}})
	r2.mustPost(t, "t", "a", note)
	long := func(i int) string { return fmt.Sprintf(`"%d-%s"`, i, strings.Repeat("x", MaxPendingIDBytes/4)) }
	for i := range 3 {
		if _, err := r2.post(t, context.Background(), "t", "", req(long(i), "session/prompt")); err != nil {
			t.Fatalf("long id %d: %v", i, err)
		}
	}
	_, err = r2.post(t, context.Background(), "t", "", req(long(3), "session/prompt"))
	wantKind(t, err, domain.KindTooManyRequests, "")
	_, err = r2.post(t, context.Background(), "t", "", req(`"`+strings.Repeat("y", MaxPendingIDBytes+1)+`"`, "echo"))
	wantKind(t, err, domain.KindInvalidRequest, "")

	// The copy: an async request's id does not alias the body it came in.
	body := []byte(req(`"alias"`, "session/prompt"))
	f, _ := domain.ParseFrame(body)
	if _, err := r2.s.Post(context.Background(), PostRequest{ServerID: "t", Frame: f}); err != nil {
		t.Fatal(err)
	}
	clear(body)
	r2.proc(t, 0).Exit(porttest.ExitCode(1))
	collect(t, r2.s, "t", func(e Event) bool { return strings.Contains(string(e.Data), `"id":"alias"`) })
}

func TestDuplicateInFlight(t *testing.T) {
	r := newACPRig(t, Options{})
	r.mustPost(t, "s", "a", note)
	first := make(chan []byte, 1)
	go func() {
		resp, err := r.post(t, context.Background(), "s", "", req(5, "hold"))
		if err != nil {
			t.Errorf("first: %v", err)
		}
		first <- resp
	}()
	r.nextHeld(t)
	for _, id := range []string{`5`, `5.0`, `5e0`} {
		_, err := r.post(t, context.Background(), "s", "", req(id, "echo"))
		wantKind(t, err, domain.KindConflict, "request id "+id+" is already in flight on server 's'")
	}
	// "5" is another id.
	if got := string(r.mustPost(t, "s", "", req(`"5"`, "echo"))); !strings.Contains(got, `"id":"5"`) {
		t.Errorf("echo of \"5\": %s", got)
	}
	say(r.proc(t, 0), `{"jsonrpc":"2.0","id":5,"result":"first"}`)
	if got := string(<-first); got != `{"jsonrpc":"2.0","id":5,"result":"first"}` {
		t.Errorf("first got %s", got)
	}
	// Answered: the id is free again.
	r.mustPost(t, "s", "", req(5, "echo"))
}

// 7 and "7" wait side by side and each gets its own answer, whatever order
// the agent answers in.
func TestNumberAndStringIDs(t *testing.T) {
	r := newACPRig(t, Options{})
	r.mustPost(t, "s", "a", note)
	type res struct {
		id   string
		resp string
	}
	got := make(chan res, 2)
	for _, id := range []string{`7`, `"7"`} {
		go func() {
			resp, err := r.post(t, context.Background(), "s", "", req(id, "hold"))
			if err != nil {
				t.Errorf("%s: %v", id, err)
			}
			got <- res{id, string(resp)}
		}()
	}
	r.nextHeld(t)
	r.nextHeld(t)
	p := r.proc(t, 0)
	say(p, `{"jsonrpc":"2.0","id":"7","result":"string"}`)
	say(p, `{"jsonrpc":"2.0","id":7.0,"result":"number"}`)
	for range 2 {
		g := <-got
		want := map[string]string{`7`: `{"jsonrpc":"2.0","id":7.0,"result":"number"}`, `"7"`: `{"jsonrpc":"2.0","id":"7","result":"string"}`}[g.id]
		if g.resp != want {
			t.Errorf("id %s got %s, want %s", g.id, g.resp, want)
		}
	}
}

func TestRequestTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newACPRig(t, Options{RequestTimeout: 30 * time.Second})
		r.mustPost(t, "s", "a", note)
		start := time.Now()
		_, err := r.post(t, context.Background(), "s", "", req(1, "hold"))
		wantKind(t, err, domain.KindTimeout, "timed out waiting for agent response")
		if d := time.Since(start); d != 30*time.Second {
			t.Errorf("timed out after %v", d)
		}
		if l := r.s.List(); l[0].PendingRequests != 0 {
			t.Errorf("pending after timeout: %d", l[0].PendingRequests)
		}
		// The late answer is still streamed, never dropped.
		held := <-r.held
		late := fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":"late"}`, held.ID)
		say(r.proc(t, 0), late)
		c, _ := r.s.Subscribe("s", nil)
		defer c.Close()
		evs, _, err := c.Read(context.Background(), nil, 10, time.Second)
		if err != nil || len(evs) != 1 || string(evs[0].Data) != late {
			t.Errorf("stream: %s %v", dataOf(evs), err)
		}
		// The id is free for a new request.
		r.mustPost(t, "s", "", req(1, "echo"))
	})
}

// Without a timeout a request waits as long as it takes.
func TestNoRequestTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newACPRig(t, Options{RequestTimeout: 0})
		r.mustPost(t, "s", "a", note)
		done := make(chan error, 1)
		go func() {
			_, err := r.post(t, context.Background(), "s", "", req(1, "hold"))
			done <- err
		}()
		held := <-r.held
		time.Sleep(24 * time.Hour)
		synctest.Wait()
		select {
		case err := <-done:
			t.Fatalf("returned after a day: %v", err)
		default:
		}
		say(r.proc(t, 0), fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":1}`, held.ID))
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	})
}

func TestPostContextCancel(t *testing.T) {
	r := newACPRig(t, Options{})
	r.mustPost(t, "s", "a", note)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := r.post(t, ctx, "s", "", req(3, "hold"))
		done <- err
	}()
	held := r.nextHeld(t)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if l := r.s.List(); l[0].PendingRequests != 0 {
		t.Errorf("pending after cancel: %d", l[0].PendingRequests)
	}
	// The id is free, and the abandoned answer only goes to the stream.
	r.mustPost(t, "s", "", req(3, "echo"))
	late := fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":"late"}`, held.ID)
	say(r.proc(t, 0), late)
	evs := collect(t, r.s, "s", contains(`"late"`))
	if string(evs[len(evs)-1].Data) != late {
		t.Errorf("stream:\n%s", dataOf(evs))
	}
}

func TestAgentExit(t *testing.T) {
	tests := []struct {
		name   string
		status func() domain.ExitStatus
		code   any
		exited string
	}{
		{"exit code", func() domain.ExitStatus { return porttest.ExitCode(3) }, 3,
			`{"jsonrpc":"2.0","method":"_adapter/agent_exited","params":{"success":false,"code":3}}`},
		{"signal", func() domain.ExitStatus { return porttest.Signalled("killed") }, nil,
			`{"jsonrpc":"2.0","method":"_adapter/agent_exited","params":{"success":false,"code":null}}`},
		{"success", func() domain.ExitStatus { return porttest.ExitCode(0) }, 0,
			`{"jsonrpc":"2.0","method":"_adapter/agent_exited","params":{"success":true,"code":0}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newACPRig(t, Options{AsyncMethods: map[string]bool{"session/prompt": true}})
			r.mustPost(t, "s", "a", note)
			p := r.proc(t, 0)
			syncErr := make(chan error, 1)
			go func() {
				_, err := r.post(t, context.Background(), "s", "", req(1, "hold"))
				syncErr <- err
			}()
			r.nextHeld(t)
			r.mustPost(t, "s", "", req(`"p"`, "session/prompt"))
			r.nextHeld(t)
			for i := 1; i <= 20; i++ {
				fmt.Fprintf(p.AgentStderr, "stderr line %d\n", i)
			}
			p.Exit(tt.status())

			wantDetails := func(err error) {
				t.Helper()
				e := wantKind(t, err, domain.KindAgentProcessExited, "a")
				var tail []string
				for i := 5; i <= 20; i++ {
					tail = append(tail, fmt.Sprintf("stderr line %d", i))
				}
				if e.Agent != "a" || fmt.Sprint(codeOrNil(e.ExitCode)) != fmt.Sprint(tt.code) || e.Stderr != strings.Join(tail, "\n") {
					t.Errorf("error %+v", e)
				}
			}
			wantDetails(<-syncErr)
			// The async request gets a JSON-RPC error on the stream, before
			// the exit notice.
			evs := collect(t, r.s, "s", contains("agent_exited"))
			if len(evs) != 2 || string(evs[0].Data) != string(domain.AgentStoppedResponse([]byte(`"p"`))) || string(evs[1].Data) != tt.exited {
				t.Errorf("stream:\n%s", dataOf(evs))
			}
			// Later posts fail the same way; the instance stays listed.
			_, err := r.post(t, context.Background(), "s", "", note)
			wantDetails(err)
			l := r.s.List()
			if len(l) != 1 || l[0].State != "exited" || l[0].PendingRequests != 0 || fmt.Sprint(codeOrNil(l[0].ExitCode)) != fmt.Sprint(tt.code) {
				t.Errorf("List = %+v", l)
			}
			if _, running := r.s.RunningSince()["a"]; running {
				t.Errorf("exited agent reported running")
			}
			// Streams do not end when the agent exits.
			c, err := r.s.Subscribe("s", nil)
			if err != nil {
				t.Fatal(err)
			}
			c.Close()
		})
	}
}

func TestStdoutFraming(t *testing.T) {
	r := newACPRig(t, Options{})
	r.mustPost(t, "s", "a", note)
	p := r.proc(t, 0)
	long := `{"big":"` + strings.Repeat("x", 200<<10) + `"}` // longer than the read buffer
	for _, line := range []string{
		"hello world",
		"", "\r", "  \t ",
		"  {\"a\":1}  \r",
		"[1,2]",
		long,
		`{"end":true}`,
	} {
		say(p, line)
	}
	evs := collect(t, r.s, "s", contains(`"end"`))
	want := []string{
		string(domain.InvalidStdoutMessage("agent wrote a line that is not JSON", []byte("hello world"))),
		`{"a":1}`,
		`[1,2]`,
		long,
		`{"end":true}`,
	}
	if len(evs) != len(want) {
		t.Fatalf("stream:\n%.300s", dataOf(evs))
	}
	for i, e := range evs {
		if e.Seq != uint64(i+1) || string(e.Data) != want[i] {
			t.Errorf("event %d = %d:%.80s, want %.80s", i, e.Seq, e.Data, want[i])
		}
	}
}

// A frame over the limit ends the instance, killing an agent that ignores
// SIGTERM after the grace period; a frame at the limit is fine.
func TestFrameLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const limit = 100
		r := newACPRig(t, Options{MaxFrameBytes: limit, StopGrace: 3 * time.Second})
		r.mustPost(t, "s", "a", note)
		p := r.proc(t, 0)
		p.OnTerm = func(*porttest.FakeProcess) {} // ignores SIGTERM
		r.stubborn = true
		atLimit := `{"n":"` + strings.Repeat("x", limit-8) + `"}`
		say(p, atLimit)
		go say(p, `{"n":"`+strings.Repeat("x", limit-7)+`"}`) // one byte over
		<-p.Stopped()
		start := time.Now()
		<-p.Done()
		if d := time.Since(start); d != 3*time.Second {
			t.Errorf("killed after %v, want the 3s grace", d)
		}
		synctest.Wait()
		c, _ := r.s.Subscribe("s", nil)
		defer c.Close()
		evs, _, _ := c.Read(context.Background(), nil, 10, time.Second)
		if len(evs) != 2 || string(evs[0].Data) != atLimit || string(evs[1].Data) != string(domain.AgentExitedMessage(false, nil)) {
			t.Errorf("stream:\n%.300s", dataOf(evs))
		}
		if l := r.s.List(); l[0].State != "exited" {
			t.Errorf("state %s", l[0].State)
		}
	})
}

func TestDelete(t *testing.T) {
	r := newACPRig(t, Options{})
	r.mustPost(t, "s", "a", note)
	p := r.proc(t, 0)
	c, err := r.s.Subscribe("s", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	pending := make(chan error, 1)
	go func() {
		_, err := r.post(t, context.Background(), "s", "", req(1, "hold"))
		pending <- err
	}()
	r.nextHeld(t)

	r.s.Delete(context.Background(), "s")
	select {
	case <-p.Done():
	default:
		t.Fatal("Delete returned before the agent was gone")
	}
	wantKind(t, <-pending, domain.KindAgentProcessExited, "a")
	if _, _, err := c.Read(context.Background(), nil, 10, time.Minute); !errors.Is(err, ErrStreamClosed) {
		t.Errorf("reader after delete: %v", err)
	}
	if l := r.s.List(); len(l) != 0 {
		t.Errorf("List = %+v", l)
	}
	if _, err := r.s.Subscribe("s", nil); !domain.IsKind(err, domain.KindSessionNotFound) {
		t.Errorf("Subscribe: %v", err)
	}
	if _, err := r.s.Stderr("s"); !domain.IsKind(err, domain.KindSessionNotFound) {
		t.Errorf("Stderr: %v", err)
	}
	r.s.Delete(context.Background(), "s")     // again
	r.s.Delete(context.Background(), "never") // never existed
	// The id is free: without an agent it is unknown, with one it starts
	// a new process, even for another agent.
	_, err = r.post(t, context.Background(), "s", "", note)
	wantKind(t, err, domain.KindInvalidRequest, "")
	r.mustPost(t, "s", "b", note)
	if n := len(r.runner.Processes()); n != 2 {
		t.Errorf("%d processes", n)
	}
}

// A DELETE while an asynchronous request (a prompt) is pending: a reader
// of the stream gets the request's JSON-RPC error and the exit notice
// before its stream ends, so a client that answers a prompt only from the
// stream (acp-http-client) sees it fail instead of waiting forever.
func TestDeleteDrainsExitToReaders(t *testing.T) {
	r := newACPRig(t, Options{AsyncMethods: map[string]bool{"session/prompt": true}})
	r.mustPost(t, "s", "a", note)
	c, err := r.s.Subscribe("s", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	got := make(chan []string, 1)
	go func() {
		var all []string
		for {
			evs, _, err := c.Read(context.Background(), nil, 100, time.Minute)
			for _, e := range evs {
				all = append(all, string(e.Data))
				c.Ack(e.Seq)
			}
			if err != nil {
				got <- append(all, err.Error())
				return
			}
		}
	}()
	r.mustPost(t, "s", "", req(`"p"`, "session/prompt"))
	r.nextHeld(t)
	r.s.Delete(context.Background(), "s")
	want := []string{
		string(domain.AgentStoppedResponse([]byte(`"p"`))),
		`{"jsonrpc":"2.0","method":"_adapter/agent_exited","params":{"success":false,"code":null}}`, // SIGTERM
		ErrStreamClosed.Error(),
	}
	select {
	case all := <-got:
		if strings.Join(all, "\n") != strings.Join(want, "\n") {
			t.Errorf("the reader got\n%s\nwant\n%s", strings.Join(all, "\n"), strings.Join(want, "\n"))
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the stream did not end after the DELETE")
	}
}

func TestClose(t *testing.T) {
	r := newACPRig(t, Options{})
	r.mustPost(t, "a", "x", note)
	r.mustPost(t, "b", "y", note)
	c, _ := r.s.Subscribe("a", nil)
	defer c.Close()
	if err := r.s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	for i, p := range r.runner.Processes() {
		select {
		case <-p.Done():
		default:
			t.Errorf("process %d still running after Close", i)
		}
	}
	if _, _, err := c.Read(context.Background(), nil, 10, time.Minute); !errors.Is(err, ErrStreamClosed) {
		t.Errorf("reader after Close: %v", err)
	}
	_, err := r.post(t, context.Background(), "c", "x", note)
	wantKind(t, err, domain.KindStreamError, "daemon is shutting down")
	_, err = r.post(t, context.Background(), "a", "", note)
	wantKind(t, err, domain.KindStreamError, "daemon is shutting down")
	if l := r.s.List(); len(l) != 0 {
		t.Errorf("List = %+v", l)
	}
	if err := r.s.Close(context.Background()); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// Close gives up at its ctx when an agent cannot be stopped in time.
func TestCloseBoundedByContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newACPRig(t, Options{StopGrace: time.Minute})
		r.mustPost(t, "s", "a", note)
		r.proc(t, 0).OnTerm = func(*porttest.FakeProcess) {}
		r.stubborn = true
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if err := r.s.Close(ctx); err == nil {
			t.Errorf("Close met its deadline although the agent ignores SIGTERM")
		}
		// The agent is still killed after the grace period.
		<-r.proc(t, 0).Done()
	})
}

func TestList(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_123)
	r := newACPRig(t, Options{Now: func() time.Time { return now }})
	r.mustPost(t, "b", "y", note)
	r.mustPost(t, "a", "x", note)
	go r.post(t, context.Background(), "a", "", req(1, "hold")) //nolint:errcheck // ends with the rig
	r.nextHeld(t)
	say(r.proc(t, 1), `{"jsonrpc":"2.0","method":"u","params":{}}`) // 42 bytes
	say(r.proc(t, 1), `{"jsonrpc":"2.0","method":"v","params":{}}`)
	collect(t, r.s, "a", contains(`"v"`)) // both are in the log
	c1, _ := r.s.Subscribe("a", nil)
	c2, _ := r.s.Subscribe("a", nil)
	defer c1.Close()
	defer c2.Close()

	got := r.s.List()
	want := []ServerInfo{
		{ServerID: "a", Agent: "x", CreatedAtMs: now.UnixMilli(), PID: r.proc(t, 1).PID(), State: "running",
			PendingRequests: 1, Subscribers: 2, LastEventID: 2, BufferedEvents: 2, BufferedBytes: 2 * (42 + eventOverhead)},
		{ServerID: "b", Agent: "y", CreatedAtMs: now.UnixMilli(), PID: r.proc(t, 0).PID(), State: "running"},
	}
	if fmt.Sprintf("%+v", got) != fmt.Sprintf("%+v", want) {
		t.Errorf("List =\n%+v\nwant\n%+v", got, want)
	}
	since := r.s.RunningSince()
	if len(since) != 2 || !since["x"].Equal(now) || !since["y"].Equal(now) {
		t.Errorf("RunningSince = %v", since)
	}
}

func TestStderrTail(t *testing.T) {
	var tail stderrTail
	var in strings.Builder
	for i := 1; i <= 20; i++ {
		fmt.Fprintf(&in, "line %d\r\n", i)
	}
	in.WriteString("no newline at the end")
	tail.drain(strings.NewReader(in.String()), discardLogger())
	lines := strings.Split(tail.String(), "\n")
	if len(lines) != stderrTailLines || lines[0] != "line 6" || lines[15] != "no newline at the end" {
		t.Errorf("tail %q", lines)
	}

	// Long lines are cut; the byte bound keeps at most 64 KiB.
	var big stderrTail
	long := strings.Repeat("y", 10<<10)
	big.drain(strings.NewReader(strings.Repeat(long+"\n", 12)+"last\n"), discardLogger())
	lines = strings.Split(big.String(), "\n")
	size := 0
	for _, l := range lines[:len(lines)-1] {
		if len(l) != stderrLineMax {
			t.Fatalf("line of %d bytes kept", len(l))
		}
		size += len(l)
	}
	if lines[len(lines)-1] != "last" || size+4 > stderrTailBytes {
		t.Errorf("%d lines, %d bytes", len(lines), size)
	}
}

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

func TestAgentOf(t *testing.T) {
	s := NewInstances(Options{}, &porttest.FakeRunner{}, porttest.LaunchAny)
	defer s.Close(context.Background()) //nolint:errcheck // test cleanup
	if got := s.AgentOf("x"); got != "" {
		t.Fatalf("unknown id: %q", got)
	}
	if _, err := s.Post(context.Background(), PostRequest{ServerID: "x", Agent: "mock", HasAgent: true, Frame: frame(t, note)}); err != nil {
		t.Fatal(err)
	}
	if got := s.AgentOf("x"); got != "mock" {
		t.Fatalf("AgentOf = %q", got)
	}
	s.Delete(context.Background(), "x")
	if got := s.AgentOf("x"); got != "" {
		t.Fatalf("after delete: %q", got)
	}
}

// --max-instances: one more live agent is refused; an exit or a DELETE
// frees the slot at once.
func TestMaxInstances(t *testing.T) {
	r := newACPRig(t, Options{MaxInstances: 2})
	r.mustPost(t, "a", "x", note)
	r.mustPost(t, "b", "x", note)
	_, err := r.post(t, context.Background(), "c", "x", note)
	e := wantKind(t, err, domain.KindTooManyInstances, "")
	if e.Limit != 2 {
		t.Errorf("limit %d", e.Limit)
	}
	if n := len(r.runner.Processes()); n != 2 {
		t.Fatalf("%d agents started", n)
	}
	// Existing instances still take posts.
	r.mustPost(t, "a", "", req(1, "echo"))
	r.s.Delete(context.Background(), "a")
	r.mustPost(t, "c", "x", note)
	// An agent that exits frees its slot but stays listed.
	r.proc(t, 1).Exit(porttest.ExitCode(0))
	waitExited(t, r, "b")
	r.mustPost(t, "d", "x", note)
	if got := len(r.s.List()); got != 3 {
		t.Errorf("%d listed, want b (exited), c, d", got)
	}
}

func waitExited(t *testing.T, r *acpRig, id string) {
	t.Helper()
	for range 1000 {
		for _, s := range r.s.List() {
			if s.ServerID == id && s.State == "exited" {
				return
			}
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("%s did not exit", id)
}

// Exited instances stay listed for ExitedTTL, at most MaxExited of them,
// and their replay leaves the shared budget when they go.
func TestExitedInstancesExpire(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newACPRig(t, Options{ExitedTTL: time.Minute, MaxExited: 2})
		for i, id := range []string{"a", "b", "c"} {
			r.mustPost(t, id, "x", note)
			say(r.proc(t, i), `{"jsonrpc":"2.0","method":"hello"}`)
			r.proc(t, i).Exit(porttest.ExitCode(0))
			synctest.Wait()
			time.Sleep(time.Second) // exits are ordered in time
		}
		ids := func() string {
			var out []string
			for _, s := range r.s.List() {
				out = append(out, s.ServerID+":"+s.State)
			}
			return strings.Join(out, ",")
		}
		if got := ids(); got != "b:exited,c:exited" {
			t.Fatalf("listed %s, want the two newest exited", got)
		}
		if _, err := r.s.Stderr("a"); !domain.IsKind(err, domain.KindSessionNotFound) {
			t.Errorf("forgotten instance: %v", err)
		}
		r.mustPost(t, "live", "x", note)
		time.Sleep(58 * time.Second) // b exited at 1 s, c at 2 s; now is 3 s
		synctest.Wait()
		if got := ids(); got != "c:exited,live:running" {
			t.Fatalf("after the TTL of b: %s", got)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if got := ids(); got != "live:running" {
			t.Fatalf("after the TTL of c: %s", got)
		}
		if total := r.s.replay.Total(); total != 0 {
			t.Errorf("replay still holds %d bytes of forgotten instances", total)
		}
		// A forgotten id can be started again.
		r.mustPost(t, "a", "x", note)
	})
}

// Lines being read count against the shared replay budget: a line the
// budget has room for (while it is read, twice its size) is delivered, one
// it has no room for stops the agent, and nothing stays charged.
func TestLineBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newACPRig(t, Options{ReplayTotal: 150 << 10, ReplayBytes: 1 << 20})
		r.mustPost(t, "s", "a", note)
		p := r.proc(t, 0)
		c, _ := r.s.Subscribe("s", nil)
		defer c.Close()
		fits := `{"n":"` + strings.Repeat("x", 70<<10) + `"}`
		say(p, fits)
		evs, _, _ := c.Read(context.Background(), nil, 10, time.Second)
		if len(evs) != 1 || string(evs[0].Data) != fits {
			t.Fatalf("line that fits: %d events", len(evs))
		}
		go say(p, `{"n":"`+strings.Repeat("x", 100<<10)+`"}`)
		<-p.Stopped()
		<-p.Done()
		synctest.Wait()
		evs, _, _ = c.Read(context.Background(), nil, 10, time.Second)
		if len(evs) != 1 || string(evs[0].Data) != string(domain.AgentExitedMessage(false, nil)) {
			t.Errorf("after the line with no room: %.300s", dataOf(evs))
		}
		// The first line was evicted to make room for reading the second:
		// only the exit event is left, and no assembly charge.
		if got, want := r.s.replay.Total(), int64(len(evs[0].Data)+eventOverhead); got != want {
			t.Errorf("replay total %d, want the exit event's %d", got, want)
		}
	})
}
