package main

import (
	"testing"
	"time"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
	"github.com/sandbox-agent-go/sandbox-agent/extensions/wasmpolicy/guest"
)

func TestPolicy(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	secret := []byte("0123456789abcdef-secret")
	p := &policy{now: func() time.Time { return now }}
	if err := p.Configure([]byte(`{"secret": "0123456789abcdef-secret"}`)); err != nil {
		t.Fatal(err)
	}
	valid := Mint(secret, "alice", now.Add(time.Hour))
	tests := []struct {
		name, header string
		want         domain.Decision
	}{
		{"valid", "Bearer " + valid, guest.Identify("hmac:alice")},
		{"subject with dots", "Bearer " + Mint(secret, "ci.build.42", now.Add(time.Minute)), guest.Identify("hmac:ci.build.42")},
		{"expired", "Bearer " + Mint(secret, "alice", now.Add(-time.Second)), guest.Deny(401, "token expired")},
		{"expires now", "Bearer " + Mint(secret, "alice", now), guest.Deny(401, "token expired")},
		{"other secret", "Bearer " + Mint([]byte("another-secret-0123"), "alice", now.Add(time.Hour)), guest.Deny(401, "bad token signature")},
		{"tampered subject", "Bearer bob" + valid[len("alice"):], guest.Deny(401, "bad token signature")},
		{"not ours (an admin token)", "Bearer nodots", guest.Pass()},
		{"no subject", "Bearer .1.x", guest.Pass()},
		{"expiry not a number", "Bearer a.b.c", guest.Pass()},
		{"missing", "", guest.Pass()},
		{"basic auth", "Basic " + valid, guest.Pass()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := domain.AuthRequest{Method: "GET", Headers: map[string][]string{"authorization": {tt.header}}}
			if got := p.Authorize(guest.NewRequest(req)); got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestConfigure(t *testing.T) {
	for _, bad := range []string{`null`, `{}`, `{"secret": "short"}`} {
		if err := (&policy{}).Configure([]byte(bad)); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
}
