package opencode

import (
	"encoding/json"
)

// The JSON shapes of OpenCode's API, as native OpenCode writes them (the
// captures of 1.1.49 beside the reference's, and @opencode-ai/sdk's types
// up to 1.19): field names, which fields are present in which state, and
// which are left out. They are what the database keeps too, so a listing
// is the stored bytes.

// sessionInfo is OpenCode's Session.
type sessionInfo struct {
	ID         string          `json:"id"`
	Slug       string          `json:"slug"`
	Version    string          `json:"version"`
	ProjectID  string          `json:"projectID"`
	Directory  string          `json:"directory"`
	ParentID   string          `json:"parentID,omitempty"`
	Title      string          `json:"title"`
	Time       sessionTime     `json:"time"`
	Summary    *sessionSummary `json:"summary,omitempty"`
	Permission json.RawMessage `json:"permission,omitempty"`
}

type sessionTime struct {
	Created  int64 `json:"created"`
	Updated  int64 `json:"updated"`
	Archived int64 `json:"archived,omitempty"`
}

type sessionSummary struct {
	Additions int `json:"additions"`
	Deletions int `json:"deletions"`
	Files     int `json:"files"`
}

// modelRef names a model as OpenCode does: the provider is the agent.
type modelRef struct {
	ProviderID string `json:"providerID"`
	ModelID    string `json:"modelID"`
}

// messageInfo is OpenCode's Message: a UserMessage or an AssistantMessage,
// told apart by Role. MarshalJSON writes each with its own fields.
type messageInfo struct {
	ID        string
	SessionID string
	Role      string // "user" or "assistant"
	Created   int64
	Completed int64 // assistant, 0 while the turn runs
	Agent     string

	// user
	Model        modelRef
	SummaryTitle string

	// assistant
	ParentID string
	Mode     string
	Cwd      string
	Root     string
	Finish   string
	Error    *messageError
	Tokens   tokens
}

type tokens struct {
	Input     int64       `json:"input"`
	Output    int64       `json:"output"`
	Reasoning int64       `json:"reasoning"`
	Cache     tokensCache `json:"cache"`
}

type tokensCache struct {
	Read  int64 `json:"read"`
	Write int64 `json:"write"`
}

// messageError is an assistant message's error: MessageAbortedError,
// UnknownError or ProviderAuthError, each with data.message.
type messageError struct {
	Name string           `json:"name"`
	Data messageErrorData `json:"data"`
}

type messageErrorData struct {
	Message    string `json:"message"`
	ProviderID string `json:"providerID,omitempty"`
}

func (m *messageInfo) MarshalJSON() ([]byte, error) {
	if m.Role == "user" {
		type summary struct {
			Title string     `json:"title,omitempty"`
			Diffs []struct{} `json:"diffs"`
		}
		u := struct {
			ID        string `json:"id"`
			SessionID string `json:"sessionID"`
			Role      string `json:"role"`
			Time      struct {
				Created int64 `json:"created"`
			} `json:"time"`
			Summary *summary `json:"summary,omitempty"`
			Agent   string   `json:"agent"`
			Model   modelRef `json:"model"`
		}{ID: m.ID, SessionID: m.SessionID, Role: "user", Agent: m.Agent, Model: m.Model}
		u.Time.Created = m.Created
		if m.SummaryTitle != "" {
			u.Summary = &summary{Title: m.SummaryTitle, Diffs: []struct{}{}}
		}
		return json.Marshal(&u)
	}
	type msgTime struct {
		Created   int64 `json:"created"`
		Completed int64 `json:"completed,omitempty"`
	}
	type path struct {
		Cwd  string `json:"cwd"`
		Root string `json:"root"`
	}
	a := struct {
		ID         string        `json:"id"`
		SessionID  string        `json:"sessionID"`
		Role       string        `json:"role"`
		Time       msgTime       `json:"time"`
		Error      *messageError `json:"error,omitempty"`
		ParentID   string        `json:"parentID"`
		ModelID    string        `json:"modelID"`
		ProviderID string        `json:"providerID"`
		Mode       string        `json:"mode"`
		Agent      string        `json:"agent"`
		Path       path          `json:"path"`
		Cost       float64       `json:"cost"`
		Tokens     tokens        `json:"tokens"`
		Finish     string        `json:"finish,omitempty"`
	}{
		ID: m.ID, SessionID: m.SessionID, Role: "assistant",
		Time:     msgTime{Created: m.Created, Completed: m.Completed},
		Error:    m.Error,
		ParentID: m.ParentID, ModelID: m.Model.ModelID, ProviderID: m.Model.ProviderID,
		Mode: m.Mode, Agent: m.Agent, Path: path{Cwd: m.Cwd, Root: m.Root},
		Tokens: m.Tokens, Finish: m.Finish,
	}
	return json.Marshal(&a)
}

// part is one of OpenCode's Parts. The fields used depend on Type; see
// MarshalJSON for which each type writes.
type part struct {
	ID        string
	SessionID string
	MessageID string
	Type      string // text, reasoning, tool, file, step-start, step-finish

	// text, reasoning
	Text      string
	Synthetic bool
	Start     int64 // time.start; 0: no time (a user's text part)
	End       int64 // time.end; 0 while streaming

	// tool
	CallID string
	Tool   string
	State  toolState

	// file
	Mime     string
	Filename string
	URL      string

	// step-finish
	Reason string
	Tokens tokens
}

// toolState is a tool part's state.status and what that state carries:
// pending (input, raw), running (input, title, metadata, time.start),
// completed (input, output, title, metadata, time) and error (input,
// error, and output as well: native OpenCode keeps a failed tool's output
// in output).
type toolState struct {
	Status   string
	Input    json.RawMessage // a JSON object, never null
	Raw      string
	Title    string
	Output   string
	Error    string
	Metadata json.RawMessage // a JSON object or nil
	Start    int64
	End      int64
}

var emptyObject = json.RawMessage(`{}`)

type partTime struct {
	Start int64 `json:"start"`
	End   int64 `json:"end,omitempty"`
}

func (p *part) MarshalJSON() ([]byte, error) {
	type head struct {
		ID        string `json:"id"`
		SessionID string `json:"sessionID"`
		MessageID string `json:"messageID"`
		Type      string `json:"type"`
	}
	h := head{p.ID, p.SessionID, p.MessageID, p.Type}
	switch p.Type {
	case "text", "reasoning":
		v := struct {
			head
			Text      string    `json:"text"`
			Synthetic bool      `json:"synthetic,omitempty"`
			Time      *partTime `json:"time,omitempty"`
		}{head: h, Text: p.Text, Synthetic: p.Synthetic}
		if p.Start != 0 {
			v.Time = &partTime{Start: p.Start, End: p.End}
		}
		return json.Marshal(&v)
	case "tool":
		v := struct {
			head
			CallID string    `json:"callID"`
			Tool   string    `json:"tool"`
			State  toolState `json:"state"`
		}{head: h, CallID: p.CallID, Tool: p.Tool, State: p.State}
		return json.Marshal(&v)
	case "file":
		v := struct {
			head
			Mime     string `json:"mime"`
			Filename string `json:"filename,omitempty"`
			URL      string `json:"url"`
		}{head: h, Mime: p.Mime, Filename: p.Filename, URL: p.URL}
		return json.Marshal(&v)
	case "step-finish":
		v := struct {
			head
			Reason string `json:"reason"`
			Cost   int    `json:"cost"`
			Tokens tokens `json:"tokens"`
		}{head: h, Reason: p.Reason, Tokens: p.Tokens}
		return json.Marshal(&v)
	}
	return json.Marshal(&h) // step-start
}

func (s toolState) MarshalJSON() ([]byte, error) {
	input := s.Input
	if len(input) == 0 {
		input = emptyObject
	}
	switch s.Status {
	case "pending":
		return json.Marshal(&struct {
			Status string          `json:"status"`
			Input  json.RawMessage `json:"input"`
			Raw    string          `json:"raw"`
		}{"pending", input, s.Raw})
	case "running":
		return json.Marshal(&struct {
			Status   string          `json:"status"`
			Input    json.RawMessage `json:"input"`
			Title    string          `json:"title,omitempty"`
			Metadata json.RawMessage `json:"metadata,omitempty"`
			Time     partTime        `json:"time"`
		}{"running", input, s.Title, s.Metadata, partTime{Start: s.Start}})
	case "completed":
		md := s.Metadata
		if len(md) == 0 {
			md = emptyObject
		}
		return json.Marshal(&struct {
			Status   string          `json:"status"`
			Input    json.RawMessage `json:"input"`
			Output   string          `json:"output"`
			Title    string          `json:"title"`
			Metadata json.RawMessage `json:"metadata"`
			Time     partTime        `json:"time"`
		}{"completed", input, s.Output, s.Title, md, partTime{Start: s.Start, End: s.End}})
	}
	return json.Marshal(&struct {
		Status   string          `json:"status"`
		Input    json.RawMessage `json:"input"`
		Output   string          `json:"output,omitempty"`
		Error    string          `json:"error"`
		Metadata json.RawMessage `json:"metadata,omitempty"`
		Time     partTime        `json:"time"`
	}{"error", input, s.Output, s.Error, s.Metadata, partTime{Start: s.Start, End: s.End}})
}

// permissionRequest is OpenCode's PermissionRequest (permission.asked,
// GET /permission).
type permissionRequest struct {
	ID         string          `json:"id"`
	SessionID  string          `json:"sessionID"`
	Permission string          `json:"permission"`
	Patterns   []string        `json:"patterns"`
	Metadata   json.RawMessage `json:"metadata"`
	Always     []string        `json:"always"`
	Tool       *toolRef        `json:"tool,omitempty"`
}

type toolRef struct {
	MessageID string `json:"messageID"`
	CallID    string `json:"callID"`
}

// questionRequest is OpenCode's QuestionRequest (question.asked, GET
// /question).
type questionRequest struct {
	ID        string         `json:"id"`
	SessionID string         `json:"sessionID"`
	Questions []questionInfo `json:"questions"`
	Tool      *toolRef       `json:"tool,omitempty"`
}

type questionInfo struct {
	Question string           `json:"question"`
	Header   string           `json:"header"`
	Options  []questionOption `json:"options"`
	Multiple bool             `json:"multiple,omitempty"`
	Custom   *bool            `json:"custom,omitempty"`
}

type questionOption struct {
	Label       string `json:"label"`
	Description string `json:"description"`
}

// todo is one entry of GET /session/{id}/todo (from an ACP plan).
type todo struct {
	ID       string `json:"id"`
	Content  string `json:"content"`
	Status   string `json:"status"`
	Priority string `json:"priority"`
}

// event is one message of /event: {"type":…,"properties":…}.
type event struct {
	Type       string `json:"type"`
	Properties any    `json:"properties"`
}
