package porttest

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/sandbox-agent-go/sandbox-agent/ports"
)

func TestFakeSecretsContract(t *testing.T) {
	SecretsContract(t, func(t *testing.T) (ports.Secrets, string, string, string) {
		dir := t.TempDir()
		secret, plain := filepath.Join(dir, "tokens"), filepath.Join(dir, "notes")
		for _, p := range []string{secret, plain} {
			if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		return &FakeSecrets{Paths: map[string]string{secret: "its token file"}}, dir, secret, plain
	})
}
