package credentials

import (
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/spf13/afero"
)

// BenchmarkDiscover is what credentialsAvailable costs each GET /v1/agents:
// a discovery over a home holding the usual files, one of them a large
// Claude Code config with no key (so every later source is read too).
// "env" finds both providers in the environment, so only OpenCode's file
// is read.
func BenchmarkDiscover(b *testing.B) {
	mem := afero.NewMemMapFs()
	big := `{"projects":{` + strings.Repeat(`"/work/p":{"history":["`+strings.Repeat("x", 200)+`"]},`, 5000) + `"last":{}}}`
	for rel, body := range map[string]string{
		".claude.json":                    big,
		".codex/auth.json":                `{"tokens":{"access_token":"cx-oauth"}}`,
		".local/share/opencode/auth.json": `{"zeta":{"type":"api","key":"zk"}}`,
	} {
		if err := afero.WriteFile(mem, filepath.Join(home, rel), []byte(body), 0o600); err != nil {
			b.Fatal(err)
		}
	}
	for _, c := range []struct {
		name string
		env  map[string]string
	}{
		{"files", nil},
		{"env", map[string]string{"ANTHROPIC_API_KEY": "a", "OPENAI_API_KEY": "o"}},
	} {
		b.Run(c.name+"/claude.json="+sizeOf(len(big)), func(b *testing.B) {
			d := &Discovery{Fs: mem, Home: home, LookupEnv: func(k string) (string, bool) { v, ok := c.env[k]; return v, ok }}
			b.ReportAllocs()
			for b.Loop() {
				d.Discover(Options{OAuth: true, Usable: true})
			}
		})
	}
}

func sizeOf(n int) string { return strconv.Itoa(n>>10) + "KiB" }
