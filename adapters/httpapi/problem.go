package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"strings"

	"github.com/danielgtaylor/huma/v2"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
)

// Problem is an application/problem+json body (RFC 9457) with the
// extensions of api.md section 1 at the top level.
type Problem struct {
	Type      string         `json:"type"`
	Title     string         `json:"title"`
	Status    int            `json:"status"`
	Detail    string         `json:"detail"`
	Agent     string         `json:"agent,omitempty"`
	SessionID string         `json:"sessionId,omitempty"`
	Details   map[string]any `json:"details,omitempty"`

	headers http.Header
}

var (
	_ huma.StatusError       = (*Problem)(nil)
	_ huma.ContentTypeFilter = (*Problem)(nil)
	_ huma.HeadersError      = (*Problem)(nil)
)

func (p *Problem) Error() string                   { return p.Detail }
func (p *Problem) GetStatus() int                  { return p.Status }
func (p *Problem) ContentType(string) string       { return "application/problem+json" }
func (p *Problem) GetHeaders() http.Header         { return p.headers }
func (p *Problem) withHeader(k, v string) *Problem { p.headers = http.Header{k: {v}}; return p }

// kindInfo is the error table of api.md section 1: status, title, and
// whether the detail carries the message after "<kind>: ".
var kindInfo = map[domain.Kind]struct {
	status int
	title  string
	prefix string // detail prefix; the message follows it
}{
	domain.KindInvalidRequest:      {400, "Invalid Request", "invalid request"},
	domain.KindUnsupportedAgent:    {400, "Unsupported Agent", "unsupported agent"},
	domain.KindTokenInvalid:        {401, "Token Invalid", "token invalid"},
	domain.KindPermissionDenied:    {403, "Permission Denied", "permission denied"},
	domain.KindAgentNotInstalled:   {404, "Agent Not Installed", "agent not installed"},
	domain.KindSessionNotFound:     {404, "Session Not Found", "session not found"},
	domain.KindNotAcceptable:       {406, "Not Acceptable", "not acceptable"},
	domain.KindConflict:            {409, "Conflict", "conflict"},
	domain.KindPayloadTooLarge:     {413, "Payload Too Large", "payload too large"},
	domain.KindUnsupportedMedia:    {415, "Unsupported Media Type", "unsupported media type"},
	domain.KindTooManyInstances:    {429, "Too Many Instances", "too many instances"},
	domain.KindInstallFailed:       {500, "Install Failed", "install failed"},
	domain.KindAgentProcessExited:  {500, "Agent Process Exited", "agent process exited"},
	domain.KindStreamError:         {502, "Stream Error", "stream error"},
	domain.KindOverloaded:          {503, "Overloaded", "overloaded"},
	domain.KindTimeout:             {504, "Timeout", "timeout"},
	domain.KindNotFound:            {404, "Not Found", "not found"},
	domain.KindTooManyRequests:     {429, "Too Many Requests", "too many requests"},
	domain.KindInsufficientStorage: {507, "Insufficient Storage", "insufficient storage"},
}

// retryAfter is the Retry-After (seconds) of the kinds that mean "not now":
// a slot or a budget frees up as agents exit and requests complete.
var retryAfter = map[domain.Kind]string{
	domain.KindTooManyInstances: "5",
	domain.KindOverloaded:       "1",
	domain.KindTooManyRequests:  "1",
}

// Kinds whose detail is only the prefix, with the message in details.message.
var detailWithoutMessage = map[domain.Kind]bool{
	domain.KindTokenInvalid:     true,
	domain.KindPermissionDenied: true,
	domain.KindTimeout:          true,
}

// problemFor is the one place where an error becomes an HTTP response. Known
// kinds follow the table; anything else is a 500 whose cause is logged with
// the request id and never sent.
func problemFor(ctx context.Context, err error) *Problem {
	var p *Problem
	if errors.As(err, &p) {
		return p
	}
	if e, ok := domain.AsError(err); ok {
		info, known := kindInfo[e.Kind]
		if known {
			detail := info.prefix
			if e.Msg != "" && !detailWithoutMessage[e.Kind] {
				detail += ": " + e.Msg
			}
			status := info.status
			if e.Status != 0 {
				status = e.Status
			}
			if e.Err != nil {
				logger(ctx).Debug("request failed", "kind", e.Kind, "err", e.Err)
			}
			p := &Problem{
				Type:      "urn:sandbox-agent:error:" + string(e.Kind),
				Title:     info.title,
				Status:    status,
				Detail:    detail,
				Agent:     e.Agent,
				SessionID: e.SessionID,
				Details:   e.Details,
			}
			if after, ok := retryAfter[e.Kind]; ok {
				p.withHeader("Retry-After", after)
			}
			return p
		}
	}
	if errors.Is(err, context.Canceled) {
		// The client went away; nobody reads this answer.
		return &Problem{Type: "urn:sandbox-agent:error:stream_error", Title: "Stream Error", Status: 499, Detail: "stream error: client closed request"}
	}
	logger(ctx).Error("internal error", "err", err)
	return &Problem{Type: "urn:sandbox-agent:error:internal", Title: "Internal Server Error", Status: 500, Detail: "internal error"}
}

// humaLimit finds the limit in huma's 413 message ("request body is too
// large limit=1048576 bytes"), so every 413 carries details.limitBytes.
func humaLimit(msg string) (int64, bool) {
	_, rest, ok := strings.Cut(msg, "limit=")
	if !ok {
		return 0, false
	}
	end := 0
	for end < len(rest) && rest[end] >= '0' && rest[end] <= '9' {
		end++
	}
	n, err := strconv.ParseInt(rest[:end], 10, 64)
	return n, err == nil
}

// invalid is a shorthand for a 400 invalid_request problem.
func invalid(format string, args ...any) error { return domain.InvalidRequest(format, args...) }

// writeProblem writes p outside huma (middleware, not-found handling).
func writeProblem(w http.ResponseWriter, p *Problem) {
	for k, v := range p.headers {
		w.Header()[k] = v
	}
	w.Header().Set("Content-Type", "application/problem+json")
	w.Header().Set("Content-Length", strconv.Itoa(len(p.body())))
	w.WriteHeader(p.Status)
	_, _ = w.Write(p.body())
}

func (p *Problem) body() []byte {
	b, _ := json.Marshal(p) // only strings, ints and JSON-safe details
	return b
}

// hookHumaErrors makes huma's own errors (parameter validation, body
// parsing, content negotiation) problems of our shape, and routes errors
// returned by handlers through problemFor. huma exposes this hook only as a
// package variable, so it is set once at init.
func init() {
	huma.NewErrorWithContext = func(hctx huma.Context, status int, msg string, errs ...error) huma.StatusError {
		ctx := context.Background()
		if hctx != nil {
			ctx = hctx.Context()
		}
		return humaError(ctx, status, msg, errs...)
	}
	huma.NewError = func(status int, msg string, errs ...error) huma.StatusError {
		return humaError(context.Background(), status, msg, errs...)
	}
}

func humaError(ctx context.Context, status int, msg string, errs ...error) huma.StatusError {
	// A handler's error arrives as a single non-StatusError with status 500.
	if status == http.StatusInternalServerError && len(errs) == 1 {
		return problemFor(ctx, errs[0])
	}
	var parts []string
	for _, e := range errs {
		if e != nil {
			parts = append(parts, e.Error())
		}
	}
	detail := msg
	if len(parts) > 0 {
		detail = strings.TrimSuffix(msg, ".") + ": " + strings.Join(parts, "; ")
	}
	kind := domain.KindInvalidRequest
	switch status {
	case http.StatusNotAcceptable:
		kind = domain.KindNotAcceptable
	case http.StatusUnsupportedMediaType:
		kind = domain.KindUnsupportedMedia
	case http.StatusRequestEntityTooLarge:
		kind = domain.KindPayloadTooLarge
	}
	if status >= 500 {
		slog.Default().Error("internal error", "status", status, "detail", detail)
		return &Problem{Type: "urn:sandbox-agent:error:internal", Title: "Internal Server Error", Status: 500, Detail: "internal error"}
	}
	e := &domain.Error{Kind: kind, Msg: detail}
	if kind != domain.KindInvalidRequest {
		e.Details = map[string]any{"message": detail}
	}
	if limit, ok := humaLimit(detail); ok && kind == domain.KindPayloadTooLarge {
		e.Details["limitBytes"] = limit
	}
	p := problemFor(ctx, e)
	p.Status = status
	return p
}
