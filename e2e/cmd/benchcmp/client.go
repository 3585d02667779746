package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

var client = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 512, MaxConnsPerHost: 0}}

func post(ctx context.Context, t *target, id, query, msg string) (int, []byte, error) {
	return postURL(ctx, t.url+"/v1/acp/"+id+query, msg)
}

func postURL(ctx context.Context, url, msg string) (int, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "POST", url, strings.NewReader(msg))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

func mustPost(ctx context.Context, t *target, id, query, msg string) ([]byte, error) {
	st, b, err := post(ctx, t, id, query, msg)
	if err != nil {
		return nil, err
	}
	if st != 200 {
		return nil, fmt.Errorf("POST %s: %d %s", id, st, b)
	}
	return b, nil
}

const initMsg = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}`

func newSessionMsg(id string) string {
	return `{"jsonrpc":"2.0","id":"` + id + `","method":"session/new","params":{"cwd":"/tmp","mcpServers":[]}}`
}

func promptMsg(id, sid string, n int) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%q,"method":"session/prompt","params":{"sessionId":%q,"prompt":[{"type":"text","text":"stream %d"}]}}`, id, sid, n)
}

func sessionID(b []byte) (string, error) {
	var r struct {
		Result struct{ SessionID string } `json:"result"`
	}
	if err := json.Unmarshal(b, &r); err != nil || r.Result.SessionID == "" {
		return "", fmt.Errorf("session/new answered %s", b)
	}
	return r.Result.SessionID, nil
}

func del(t *target, id string) {
	if t.kind != "ours" {
		return // the reference's DELETE hangs while the agent lives
	}
	req, _ := http.NewRequest("DELETE", t.url+"/v1/acp/"+id, nil)
	if resp, err := client.Do(req); err == nil {
		resp.Body.Close()
	}
}
