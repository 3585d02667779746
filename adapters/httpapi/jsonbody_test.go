package httpapi

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sandbox-agent-go/sandbox-agent/app/processes"
	"github.com/sandbox-agent-go/sandbox-agent/domain"
	"github.com/sandbox-agent-go/sandbox-agent/ports/porttest"
)

// The JSON bodies huma decodes go through the middleware: an ambiguous one
// is a 400 before anything runs, and the process input is bounded by the
// limit configured now, refused on its Content-Length or as it grows,
// never read whole first; every body is charged to the in-flight budget
// until its request is answered.
func TestJSONBodyMiddleware(t *testing.T) {
	svc := processes.New(&porttest.FakeStarter{}, processes.Options{})
	cfg := Config{Processes: svc, InflightBytes: 1 << 20}
	cfg.fill()
	srv := httptest.NewServer(New(cfg))
	defer srv.Close()
	post := func(path, body string) (int, string) {
		t.Helper()
		resp, err := http.Post(srv.URL+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	info, err := svc.Create(context.Background(), domain.ProcessCreateRequest{Command: "cat", Interactive: true})
	if err != nil {
		t.Fatal(err)
	}
	if st, b := post("/v1/processes/"+info.ID+"/input", `{"data":"aGk=","DATA":"eW91"}`); st != 400 || !strings.Contains(b, "ambiguous") {
		t.Fatalf("ambiguous input: %d %s", st, b)
	}
	if st, b := post("/v1/processes/"+info.ID+"/input", `{"data":"aGk="}`); st != 200 {
		t.Fatalf("input: %d %s", st, b)
	}
	if st, b := post("/v1/processes", `{"command":"true","COMMAND":"rm"}`); st != 400 || !strings.Contains(b, "ambiguous") {
		t.Fatalf("ambiguous create: %d %s", st, b)
	}

	// 64 KiB of input is at most 6 × 64 KiB + 4 KiB of JSON: a body
	// announcing more is refused before a byte of it is read.
	c, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "POST /v1/processes/%s/input HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 20000000\r\n\r\n", info.ID)
	buf := make([]byte, 4096)
	n, _ := c.Read(buf)
	if !strings.HasPrefix(string(buf[:n]), "HTTP/1.1 413") || !strings.Contains(string(buf[:n]), `"limitBytes":397312`) {
		t.Fatalf("announced 20 MB: %q", buf[:n])
	}
	// Without a length, it is cut where it passes the limit.
	pr, pw := io.Pipe()
	go func() {
		io.WriteString(pw, `{"data":"`)
		for range 100 {
			if _, err := io.WriteString(pw, strings.Repeat("A", 64<<10)); err != nil {
				return
			}
		}
		pw.Close()
	}()
	req, _ := http.NewRequest("POST", srv.URL+"/v1/processes/"+info.ID+"/input", pr)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	pr.CloseWithError(io.ErrClosedPipe)
	if resp.StatusCode != 413 {
		t.Fatalf("streamed 6.4 MB: %d", resp.StatusCode)
	}
	if got := cfg.env.Budget.Used(); got != 0 {
		t.Fatalf("%d bytes still charged after every request was answered", got)
	}
	// A budget smaller than a body: 503.
	small := Config{Processes: svc, InflightBytes: 1000}
	small.fill()
	srv2 := httptest.NewServer(New(small))
	defer srv2.Close()
	resp, err = http.Post(srv2.URL+"/v1/processes/"+info.ID+"/input", "application/json", strings.NewReader(`{"data":"`+strings.Repeat("QUJD", 2000)+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 503 || !strings.Contains(string(b), "inflight-bytes") {
		t.Fatalf("over the budget: %d %s", resp.StatusCode, b)
	}
}

// Media types are case-insensitive (RFC 9110 section 8.3.1): a JSON body
// sent as Application/JSON is decoded like application/json, as the
// browser guard and the config routes already read it.
func TestJSONMediaTypeCaseInsensitive(t *testing.T) {
	srv, _ := agentsServer(t)
	for _, ct := range []string{"Application/JSON", "APPLICATION/JSON; charset=UTF-8"} {
		resp, body := doHTTP(t, "POST", srv.URL+"/v1/agents/mock/install", `{}`, map[string]string{"Content-Type": ct})
		if resp.StatusCode != 200 {
			t.Errorf("%s: %d %s", ct, resp.StatusCode, body)
		}
	}
}
