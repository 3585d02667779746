package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// load drives the daemon and counts what went wrong.
type load struct {
	d    *daemon
	home string
	ops  atomic.Int64
	mu   sync.Mutex
	errs map[string]int
}

func (l *load) fail(what string, detail any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	key := fmt.Sprintf("%s: %v", what, detail)
	if len(key) > 160 {
		key = key[:160]
	}
	l.errs[key]++
}

func (l *load) errCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, v := range l.errs {
		n += v
	}
	return n
}

func (l *load) errors() map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string]int{}
	for k, v := range l.errs {
		out[k] = v
	}
	return out
}

var client = &http.Client{Timeout: time.Minute}

// post returns the status (or -1 on a transport error) and body.
func (l *load) post(ctx context.Context, path, msg string) (int, []byte) {
	l.ops.Add(1)
	req, _ := http.NewRequestWithContext(ctx, "POST", l.d.url+path, strings.NewReader(msg))
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return -1, []byte(err.Error())
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// expect posts and records anything but the wanted status, unless the
// load is ending.
func (l *load) expect(ctx context.Context, what, path, msg string, want int) []byte {
	st, b := l.post(ctx, path, msg)
	if st != want && ctx.Err() == nil {
		l.fail(what, fmt.Sprintf("%d %s", st, bytes.TrimSpace(b)))
	}
	return b
}

func (l *load) del(id string) {
	l.ops.Add(1)
	req, _ := http.NewRequest("DELETE", l.d.url+"/v1/acp/"+id, nil)
	resp, err := client.Do(req)
	if err != nil {
		l.fail("DELETE", err)
		return
	}
	resp.Body.Close()
	if resp.StatusCode != 204 {
		l.fail("DELETE", resp.StatusCode)
	}
}

func (l *load) servers() []string {
	resp, err := client.Get(l.d.url + "/v1/acp")
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var ids []string
	for _, part := range strings.Split(string(b), `"serverId":"`)[1:] {
		id, _, _ := strings.Cut(part, `"`)
		ids = append(ids, id)
	}
	return ids
}

const initMsg = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}`

// stream opens GET /v1/acp/{id}; the caller closes the body.
func (l *load) stream(ctx context.Context, id string, after string) (*http.Response, error) {
	l.ops.Add(1)
	req, _ := http.NewRequestWithContext(ctx, "GET", l.d.url+"/v1/acp/"+id, nil)
	req.Header.Set("Accept", "text/event-stream")
	if after != "" {
		req.Header.Set("Last-Event-ID", after)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != 200 {
		resp.Body.Close()
		return nil, fmt.Errorf("stream status %d", resp.StatusCode)
	}
	return resp, nil
}
