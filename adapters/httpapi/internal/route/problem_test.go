package route

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
)

// TestProblemForKinds is the error table of docs/api.md section 1, row by row:
// each kind's status, title, type, detail and extension shape, as the
// client receives it.
func TestProblemForKinds(t *testing.T) {
	three := 3
	tests := []struct {
		err    *domain.Error
		status int
		title  string
		body   string // the JSON body, exactly
	}{
		{domain.InvalidRequest("missing required 'agent' query parameter for first POST to /v1/acp/x"), 400, "Invalid Request",
			`{"type":"urn:sandbox-agent:error:invalid_request","title":"Invalid Request","status":400,"detail":"invalid request: missing required 'agent' query parameter for first POST to /v1/acp/x"}`},
		{domain.UnsupportedAgent("nope"), 400, "Unsupported Agent",
			`{"type":"urn:sandbox-agent:error:unsupported_agent","title":"Unsupported Agent","status":400,"detail":"unsupported agent: nope","agent":"nope"}`},
		{domain.UnlistedAgent("nope", errors.New("dial tcp: refused")), 400, "Unsupported Agent",
			`{"type":"urn:sandbox-agent:error:unsupported_agent","title":"Unsupported Agent","status":400,"detail":"unsupported agent: nope","agent":"nope","details":{"message":"not a known agent, and the ACP registry could not be read: dial tcp: refused"}}`},
		{domain.TokenInvalid("missing or invalid bearer token"), 401, "Token Invalid",
			`{"type":"urn:sandbox-agent:error:token_invalid","title":"Token Invalid","status":401,"detail":"token invalid","details":{"message":"missing or invalid bearer token"}}`},
		{domain.PermissionDenied("policy says no"), 403, "Permission Denied",
			`{"type":"urn:sandbox-agent:error:permission_denied","title":"Permission Denied","status":403,"detail":"permission denied","details":{"message":"policy says no"}}`},
		{domain.AgentNotInstalled("claude"), 404, "Agent Not Installed",
			`{"type":"urn:sandbox-agent:error:agent_not_installed","title":"Agent Not Installed","status":404,"detail":"agent not installed: claude","agent":"claude"}`},
		{domain.SessionNotFound("s1"), 404, "Session Not Found",
			`{"type":"urn:sandbox-agent:error:session_not_found","title":"Session Not Found","status":404,"detail":"session not found: s1","sessionId":"s1"}`},
		{domain.NotAcceptable("this endpoint only produces application/json"), 406, "Not Acceptable",
			`{"type":"urn:sandbox-agent:error:not_acceptable","title":"Not Acceptable","status":406,"detail":"not acceptable: this endpoint only produces application/json","details":{"message":"this endpoint only produces application/json"}}`},
		{domain.Conflict("server 's' already exists for agent 'a'; requested 'b'"), 409, "Conflict",
			`{"type":"urn:sandbox-agent:error:conflict","title":"Conflict","status":409,"detail":"conflict: server 's' already exists for agent 'a'; requested 'b'","details":{"message":"server 's' already exists for agent 'a'; requested 'b'"}}`},
		{domain.TooLarge(8, "input of 9 bytes exceeds maxInputBytesPerRequest (8)"), 413, "Payload Too Large",
			`{"type":"urn:sandbox-agent:error:payload_too_large","title":"Payload Too Large","status":413,"detail":"payload too large: input of 9 bytes exceeds maxInputBytesPerRequest (8)","details":{"limitBytes":8}}`},
		{domain.PayloadTooLarge(32 << 20), 413, "Payload Too Large",
			`{"type":"urn:sandbox-agent:error:payload_too_large","title":"Payload Too Large","status":413,"detail":"payload too large: request body exceeds 33554432 bytes","details":{"limitBytes":33554432}}`},
		{domain.UnsupportedMedia("expected Content-Type: application/json"), 415, "Unsupported Media Type",
			`{"type":"urn:sandbox-agent:error:unsupported_media_type","title":"Unsupported Media Type","status":415,"detail":"unsupported media type: expected Content-Type: application/json","details":{"message":"expected Content-Type: application/json"}}`},
		{domain.InstallFailed("codex", "npm ERR! 404"), 500, "Install Failed",
			`{"type":"urn:sandbox-agent:error:install_failed","title":"Install Failed","status":500,"detail":"install failed: codex","agent":"codex","details":{"stderr":"npm ERR! 404"}}`},
		{domain.InstallStepFailed("codex", "npm install", "npm ERR! 404"), 500, "Install Failed",
			`{"type":"urn:sandbox-agent:error:install_failed","title":"Install Failed","status":500,"detail":"install failed: codex","agent":"codex","details":{"stderr":"npm install: npm ERR! 404","step":"npm install"}}`},
		{domain.AgentExited("mock", &three, "a\nb"), 500, "Agent Process Exited",
			`{"type":"urn:sandbox-agent:error:agent_process_exited","title":"Agent Process Exited","status":500,"detail":"agent process exited: mock","agent":"mock","details":{"exitCode":3,"stderr":"a\nb"}}`},
		{domain.AgentExited("mock", nil, ""), 500, "Agent Process Exited",
			`{"type":"urn:sandbox-agent:error:agent_process_exited","title":"Agent Process Exited","status":500,"detail":"agent process exited: mock","agent":"mock","details":{"exitCode":null,"stderr":""}}`},
		{domain.StreamError("failed to start agent process: x").Because(errors.New("/secret/host/path: no such file")), 502, "Stream Error",
			`{"type":"urn:sandbox-agent:error:stream_error","title":"Stream Error","status":502,"detail":"stream error: failed to start agent process: x","details":{"message":"failed to start agent process: x"}}`},
		{domain.TooManyInstances("limit", 2), 429, "Too Many Instances",
			`{"type":"urn:sandbox-agent:error:too_many_instances","title":"Too Many Instances","status":429,"detail":"too many instances: limit","details":{"limit":2,"message":"limit"}}`},
		{domain.Overloaded("busy", 10), 503, "Overloaded",
			`{"type":"urn:sandbox-agent:error:overloaded","title":"Overloaded","status":503,"detail":"overloaded: busy","details":{"limitBytes":10,"message":"busy"}}`},
		// A resource of the system that ran out: which one, and its limit.
		{domain.Exhausted(domain.ResourceFileDescriptors, 64, "out of file descriptors"), 503, "Overloaded",
			`{"type":"urn:sandbox-agent:error:overloaded","title":"Overloaded","status":503,"detail":"overloaded: out of file descriptors","details":{"limit":64,"message":"out of file descriptors","resource":"file_descriptors"}}`},
		{domain.Exhausted(domain.ResourceProcesses, 0, "out of processes"), 503, "Overloaded",
			`{"type":"urn:sandbox-agent:error:overloaded","title":"Overloaded","status":503,"detail":"overloaded: out of processes","details":{"message":"out of processes","resource":"processes"}}`},
		{domain.Timeout("timed out waiting for agent response"), 504, "Timeout",
			`{"type":"urn:sandbox-agent:error:timeout","title":"Timeout","status":504,"detail":"timeout","details":{"message":"timed out waiting for agent response"}}`},
		{domain.NotFound("process proc_7"), 404, "Not Found",
			`{"type":"urn:sandbox-agent:error:not_found","title":"Not Found","status":404,"detail":"not found: process proc_7"}`},
		// A process, as the reference names it in details.
		{domain.ResourceNotFound("process", "proc_7"), 404, "Not Found",
			`{"type":"urn:sandbox-agent:error:not_found","title":"Not Found","status":404,"detail":"not found: process proc_7","details":{"id":"proc_7","resource":"process"}}`},
		// As the processes service sends it: the message and the cap.
		{domain.TooManyRequests("64 processes are alive", 64), 429, "Too Many Requests",
			`{"type":"urn:sandbox-agent:error:too_many_requests","title":"Too Many Requests","status":429,"detail":"too many requests: 64 processes are alive","details":{"limit":64,"message":"64 processes are alive"}}`},
		{domain.InsufficientStorage(1<<30, "less than 1073741824 bytes free"), 507, "Insufficient Storage",
			`{"type":"urn:sandbox-agent:error:insufficient_storage","title":"Insufficient Storage","status":507,"detail":"insufficient storage: less than 1073741824 bytes free","details":{"minFreeBytes":1073741824}}`},
	}
	seen := map[domain.Kind]bool{}
	for _, tt := range tests {
		t.Run(string(tt.err.Kind), func(t *testing.T) {
			seen[tt.err.Kind] = true
			// Through a wrapping error, as handlers return them.
			p := ProblemFor(context.Background(), fmt.Errorf("doing something: %w", tt.err))
			if p.Status != tt.status || p.Title != tt.title {
				t.Errorf("status %d title %q, want %d %q", p.Status, p.Title, tt.status, tt.title)
			}
			if got := string(p.Body()); got != tt.body {
				t.Errorf("body\n got %s\nwant %s", got, tt.body)
			}
			// And on the wire.
			rec := httptest.NewRecorder()
			WriteProblem(rec, p)
			if rec.Code != tt.status || rec.Header().Get("Content-Type") != "application/problem+json" || rec.Body.String() != tt.body {
				t.Errorf("wire: %d %q %s", rec.Code, rec.Header().Get("Content-Type"), rec.Body)
			}
			if got, want := rec.Header().Get("Retry-After") != "", tt.status == 429 || tt.status == 503; got != want {
				t.Errorf("Retry-After %q", rec.Header().Get("Retry-After"))
			}
		})
	}
	// docs/api.md's 14, plus not_found and too_many_requests (processes),
	// too_many_instances and overloaded (docs/limits.md) and
	// insufficient_storage (files).
	if len(seen) != 19 || len(kindInfo) != 19 {
		t.Errorf("table covers %d kinds, kindInfo has %d; want 19", len(seen), len(kindInfo))
	}
	for k := range kindInfo {
		if !seen[k] {
			t.Errorf("kind %s has no row here", k)
		}
	}
}

// A stream_error caused by a full disk or a full descriptor table says
// so, with the status a client can act on; other causes stay 502.
func TestProblemForShortages(t *testing.T) {
	cause := func(errno syscall.Errno) error {
		return domain.StreamError(errno.Error()).Because(&fs.PathError{Op: "write", Path: "/x", Err: errno})
	}
	install := func(errno syscall.Errno) error {
		err := &fs.PathError{Op: "write", Path: "/x", Err: errno}
		return domain.InstallStepFailed("a", "download http://x/a.tar.gz", err.Error()).Because(fmt.Errorf("install a: %w", err))
	}
	for _, c := range []struct {
		err    error
		status int
		has    string
	}{
		{cause(syscall.ENOSPC), 507, `"type":"urn:sandbox-agent:error:insufficient_storage"`},
		{cause(syscall.EDQUOT), 507, `the disk is full`},
		{cause(syscall.EMFILE), 503, `"resource":"file_descriptors"`},
		{cause(syscall.EACCES), 502, `"type":"urn:sandbox-agent:error:stream_error"`},
		// An install's download or unpack on a full disk (--min-free 0):
		// it was a 500 install_failed, though limits.md promised 507.
		{install(syscall.ENOSPC), 507, `the disk is full: download http://x/a.tar.gz: write /x: no space left on device`},
		{install(syscall.EMFILE), 503, `"resource":"file_descriptors"`},
		{install(syscall.EACCES), 500, `"type":"urn:sandbox-agent:error:install_failed"`},
	} {
		p := ProblemFor(context.Background(), c.err)
		if p.Status != c.status || !strings.Contains(string(p.Body()), c.has) {
			t.Errorf("%v: %d %s", c.err, p.Status, p.Body())
		}
	}
}

func TestProblemForOthers(t *testing.T) {
	t.Run("status override keeps the kind", func(t *testing.T) {
		p := ProblemFor(context.Background(), fmt.Errorf("wrapped: %w", WithStatus(405, domain.InvalidRequest("method not allowed"))))
		if p.Status != 405 || p.Type != "urn:sandbox-agent:error:invalid_request" || p.Detail != "invalid request: method not allowed" {
			t.Errorf("%+v", p)
		}
	})
	t.Run("a problem passes through", func(t *testing.T) {
		in := &Problem{Type: "urn:x", Title: "T", Status: 418, Detail: "d"}
		if p := ProblemFor(context.Background(), fmt.Errorf("wrapped: %w", in)); p != in {
			t.Errorf("got %+v", p)
		}
	})
	t.Run("unknown errors are 500 and leak nothing", func(t *testing.T) {
		p := ProblemFor(context.Background(), fmt.Errorf("open /home/secret/.config: %w", errors.New("permission denied")))
		want := `{"type":"urn:sandbox-agent:error:internal","title":"Internal Server Error","status":500,"detail":"internal error"}`
		if got := string(p.Body()); got != want || p.Status != 500 {
			t.Errorf("got %s", got)
		}
	})
	t.Run("unknown kind is internal", func(t *testing.T) {
		p := ProblemFor(context.Background(), &domain.Error{Kind: "made_up", Msg: "secret"})
		if p.Status != 500 || strings.Contains(string(p.Body()), "secret") {
			t.Errorf("got %s", p.Body())
		}
	})
	t.Run("client gone", func(t *testing.T) {
		p := ProblemFor(context.Background(), fmt.Errorf("waiting: %w", context.Canceled))
		if p.Status != 499 {
			t.Errorf("got %+v", p)
		}
	})
}
