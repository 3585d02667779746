package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-agent-go/sandbox-agent/e2e/internal/harness"
)

// fakeGemini is a loopback stand-in for the Gemini API, enough for
// gemini-cli (@google/gemini-cli, pinned in package.json) to run real turns
// as an ACP agent. The last user message decides the answer:
//
//	"say hi"    → two streamed text chunks
//	"write it"  → a write_file call (the agent asks the client's permission),
//	              then, with the tool's result, "written"
//	"stream N"  → N streamed chunks "c1;" .. "cN;"
//	"slow"      → an answer that never comes (until the client cancels)
func fakeGemini(t *testing.T, dir string) *httptest.Server {
	t.Helper()
	sse := func(w http.ResponseWriter, parts ...map[string]any) {
		w.Header().Set("Content-Type", "text/event-stream")
		for i, p := range parts {
			cand := map[string]any{"content": map[string]any{"role": "model", "parts": []any{p}}, "index": 0}
			ev := map[string]any{"candidates": []any{cand}}
			if i == len(parts)-1 {
				cand["finishReason"] = "STOP"
				ev["usageMetadata"] = map[string]any{"promptTokenCount": 5, "candidatesTokenCount": len(parts), "totalTokenCount": 5 + len(parts)}
			}
			b, _ := json.Marshal(ev)
			fmt.Fprintf(w, "data: %s\r\n\r\n", b)
			w.(http.Flusher).Flush()
		}
	}
	text := func(s string) map[string]any { return map[string]any{"text": s} }
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if !strings.Contains(r.URL.Path, ":streamGenerateContent") {
			w.Header().Set("Content-Type", "application/json")
		}
		switch {
		case strings.Contains(r.URL.Path, ":streamGenerateContent"):
		case strings.Contains(r.URL.Path, ":countTokens"):
			w.Write([]byte(`{"totalTokens":5}`))
			return
		case strings.Contains(r.URL.Path, ":generateContent"):
			// Structured answers for its helper calls (model routing,
			// next-speaker check): one object with every field they read.
			helper, _ := json.Marshal(`{"complexity_reasoning":"simple","complexity_score":10,"reasoning":"simple","model_choice":"flash","next_speaker":"user"}`)
			w.Write([]byte(`{"candidates":[{"content":{"role":"model","parts":[{"text":` + string(helper) + `}]},"finishReason":"STOP"}]}`))
			return
		default:
			w.Write([]byte(`{}`))
			return
		}
		var req struct {
			Contents []struct {
				Role  string           `json:"role"`
				Parts []map[string]any `json:"parts"`
			} `json:"contents"`
		}
		_ = json.Unmarshal(body, &req)
		var last string
		lastHasResult := false
		if n := len(req.Contents); n > 0 {
			for _, p := range req.Contents[n-1].Parts {
				if s, ok := p["text"].(string); ok {
					last += s
				}
				if _, ok := p["functionResponse"]; ok {
					lastHasResult = true
				}
			}
		}
		switch {
		case lastHasResult:
			sse(w, text("written"))
		case strings.Contains(last, "write it"):
			sse(w, map[string]any{"functionCall": map[string]any{"name": "write_file",
				"args": map[string]any{"file_path": filepath.Join(dir, "hello.txt"), "content": "hi from the fake model"}}})
		case strings.Contains(last, "stream "):
			n, _ := strconv.Atoi(strings.TrimSpace(last[strings.LastIndex(last, "stream ")+len("stream "):]))
			parts := make([]map[string]any, n)
			for i := range parts {
				parts[i] = text("c" + strconv.Itoa(i+1) + ";")
			}
			sse(w, parts...)
		case strings.Contains(last, "slow"):
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(200)
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
			case <-time.After(60 * time.Second):
			}
		default:
			sse(w, text("hello "), text("from fake model"))
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestCompatACPStdRealAgent drives a real ACP agent from npm (gemini-cli,
// its model replaced by fakeGemini on loopback) through /acp with the
// official SDK 2.4.0 client over Streamable HTTP and WebSocket: initialize,
// session/new, a prompt, a tool call whose permission the client grants (the
// file gets written), a streamed answer in order, cancel, close.
func TestCompatACPStdRealAgent(t *testing.T) {
	t.Parallel()
	requireNodeModules(t)
	gemini, err := filepath.Abs(filepath.Join("node_modules", "@google", "gemini-cli", "bundle", "gemini.js"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tr := range []string{"http", "ws"} {
		t.Run(tr, func(t *testing.T) {
			work := t.TempDir()
			model := fakeGemini(t, work)
			home := t.TempDir()
			// No telemetry, usage statistics or update checks: the agent
			// talks to nothing but the fake model on loopback.
			settings := `{"privacy":{"usageStatisticsEnabled":false},"telemetry":{"enabled":false},` +
				`"general":{"enableAutoUpdate":false,"enableAutoUpdateNotification":false}}`
			if err := os.MkdirAll(filepath.Join(home, ".gemini"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(home, ".gemini", "settings.json"), []byte(settings), 0o644); err != nil {
				t.Fatal(err)
			}
			agents := map[string]any{"agents": []any{map[string]any{
				"id": "gemini-fake", "command": "node", "args": []string{gemini, "--experimental-acp"},
				"env": map[string]string{
					"GEMINI_API_KEY": "fake", "GOOGLE_GEMINI_BASE_URL": model.URL, "GEMINI_CLI_NO_RELAUNCH": "true",
					"GEMINI_TELEMETRY_ENABLED": "false",
				},
			}}}
			f := filepath.Join(t.TempDir(), "agents.json")
			b, _ := json.Marshal(agents)
			if err := os.WriteFile(f, b, 0o644); err != nil {
				t.Fatal(err)
			}
			d := harness.Start(t, harness.Options{Home: home, Args: []string{"--agents-file", f}})
			runNode(t, "acp-std-real.mjs", 180*time.Second, "BASE_URL="+d.URL, "TRANSPORT="+tr, "WORK_DIR="+work)
			got, err := os.ReadFile(filepath.Join(work, "hello.txt"))
			if err != nil || string(got) != "hi from the fake model" {
				t.Errorf("the permitted tool call did not write the file: %q %v", got, err)
			}
		})
	}
}
