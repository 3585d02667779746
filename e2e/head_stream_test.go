package e2e

import (
	"context"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/sandbox-agent-go/sandbox-agent/e2e/internal/harness"
)

// A HEAD of an event stream (an instance's, a process's log follow)
// answers its headers and ends. Writes to a HEAD body never fail, so the
// stream ran until the daemon stopped, holding the keep-alive connection,
// whose next request was never read.
func TestHeadOfAnEventStreamEnds(t *testing.T) {
	t.Parallel()
	d := harness.Start(t, harness.Options{})
	if st, b := d.Post("/v1/acp/h?agent=mock", initMsg); st != 200 {
		t.Fatalf("start: %d %s", st, b)
	}
	id := createProcess(t, d, map[string]any{"command": "sh", "args": []string{"-c", "echo hi; exec sleep 300"}}).ID
	t.Cleanup(func() { d.Do("POST", "/v1/processes/"+id+"/kill", nil) })

	// One connection for everything: a HEAD that never ends would leave
	// the next request unread.
	conns := 0
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		MaxConnsPerHost: 1,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			conns++
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		},
	}}
	for _, path := range []string{"/v1/acp/h", "/v1/processes/" + id + "/logs?follow=true"} {
		req, _ := http.NewRequest("HEAD", d.URL+path, nil)
		req.Header.Set("Accept", "text/event-stream")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("HEAD %s: %v", path, err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
			t.Errorf("HEAD %s: %d %q", path, resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		resp, err = client.Get(d.URL + "/v1/health")
		if err != nil {
			t.Fatalf("the request after HEAD %s: %v", path, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body) // read whole, so the connection is kept
		resp.Body.Close()
	}
	if conns != 1 {
		t.Errorf("%d connections for four requests, want 1", conns)
	}
}
