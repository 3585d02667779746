package e2e

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/sandbox-agent-go/sandbox-agent/e2e/internal/harness"
)

// hostileDownloads is a registry on 127.0.0.1 listing agents whose
// archives are served by handler (under /files/).
func hostileDownloads(t *testing.T, agents map[string]string, handler http.HandlerFunc) *httptest.Server {
	t.Helper()
	var srv *httptest.Server
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/registry.json" {
			handler(w, r)
			return
		}
		var entries []string
		for id, file := range agents {
			target := `{"archive":"` + srv.URL + `/files/` + file + `","cmd":"./bin/agent"}`
			entries = append(entries, `{"id":"`+id+`","version":"1.0.0","distribution":{"binary":{`+
				`"linux-x86_64":`+target+`,"linux-aarch64":`+target+`}}}`)
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"agents":[` + strings.Join(entries, ",") + `]}`))
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestFaultInstallEndlessDownload: a download server that never ends its
// archive (no length, zeros forever). The download used to run on until
// the disk reached the free-space floor (the whole disk with --min-free
// 0), for up to the 10-minute download timeout; now it stops at
// --max-extract with 413 payload_too_large, and nothing is left.
func TestFaultInstallEndlessDownload(t *testing.T) {
	t.Parallel()
	var sent atomic.Int64
	chunk := make([]byte, 64<<10)
	srv := hostileDownloads(t, map[string]string{"endless": "endless.tar.gz"}, func(w http.ResponseWriter, r *http.Request) {
		for r.Context().Err() == nil {
			n, err := w.Write(chunk)
			sent.Add(int64(n))
			if err != nil {
				return
			}
		}
	})
	const limit = 1 << 20
	d := harness.Start(t, harness.Options{
		Args: []string{"--max-extract", "1048576", "--min-free", "0"},
		Env:  []string{"SANDBOX_AGENT_ACP_REGISTRY_URL=" + srv.URL + "/registry.json"},
	})
	st, h, body := d.Do("POST", "/v1/agents/endless/install", []byte("{}"), "Content-Type", "application/json")
	p := problemOf(t, st, h, body)
	if st != 413 || p["type"] != "urn:sandbox-agent:error:payload_too_large" || limitBytes(p) != limit {
		t.Fatalf("endless archive: %d %s", st, body)
	}
	store := filepath.Join(d.Home, ".local", "share", "sandbox-agent", "bin", "packages", "endless")
	if left, _ := os.ReadDir(store); len(left) != 0 {
		t.Errorf("the refused install left %d entries in %s", len(left), store)
	}
	t.Logf("endless archive: %d after the server sent %d KiB; peak RSS %d KiB, disk used %d KiB", st, sent.Load()>>10, peakRSS(t, d), diskUse(t, d.Home)>>10)
}
