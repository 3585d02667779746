package opencode

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandbox-agent-go/sandbox-agent/app/acp"
)

// BenchmarkStorePutPart is the database's cost per event: one part
// written (an upsert of ~600 bytes, as a streamed text part's is), on a
// file in WAL mode as the daemon runs it.
//
//	go test ./adapters/opencode -run '^$' -bench Store -benchmem
func BenchmarkStorePutPart(b *testing.B) {
	for _, mode := range []string{"file", "memory"} {
		b.Run(mode, func(b *testing.B) {
			path := ""
			if mode == "file" {
				path = filepath.Join(b.TempDir(), "bench.db")
			}
			s, err := OpenStore(context.Background(), StoreOptions{Path: path})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			p := &part{ID: "prt_1", SessionID: "ses_1", MessageID: "msg_1", Type: "text", Text: strings.Repeat("x", 480), Start: 1}
			data, _ := json.Marshal(p)
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				if err := s.putPart(context.Background(), "ses_1", "msg_1", "prt_1", data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkStreamChunk is the adapter's whole cost per streamed chunk of
// an agent's answer: the session/update decoded, the part grown, written
// to the database (file, WAL) and published.
func BenchmarkStreamChunk(b *testing.B) {
	store, err := OpenStore(context.Background(), StoreOptions{Path: filepath.Join(b.TempDir(), "bench.db")})
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	a := &Adapter{cfg: Config{MaxPartBytes: 8 << 20, Directory: "/"}, store: store}
	a.cfg.fill()
	a.log, a.bus = a.cfg.Logger, acp.NewEventLog(a.cfg.EventBytes)
	a.ids.now = a.cfg.Now
	s := newSession(a, sessionInfo{ID: "ses_1", Directory: "/"}, "mock", "acp-1")
	chunk := json.RawMessage(`{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"` + strings.Repeat("y", 40) + `"}}`)
	newTurn := func() {
		s.turn = &turn{asst: &messageInfo{ID: a.ids.message(), SessionID: s.id, Role: "assistant"}, saved: map[*part]int{}, tools: map[string]*part{}, done: make(chan struct{})}
	}
	newTurn()
	n := 0
	for b.Loop() {
		s.applyUpdate(chunk)
		if n++; n%500 == 0 { // a new answer every 500 chunks (20 KB)
			newTurn()
		}
	}
}

// BenchmarkOpenStore is what the database adds to the daemon's start:
// opening (and on first use creating) the file, then closing it.
func BenchmarkOpenStore(b *testing.B) {
	for _, existing := range []bool{false, true} {
		name := "new"
		if existing {
			name = "existing"
		}
		b.Run(name, func(b *testing.B) {
			dir := b.TempDir()
			path := filepath.Join(dir, "bench.db")
			i := 0
			for b.Loop() {
				if !existing {
					i++
					path = filepath.Join(dir, fmt.Sprint(i, ".db"))
				}
				s, err := OpenStore(context.Background(), StoreOptions{Path: path})
				if err != nil {
					b.Fatal(err)
				}
				s.Close()
			}
		})
	}
}
