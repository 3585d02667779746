package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

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

// A body whose members have the wrong JSON type is refused on the first
// one, before huma validates it: huma's validator makes an error (about
// 200 bytes) for every element, so 1 MiB of [1,1,…] as a process's args
// cost 120 MB of memory per request, against the 4 MiB charged for it
// (BenchmarkJSONBodyWrongTypes).
func TestJSONBodyWrongTypesRefusedOnce(t *testing.T) {
	svc := processes.New(&porttest.FakeStarter{}, processes.Options{})
	cfg := Config{Processes: svc, InflightBytes: 64 << 20}
	cfg.fill()
	srv := httptest.NewServer(New(cfg))
	defer srv.Close()
	for _, tt := range []struct{ name, body, want string }{
		{"array elements", `{"command":"true","args":[` + strings.Repeat("1,", 100000) + `1]}`, "body.args"},
		{"map values", `{"command":"true","env":{"A":1,"B":2,"C":3}}`, "body.env"},
		{"member", `{"command":7}`, "body.command"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := doHTTP(t, "POST", srv.URL+"/v1/processes", tt.body, map[string]string{"Content-Type": "application/json"})
			m := problemOf(t, resp, body)
			if resp.StatusCode != 422 {
				t.Errorf("status %d: %.300s", resp.StatusCode, body)
			}
			d, _ := m["detail"].(string)
			if !strings.Contains(d, tt.want) || strings.Contains(d, ";") {
				t.Errorf("want one error naming %s: %q", tt.want, d)
			}
		})
	}
}

func BenchmarkJSONBodyWrongTypes(b *testing.B) {
	svc := processes.New(&porttest.FakeStarter{}, processes.Options{})
	cfg := Config{Processes: svc, InflightBytes: 64 << 20}
	cfg.fill()
	h := New(cfg)
	body := `{"command":"true","args":[` + strings.Repeat("1,", 1<<19-20) + `1]}`
	b.ReportAllocs()
	for b.Loop() {
		req := httptest.NewRequest("POST", "/v1/processes", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != 422 {
			b.Fatalf("%d %.300s", w.Code, w.Body)
		}
	}
}

// The buffered logs of a process (up to maxLogBytesPerProcess, 10 MiB by
// default, base64 in JSON) are held whole while answered: charged to the
// in-flight budget until answered, so slow readers wait (503) instead of
// each holding a copy: twenty clients not reading the logs of a process
// that wrote 9 MB held 700 MB.
func TestProcessLogsCharged(t *testing.T) {
	out := strings.Repeat("x", 300<<10)
	svc := processes.New(&porttest.FakeStarter{Program: func(_ domain.ProcessSpec, p *porttest.FakeUserProcess) {
		_, _ = io.WriteString(p.Out, out)
		p.Exit(porttest.ExitCode(0))
	}}, processes.Options{})
	cfg := Config{Processes: svc, InflightBytes: 1 << 20}
	cfg.fill()
	srv := httptest.NewServer(New(cfg))
	defer srv.Close()
	info, err := svc.Create(context.Background(), domain.ProcessCreateRequest{Command: "x"})
	if err != nil {
		t.Fatal(err)
	}
	// Read to the end: the process has exited and all it wrote is logged.
	f, err := svc.Follow(context.Background(), info.ID, domain.ProcessLogsStream("combined"), nil)
	if err != nil {
		t.Fatal(err)
	}
	for err == nil {
		_, _, err = f.Next(time.Minute)
	}
	f.Close()
	if !errors.Is(err, processes.ErrEnded) {
		t.Fatal(err)
	}
	budget := cfg.env.Budget
	if !budget.Take(600 << 10) {
		t.Fatal("take")
	}
	logs := "/v1/processes/" + info.ID + "/logs"
	if resp, body := doHTTP(t, "GET", srv.URL+logs, "", nil); resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" {
		t.Errorf("with the budget half spent: %d %.200s", resp.StatusCode, body)
	}
	budget.Give(600 << 10)
	// Written entry by entry, the answer is what json.Marshal makes.
	want, err := svc.Logs(info.ID, processes.LogQuery{Stream: "combined", Encoding: "base64"})
	if err != nil || len(want.Entries) == 0 {
		t.Fatal(want, err)
	}
	wantJSON, _ := json.Marshal(want)
	if resp, body := doHTTP(t, "GET", srv.URL+logs, "", nil); resp.StatusCode != 200 || string(body) != string(wantJSON) {
		t.Errorf("logs: %d %.200s\nwant %.200s", resp.StatusCode, body, wantJSON)
	}
	if u := budget.Used(); u != 0 {
		t.Errorf("%d bytes still charged after the answer", u)
	}
}

// Every operation's refusals that mean "not now" carry Retry-After, not
// only those of the routes that asked for it: a process start refused for
// want of descriptors (503) or past the live cap (429) had none.
func TestRetryAfterOnEveryOperation(t *testing.T) {
	svc := processes.New(&porttest.FakeStarter{StartErr: func(domain.ProcessSpec) error {
		return domain.Exhausted(domain.ResourceFileDescriptors, 64, "out of file descriptors")
	}}, processes.Options{})
	cfg := Config{Processes: svc, InflightBytes: 1 << 20}
	cfg.fill()
	srv := httptest.NewServer(New(cfg))
	defer srv.Close()
	for _, path := range []string{"/v1/processes", "/v1/processes/run"} {
		resp, body := doHTTP(t, "POST", srv.URL+path, `{"command":"x"}`, map[string]string{"Content-Type": "application/json"})
		if resp.StatusCode != 503 || resp.Header.Get("Retry-After") != "1" || !strings.Contains(string(body), `"resource":"file_descriptors"`) {
			t.Errorf("%s: %d, Retry-After %q, %s", path, resp.StatusCode, resp.Header.Get("Retry-After"), body)
		}
	}
}
