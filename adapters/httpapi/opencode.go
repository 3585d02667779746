package httpapi

import (
	"bytes"
	"context"
	"encoding/base64"
	"io"
	"net/http"
	"slices"
	"strings"

	"github.com/sandbox-agent-go/sandbox-agent/adapters/httpapi/internal/route"
	"github.com/sandbox-agent-go/sandbox-agent/domain"
)

// OpenCode is OpenCode's HTTP API (adapters/opencode), mounted at
// /opencode behind the same auth chain, browser guards and CORS as every
// route. It describes its own requests: Describe fills in the action and
// the agent of one (body is the request body when policies are to see
// it, else nil). StartAllowed carries into the request's context whether
// the chain let it start an agent: a prompt described as a send to a
// running agent must not start it if it stopped meanwhile.
type OpenCode interface {
	http.Handler
	Describe(r *http.Request, body []byte, req *domain.AuthRequest)
	StartAllowed(ctx context.Context, allowed bool) context.Context
}

// openCodeRoute names every /opencode request to the policies: one route
// and operation id, the action telling them apart.
const (
	openCodeRoute = "/opencode/*"
	openCodeOpID  = "opencode"
)

// mountOpenCode serves /opencode: OpenCode's Basic credentials read as
// the bearer token, then the chain (with policies, after the body is
// read, bounded by --max-acp-body and --inflight-bytes, so they see which
// agent a prompt runs), then the adapter.
func mountOpenCode(mux *http.ServeMux, cfg *Config) {
	oc := cfg.OpenCode
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		basicAsBearer(r)
		var body []byte
		if cfg.env.Chain.HasPolicies() && r.Body != nil && r.Body != http.NoBody && r.Method != http.MethodGet && r.Method != http.MethodHead {
			b, charged, err := route.ReadCharged(r, cfg.MaxACPBody, cfg.env.Budget)
			defer cfg.env.Budget.Give(charged)
			if err != nil {
				route.WriteProblem(w, route.ProblemFor(r.Context(), err))
				return
			}
			body = b
			r.Body = io.NopCloser(bytes.NewReader(b))
		}
		req := cfg.env.AuthRequest(r, r.Method, openCodeRoute, openCodeOpID)
		if req.Query != nil {
			// The OpenCode adapter reads its query with net/url, not
			// huma: the policies see that reading (route.QueryAsRead).
			req.Query = r.URL.Query()
		}
		oc.Describe(r, body, &req)
		ctx, err := cfg.env.Authorize(r.Context(), req)
		if err != nil {
			route.WriteAuthProblem(w, ctx, err)
			return
		}
		// Without policies whoever passes the token check may do
		// anything; with them, only what they judged.
		ctx = oc.StartAllowed(ctx, !cfg.env.Chain.HasPolicies() || slices.Contains(req.AllActions(), domain.ActionACPStart))
		if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/event") {
			// OpenCode's event streams end when a reload revokes them.
			var cancel context.CancelFunc
			ctx, cancel = context.WithCancel(ctx)
			defer cancel()
			defer route.Revocable(ctx, cancel)()
		}
		oc.ServeHTTP(w, r.WithContext(ctx))
	})
	mux.Handle("/opencode/", h)
	mux.Handle("/opencode", h)
}

// basicAsBearer reads HTTP Basic credentials, as OpenCode's CLI sends its
// --password (user "opencode" or $OPENCODE_SERVER_USERNAME; any user is
// accepted), as the bearer token, so the chain checks one thing.
func basicAsBearer(r *http.Request) {
	v := r.Header.Get("Authorization")
	if len(v) < 6 || !strings.EqualFold(v[:6], "basic ") {
		return
	}
	dec, err := base64.StdEncoding.DecodeString(strings.TrimSpace(v[6:]))
	if err != nil {
		return
	}
	if _, pass, ok := strings.Cut(string(dec), ":"); ok {
		r.Header.Set("Authorization", "Bearer "+pass)
	}
}
