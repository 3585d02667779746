package main

import (
	"testing"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
	"github.com/sandbox-agent-go/sandbox-agent/extensions/wasmpolicy/guest"
)

func TestPolicy(t *testing.T) {
	p := &policy{}
	if err := p.Configure([]byte(`{"deny": ["terminal/*", "session/set_mode"], "status": 405}`)); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		rpc  *domain.RPCInfo
		want domain.Decision
	}{
		{"terminal/create", &domain.RPCInfo{Kind: "request", ID: "1", Method: "terminal/create"}, guest.Deny(405, "ACP method terminal/create is not allowed")},
		{"exact", &domain.RPCInfo{Kind: "notification", Method: "session/set_mode"}, guest.Deny(405, "ACP method session/set_mode is not allowed")},
		{"other method", &domain.RPCInfo{Kind: "request", ID: "2", Method: "session/prompt"}, guest.Pass()},
		{"nested is not matched", &domain.RPCInfo{Kind: "request", ID: "3", Method: "terminal/x/y"}, guest.Pass()},
		{"response", &domain.RPCInfo{Kind: "response", ID: "4"}, guest.Pass()},
		{"not ACP", nil, guest.Pass()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := p.Authorize(guest.NewRequest(domain.AuthRequest{Method: "POST", RPC: tt.rpc}))
			if got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestConfigure(t *testing.T) {
	p := &policy{}
	if err := p.Configure([]byte(`{"deny": ["x"]}`)); err != nil || p.Status != 403 {
		t.Errorf("default status: %d, %v", p.Status, err)
	}
	if err := (&policy{}).Configure([]byte(`{"deny": ["[bad"]}`)); err == nil {
		t.Error("bad pattern accepted")
	}
}
