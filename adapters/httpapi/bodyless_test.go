package httpapi

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
	"github.com/sandbox-agent-go/sandbox-agent/ports"
)

// docOp is one operation of the OpenAPI document (and /metrics).
type docOp struct{ id, method, path string }

// documentOps lists every operation of the document, and /metrics, by id.
func documentOps() []docOp {
	var ops []docOp
	for p, item := range OpenAPI("test").Paths {
		for method, o := range map[string]string{
			"GET": opID(item.Get), "PUT": opID(item.Put), "POST": opID(item.Post),
			"DELETE": opID(item.Delete), "PATCH": opID(item.Patch),
		} {
			if o != "" {
				ops = append(ops, docOp{o, method, p})
			}
		}
	}
	ops = append(ops, docOp{"get_metrics", "GET", "/metrics"})
	sort.Slice(ops, func(i, j int) bool { return ops[i].id < ops[j].id })
	return ops
}

// watchedBody is a request body that counts the bytes read from it.
type watchedBody struct {
	r    io.Reader
	read atomic.Int64
}

func (b *watchedBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	b.read.Add(int64(n))
	return n, err
}

func (b *watchedBody) Close() error { return nil }

// bodylessPolicy is a policy with the BodylessAuthorizer ability: it
// grants requests carrying x-key, passes the rest, and says it can decide
// without the body unless blind (a policy reading the body's fields).
type bodylessPolicy struct {
	blind bool
	asked atomic.Int64
}

var _ ports.BodylessAuthorizer = (*bodylessPolicy)(nil)

func (p *bodylessPolicy) Authorize(_ context.Context, r domain.AuthRequest) (domain.Decision, error) {
	p.asked.Add(1)
	if r.Headers["x-key"] != nil {
		return domain.Decision{Verdict: domain.Grant, Principal: "key"}, nil
	}
	return domain.Decision{Verdict: domain.Pass}, nil
}

func (p *bodylessPolicy) AuthorizeWithoutBody(ctx context.Context, r domain.AuthRequest) (domain.Decision, bool, error) {
	if p.blind {
		return domain.Decision{}, false, nil
	}
	if r.FSPath != "" || r.FSDest != "" || r.RPC != nil {
		return domain.Decision{}, false, errors.New("asked without the body, with the body's fields")
	}
	d, err := p.Authorize(ctx, r)
	return d, true, err
}

// passPolicy passes everything, without the BodylessAuthorizer ability.
type passPolicy struct{}

func (passPolicy) Authorize(context.Context, domain.AuthRequest) (domain.Decision, error) {
	return domain.Decision{Verdict: domain.Pass}, nil
}

// A request the chain refuses whatever its body holds (a token configured,
// none or a wrong one presented, no policy granting) is answered 401
// before a byte of its body is read, on every operation of the document,
// whatever its content type. The exceptions are the requests described
// from their body (the move's paths, the ACP POSTs' JSON-RPC method) when
// a policy cannot say that it decides them without the body: those read
// the body, and are refused after.
func TestUnauthenticatedBodyUnread(t *testing.T) {
	fromBody := []string{"post_acp", "post_v1_acp", "post_v1_fs_move"}
	for _, c := range []struct {
		name     string
		policy   ports.Authorizer
		readsFor []string // operations whose body is read before the refusal
	}{
		{"no policies", nil, nil},
		{"policies deciding without the body", &bodylessPolicy{}, nil},
		{"policies that need the body", &bodylessPolicy{blind: true}, fromBody},
		{"policies that cannot tell", passPolicy{}, fromBody},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := fullConfig(nil)
			cfg.Authorizer = c.policy
			h := New(cfg)
			for _, o := range documentOps() {
				for _, token := range []string{"", "Bearer wrong"} {
					for _, ctype := range []string{"application/json", "text/plain", "application/x-tar", ""} {
						const body = `{"jsonrpc":"2.0","id":1,"method":"initialize","from":"a","to":"b","command":"sh"}`
						b := &watchedBody{r: strings.NewReader(body)}
						path := strings.NewReplacer("{server_id}", "s1", "{agent}", "mock", "{id}", "p1").Replace(o.path)
						req := httptest.NewRequest(o.method, path+"?path=x&directory=d&mcpName=m&skillName=s", nil)
						req.Body, req.ContentLength = b, int64(len(body))
						if ctype != "" {
							req.Header.Set("Content-Type", ctype)
						}
						if token != "" {
							req.Header.Set("Authorization", token)
						}
						w := httptest.NewRecorder()
						h.ServeHTTP(w, req)
						if w.Code != http.StatusUnauthorized {
							t.Errorf("%s %s (token %q, %q): status %d, want 401: %s", o.method, path, token, ctype, w.Code, w.Body)
						}
						read := b.read.Load()
						switch reads := slices.Contains(c.readsFor, o.id); {
						case !reads && read != 0:
							t.Errorf("%s %s (token %q, %q): %d body bytes read before the 401", o.method, path, token, ctype, read)
						case reads && read == 0 && ctype == "application/json":
							t.Errorf("%s %s: the body was not read, yet the policy needs it to decide", o.method, path)
						}
					}
				}
			}
		})
	}
}

// A policy that decides without the body still grants without the token,
// and the operation then reads the body as usual; the policies are asked
// once.
func TestBodylessGrantReadsBodyAfter(t *testing.T) {
	p := &bodylessPolicy{}
	cfg := fullConfig(nil)
	cfg.Authorizer = p
	srv := httptest.NewServer(New(cfg))
	defer srv.Close()
	req, _ := http.NewRequest("POST", srv.URL+"/v1/fs/move", strings.NewReader(`{"from":"a","to":"b"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Key", "1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	// The move itself fails (no such file in the test's home), after the
	// chain let it through: not 401, not 415.
	if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusUnsupportedMediaType {
		t.Errorf("status %d: %s", resp.StatusCode, b)
	}
	if n := p.asked.Load(); n != 1 {
		t.Errorf("the policy was asked %d times, want once", n)
	}
}
