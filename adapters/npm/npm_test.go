package npm

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandbox-agent-go/sandbox-agent/ports/porttest"
)

// packFixture builds a tiny npm package (a shell-script bin, no
// dependencies) with "npm pack", so installs need no registry.
func packFixture(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("npm"); err != nil {
		t.Fatal("these tests need npm on PATH")
	}
	src := t.TempDir()
	files := map[string]string{
		"package.json":      `{"name":"@fixture/echo-agent","version":"1.2.3","bin":{"echo-agent":"bin/echo-agent.sh"}}`,
		"bin/echo-agent.sh": "#!/bin/sh\necho \"echo-agent $*\"\n",
	}
	for name, body := range files {
		p := filepath.Join(src, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	out := t.TempDir()
	cmd := exec.Command("npm", "pack", "--pack-destination", out, "--loglevel=error", src)
	cmd.Dir = out
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("npm pack: %v\n%s", err, b)
	}
	return filepath.Join(out, "fixture-echo-agent-1.2.3.tgz")
}

func TestPackageInstallerContract(t *testing.T) {
	porttest.PackageInstallerContract(t, &Installer{}, packFixture(t), "@fixture/echo-agent", "echo-agent")
}

func TestInstalledBinRuns(t *testing.T) {
	prefix := t.TempDir()
	pkg, err := (&Installer{}).Install(context.Background(), prefix, packFixture(t))
	if err != nil {
		t.Fatal(err)
	}
	res, err := (&Commands{}).Run(context.Background(), pkg.Bins["echo-agent"], "--help")
	if err != nil || res.ExitCode != 0 || strings.TrimSpace(string(res.Stdout)) != "echo-agent --help" {
		t.Fatalf("res = %+v (%q), err = %v", res, res.Stdout, err)
	}
}

func TestInstallFailureCarriesOutput(t *testing.T) {
	_, err := (&Installer{}).Install(context.Background(), t.TempDir(), "/nonexistent/no-such.tgz")
	if err == nil || !strings.Contains(err.Error(), "npm install /nonexistent/no-such.tgz: exit status") {
		t.Fatalf("err = %v", err)
	}
}

func TestCommandsContract(t *testing.T) {
	porttest.CommandsContract(t, &Commands{},
		porttest.Program{Name: "sh", Args: []string{"-c", "echo hello"}},
		porttest.Program{Name: "sh", Args: []string{"-c", "echo oops >&2; exit 3"}},
		// The child sleeps on while the shell waits: the whole group must die.
		porttest.Program{Name: "sh", Args: []string{"-c", "sleep 600 & wait"}},
	)
}

// A package spec is never read as an npm option: a registry entry whose
// package was "--global" or "--registry=http://elsewhere" set that option
// and installed nothing (or from elsewhere). npm takes what follows "--"
// as packages.
func TestSpecIsNotAnOption(t *testing.T) {
	dir := t.TempDir()
	argsFile := filepath.Join(dir, "args")
	fake := filepath.Join(dir, "npm")
	if err := os.WriteFile(fake, []byte("#!/bin/sh\nfor a in \"$@\"; do echo \"$a\"; done > '"+argsFile+"'\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	_, _ = (&Installer{NPM: fake}).Install(context.Background(), filepath.Join(dir, "prefix"), "--registry=http://elsewhere")
	b, err := os.ReadFile(argsFile)
	if err != nil {
		t.Fatal(err)
	}
	args := strings.Split(strings.TrimSpace(string(b)), "\n")
	if n := len(args); n < 2 || args[n-2] != "--" || args[n-1] != "--registry=http://elsewhere" {
		t.Fatalf("npm %q, want the spec after --", args)
	}
}
