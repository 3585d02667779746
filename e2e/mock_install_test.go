package e2e

import (
	"encoding/json"
	"testing"
)

// TestMockInstall: installing the built-in mock writes its launcher, as the
// reference does, so the listing and the install answer agree, and the
// mock still runs through the launcher.
func TestMockInstall(t *testing.T) {
	d := startDaemon(t, daemonOpts{})
	installed := func() bool {
		_, _, b := d.do("GET", "/v1/agents/mock", nil)
		var a struct{ Installed bool }
		_ = json.Unmarshal(b, &a)
		return a.Installed
	}
	if installed() {
		t.Fatal("mock listed as installed before install (reference: false)")
	}
	var res struct {
		AlreadyInstalled bool `json:"already_installed"`
		Artifacts        []struct{ Kind, Source, Path string }
	}
	st, _, b := d.do("POST", "/v1/agents/mock/install", []byte(`{}`), "Content-Type", "application/json")
	if err := json.Unmarshal(b, &res); st != 200 || err != nil || res.AlreadyInstalled || len(res.Artifacts) != 1 || res.Artifacts[0].Source != "builtin" {
		t.Fatalf("first install: %d %s", st, b)
	}
	if !installed() {
		t.Fatal("mock not listed as installed after install")
	}
	_, _, b = d.do("POST", "/v1/agents/mock/install", []byte(`{}`), "Content-Type", "application/json")
	if json.Unmarshal(b, &res) != nil || !res.AlreadyInstalled {
		t.Fatalf("second install: %s", b)
	}
	if st, b := d.post("/v1/acp/m?agent=mock", initMsg); st != 200 {
		t.Fatalf("mock through its launcher: %d %s", st, b)
	}
	if src := d.server("m"); src.State != "running" {
		t.Fatalf("%+v", src)
	}
}
