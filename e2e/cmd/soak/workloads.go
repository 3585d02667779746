package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	"github.com/sandbox-agent-go/sandbox-agent/adapters/httpclient"
)

// churn spawns an instance, uses it a little and deletes it.
func (l *load) churn(ctx context.Context, w int) {
	for i := 0; ctx.Err() == nil; i++ {
		id := fmt.Sprintf("churn-%d-%d", w, i)
		l.expect(ctx, "churn bootstrap", "/v1/acp/"+id+"?agent=test", initMsg, 200)
		for k := range 5 {
			l.expect(ctx, "churn ping", "/v1/acp/"+id, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"ping"}`, 10+k), 200)
		}
		l.del(id)
	}
}

// sessions keeps one mock instance per worker and streams prompts to a
// subscriber that reconnects with Last-Event-ID now and then.
func (l *load) sessions(ctx context.Context, w int) {
	id := fmt.Sprintf("mock-%d", w)
	l.expect(ctx, "mock bootstrap", "/v1/acp/"+id+"?agent=mock", initMsg, 200)
	b := l.expect(ctx, "session/new", "/v1/acp/"+id, `{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/tmp","mcpServers":[]}}`, 200)
	_, rest, _ := strings.Cut(string(b), `"sessionId":"`)
	sid, _, _ := strings.Cut(rest, `"`)
	lastID := ""
	for turn := 0; ctx.Err() == nil; turn++ {
		resp, err := l.stream(ctx, id, lastID)
		if err != nil {
			if ctx.Err() == nil {
				l.fail("session stream", err)
			}
			return
		}
		pid := fmt.Sprintf("t%d", turn)
		l.expect(ctx, "prompt", "/v1/acp/"+id, fmt.Sprintf(`{"jsonrpc":"2.0","id":%q,"method":"session/prompt","params":{"sessionId":%q,"prompt":[{"type":"text","text":"stream 2000"}]}}`, pid, sid), 202)
		r := httpclient.NewSSEReader(resp.Body, 0)
		for {
			ev, err := r.Next()
			if err != nil {
				if ctx.Err() == nil {
					l.fail("session stream read", err)
				}
				break
			}
			if ev.ID != "" {
				lastID = ev.ID
			}
			if bytes.Contains(ev.Data, []byte(`_adapter/replay_gap`)) {
				l.fail("session stream", "gap for a reader that keeps up")
			}
			if bytes.Contains(ev.Data, []byte(`"id":"`+pid+`"`)) {
				break
			}
		}
		resp.Body.Close()
	}
}

// streamChurn opens streams on a bursting instance and drops them.
func (l *load) streamChurn(ctx context.Context, w int) {
	id := fmt.Sprintf("burst-%d", w)
	l.expect(ctx, "burst bootstrap", "/v1/acp/"+id+"?agent=test", initMsg, 200)
	for ctx.Err() == nil {
		resp, err := l.stream(ctx, id, "")
		if err != nil {
			if ctx.Err() == nil {
				l.fail("burst stream", err)
			}
			return
		}
		l.expect(ctx, "burst", "/v1/acp/"+id, `{"jsonrpc":"2.0","method":"burst","params":{"n":20000}}`, 202)
		// About 500 lines: an event is four (event, id, data, a blank line).
		r := httpclient.NewSSEReader(resp.Body, 0)
		for range 125 {
			if _, err := r.Next(); err != nil {
				break
			}
		}
		resp.Body.Close()
		time.Sleep(100 * time.Millisecond)
	}
}

// faults: an agent exiting mid-request, a wedged agent, a late response.
func (l *load) faults(ctx context.Context, w int) {
	big := `{"jsonrpc":"2.0","method":"echo","params":{"pad":"` + strings.Repeat("x", 1<<20) + `"}}`
	for i := 0; ctx.Err() == nil; i++ {
		id := fmt.Sprintf("fault-%d-%d", w, i)
		l.expect(ctx, "fault bootstrap", "/v1/acp/"+id+"?agent=test", initMsg, 200)
		switch i % 3 {
		case 0: // exits while a request waits
			done := make(chan struct{})
			go func() {
				defer close(done)
				st, b := l.post(ctx, "/v1/acp/"+id, `{"jsonrpc":"2.0","id":2,"method":"hang"}`)
				if st != 500 && ctx.Err() == nil {
					l.fail("request pending at exit", fmt.Sprintf("%d %s", st, b))
				}
			}()
			time.Sleep(50 * time.Millisecond)
			l.expect(ctx, "exit", "/v1/acp/"+id, `{"jsonrpc":"2.0","method":"exit","params":{"code":7}}`, 202)
			<-done
		case 1: // stops reading stdin
			l.expect(ctx, "wedge", "/v1/acp/"+id, `{"jsonrpc":"2.0","id":2,"method":"wedge"}`, 504)
			l.expect(ctx, "write to wedged agent", "/v1/acp/"+id, big, 502)
		case 2: // answers after the request timed out
			l.expect(ctx, "late", "/v1/acp/"+id, `{"jsonrpc":"2.0","id":2,"method":"slow","params":{"delayMs":3500}}`, 504)
			time.Sleep(time.Second)
		}
		l.del(id)
	}
}

// files writes, reads and deletes a 1 MiB file.
func (l *load) files(ctx context.Context, w int) {
	data := bytes.Repeat([]byte("0123456789abcdef"), 1<<16)
	for i := 0; ctx.Err() == nil; i++ {
		p := url.QueryEscape(filepath.Join(l.home, fmt.Sprintf("files/%d/f%d.bin", w, i%10)))
		req, _ := http.NewRequestWithContext(ctx, "PUT", l.d.url+"/v1/fs/file?path="+p, bytes.NewReader(data))
		l.ops.Add(1)
		resp, err := client.Do(req)
		if err != nil {
			if ctx.Err() == nil {
				l.fail("PUT", err)
			}
			return
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			l.fail("PUT", resp.StatusCode)
		}
		l.ops.Add(1)
		resp, err = client.Get(l.d.url + "/v1/fs/file?path=" + p)
		if err != nil {
			l.fail("GET", err)
			return
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !bytes.Equal(got, data) {
			l.fail("GET", "content differs")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// slowReader opens a stream it never reads while the agent bursts.
func (l *load) slowReader(ctx context.Context, w int) {
	for i := 0; ctx.Err() == nil; i++ {
		id := fmt.Sprintf("slow-%d-%d", w, i)
		l.expect(ctx, "slow bootstrap", "/v1/acp/"+id+"?agent=test", initMsg, 200)
		resp, err := l.stream(ctx, id, "")
		if err != nil {
			if ctx.Err() == nil {
				l.fail("slow stream", err)
			}
			return
		}
		l.expect(ctx, "slow burst", "/v1/acp/"+id, `{"jsonrpc":"2.0","method":"burst","params":{"n":200000}}`, 202)
		select {
		case <-ctx.Done():
		case <-time.After(5 * time.Second):
		}
		resp.Body.Close()
		l.del(id)
	}
}
