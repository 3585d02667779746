package acp

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
	"github.com/sandbox-agent-go/sandbox-agent/ports/porttest"
)

// Many clients post to one instance at once, with distinct ids, while the
// agent answers out of order and a reader acknowledges the stream (so the
// flush barrier is on the path): every request gets exactly its answer.
func TestHammerConcurrentPosts(t *testing.T) {
	const clients, perClient = 16, 40
	runner := &porttest.FakeRunner{Agent: func(_ domain.LaunchSpec, p *porttest.FakeProcess) {
		in := bufio.NewReader(p.AgentStdin)
		var wg sync.WaitGroup
		defer wg.Wait()
		for {
			line, err := in.ReadBytes('\n')
			if err != nil {
				p.Exit(porttest.ExitCode(0))
				return
			}
			f, perr := domain.ParseFrame(bytes.TrimSuffix(line, []byte("\n")))
			if perr != nil || f.Kind != domain.FrameRequest {
				continue
			}
			// Answer from another goroutine, after an update: answers
			// overtake each other.
			wg.Go(func() {
				say(p, fmt.Sprintf(`{"jsonrpc":"2.0","method":"session/update","params":{"for":%s}}`, f.ID))
				say(p, fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"for":%s}}`, f.ID, f.ID))
			})
		}
	}}
	s := NewInstances(Options{ReplayBytes: 64 << 10}, runner, porttest.LaunchAny)
	defer s.Close(context.Background()) //nolint:errcheck // test cleanup
	if _, err := s.Post(context.Background(), PostRequest{ServerID: "s", Agent: "a", HasAgent: true, Frame: frame(t, note)}); err != nil {
		t.Fatal(err)
	}

	// A reader that keeps up and acknowledges everything it reads.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cur, err := s.Subscribe("s", nil)
	if err != nil {
		t.Fatal(err)
	}
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		defer cur.Close()
		for {
			evs, gap, err := cur.Read(ctx, nil, 256, time.Minute)
			if err != nil {
				return
			}
			switch {
			case len(evs) > 0:
				cur.Ack(evs[len(evs)-1].Seq)
			case gap != nil:
				cur.Ack(gap.OldestAvailable - 1)
			}
		}
	}()

	var wg sync.WaitGroup
	var answered atomic.Int64
	for c := range clients {
		wg.Go(func() {
			for i := range perClient {
				// Mix number and string ids that canonicalise differently.
				id := fmt.Sprint(c*1000 + i)
				if i%2 == 1 {
					id = `"` + id + `"`
				}
				body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":"m","params":{}}`, id)
				f, _ := domain.ParseFrame([]byte(body))
				resp, err := s.Post(context.Background(), PostRequest{ServerID: "s", Frame: f})
				if err != nil {
					t.Errorf("post %s: %v", id, err)
					return
				}
				if want := fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"for":%s}}`, id, id); string(resp) != want {
					t.Errorf("post %s got %s", id, resp)
					return
				}
				answered.Add(1)
				if i%10 == 0 {
					f, _ := domain.ParseFrame([]byte(note))
					if _, err := s.Post(context.Background(), PostRequest{ServerID: "s", Frame: f}); err != nil {
						t.Errorf("notification: %v", err)
					}
				}
			}
		})
	}
	wg.Wait()
	if n := answered.Load(); n != clients*perClient {
		t.Errorf("%d answered, want %d", n, clients*perClient)
	}
	l := s.List()
	if l[0].PendingRequests != 0 || l[0].LastEventID != 2*clients*perClient {
		t.Errorf("after the storm: %+v", l[0])
	}
	cancel()
	<-readerDone
}

// Readers subscribe, read and leave continuously while the agent streams
// into a small buffer. Every reader sees strictly increasing sequence
// numbers with the right payloads, and skips events only right after a gap
// frame naming exactly what it missed.
func TestHammerSubscribeChurn(t *testing.T) {
	const events, readers = 5000, 4
	start, sent := make(chan struct{}), make(chan struct{})
	runner := &porttest.FakeRunner{Agent: func(_ domain.LaunchSpec, p *porttest.FakeProcess) {
		go func() { _, _ = bufio.NewReader(p.AgentStdin).WriteTo(discardWriter{}) }()
		<-start
		for n := 1; n <= events; n++ {
			say(p, fmt.Sprintf(`{"n":%d}`, n))
		}
		close(sent)
	}}
	s := NewInstances(Options{ReplayBytes: 200 * (12 + eventOverhead)}, runner, porttest.LaunchAny)
	defer s.Close(context.Background()) //nolint:errcheck // test cleanup
	if _, err := s.Post(context.Background(), PostRequest{ServerID: "s", Agent: "a", HasAgent: true, Frame: frame(t, note)}); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var streamed atomic.Bool // the agent is done
	var gaps, subs atomic.Int64
	var wg sync.WaitGroup
	for r := range readers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(r), 42))
			for final := false; !final; {
				final = streamed.Load()
				newest := s.List()[0].LastEventID
				var after *uint64
				expect := uint64(0) // next seq this reader may see; 0: any
				switch rng.IntN(3) {
				case 0: // from the oldest buffered event
				case 1: // resume from somewhere already streamed
					a := rng.Uint64N(newest + 1)
					after, expect = &a, a+1
				case 2: // resume from the newest: live only
					after, expect = &newest, newest+1
				}
				cur, err := s.Subscribe("s", after)
				if err != nil {
					t.Error(err)
					return
				}
				subs.Add(1)
				batches := 1 + rng.IntN(8)
				if final {
					batches = 1 << 30 // read to the end
				}
				for b := 0; b < batches; b++ {
					evs, gap, err := cur.Read(ctx, nil, 1+rng.IntN(300), 20*time.Millisecond)
					if err != nil {
						t.Errorf("read: %v", err)
						cur.Close()
						return
					}
					if gap != nil {
						gaps.Add(1)
						if (expect != 0 && gap.LastEventID != expect-1) || gap.OldestAvailable <= gap.LastEventID+1 {
							t.Errorf("gap %+v, expecting %d", *gap, expect)
						}
						expect = gap.OldestAvailable
						cur.Ack(gap.OldestAvailable - 1)
						continue
					}
					for _, e := range evs {
						if expect != 0 && e.Seq != expect {
							t.Errorf("event %d, expecting %d (no gap announced)", e.Seq, expect)
						}
						if want := fmt.Sprintf(`{"n":%d}`, e.Seq); string(e.Data) != want {
							t.Errorf("event %d carries %s", e.Seq, e.Data)
						}
						expect = e.Seq + 1
					}
					if len(evs) > 0 {
						cur.Ack(evs[len(evs)-1].Seq)
					}
					if final && expect == events+1 {
						break
					}
				}
				cur.Close()
				if t.Failed() {
					return
				}
			}
		})
	}
	close(start)
	select {
	case <-sent:
	case <-ctx.Done():
		t.Fatal("the agent did not finish streaming")
	}
	streamed.Store(true)
	wg.Wait()
	if st := s.List()[0]; st.Subscribers != 0 {
		t.Errorf("%d cursors left open", st.Subscribers)
	}
	t.Logf("%d subscriptions, %d gaps", subs.Load(), gaps.Load())
}

type discardWriter struct{}

func (discardWriter) Write(p []byte) (int, error) { return len(p), nil }
