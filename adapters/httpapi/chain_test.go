package httpapi

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/danielgtaylor/huma/v2"

	"github.com/sandbox-agent-go/sandbox-agent/app/acp"
	"github.com/sandbox-agent-go/sandbox-agent/app/agents"
	"github.com/sandbox-agent-go/sandbox-agent/app/authz"
	"github.com/sandbox-agent-go/sandbox-agent/app/files"
	"github.com/sandbox-agent-go/sandbox-agent/app/processes"
	"github.com/sandbox-agent-go/sandbox-agent/domain"
)

// wantAction is what every operation of the document does. A new
// operation must be added here, with its action: the walk below fails for
// an operation missing from the table, and for one registered without an
// action (which the chain refuses before any policy runs).
var wantAction = map[string]domain.Action{
	"get_v1_health":           domain.ActionHealthRead,
	"get_v1_acp_servers":      domain.ActionACPRead,
	"post_v1_acp":             domain.ActionACPStart, // a new server id; acp.send once it exists
	"get_v1_acp":              domain.ActionACPRead,
	"delete_v1_acp":           domain.ActionACPStop,
	"get_v1_acp_stderr":       domain.ActionACPRead,
	"get_v1_agents":           domain.ActionAgentRead,
	"get_v1_agent":            domain.ActionAgentRead,
	"post_v1_agent_install":   domain.ActionAgentInstall,
	"get_v1_fs_entries":       domain.ActionFSRead,
	"get_v1_fs_file":          domain.ActionFSRead,
	"put_v1_fs_file":          domain.ActionFSWrite,
	"delete_v1_fs_entry":      domain.ActionFSWrite,
	"post_v1_fs_mkdir":        domain.ActionFSWrite,
	"post_v1_fs_move":         domain.ActionFSWrite,
	"get_v1_fs_stat":          domain.ActionFSRead,
	"post_v1_fs_upload_batch": domain.ActionFSWrite,
	"get_v1_config_mcp":       domain.ActionConfigRead,
	"put_v1_config_mcp":       domain.ActionConfigWrite,
	"delete_v1_config_mcp":    domain.ActionConfigWrite,
	"get_v1_config_skills":    domain.ActionConfigRead,
	"put_v1_config_skills":    domain.ActionConfigWrite,
	"delete_v1_config_skills": domain.ActionConfigWrite,
	"get_metrics":             domain.ActionMetricsRead, // not in the document; walked too

	"get_v1_processes_config":         domain.ActionProcessRead,
	"post_v1_processes_config":        domain.ActionProcessRun,
	"post_v1_processes_run":           domain.ActionProcessRun,
	"get_v1_processes":                domain.ActionProcessRead,
	"post_v1_processes":               domain.ActionProcessRun,
	"get_v1_process":                  domain.ActionProcessRead,
	"delete_v1_process":               domain.ActionProcessSignal,
	"post_v1_process_stop":            domain.ActionProcessSignal,
	"post_v1_process_kill":            domain.ActionProcessSignal,
	"post_v1_process_input":           domain.ActionProcessWrite,
	"post_v1_process_terminal_resize": domain.ActionProcessWrite,
	"get_v1_process_logs":             domain.ActionProcessRead,
	"get_v1_process_terminal_ws":      domain.ActionProcessWrite,

	// ACP's standard transport; the resource is Acp-Connection-Id (as
	// the server id) and {agent}.
	"post_acp":   domain.ActionACPStart, // initialize without Acp-Connection-Id; acp.send with one
	"get_acp":    domain.ActionACPRead,  // the SSE stream; acp.start for a WebSocket upgrade (it creates a connection)
	"delete_acp": domain.ActionACPStop,
}

// recorder is a policy that records what it is asked and refuses with
// 418, so no operation runs.
type recorder struct {
	mu  sync.Mutex
	got []domain.AuthRequest
}

func (r *recorder) Authorize(_ context.Context, req domain.AuthRequest) (domain.Decision, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, req)
	return domain.Decision{Status: 418, Message: "recorded"}, nil
}

func (r *recorder) take() []domain.AuthRequest {
	r.mu.Lock()
	defer r.mu.Unlock()
	got := r.got
	r.got = nil
	return got
}

// fullConfig wires every route group, with a recording policy.
func fullConfig(rec *recorder) Config {
	return Config{
		Instances:  acp.NewInstances(acp.DefaultOptions(), nil, nil),
		Catalog:    &agents.Catalog{},
		Files:      &files.Files{Home: "/home/u"},
		Config:     &files.ConfigStore{Base: "/work"},
		Processes:  &processes.Service{},
		Authorizer: rec,
		Token:      "admin",
	}
}

// Nothing skips the chain: every operation of the OpenAPI document (and
// /metrics) reaches the policies once, with the right action, before it
// runs.
func TestEveryOperationReachesTheChain(t *testing.T) {
	rec := &recorder{}
	srv := httptest.NewServer(New(fullConfig(rec)))
	defer srv.Close()

	ops := documentOps()
	if len(ops) != len(wantAction) {
		t.Errorf("the document has %d operations (+ /metrics), the table %d: update wantAction", len(ops), len(wantAction))
	}
	for _, o := range ops {
		t.Run(o.id, func(t *testing.T) {
			want, ok := wantAction[o.id]
			if !ok {
				t.Fatalf("operation %s %s is not in wantAction: give it an action", o.method, o.path)
			}
			path := strings.NewReplacer("{server_id}", "s1", "{agent}", "mock", "{id}", "p1").Replace(o.path)
			body := ""
			if o.method == "POST" || o.method == "PUT" {
				body = `{"jsonrpc":"2.0","id":1,"method":"initialize","from":"a","to":"b"}`
			}
			req, _ := http.NewRequest(o.method, srv.URL+path+"?path=x&directory=d&mcpName=m&skillName=s", strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			got := rec.take()
			if len(got) != 1 {
				t.Fatalf("%s %s: the policies were asked %d times (status %d: %s); every operation must reach the chain once", o.method, path, len(got), resp.StatusCode, b)
			}
			if resp.StatusCode != 418 {
				t.Errorf("status %d, want the policy's 418: %s", resp.StatusCode, b)
			}
			if got[0].Action != want {
				t.Errorf("action %q, want %q", got[0].Action, want)
			}
			if got[0].OperationID != o.id {
				t.Errorf("operationId %q, want %q", got[0].OperationID, o.id)
			}
			// The resource, resolved as the operation would resolve it.
			g := got[0]
			switch {
			case o.id == "post_v1_fs_move":
				if g.FSPath != "/home/u/a" || g.FSDest != "/home/u/b" {
					t.Errorf("move paths %q → %q", g.FSPath, g.FSDest)
				}
			case want.Area() == "fs" && g.FSPath != "/home/u/x":
				t.Errorf("fs path %q, want /home/u/x", g.FSPath)
			case want.Area() == "config" && g.FSPath != "/work/d":
				t.Errorf("config directory %q, want /work/d", g.FSPath)
			case strings.Contains(o.path, "{server_id}") && g.ServerID != "s1":
				t.Errorf("server id %q", g.ServerID)
			case strings.Contains(o.path, "{agent}") && g.Agent != "mock":
				t.Errorf("agent %q", g.Agent)
			}
		})
	}
}

func opID(o *huma.Operation) string {
	if o == nil {
		return ""
	}
	return o.OperationID
}

// A raw route wrapped with Env.WithAuth reaches the chain with its action.
func TestWithAuth(t *testing.T) {
	rec := &recorder{}
	cfg := fullConfig(rec)
	cfg.fill()
	ran := false
	h := cfg.env.WithAuth("/acp/{agent}", "post_acp", func(r *http.Request, c *authz.Chain, req *domain.AuthRequest) {
		c.ACPPost(req, "", r.PathValue("agent"))
	}, http.HandlerFunc(func(http.ResponseWriter, *http.Request) { ran = true }))
	mux := http.NewServeMux()
	mux.Handle("POST /acp/{agent}", h)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	resp, err := http.Post(srv.URL+"/acp/mock", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	got := rec.take()
	if resp.StatusCode != 418 || ran || len(got) != 1 || got[0].Action != domain.ActionACPStart || got[0].Agent != "mock" || got[0].Route != "/acp/{agent}" {
		t.Errorf("status %d, ran %v, requests %+v", resp.StatusCode, ran, got)
	}
}
