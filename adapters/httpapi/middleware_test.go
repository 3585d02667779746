package httpapi

import (
	"go/ast"
	"go/parser"
	"go/token"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/sandbox-agent-go/sandbox-agent/app/acp"
)

// plainServer serves the daemon's routes with only the ACP use cases wired.
func plainServer(t *testing.T, cfg Config) *httptest.Server {
	t.Helper()
	if cfg.Instances == nil {
		cfg.Instances = acp.NewInstances(acp.Options{}, nil, nil)
	}
	srv := httptest.NewServer(New(cfg))
	t.Cleanup(srv.Close)
	return srv
}

func TestUnknownRoutesAndMethods(t *testing.T) {
	srv := plainServer(t, Config{})
	tests := []struct {
		name, method, path string
		status             int
		detail             string
		allow              []string // methods the Allow header must list
	}{
		{"unknown route", "GET", "/v1/nope", 404, "endpoint not found", nil},
		{"unknown top-level route", "POST", "/whatever/else", 404, "endpoint not found", nil},
		{"opencode is not mounted", "GET", "/opencode/session", 404, "endpoint not found", nil},
		{"wrong method", "PUT", "/v1/health", 405, "invalid request: method not allowed", []string{"GET"}},
		{"wrong method on ACP", "PATCH", "/v1/acp/x", 405, "invalid request: method not allowed", []string{"GET", "POST", "DELETE"}},
		{"rpc GET is gone", "GET", "/v1/rpc", 410, "invalid request: /v1/rpc has been removed; use /v1/acp/{server_id}", nil},
		{"rpc POST is gone", "POST", "/v1/rpc", 410, "invalid request: /v1/rpc has been removed; use /v1/acp/{server_id}", nil},
		{"rpc DELETE is gone", "DELETE", "/v1/rpc", 410, "invalid request: /v1/rpc has been removed; use /v1/acp/{server_id}", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := doHTTP(t, tt.method, srv.URL+tt.path, "", nil)
			if resp.StatusCode != tt.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tt.status, body)
			}
			wantProblem(t, problemOf(t, resp, body), "invalid_request", tt.detail)
			allow := resp.Header.Get("Allow")
			for _, m := range tt.allow {
				if !strings.Contains(allow, m) {
					t.Errorf("Allow %q lacks %s", allow, m)
				}
			}
			if tt.allow == nil && allow != "" {
				t.Errorf("Allow %q on a %d", allow, resp.StatusCode)
			}
		})
	}
}

func TestBearerAuth(t *testing.T) {
	srv := plainServer(t, Config{Token: "s3cret"})
	tests := []struct {
		name, path, auth string
		status           int
	}{
		{"missing", "/v1/health", "", 401},
		{"wrong token", "/v1/health", "Bearer nope", 401},
		{"token prefix", "/v1/health", "Bearer s3cre", 401},
		{"token plus more", "/v1/health", "Bearer s3cret2", 401},
		{"lowercase scheme", "/v1/health", "bearer s3cret", 401},
		{"uppercase scheme", "/v1/health", "BEARER s3cret", 401},
		{"two spaces", "/v1/health", "Bearer  s3cret", 401},
		{"no scheme", "/v1/health", "s3cret", 401},
		{"basic", "/v1/health", "Basic czNjcmV0", 401},
		{"right", "/v1/health", "Bearer s3cret", 200},
		{"every /v1 route", "/v1/acp", "", 401},
		{"even unknown /v1 routes", "/v1/nope", "", 401},
		{"root needs none", "/", "", 200},
		{"document needs none", "/openapi.json", "", 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hdr := map[string]string{}
			if tt.auth != "" {
				hdr["Authorization"] = tt.auth
			}
			resp, body := doHTTP(t, "GET", srv.URL+tt.path, "", hdr)
			if resp.StatusCode != tt.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tt.status, body)
			}
			if tt.status != 401 {
				return
			}
			m := problemOf(t, resp, body)
			wantProblem(t, m, "token_invalid", "token invalid")
			if d, _ := m["details"].(map[string]any); d["message"] != "missing or invalid bearer token" {
				t.Errorf("details %v", m["details"])
			}
			if got := resp.Header.Get("WWW-Authenticate"); got != "Bearer" {
				t.Errorf("WWW-Authenticate %q", got)
			}
		})
	}

	t.Run("no token configured", func(t *testing.T) {
		open := plainServer(t, Config{})
		if resp, body := doHTTP(t, "GET", open.URL+"/v1/health", "", nil); resp.StatusCode != 200 {
			t.Errorf("status %d: %s", resp.StatusCode, body)
		}
	})
}

// The token comparison must not leak through timing: the one check /v1
// and /metrics share (app/authz Tokens.Check) compares with crypto/subtle
// and never with ==.
func TestBearerAuthConstantTime(t *testing.T) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "../../app/authz/tokens.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var fn *ast.FuncDecl
	for _, d := range f.Decls {
		if d, ok := d.(*ast.FuncDecl); ok && d.Name.Name == "Check" {
			fn = d
		}
	}
	if fn == nil {
		t.Fatal("Check not found in app/authz/tokens.go")
	}
	usesSubtle := false
	ast.Inspect(fn, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.SelectorExpr:
			if x, ok := n.X.(*ast.Ident); ok && x.Name == "subtle" && n.Sel.Name == "ConstantTimeCompare" {
				usesSubtle = true
			}
		case *ast.BinaryExpr:
			_, litX := n.X.(*ast.BasicLit)
			_, litY := n.Y.(*ast.BasicLit)
			if (n.Op == token.EQL || n.Op == token.NEQ) && !litX && !litY { // token == "" is fine
				for _, side := range []ast.Expr{n.X, n.Y} {
					if id, ok := side.(*ast.Ident); ok && (id.Name == "token" || id.Name == "want" || id.Name == "got") {
						t.Errorf("%s: token compared with %s", fset.Position(n.Pos()), n.Op)
					}
				}
			}
		}
		return true
	})
	if !usesSubtle {
		t.Error("Check does not use subtle.ConstantTimeCompare")
	}
}

func TestCORS(t *testing.T) {
	preflight := map[string]string{
		"Origin":                         "https://app.example",
		"Access-Control-Request-Method":  "POST",
		"Access-Control-Request-Headers": "authorization, content-type",
	}
	tests := []struct {
		name    string
		cors    CORS
		method  string
		hdr     map[string]string
		status  int
		headers map[string]string // "" means the header must be absent
	}{
		{"no origin configured: never a CORS header", CORS{}, "GET",
			map[string]string{"Origin": "https://app.example", "Authorization": "Bearer t"}, 200,
			map[string]string{"Access-Control-Allow-Origin": "", "Access-Control-Allow-Credentials": ""}},
		{"no origin configured: preflight is not special", CORS{}, "OPTIONS", preflight, 401,
			map[string]string{"Access-Control-Allow-Origin": ""}},
		{"preflight needs no token", CORS{Origins: []string{"https://app.example"}}, "OPTIONS", preflight, 204,
			map[string]string{
				"Access-Control-Allow-Origin":  "https://app.example",
				"Access-Control-Allow-Methods": "GET, POST, PUT, DELETE, OPTIONS",
				"Access-Control-Allow-Headers": "authorization, content-type",
				"Access-Control-Max-Age":       "600",
				"Vary":                         "Origin",
			}},
		{"explicit methods and headers", CORS{Origins: []string{"https://app.example"}, Methods: []string{"GET", "POST"}, Headers: []string{"Authorization"}}, "OPTIONS", preflight, 204,
			map[string]string{"Access-Control-Allow-Methods": "GET, POST", "Access-Control-Allow-Headers": "Authorization"}},
		{"other origin gets nothing", CORS{Origins: []string{"https://other.example"}}, "GET",
			map[string]string{"Origin": "https://app.example", "Authorization": "Bearer t"}, 200,
			map[string]string{"Access-Control-Allow-Origin": ""}},
		{"wildcard origin", CORS{Origins: []string{"*"}}, "GET",
			map[string]string{"Origin": "https://app.example", "Authorization": "Bearer t"}, 200,
			map[string]string{"Access-Control-Allow-Origin": "*", "Access-Control-Allow-Credentials": "", "Access-Control-Expose-Headers": "Content-Type, X-Request-Id, Acp-Connection-Id"}},
		{"credentials echo the origin", CORS{Origins: []string{"https://app.example"}, Methods: []string{"GET"}, Headers: []string{"Authorization"}, Credentials: true}, "GET",
			map[string]string{"Origin": "https://app.example", "Authorization": "Bearer t"}, 200,
			map[string]string{"Access-Control-Allow-Origin": "https://app.example", "Access-Control-Allow-Credentials": "true", "Vary": "Origin"}},
		{"errors carry CORS headers too", CORS{Origins: []string{"https://app.example"}}, "GET",
			map[string]string{"Origin": "https://app.example"}, 401,
			map[string]string{"Access-Control-Allow-Origin": "https://app.example"}},
		{"hostile origin: not reflected, and the answer varies by Origin", CORS{Origins: []string{"https://app.example"}}, "GET",
			map[string]string{"Origin": "https://evil.example", "Authorization": "Bearer t"}, 200,
			map[string]string{"Access-Control-Allow-Origin": "", "Access-Control-Allow-Credentials": "", "Vary": "Origin"}},
		{"hostile origin with credentials: nothing", CORS{Origins: []string{"https://app.example"}, Methods: []string{"GET"}, Headers: []string{"Authorization"}, Credentials: true}, "GET",
			map[string]string{"Origin": "https://evil.example", "Authorization": "Bearer t"}, 200,
			map[string]string{"Access-Control-Allow-Origin": "", "Access-Control-Allow-Credentials": ""}},
		{"a look-alike origin is another origin", CORS{Origins: []string{"https://app.example"}, Methods: []string{"GET"}, Headers: []string{"Authorization"}, Credentials: true}, "GET",
			map[string]string{"Origin": "https://app.example.evil.example", "Authorization": "Bearer t"}, 200,
			map[string]string{"Access-Control-Allow-Origin": "", "Access-Control-Allow-Credentials": ""}},
		{"hostile preflight: no 204, no CORS header", CORS{Origins: []string{"https://app.example"}, Methods: []string{"GET"}, Headers: []string{"Authorization"}, Credentials: true}, "OPTIONS",
			map[string]string{"Origin": "https://evil.example", "Access-Control-Request-Method": "POST"}, 401,
			map[string]string{"Access-Control-Allow-Origin": "", "Access-Control-Allow-Methods": "", "Access-Control-Allow-Credentials": ""}},
		{"null origin not listed", CORS{Origins: []string{"https://app.example"}}, "OPTIONS",
			map[string]string{"Origin": "null", "Access-Control-Request-Method": "POST"}, 401,
			map[string]string{"Access-Control-Allow-Origin": ""}},
		{"wildcard answers null with *, never the origin itself", CORS{Origins: []string{"*"}}, "GET",
			map[string]string{"Origin": "null", "Authorization": "Bearer t"}, 200,
			map[string]string{"Access-Control-Allow-Origin": "*", "Access-Control-Allow-Credentials": ""}},
		{"no Origin: no CORS header", CORS{Origins: []string{"*"}}, "GET",
			map[string]string{"Authorization": "Bearer t"}, 200,
			map[string]string{"Access-Control-Allow-Origin": "", "Vary": "Origin"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := plainServer(t, Config{Token: "t", CORS: tt.cors})
			resp, body := doHTTP(t, tt.method, srv.URL+"/v1/health", "", tt.hdr)
			if resp.StatusCode != tt.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tt.status, body)
			}
			for k, want := range tt.headers {
				if got := resp.Header.Get(k); got != want {
					t.Errorf("%s = %q, want %q", k, got, want)
				}
			}
		})
	}
}

func TestCORSValidate(t *testing.T) {
	explicit := CORS{Origins: []string{"https://a"}, Methods: []string{"GET"}, Headers: []string{"Authorization"}, Credentials: true}
	tests := []struct {
		name string
		cors CORS
		want string // part of the error; "" for none
	}{
		{"nothing", CORS{}, ""},
		{"wildcards without credentials", CORS{Origins: []string{"*"}, Methods: []string{"*"}, Headers: []string{"*"}}, ""},
		{"credentials with everything explicit", explicit, ""},
		{"credentials with wildcard origin", CORS{Origins: []string{"*"}, Methods: []string{"GET"}, Headers: []string{"X"}, Credentials: true}, "wildcard origin"},
		{"credentials with default methods", CORS{Origins: []string{"https://a"}, Headers: []string{"X"}, Credentials: true}, "--cors-allow-method"},
		{"credentials with wildcard methods", CORS{Origins: []string{"https://a"}, Methods: []string{"*"}, Headers: []string{"X"}, Credentials: true}, "--cors-allow-method"},
		{"credentials with default headers", CORS{Origins: []string{"https://a"}, Methods: []string{"GET"}, Credentials: true}, "--cors-allow-header"},
		{"credentials with wildcard headers", CORS{Origins: []string{"https://a"}, Methods: []string{"GET"}, Headers: []string{"*"}, Credentials: true}, "--cors-allow-header"},
		{"credentials with null", CORS{Origins: []string{"https://a", "null"}, Methods: []string{"GET"}, Headers: []string{"X"}, Credentials: true}, "'null'"},
		{"null without credentials", CORS{Origins: []string{"null"}}, ""},
		{"with a port", CORS{Origins: []string{"http://localhost:5173", "http://[::1]:3000", "http://127.0.0.1:5173"}}, ""},
		{"a path of its own", CORS{Origins: []string{"https://app.example/"}}, "not an origin"}, // NormalizeOrigins strips it first
		{"a path", CORS{Origins: []string{"https://app.example/app"}}, "not an origin"},
		{"no scheme", CORS{Origins: []string{"app.example"}}, "not an origin"},
		{"user info", CORS{Origins: []string{"https://u@app.example"}}, "not an origin"},
		{"a query", CORS{Origins: []string{"https://app.example?x"}}, "not an origin"},
		{"capitals", CORS{Origins: []string{"https://App.example"}}, "lower case"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cors.Validate()
			if tt.want == "" {
				if err := (CORS{Origins: NormalizeOrigins(tt.cors.Origins)}).Validate(); err != nil {
					t.Errorf("normalized: %v", err)
				}
			}
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("unexpected error: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("error %v, want one mentioning %q", err, tt.want)
			}
		})
	}
}

// Origins written as an address bar shows them (capitals, a trailing
// slash) mean the origin browsers send; what is no origin stays as it is,
// for Validate to refuse.
func TestNormalizeOrigins(t *testing.T) {
	in := []string{"https://App.Example/", "HTTP://localhost:5173", "https://a.example", "*", "null", "https://a.example/app", "app.example", "https://a.example/?x"}
	want := []string{"https://app.example", "http://localhost:5173", "https://a.example", "*", "null", "https://a.example/app", "app.example", "https://a.example/?x"}
	if got := NormalizeOrigins(in); !slices.Equal(got, want) {
		t.Errorf("NormalizeOrigins = %q, want %q", got, want)
	}
	if err := (CORS{Origins: NormalizeOrigins([]string{"https://App.example/"})}).Validate(); err != nil {
		t.Errorf("a normalized origin is refused: %v", err)
	}
}

// Every response carries a request id, the client's own when it sent one.
func TestRequestID(t *testing.T) {
	srv := plainServer(t, Config{})
	resp, _ := doHTTP(t, "GET", srv.URL+"/v1/health", "", map[string]string{"X-Request-Id": "abc-123"})
	if got := resp.Header.Get("X-Request-Id"); got != "abc-123" {
		t.Errorf("echoed id %q", got)
	}
	resp, _ = doHTTP(t, "GET", srv.URL+"/v1/nope", "", nil)
	if got := resp.Header.Get("X-Request-Id"); len(got) != 16 {
		t.Errorf("generated id %q", got)
	}
}
