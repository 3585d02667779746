package route

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"unicode/utf8"

	"github.com/danielgtaylor/huma/v2"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
)

// Problem is an application/problem+json body (RFC 9457) with the
// extensions of docs/api.md section 1 at the top level.
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

func (p *Problem) Error() string             { return p.Detail }
func (p *Problem) GetStatus() int            { return p.Status }
func (p *Problem) ContentType(string) string { return "application/problem+json" }
func (p *Problem) GetHeaders() http.Header   { return p.headers }

// WithHeader sets header k of the answer to v (Retry-After,
// WWW-Authenticate, Allow) and returns p.
func (p *Problem) WithHeader(k, v string) *Problem { p.headers = http.Header{k: {v}}; return p }

// shape says which of a domain.Error's fields reach the wire, and where.
type shape uint16

const (
	msgInDetail     shape = 1 << iota // detail is "<prefix>: <Msg>"
	agentInDetail                     // detail is "<prefix>: <Agent>"
	sessionInDetail                   // detail is "<prefix>: <SessionID>"
	withAgent                         // top-level "agent"
	withSessionID                     // top-level "sessionId"
	withMessage                       // details.message = Msg (omitted when empty)
	withStderr                        // details.stderr, and details.step when set
	withExitCode                      // details.exitCode (null after a signal)
	withLimit                         // details.limitBytes
	withCount                         // details.limit, a count
	withMinFree                       // details.minFreeBytes
	withResource                      // details.id and details.resource, when the error names a resource
	withExhausted                     // details.resource and details.limit (when known) in place of details.limitBytes, when the error names what ran out
)

// kindInfo is the error table of docs/api.md section 1: status, title, detail
// prefix, and which fields of the error reach the wire. It is the only place
// that knows a kind's status or wire shape; adding a kind is one row here
// (and its constant and constructor in domain/errors.go).
var kindInfo = map[domain.Kind]struct {
	status int
	title  string
	prefix string // detail prefix
	shape  shape
	// retryAfter is the Retry-After (seconds) of the kinds that mean "not
	// now": a slot or a budget frees up as agents exit and requests
	// complete.
	retryAfter string
}{
	domain.KindInvalidRequest:      {400, "Invalid Request", "invalid request", msgInDetail, ""},
	domain.KindUnsupportedAgent:    {400, "Unsupported Agent", "unsupported agent", agentInDetail | withAgent | withMessage, ""},
	domain.KindTokenInvalid:        {401, "Token Invalid", "token invalid", withMessage, ""},
	domain.KindPermissionDenied:    {403, "Permission Denied", "permission denied", withMessage, ""},
	domain.KindAgentNotInstalled:   {404, "Agent Not Installed", "agent not installed", agentInDetail | withAgent, ""},
	domain.KindSessionNotFound:     {404, "Session Not Found", "session not found", sessionInDetail | withSessionID, ""},
	domain.KindNotAcceptable:       {406, "Not Acceptable", "not acceptable", msgInDetail | withMessage, ""},
	domain.KindConflict:            {409, "Conflict", "conflict", msgInDetail | withMessage, ""},
	domain.KindPayloadTooLarge:     {413, "Payload Too Large", "payload too large", msgInDetail | withLimit, ""},
	domain.KindUnsupportedMedia:    {415, "Unsupported Media Type", "unsupported media type", msgInDetail | withMessage, ""},
	domain.KindInstallFailed:       {500, "Install Failed", "install failed", agentInDetail | withAgent | withStderr, ""},
	domain.KindAgentProcessExited:  {500, "Agent Process Exited", "agent process exited", agentInDetail | withAgent | withStderr | withExitCode, ""},
	domain.KindStreamError:         {502, "Stream Error", "stream error", msgInDetail | withMessage, ""},
	domain.KindTimeout:             {504, "Timeout", "timeout", withMessage, ""},
	domain.KindNotFound:            {404, "Not Found", "not found", msgInDetail | withResource, ""},
	domain.KindTooManyInstances:    {429, "Too Many Instances", "too many instances", msgInDetail | withMessage | withCount, "5"},
	domain.KindOverloaded:          {503, "Overloaded", "overloaded", msgInDetail | withMessage | withLimit | withExhausted, "1"},
	domain.KindTooManyRequests:     {429, "Too Many Requests", "too many requests", msgInDetail | withMessage | withCount, "1"},
	domain.KindInsufficientStorage: {507, "Insufficient Storage", "insufficient storage", msgInDetail | withMinFree, ""},
}

// statusError answers an error with a status other than its kind's usual
// one (405, 410, 416, 422 for invalid_request, a policy's chosen status).
// The status is an HTTP matter, so it lives here and not on domain.Error.
type statusError struct {
	err    *domain.Error
	status int
}

func (s *statusError) Error() string { return s.err.Error() }
func (s *statusError) Unwrap() error { return s.err }

// WithStatus makes err answer with status.
func WithStatus(status int, err *domain.Error) error { return &statusError{err: err, status: status} }

// ProblemFor is the one place where an error becomes an HTTP response. Known
// kinds follow the table; anything else is a 500 whose cause is logged with
// the request id and never sent.
func ProblemFor(ctx context.Context, err error) *Problem {
	var p *Problem
	if errors.As(err, &p) {
		return p
	}
	if e, ok := domain.AsError(err); ok {
		if e.Kind == domain.KindStreamError || e.Kind == domain.KindInstallFailed {
			e = shortage(e)
		}
		if info, known := kindInfo[e.Kind]; known {
			status := info.status
			if e.PolicyStatus != 0 {
				status = e.PolicyStatus
			}
			var se *statusError
			if errors.As(err, &se) {
				status = se.status
			}
			if e.Err != nil {
				Logger(ctx).Debug("request failed", "kind", e.Kind, "err", e.Err)
			}
			p := wireProblem(e, status, info.title, info.prefix, info.shape)
			if info.retryAfter != "" {
				p.WithHeader("Retry-After", info.retryAfter)
			}
			return p
		}
	}
	if errors.Is(err, context.Canceled) {
		// The client went away; nobody reads this answer.
		return &Problem{Type: "urn:sandbox-agent:error:stream_error", Title: "Stream Error", Status: 499, Detail: "stream error: client closed request"}
	}
	Logger(ctx).Error("internal error", "err", err)
	return &Problem{Type: "urn:sandbox-agent:error:internal", Title: "Internal Server Error", Status: 500, Detail: "internal error"}
}

// shortage is a stream_error (the kind of an I/O failure nothing else
// names) or an install_failed whose cause is a resource of the system
// that ran out, as the client can act on it: a full disk (ENOSPC, EDQUOT:
// with --min-free 0, or a disk filled by someone else meanwhile) is 507
// insufficient_storage, a full descriptor table (EMFILE, ENFILE: a file
// opened for a listing or a download) 503 overloaded naming it. They were
// 502 (an install's 500) with the bare errno. Anything else stays as it is.
func shortage(e *domain.Error) *domain.Error {
	msg := cmp.Or(e.Msg, e.Stderr) // an install's step and what it said
	switch {
	case errors.Is(e.Err, syscall.ENOSPC), errors.Is(e.Err, syscall.EDQUOT):
		return domain.InsufficientStorage(0, "the disk is full: %s", msg).Because(e.Err)
	case errors.Is(e.Err, syscall.EMFILE), errors.Is(e.Err, syscall.ENFILE):
		return domain.Exhausted(domain.ResourceFileDescriptors, 0,
			"the daemon is out of file descriptors: "+msg+"; retry later, or close event streams, processes or agents").Because(e.Err)
	}
	return e
}

// wireProblem lays e out as its kind's shape says.
func wireProblem(e *domain.Error, status int, title, prefix string, sh shape) *Problem {
	p := &Problem{Type: "urn:sandbox-agent:error:" + string(e.Kind), Title: title, Status: status, Detail: prefix}
	subject := ""
	switch {
	case sh&msgInDetail != 0:
		subject = e.Msg
	case sh&agentInDetail != 0:
		subject = e.Agent
	case sh&sessionInDetail != 0:
		subject = e.SessionID
	}
	if subject != "" {
		p.Detail += ": " + subject
	}
	if sh&withAgent != 0 {
		p.Agent = e.Agent
	}
	if sh&withSessionID != 0 {
		p.SessionID = e.SessionID
	}
	details := map[string]any{}
	if sh&withMessage != 0 && e.Msg != "" {
		details["message"] = e.Msg
	}
	if sh&withStderr != 0 {
		details["stderr"] = e.Stderr
		if e.Step != "" {
			details["step"] = e.Step
		}
	}
	if sh&withExitCode != 0 {
		if e.ExitCode != nil {
			details["exitCode"] = *e.ExitCode
		} else {
			details["exitCode"] = nil
		}
	}
	exhausted := sh&withExhausted != 0 && e.Resource != ""
	if sh&withLimit != 0 && !exhausted {
		details["limitBytes"] = e.LimitBytes
	}
	if exhausted {
		details["resource"] = e.Resource
		if e.Limit > 0 {
			details["limit"] = e.Limit
		}
	}
	if sh&withCount != 0 {
		details["limit"] = e.Limit
	}
	if sh&withMinFree != 0 {
		details["minFreeBytes"] = e.MinFreeBytes
	}
	if sh&withResource != 0 && e.Resource != "" {
		details["id"] = e.ID
		details["resource"] = e.Resource
	}
	if len(details) > 0 {
		p.Details = details
	}
	return p
}

// EndpointNotFound is the answer to a path no route serves, as the
// reference words it: kind invalid_request, but titled "Not Found" and
// without the kind's detail prefix. The SDK makes a problem's title its
// error's message, so a client sees "Not Found" from either server.
func EndpointNotFound() *Problem {
	return &Problem{Type: "urn:sandbox-agent:error:" + string(domain.KindInvalidRequest), Title: "Not Found", Status: http.StatusNotFound, Detail: "endpoint not found"}
}

// Invalid is a shorthand for a 400 invalid_request problem.
func Invalid(format string, args ...any) error { return domain.InvalidRequest(format, args...) }

// WriteProblem writes p outside huma (middleware, not-found handling).
func WriteProblem(w http.ResponseWriter, p *Problem) {
	for k, v := range p.headers {
		w.Header()[k] = v
	}
	w.Header().Set("Content-Type", "application/problem+json")
	w.Header().Set("Content-Length", strconv.Itoa(len(p.Body())))
	w.WriteHeader(p.Status)
	_, _ = w.Write(p.Body())
}

// Body is p as the JSON of an application/problem+json answer.
func (p *Problem) Body() []byte {
	b, _ := json.Marshal(p) // only strings, ints and JSON-safe details
	return b
}

// hookHumaErrors makes huma's own errors (parameter validation, body
// parsing, content negotiation) problems of our shape, and routes errors
// returned by handlers through ProblemFor. huma exposes this hook only as a
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
		return ProblemFor(ctx, errs[0])
	}
	var parts []string
	for _, e := range errs {
		if e == nil {
			continue
		}
		if len(parts) == maxErrorParts {
			parts = append(parts, fmt.Sprintf("and %d more", countErrs(errs)-maxErrorParts))
			break
		}
		parts = append(parts, errorPart(e))
	}
	if status == http.StatusUnprocessableEntity && inParameters(errs) {
		// A query or path parameter that does not parse is 400, as the
		// reference answers it (its query extractor refuses the request
		// before any body is read); 422 stays for bodies.
		status = http.StatusBadRequest
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
	p := ProblemFor(ctx, WithStatus(status, domain.Errorf(kind, "%s", detail)))
	if kind != domain.KindInvalidRequest {
		// huma's message, whatever the kind's usual details; every 413
		// carries details.limitBytes.
		p.Details = map[string]any{"message": detail}
		if limit, ok := humaLimit(detail); ok && kind == domain.KindPayloadTooLarge {
			p.Details["limitBytes"] = limit
		}
	}
	return p
}

// A problem names what huma refused, never all of it: huma's own message
// repeats the value ("expected boolean (body.reinstall: …)"), the whole
// body for one it cannot parse, and lists every element of an array that
// fails. Echoed whole, a 1 MiB body of control characters was a 12 MB
// answer (each escaped six times, in detail and in details.message), held
// outside every budget while the client did not read it.
const (
	maxEchoedValue = 64 // bytes of a refused value a problem repeats
	maxErrorParts  = 8  // huma errors a problem lists
)

// errorPart is e as a problem states it: huma's message and where, with at
// most maxEchoedValue bytes of the value (none of the whole body: the
// client has it).
func errorPart(e error) string {
	var d huma.ErrorDetailer
	if !errors.As(e, &d) {
		return e.Error()
	}
	ed := d.ErrorDetail()
	switch {
	case ed.Location == "" && ed.Value == nil:
		return ed.Message
	case ed.Location == "body" || ed.Value == nil:
		return fmt.Sprintf("%s (%s)", ed.Message, ed.Location)
	}
	v := fmt.Sprint(ed.Value)
	if len(v) > maxEchoedValue {
		cut := maxEchoedValue
		for cut > 0 && !utf8.RuneStart(v[cut]) {
			cut--
		}
		v = v[:cut] + "…"
	}
	return fmt.Sprintf("%s (%s: %s)", ed.Message, ed.Location, v)
}

// inParameters reports whether huma refused a parameter of the request
// (query, path, header, cookie) rather than its body.
func inParameters(errs []error) bool {
	for _, e := range errs {
		var d huma.ErrorDetailer
		if e == nil || !errors.As(e, &d) {
			continue
		}
		loc := d.ErrorDetail().Location
		for _, p := range [...]string{"query.", "path.", "header.", "cookie."} {
			if strings.HasPrefix(loc, p) {
				return true
			}
		}
	}
	return false
}

// countErrs is how many of errs are errors.
func countErrs(errs []error) int {
	n := 0
	for _, e := range errs {
		if e != nil {
			n++
		}
	}
	return n
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

// WithHeaders maps a handler's error to its problem inside the handler, for
// the kinds whose problem carries headers (Retry-After): huma takes response
// headers only from the error a handler returns, not from the one its error
// hook makes of it. Register wraps every operation in it (it used to be
// opt-in, and the process routes' 429 and 503 went without Retry-After).
func WithHeaders[I, O any](h func(context.Context, *I) (O, error)) func(context.Context, *I) (O, error) {
	return func(ctx context.Context, in *I) (O, error) {
		out, err := h(ctx, in)
		if e, ok := domain.AsError(err); ok && kindInfo[e.Kind].retryAfter != "" {
			return out, ProblemFor(ctx, err)
		}
		return out, err
	}
}
