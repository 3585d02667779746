package processapi

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"reflect"
	"strconv"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/sandbox-agent-go/sandbox-agent/adapters/httpapi/internal/route"
	"github.com/sandbox-agent-go/sandbox-agent/app/processes"
	"github.com/sandbox-agent-go/sandbox-agent/domain"
)

// The processes routes (/v1/processes), with the TypeScript SDK 0.4.2's
// operation ids, shapes and frames. Errors go through route.ProblemFor like every
// route; the log stream is SSE written here, the terminal a WebSocket
// (terminal.go).

var procTags = []string{"processes"}

type procIDInput struct {
	ID string `path:"id" doc:"Process ID."`
}

type procListInput struct {
	Owner string `query:"owner" enum:"user,desktop,system" doc:"Only processes of this owner."`
}

type procListOutput struct {
	Body struct {
		Processes []domain.ProcessInfo `json:"processes"`
	}
}

type procInfoOutput struct{ Body domain.ProcessInfo }

type procCreateInput struct{ Body domain.ProcessCreateRequest }

type procRunInput struct {
	Body domain.ProcessRunRequest
}

type procRunOutput struct{ Body domain.ProcessRunResponse }

type procConfigInput struct{ Body domain.ProcessConfig }

type procConfigOutput struct{ Body domain.ProcessConfig }

type procSignalInput struct {
	route.RawRequest
	ID     string `path:"id" doc:"Process ID."`
	WaitMs int64  `query:"waitMs" minimum:"0" doc:"Wait up to N ms for the process to exit (default 2000 for stop, 1000 for kill; at most 60000)."`
}

type procLogsInput struct {
	route.RawRequest
	ID          string `path:"id" doc:"Process ID."`
	Stream      string `query:"stream" enum:"stdout,stderr,combined,pty" doc:"Which output: stdout, stderr, both (combined), or a terminal's (pty). Default: pty for a terminal, else combined."`
	Tail        int    `query:"tail" minimum:"0" doc:"Only the last N entries."`
	Follow      bool   `query:"follow" doc:"Stream entries as Server-Sent Events (event: log), then follow live output until the process exits."`
	Since       int64  `query:"since" minimum:"0" doc:"Only entries with a sequence greater than this."`
	LastEventID string `header:"Last-Event-ID" doc:"With follow: resume after this sequence (the larger of it and since wins)."`
	Encoding    string `query:"encoding" enum:"base64,utf8" doc:"How entries carry the output: base64 (default, any bytes) or utf8 (text; bytes that are not UTF-8 become U+FFFD, a character split between two reads is kept whole)."`
}

type procInputInput struct {
	ID   string `path:"id" doc:"Process ID."`
	Body struct {
		_        struct{} `json:"-" additionalProperties:"true"`
		Data     string   `json:"data" doc:"The input, encoded as encoding says."`
		Encoding *string  `json:"encoding,omitempty" doc:"base64 (default), utf8 or text."`
	}
}

type procInputOutput struct {
	Body struct {
		BytesWritten int `json:"bytesWritten"`
	}
}

type procResizeInput struct {
	ID   string `path:"id" doc:"Process ID."`
	Body procSize
}

// procSize is a terminal size; out of 0–65535 is 422, as the reference's
// unsigned 16-bit fields refuse it.
type procSize struct {
	_    struct{} `json:"-" additionalProperties:"true"`
	Cols int      `json:"cols" minimum:"0" maximum:"65535"`
	Rows int      `json:"rows" minimum:"0" maximum:"65535"`
}

type procResizeOutput struct{ Body procSize }

// inputBodyLimit bounds the JSON body of an input request, and a terminal
// frame: the configured maxInputBytesPerRequest as JSON may carry it (utf8
// data with every byte escaped as \u00XX takes six bytes a byte, base64
// four for three) plus 4 KiB for the envelope. A body past it is refused
// on its Content-Length, or as it grows, before it is held (413); the
// configured limit itself is checked on the decoded bytes (413).
func inputBodyLimit(svc *processes.Service) int64 {
	return 6*int64(svc.Config().MaxInputBytesPerRequest) + 4<<10
}

// Register adds the /v1/processes operations to api, served by svc.
func Register(api huma.API, env *route.Env, svc *processes.Service) {

	route.Register(api, huma.Operation{
		OperationID: "get_v1_processes_config", Method: http.MethodGet, Path: "/v1/processes/config",
		Summary: "Get process runtime configuration", Tags: procTags, Security: route.Bearer,
	}, route.Act(domain.ActionProcessRead), func(ctx context.Context, _ *struct{}) (*procConfigOutput, error) {
		return &procConfigOutput{Body: svc.Config()}, nil
	})

	route.Register(api, huma.Operation{
		OperationID: "post_v1_processes_config", Method: http.MethodPost, Path: "/v1/processes/config",
		Summary:     "Update process runtime configuration",
		Description: "Replaces the configuration as a whole. Every value must be positive and within the daemon's ceiling (400 otherwise); a default run timeout above the maximum is lowered to it.",
		Tags:        procTags, Security: route.Bearer,
	}, route.Act(domain.ActionProcessRun), func(ctx context.Context, in *procConfigInput) (*procConfigOutput, error) {
		c, err := svc.SetConfig(in.Body)
		if err != nil {
			return nil, err
		}
		return &procConfigOutput{Body: c}, nil
	})

	route.Register(api, huma.Operation{
		OperationID: "post_v1_processes_run", Method: http.MethodPost, Path: "/v1/processes/run",
		Summary:     "Run a command to completion",
		Description: "stdin is /dev/null. Each output is kept up to maxOutputBytes (then *Truncated); at the timeout the whole process group is killed (timedOut). Counts against maxConcurrentProcesses (429).",
		Tags:        procTags, Security: route.Bearer,
	}, route.Act(domain.ActionProcessRun), func(ctx context.Context, in *procRunInput) (*procRunOutput, error) {
		out, err := svc.Run(ctx, in.Body)
		if err != nil {
			return nil, err
		}
		return &procRunOutput{Body: out}, nil
	})

	route.Register(api, huma.Operation{
		OperationID: "get_v1_processes", Method: http.MethodGet, Path: "/v1/processes",
		Summary:     "List managed processes",
		Description: "Running and exited processes, in creation order.",
		Tags:        procTags, Security: route.Bearer,
	}, route.Act(domain.ActionProcessRead), func(ctx context.Context, in *procListInput) (*procListOutput, error) {
		out := &procListOutput{}
		out.Body.Processes = svc.List(domain.ProcessOwner(in.Owner))
		return out, nil
	})

	route.Register(api, huma.Operation{
		OperationID: "post_v1_processes", Method: http.MethodPost, Path: "/v1/processes",
		Summary:     "Start a long-lived managed process",
		Description: "On pipes (stdin, stdout, stderr) or, with tty, on a pseudo-terminal; in a process group of its own. 429 past maxConcurrentProcesses.",
		Tags:        procTags, Security: route.Bearer,
	}, route.Act(domain.ActionProcessRun), func(ctx context.Context, in *procCreateInput) (*procInfoOutput, error) {
		info, err := svc.Create(ctx, in.Body)
		if err != nil {
			return nil, err
		}
		return &procInfoOutput{Body: info}, nil
	})

	route.Register(api, huma.Operation{
		OperationID: "get_v1_process", Method: http.MethodGet, Path: "/v1/processes/{id}",
		Summary: "Get a managed process", Tags: procTags, Security: route.Bearer,
	}, route.Act(domain.ActionProcessRead), func(ctx context.Context, in *procIDInput) (*procInfoOutput, error) {
		info, err := svc.Get(in.ID)
		if err != nil {
			return nil, err
		}
		return &procInfoOutput{Body: info}, nil
	})

	route.Register(api, huma.Operation{
		OperationID: "delete_v1_process", Method: http.MethodDelete, Path: "/v1/processes/{id}",
		Summary:     "Delete an exited process",
		Description: "Forgets the process and its logs. 409 while it runs: stop or kill it first.",
		Tags:        procTags, Security: route.Bearer, DefaultStatus: http.StatusNoContent,
	}, route.Act(domain.ActionProcessSignal), func(ctx context.Context, in *procIDInput) (*struct{}, error) {
		return nil, svc.Delete(in.ID)
	})

	signal := func(opID, path, summary string, sig domain.Signal, defWait time.Duration) {
		route.Register(api, huma.Operation{
			OperationID: opID, Method: http.MethodPost, Path: path,
			Summary:     summary,
			Description: "Signals the whole process group, then waits up to waitMs for it to exit and describes it.",
			Tags:        procTags, Security: route.Bearer,
		}, route.Act(domain.ActionProcessSignal), func(ctx context.Context, in *procSignalInput) (*procInfoOutput, error) {
			wait := defWait
			if in.Request().URL.Query().Has("waitMs") {
				wait = time.Duration(in.WaitMs) * time.Millisecond
			}
			info, err := svc.Signal(ctx, in.ID, sig, wait)
			if err != nil {
				return nil, err
			}
			return &procInfoOutput{Body: info}, nil
		})
	}
	signal("post_v1_process_stop", "/v1/processes/{id}/stop", "Send SIGTERM to a process group", domain.SignalTerm, 2*time.Second)
	signal("post_v1_process_kill", "/v1/processes/{id}/kill", "Send SIGKILL to a process group", domain.SignalKill, time.Second)

	route.Register(api, huma.Operation{
		OperationID: "post_v1_process_input", Method: http.MethodPost, Path: "/v1/processes/{id}/input",
		Summary:     "Write to a process's stdin or terminal",
		Description: "data is base64 unless encoding says utf8 or text. 413 past maxInputBytesPerRequest (decoded); 409 once the process has exited; 504 when the process reads nothing for 10 s.",
		Tags:        procTags, Security: route.Bearer,
		// The middleware reads the body first, bounded by the limit the
		// configuration sets now (route.MetaBodyLimit); huma then reads
		// that copy.
		MaxBodyBytes: -1,
		Metadata:     map[string]any{route.MetaBodyLimit: func() int64 { return inputBodyLimit(svc) }},
	}, route.Act(domain.ActionProcessWrite), func(ctx context.Context, in *procInputInput) (*procInputOutput, error) {
		enc := "base64"
		if in.Body.Encoding != nil && *in.Body.Encoding != "" {
			enc = *in.Body.Encoding
		}
		data, err := decodeInput(in.Body.Data, enc)
		if err != nil {
			return nil, err
		}
		n, err := svc.Input(ctx, in.ID, data)
		if err != nil {
			return nil, err
		}
		out := &procInputOutput{}
		out.Body.BytesWritten = n
		return out, nil
	})

	route.Register(api, huma.Operation{
		OperationID: "post_v1_process_terminal_resize", Method: http.MethodPost, Path: "/v1/processes/{id}/terminal/resize",
		Summary:     "Resize a process's terminal",
		Description: "Sets the PTY size; the kernel sends SIGWINCH to its foreground group. 409 for a process without a terminal.",
		Tags:        procTags, Security: route.Bearer,
	}, route.Act(domain.ActionProcessWrite), func(ctx context.Context, in *procResizeInput) (*procResizeOutput, error) {
		if err := svc.Resize(in.ID, in.Body.Cols, in.Body.Rows); err != nil {
			return nil, err
		}
		return &procResizeOutput{Body: procSize{Cols: in.Body.Cols, Rows: in.Body.Rows}}, nil
	})

	route.Register(api, huma.Operation{
		OperationID: "get_v1_process_logs", Method: http.MethodGet, Path: "/v1/processes/{id}/logs",
		Summary: "A process's buffered output, or a live stream of it",
		Description: "Entries carry base64 data (utf8 text with encoding=utf8), a per-process sequence and a timestamp. With follow=true: Server-Sent Events `event: log`, `id: <sequence>`, `data: <entry>`, " +
			"replaying the buffered entries after since (or Last-Event-ID) then following live output; `event: gap` (data {lastSequence, oldestAvailable}) when entries were evicted before the reader got them; " +
			"`event: exit` (data: the process) once it has exited and everything was sent, then the stream ends; `: heartbeat` after 15 s idle.",
		Tags: procTags, Security: route.Bearer,
		Responses: map[string]*huma.Response{
			"200": {Description: "The buffered entries, or (follow=true) an event stream.", Content: map[string]*huma.MediaType{
				"application/json":  {Schema: api.OpenAPI().Components.Schemas.Schema(reflect.TypeOf(domain.ProcessLogsResponse{}), true, "")},
				"text/event-stream": {Schema: &huma.Schema{Type: "string"}},
			}},
		},
	}, route.Act(domain.ActionProcessRead), func(ctx context.Context, in *procLogsInput) (*huma.StreamResponse, error) {
		q := processes.LogQuery{Stream: domain.ProcessLogsStream(in.Stream), Encoding: domain.LogEncoding(in.Encoding)}
		if in.Request().URL.Query().Has("tail") {
			q.Tail = &in.Tail // tail=0 is no entries, as the reference answers it
		}
		since, err := logsSince(in)
		if err != nil {
			return nil, err
		}
		q.Since = since
		if !in.Follow {
			out, err := svc.Logs(in.ID, q)
			if err != nil {
				return nil, err
			}
			// Held whole until answered, then as JSON: charged, so slow
			// readers of a large log wait (503) instead of each holding
			// a copy.
			if err := route.Hold(ctx, 2*logsSize(out)); err != nil {
				return nil, err
			}
			return logsResponse(out), nil
		}
		if !route.Accepts(in.Request().Header.Get("Accept"), "text/event-stream") {
			msg := "follow=true only produces text/event-stream"
			return nil, domain.NotAcceptable(msg)
		}
		if q.Tail != nil {
			// Start the stream at the last Tail entries; with tail=0,
			// after the last one (live output only).
			n := max(*q.Tail, 1)
			snap, err := svc.Logs(in.ID, processes.LogQuery{Stream: q.Stream, Since: q.Since, Tail: &n})
			if err != nil {
				return nil, err
			}
			if len(snap.Entries) > 0 {
				after := snap.Entries[0].Sequence - 1
				if *q.Tail == 0 {
					after = snap.Entries[0].Sequence
				}
				q.Since = &after
			}
		}
		// The follower reads until ctx ends, which a reload revoking
		// the request's credentials does too (route.Revocable).
		ctx, cancel := context.WithCancel(ctx)
		release := route.Revocable(ctx, cancel)
		f, err := svc.Follow(ctx, in.ID, q.Stream, q.Since)
		if err != nil {
			release()
			cancel()
			return nil, err
		}
		return &huma.StreamResponse{Body: func(hctx huma.Context) {
			defer cancel()
			defer release()
			defer f.Close()
			r, w := route.Unwrap(hctx)
			streamProcessLogs(ctx, w, r, f, processes.NewEncoder(q.Encoding), env)
		}}, nil
	})

	registerTerminalWS(api, env, svc)
}

// logsSince is the position to read after: the larger of since and
// Last-Event-ID, or nil for the whole buffer.
func logsSince(in *procLogsInput) (*uint64, error) {
	var since *uint64
	if in.Request().URL.Query().Has("since") {
		v := uint64(in.Since)
		since = &v
	}
	if in.LastEventID != "" {
		n, err := strconv.ParseUint(in.LastEventID, 10, 64)
		if err != nil {
			return nil, route.Invalid("Last-Event-ID must be a positive integer")
		}
		if since == nil || n > *since {
			since = &n
		}
	}
	return since, nil
}

// decodeInput decodes an input request's data.
func decodeInput(data, enc string) ([]byte, error) {
	switch enc {
	case "base64":
		b, err := base64.StdEncoding.DecodeString(data)
		if err != nil {
			return nil, route.Invalid("data is not valid base64: %v", err)
		}
		return b, nil
	case "utf8", "text":
		return []byte(data), nil
	}
	return nil, route.Invalid("encoding must be one of: base64, utf8, text")
}

// jsonResponse answers 200 with v as JSON.
// logsSize is about what out holds: its data and, per entry, its other
// fields.
func logsSize(out domain.ProcessLogsResponse) int64 {
	n := int64(0)
	for _, e := range out.Entries {
		n += int64(len(e.Data)) + 128
	}
	return n
}

// logsResponse writes out as json.Marshal would, entry by entry through a
// small buffer: marshalled whole, a 9 MB log held 57 MB while a client
// took its time reading it.
func logsResponse(out domain.ProcessLogsResponse) *huma.StreamResponse {
	return &huma.StreamResponse{Body: func(hctx huma.Context) {
		hctx.SetHeader("Content-Type", "application/json")
		hctx.SetStatus(http.StatusOK)
		w := bufio.NewWriterSize(hctx.BodyWriter(), 32<<10)
		enc := func(prefix string, v any) {
			b, _ := json.Marshal(v) // strings, numbers: cannot fail
			_, _ = w.WriteString(prefix)
			_, _ = w.Write(b)
		}
		enc(`{"processId":`, out.ProcessID)
		enc(`,"stream":`, out.Stream)
		_, _ = w.WriteString(`,"entries":[`)
		sep := ""
		for _, e := range out.Entries {
			enc(sep, e)
			sep = ","
		}
		_, _ = w.WriteString("]")
		if out.Gap != nil {
			enc(`,"gap":`, out.Gap)
		}
		_, _ = w.WriteString("}")
		_ = w.Flush()
	}}
}

func hctxWriter(hctx huma.Context) http.ResponseWriter {
	_, w := route.Unwrap(hctx)
	return w
}

// streamProcessLogs writes a follower's entries as SSE until the process
// has exited and everything was sent (then an exit event), the process is
// deleted, the client leaves, or a write stalls past the stream write
// timeout. Like streamSSE, it clears the server's write deadline and sets
// one per write round instead.
func streamProcessLogs(ctx context.Context, w http.ResponseWriter, r *http.Request, f *processes.Follower, entries *processes.Encoder, env *route.Env) {
	rc, bw, ok := route.StartSSE(w, r)
	defer route.ClearDeadline(rc)
	if !ok {
		return
	}
	var num []byte
	enc := json.NewEncoder(bw)
	for {
		chunks, gap, err := f.Next(env.Heartbeat)
		if ctx.Err() != nil {
			return
		}
		_ = rc.SetWriteDeadline(time.Now().Add(env.StreamWriteTimeout))
		switch {
		case gap != nil:
			entries.Gap()
			bw.WriteString("event: gap\ndata: ")
			_ = enc.Encode(gap) // ends with the newline of the data line
			bw.WriteString("\n")
		case len(chunks) == 0 && err == nil:
			bw.WriteString(": heartbeat\n\n")
		}
		for _, c := range chunks {
			bw.WriteString("event: log\nid: ")
			num = strconv.AppendUint(num[:0], c.Seq, 10)
			bw.Write(num)
			bw.WriteString("\ndata: ")
			_ = enc.Encode(entries.Entry(c))
			bw.WriteString("\n")
		}
		if err == processes.ErrEnded {
			bw.WriteString("event: exit\ndata: ")
			_ = enc.Encode(f.Exit())
			bw.WriteString("\n")
		}
		if bw.Flush() != nil || rc.Flush() != nil || err != nil {
			return
		}
	}
}
