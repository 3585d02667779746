package httpapi

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/sandbox-agent-go/sandbox-agent/app/acp"
	"github.com/sandbox-agent-go/sandbox-agent/ports/porttest"
)

// BenchmarkACPPost is the daemon's own cost of one synchronous request: the
// handler chain, the instance and an in-memory echo agent, without sockets
// or processes. The e2e RoundTrip benchmark measures the whole trip.
//
//	go test ./adapters/httpapi -run '^$' -bench ACPPost -benchmem
func BenchmarkACPPost(b *testing.B) {
	instances := acp.NewInstances(acp.Options{}, &porttest.FakeRunner{Agent: echoAgent}, porttest.LaunchAny)
	b.Cleanup(func() { _ = instances.Close(context.Background()) })
	h := New(Config{Instances: instances})
	post := func(url, body string) *httptest.ResponseRecorder {
		req := httptest.NewRequest("POST", url, strings.NewReader(body))
		req.Header.Set("Content-Type", jsonCTHeader)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	if rec := post("/v1/acp/b?agent=a", `{"jsonrpc":"2.0","method":"hello"}`); rec.Code != http.StatusAccepted {
		b.Fatalf("bootstrap: %d %s", rec.Code, rec.Body)
	}
	i := 0
	for b.Loop() {
		i++
		rec := post("/v1/acp/b", `{"jsonrpc":"2.0","id":"r`+strconv.Itoa(i)+`","method":"echo","params":{}}`)
		if rec.Code != http.StatusOK {
			b.Fatalf("%d %s", rec.Code, rec.Body)
		}
	}
}
