package e2e

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-agent-go/sandbox-agent/e2e/internal/harness"
)

// TestProcessLogsAsText: ?encoding=utf8 gives a process's output as text a
// curl user can read, in the JSON answer and in the followed stream; base64
// stays the default the SDK decodes. A byte that is not UTF-8 becomes
// U+FFFD; a character split between two writes of the process is whole.
func TestProcessLogsAsText(t *testing.T) {
	t.Parallel()
	d := harness.Start(t, harness.Options{})
	// Two writes, the second completing the "é" the first began, then an
	// invalid byte.
	script := `printf 'caf\303'; sleep 0.2; printf '\251 ok\377\n'`
	p := createProcess(t, d, map[string]any{"command": "sh", "args": []string{"-c", script}})
	harness.Eventually(t, 10*time.Second, "output complete", func() bool {
		return strings.HasSuffix(processLogs(t, d, p.ID), "\n")
	})

	var logs struct {
		Entries []struct {
			Data     string `json:"data"`
			Encoding string `json:"encoding"`
		} `json:"entries"`
	}
	if st, b := d.JSONDo("GET", "/v1/processes/"+p.ID+"/logs?encoding=utf8", nil, &logs); st != 200 {
		t.Fatalf("logs: %d %s", st, b)
	}
	var text strings.Builder
	for _, e := range logs.Entries {
		if e.Encoding != "utf8" {
			t.Errorf("entry encoding %q", e.Encoding)
		}
		text.WriteString(e.Data)
	}
	if got, want := text.String(), "café ok\uFFFD\n"; got != want {
		t.Errorf("text logs %q, want %q (entries %+v)", got, want, logs.Entries)
	}
	if got := processLogs(t, d, p.ID); got != "caf\303\251 ok\377\n" {
		t.Errorf("default (base64) logs %q", got)
	}

	// The followed stream, as text.
	st, _, body := d.Do("GET", "/v1/processes/"+p.ID+"/logs?follow=true&encoding=utf8", nil, "Accept", "text/event-stream")
	if st != 200 {
		t.Fatalf("follow: %d %s", st, body)
	}
	var streamed strings.Builder
	sc := bufio.NewScanner(strings.NewReader(string(body)))
	event := ""
	for sc.Scan() {
		line := sc.Text()
		if ev, ok := strings.CutPrefix(line, "event: "); ok {
			event = ev
		}
		if data, ok := strings.CutPrefix(line, "data: "); ok && event == "log" {
			var e struct{ Data, Encoding string }
			if err := json.Unmarshal([]byte(data), &e); err != nil || e.Encoding != "utf8" {
				t.Fatalf("log event %s: %v", data, err)
			}
			streamed.WriteString(e.Data)
		}
	}
	if got := streamed.String(); got != "café ok\uFFFD\n" {
		t.Errorf("followed text %q", got)
	}

	if st, _, b := d.Do("GET", "/v1/processes/"+p.ID+"/logs?encoding=latin1", nil); st != http.StatusUnprocessableEntity && st != http.StatusBadRequest {
		t.Errorf("encoding=latin1: %d %s", st, b)
	}
}
