package main

import (
	"testing"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
	"github.com/sandbox-agent-go/sandbox-agent/extensions/wasmpolicy/guest"
)

func TestPolicy(t *testing.T) {
	p := &policy{}
	if err := p.Configure([]byte(`{"readOnly": ["viewer"]}`)); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		token, method, route, op string
		allow                    bool
	}{
		{"viewer", "GET", "/v1/fs/file", "get_v1_fs_file", true},
		{"viewer", "GET", "/v1/acp/{server_id}", "get_v1_acp", true},
		{"viewer", "POST", "/v1/acp/{server_id}", "post_v1_acp", true},
		{"viewer", "PUT", "/v1/fs/file", "put_v1_fs_file", false},
		{"viewer", "DELETE", "/v1/fs/entry", "delete_v1_fs_entry", false},
		{"viewer", "POST", "/v1/fs/mkdir", "post_v1_fs_mkdir", false},
		{"viewer", "POST", "/v1/fs/move", "post_v1_fs_move", false},
		{"viewer", "POST", "/v1/fs/upload-batch", "post_v1_fs_upload_batch", false},
		{"viewer", "POST", "/v1/agents/{agent}/install", "post_v1_agent_install", false},
		{"viewer", "PUT", "/v1/config/mcp", "put_v1_config_mcp", false},
		{"viewer", "DELETE", "/v1/acp/{server_id}", "delete_v1_acp", false},
		{"viewer", "GET", "/v1/processes", "get_v1_processes", true},
		{"viewer", "GET", "/v1/processes/{id}/logs", "get_v1_process_logs", true},
		{"viewer", "POST", "/v1/processes", "post_v1_processes", false},
		{"viewer", "POST", "/v1/processes/run", "post_v1_processes_run", false},
		{"viewer", "POST", "/v1/processes/{id}/input", "post_v1_process_input", false},
		{"viewer", "POST", "/v1/processes/{id}/kill", "post_v1_process_kill", false},
		{"viewer", "DELETE", "/v1/processes/{id}", "delete_v1_process", false},
		{"viewer", "POST", "/v1/processes/config", "post_v1_processes_config", false},
		{"viewer", "GET", "/v1/processes/{id}/terminal/ws", "get_v1_process_terminal_ws", false},
		{"writer", "PUT", "/v1/fs/file", "put_v1_fs_file", true},
		{"", "DELETE", "/v1/acp/{server_id}", "delete_v1_acp", true},
	}
	for _, tt := range tests {
		t.Run(tt.token+" "+tt.op, func(t *testing.T) {
			req := domain.AuthRequest{Method: tt.method, Route: tt.route, OperationID: tt.op,
				Headers: map[string][]string{"authorization": {"Bearer " + tt.token}}}
			got := p.Authorize(guest.NewRequest(req))
			if got.Allow != tt.allow {
				t.Errorf("got %+v, want allow=%v", got, tt.allow)
			}
			if !got.Allow && got.Status != 403 {
				t.Errorf("status %d, want 403", got.Status)
			}
		})
	}
}

func TestConfigure(t *testing.T) {
	for _, bad := range []string{`null`, `{}`, `{"readOnly": "x"}`} {
		if err := (&policy{}).Configure([]byte(bad)); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
}
