package agents

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"cmp"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/spf13/afero"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
	"github.com/sandbox-agent-go/sandbox-agent/ports/porttest"
)

const testDir = "/data/sandbox-agent/bin"

// installRig is an Installer on a memory filesystem with fake ports. The
// fake npm "installs" a package by writing its bin; the fake command
// runner "verifies" a launcher by checking that the program it execs
// exists, unless failVerify is set.
type installRig struct {
	fs         afero.Fs
	in         *Installer
	down       *porttest.FakeDownloader
	registry   string // the registry document
	regErr     error
	npmSpecs   []string
	npmErr     error
	npmCount   atomic.Int32
	fetches    atomic.Int32
	failVerify bool
	mu         sync.Mutex
}

func newRig(t *testing.T, registry string) *installRig {
	t.Helper()
	r := &installRig{fs: afero.NewMemMapFs(), registry: registry, down: &porttest.FakeDownloader{Files: map[string][]byte{}}}
	r.in = &Installer{
		Fs: r.fs, Dir: testDir, RegistryURL: "http://registry.test/registry.json", Platform: "linux-x86_64",
		Registry: &porttest.FakeRegistry{FetchFunc: func(context.Context) (domain.Registry, error) {
			r.fetches.Add(1)
			if r.regErr != nil {
				return domain.Registry{}, r.regErr
			}
			return domain.ParseRegistry([]byte(r.registry))
		}},
		Downloader: r.down,
		Disk:       &simpleDisk{},
		Packages: &porttest.FakePackageInstaller{InstallFunc: func(ctx context.Context, prefix, spec string) (domain.InstalledPackage, error) {
			r.npmCount.Add(1)
			r.mu.Lock()
			r.npmSpecs = append(r.npmSpecs, spec)
			r.mu.Unlock()
			if r.npmErr != nil {
				return domain.InstalledPackage{}, r.npmErr
			}
			name, version := domain.SplitPackageSpec(spec)
			version = cmp.Or(version, "9.9.9")
			base := name[strings.LastIndex(name, "/")+1:]
			bin := filepath.Join(prefix, "node_modules", ".bin", base)
			if err := afero.WriteFile(r.fs, bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
				return domain.InstalledPackage{}, err
			}
			return domain.InstalledPackage{Name: name, Version: version, Bins: map[string]string{base: bin}}, nil
		}},
		Commands: &porttest.FakeCommands{RunFunc: func(ctx context.Context, name string, args ...string) (domain.CommandResult, error) {
			b, err := afero.ReadFile(r.fs, name)
			if err != nil {
				return domain.CommandResult{}, err
			}
			if len(args) == 1 && args[0] == "--version" {
				return domain.CommandResult{Stdout: []byte("1.0.7 (Claude Code)\n")}, nil
			}
			if r.failVerify {
				return domain.CommandResult{Stderr: []byte("line1\nError: cannot find module\n"), ExitCode: 1}, nil
			}
			// The launcher's exec target must exist.
			target := execTarget(string(b))
			if target == "" || !isFile(r.fs, target) {
				return domain.CommandResult{Stderr: []byte("exec: not found: " + target), ExitCode: 127}, nil
			}
			return domain.CommandResult{}, nil
		}},
	}
	return r
}

func (r *installRig) launcher(t *testing.T, agent string) string {
	t.Helper()
	b, err := afero.ReadFile(r.fs, launcherPath(r.in.Dir, agent))
	if err != nil {
		t.Fatalf("launcher of %s: %v", agent, err)
	}
	return string(b)
}

func wantInstallFailed(t *testing.T, err error, step, stderrPart string) {
	t.Helper()
	e, ok := domain.AsError(err)
	if !ok || e.Kind != domain.KindInstallFailed {
		t.Fatalf("err = %v, want install_failed", err)
	}
	if !strings.HasPrefix(e.Step, step) {
		t.Errorf("step = %q, want prefix %q", e.Step, step)
	}
	if !strings.Contains(e.Stderr, stderrPart) {
		t.Errorf("stderr = %q, want it to contain %q", e.Stderr, stderrPart)
	}
}

const npxRegistry = `{"version":"1.0.0","agents":[
 {"id":"claude-acp","version":"0.30.1","distribution":{"npx":{"package":"@zed-industries/claude-agent-acp@0.30.1","args":["--hide-claude-auth"],"env":{"CLAUDE_FLAG":"it's on"}}}},
 {"id":"new-agent","version":"2.0.0","distribution":{"npx":{"package":"new-agent@2.0.0"}}}
]}`

func TestInstallNpxFromRegistry(t *testing.T) {
	r := newRig(t, npxRegistry)
	res, err := r.in.Install(context.Background(), "claude", domain.InstallOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := domain.Artifact{Kind: domain.ArtifactAgentProcess, Path: testDir + "/agent_processes/claude-acp", Source: domain.SourceRegistry, Version: "0.30.1"}
	if res.AlreadyInstalled || len(res.Artifacts) != 1 || res.Artifacts[0] != want {
		t.Fatalf("result = %+v, want one artifact %+v", res, want)
	}
	if got := r.npmSpecs; len(got) != 1 || got[0] != "@zed-industries/claude-agent-acp@0.30.1" {
		t.Errorf("npm specs = %v", got)
	}
	script := r.launcher(t, "claude")
	for _, part := range []string{"export CLAUDE_FLAG='it'\\''s on'\n", "/node_modules/.bin/claude-agent-acp' '--hide-claude-auth' \"$@\"\n"} {
		if !strings.Contains(script, part) {
			t.Errorf("launcher lacks %q:\n%s", part, script)
		}
	}
	if v := r.in.AgentProcessVersion("claude"); v != "0.30.1" {
		t.Errorf("manifest version = %q", v)
	}

	// A second install changes nothing.
	res, err = r.in.Install(context.Background(), "claude", domain.InstallOptions{})
	if err != nil || !res.AlreadyInstalled || len(res.Artifacts) != 0 {
		t.Fatalf("second install = %+v, %v", res, err)
	}
	if len(r.npmSpecs) != 1 {
		t.Errorf("npm ran %d times", len(r.npmSpecs))
	}
}

func TestInstallVersionOverride(t *testing.T) {
	r := newRig(t, npxRegistry)
	res, err := r.in.Install(context.Background(), "claude", domain.InstallOptions{AgentProcessVersion: "0.19.0"})
	if err != nil {
		t.Fatal(err)
	}
	if r.npmSpecs[0] != "@zed-industries/claude-agent-acp@0.19.0" || res.Artifacts[0].Version != "0.19.0" {
		t.Errorf("spec %q, version %q", r.npmSpecs[0], res.Artifacts[0].Version)
	}
}

func TestInstallFallbackWhenRegistryHasNoEntry(t *testing.T) {
	r := newRig(t, `{"agents":[]}`)
	res, err := r.in.Install(context.Background(), "codex", domain.InstallOptions{})
	if err != nil {
		t.Fatal(err)
	}
	fallback := domain.Recipes["codex"].FallbackPackage
	if r.npmSpecs[0] != fallback {
		t.Errorf("npm spec = %q, want %q", r.npmSpecs[0], fallback)
	}
	_, v := domain.SplitPackageSpec(fallback)
	if a := res.Artifacts[0]; a.Source != domain.SourceFallback || a.Version != v {
		t.Errorf("artifact = %+v", a)
	}
}

func TestInstallUnknownAgent(t *testing.T) {
	t.Run("listed in the registry", func(t *testing.T) {
		r := newRig(t, npxRegistry)
		res, err := r.in.Install(context.Background(), "new-agent", domain.InstallOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if res.Artifacts[0].Source != domain.SourceRegistry || !strings.Contains(r.launcher(t, "new-agent"), "/.bin/new-agent'") {
			t.Errorf("result = %+v", res)
		}
	})
	t.Run("not listed", func(t *testing.T) {
		r := newRig(t, npxRegistry)
		_, err := r.in.Install(context.Background(), "nobody", domain.InstallOptions{})
		if !domain.IsKind(err, domain.KindUnsupportedAgent) {
			t.Fatalf("err = %v, want unsupported_agent", err)
		}
	})
	t.Run("invalid id", func(t *testing.T) {
		r := newRig(t, npxRegistry)
		_, err := r.in.Install(context.Background(), "../x", domain.InstallOptions{})
		if !domain.IsKind(err, domain.KindUnsupportedAgent) {
			t.Fatalf("err = %v, want unsupported_agent", err)
		}
	})
}

func TestInstallUnreachableRegistry(t *testing.T) {
	r := newRig(t, "")
	r.regErr = errors.New("ACP registry: GET http://registry.test/registry.json: connection refused")
	_, err := r.in.Install(context.Background(), "claude", domain.InstallOptions{})
	wantInstallFailed(t, err, "fetch registry", "http://registry.test/registry.json")
	// It says what would make it work (the first error of a host without network).
	wantInstallFailed(t, err, "fetch registry", `SANDBOX_AGENT_ACP_REGISTRY_URL at a mirror; or install it ahead of time where they are reachable, with "sandbox-agent install-agent claude"`)
	if r.in.Installed("claude") {
		t.Error("a launcher exists after a failed install")
	}
}

func TestInstallNpmFailure(t *testing.T) {
	r := newRig(t, npxRegistry)
	r.npmErr = errors.New("npm install x: exit status 1: npm error 404 Not Found")
	_, err := r.in.Install(context.Background(), "claude", domain.InstallOptions{})
	wantInstallFailed(t, err, "npm install @zed-industries/claude-agent-acp", "404 Not Found")
}

func TestInstallFailingVerification(t *testing.T) {
	r := newRig(t, npxRegistry)
	r.failVerify = true
	_, err := r.in.Install(context.Background(), "claude", domain.InstallOptions{})
	wantInstallFailed(t, err, "verify claude-acp --help", "cannot find module")
	if r.in.Installed("claude") {
		t.Error("an unverified launcher counts as installed")
	}
	if left, _ := afero.ReadDir(r.fs, filepath.Dir(launcherPath(r.in.Dir, "claude"))); len(left) != 0 {
		t.Errorf("temporary launcher left behind: %v", left[0].Name())
	}
	entries, _ := afero.ReadDir(r.fs, r.in.storeDir("claude"))
	if len(entries) != 0 {
		t.Errorf("store holds %d entries after a failed install", len(entries))
	}
}

func TestReinstall(t *testing.T) {
	r := newRig(t, npxRegistry)
	ctx := context.Background()
	if _, err := r.in.Install(ctx, "claude", domain.InstallOptions{}); err != nil {
		t.Fatal(err)
	}
	first := execTarget(r.launcher(t, "claude"))
	res, err := r.in.Install(ctx, "claude", domain.InstallOptions{Reinstall: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.AlreadyInstalled || len(res.Artifacts) != 1 || len(r.npmSpecs) != 2 {
		t.Fatalf("reinstall = %+v, npm runs %d", res, len(r.npmSpecs))
	}
	second := execTarget(r.launcher(t, "claude"))
	if first == second {
		t.Error("reinstall kept the old package directory")
	}
	if ok, _ := afero.Exists(r.fs, first); ok {
		t.Error("the old install was not pruned")
	}
	// A failed reinstall keeps the working install.
	r.failVerify = true
	if _, err := r.in.Install(ctx, "claude", domain.InstallOptions{Reinstall: true}); err == nil {
		t.Fatal("no error")
	}
	if execTarget(r.launcher(t, "claude")) != second || !isFile(r.fs, second) {
		t.Error("a failed reinstall broke the previous install")
	}
}

func tarGz(t *testing.T, entries ...tar.Header) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, h := range entries {
		body := []byte("#!/bin/sh\necho " + h.Name + "\n")
		if h.Typeflag == tar.TypeReg {
			h.Size = int64(len(body))
		}
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			tw.Write(body)
		}
	}
	tw.Close()
	gz.Close()
	return buf.Bytes()
}

func zipOf(t *testing.T, names ...string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, n := range names {
		h := &zip.FileHeader{Name: n, Method: zip.Deflate}
		h.SetMode(0o755)
		w, err := zw.CreateHeader(h)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(w, "#!/bin/sh\necho %s\n", n)
	}
	zw.Close()
	return buf.Bytes()
}

func binaryRegistry(archive string) string {
	return `{"agents":[{"id":"bin-agent","version":"3.1.4","distribution":{"binary":{
	 "linux-x86_64":{"archive":"` + archive + `","cmd":"./bin/bin-agent","args":["acp"],"env":{"MODE":"acp"}},
	 "darwin-aarch64":{"archive":"https://dl.test/other.tar.gz","cmd":"x"}}}}]}`
}

func TestInstallBinaryArchive(t *testing.T) {
	for _, tc := range []struct {
		name, url string
		archive   func(t *testing.T) []byte
	}{
		{"tar.gz", "https://dl.test/bin-agent-linux.tar.gz", func(t *testing.T) []byte {
			return tarGz(t,
				tar.Header{Name: "./", Typeflag: tar.TypeDir, Mode: 0o755},
				tar.Header{Name: "bin/", Typeflag: tar.TypeDir, Mode: 0o755},
				tar.Header{Name: "bin/bin-agent", Typeflag: tar.TypeReg, Mode: 0o755},
				tar.Header{Name: "README", Typeflag: tar.TypeReg, Mode: 0o644})
		}},
		{"zip", "https://dl.test/bin-agent-linux.zip?sig=1", func(t *testing.T) []byte { return zipOf(t, "pkg/bin/bin-agent", "pkg/LICENSE") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, binaryRegistry(tc.url))
			r.down.Files[tc.url] = tc.archive(t)
			res, err := r.in.Install(context.Background(), "bin-agent", domain.InstallOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if a := res.Artifacts[0]; a.Source != domain.SourceRegistry || a.Version != "3.1.4" {
				t.Errorf("artifact = %+v", a)
			}
			script := r.launcher(t, "bin-agent")
			target := execTarget(script)
			if !strings.HasSuffix(target, "/bin/bin-agent") || !strings.Contains(script, "export MODE='acp'") || !strings.Contains(script, "' 'acp' \"$@\"") {
				t.Errorf("launcher:\n%s", script)
			}
			fi, err := r.fs.Stat(target)
			if err != nil || fi.Mode()&0o111 == 0 {
				t.Errorf("command %s: %v, mode %v", target, err, fi)
			}
		})
	}
}

// TestInstallDiskErrors: what the extractor (agents.Disk; its escape and
// limit rules are tested in app/files) refuses is an install_failed naming
// the unpack step, except the limits, which reach the client as they are
// (413, 507); nothing of the install is left.
func TestInstallDiskErrors(t *testing.T) {
	const url = "https://dl.test/a.tar.gz"
	for _, tc := range []struct {
		name string
		err  error
		kind domain.Kind
	}{
		{"refused entry", domain.InvalidRequest(`tar entry "../evil": ".." is not allowed`), domain.KindInstallFailed},
		{"over --max-extract", domain.TooLarge(10, "the archive expands to more than 10 bytes"), domain.KindPayloadTooLarge},
		{"below --min-free", domain.InsufficientStorage(1<<30, "less than 1073741824 bytes free"), domain.KindInsufficientStorage},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, binaryRegistry(url))
			r.down.Files[url] = tarGz(t, tar.Header{Name: "bin/bin-agent", Typeflag: tar.TypeReg, Mode: 0o755})
			r.in.Disk = &simpleDisk{unpackErr: tc.err}
			_, err := r.in.Install(context.Background(), "bin-agent", domain.InstallOptions{})
			if !domain.IsKind(err, tc.kind) {
				t.Fatalf("err %v, want %s", err, tc.kind)
			}
			if tc.kind == domain.KindInstallFailed {
				wantInstallFailed(t, err, "unpack", `".." is not allowed`)
			}
			entries, _ := afero.ReadDir(r.fs, r.in.storeDir("bin-agent"))
			if len(entries) != 0 {
				t.Errorf("install left %v", entries)
			}
		})
	}
}

func TestInstallMissingArchive(t *testing.T) {
	r := newRig(t, binaryRegistry("https://dl.test/missing.tar.gz"))
	_, err := r.in.Install(context.Background(), "bin-agent", domain.InstallOptions{})
	wantInstallFailed(t, err, "download https://dl.test/missing.tar.gz", "404")
}

func TestInstallOpencodeNative(t *testing.T) {
	r := newRig(t, `{"agents":[]}`)
	r.in.NativeURLs = map[string]string{"opencode": "http://mirror.test/opencode/{version}/opencode-{platform}"}
	url := "http://mirror.test/opencode/latest/opencode-linux-x64.tar.gz"
	r.down.Files[url] = tarGz(t, tar.Header{Name: "opencode", Typeflag: tar.TypeReg, Mode: 0o755})
	res, err := r.in.Install(context.Background(), "opencode", domain.InstallOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Artifacts) != 2 || res.Artifacts[0].Kind != domain.ArtifactNativeAgent || res.Artifacts[0].Path != testDir+"/opencode" || res.Artifacts[0].Version != "1.0.7" {
		t.Fatalf("artifacts = %+v", res.Artifacts)
	}
	script := r.launcher(t, "opencode")
	if execTarget(script) != testDir+"/opencode" || !strings.Contains(script, "' 'acp' \"$@\"") {
		t.Errorf("launcher:\n%s", script)
	}
}

func TestInstallClaudeNativeOnRequest(t *testing.T) {
	r := newRig(t, npxRegistry)
	r.in.NativeURLs = map[string]string{"claude": "http://mirror.test/claude/{version}/{platform}/claude"}
	r.down.Files["http://mirror.test/claude/1.0.7/linux-x64/claude"] = []byte("#!/bin/sh\n")
	res, err := r.in.Install(context.Background(), "claude", domain.InstallOptions{AgentVersion: "1.0.7"})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Artifacts) != 2 || res.Artifacts[0].Kind != domain.ArtifactNativeAgent || res.Artifacts[0].Version != "1.0.7" {
		t.Fatalf("artifacts = %+v", res.Artifacts)
	}
	if !strings.Contains(r.launcher(t, "claude"), "export CLAUDE_CODE_EXECUTABLE='"+testDir+"/claude'") {
		t.Errorf("launcher does not point the adapter at the native binary:\n%s", r.launcher(t, "claude"))
	}
}

// Lookups remember a failed fetch for a while; installs always try again.
func TestRegistryFailureIsRemembered(t *testing.T) {
	r := newRig(t, npxRegistry)
	r.regErr = errors.New("connection refused")
	ctx := context.Background()
	for range 3 {
		if _, err := r.in.Listed(ctx, "new-agent"); err == nil {
			t.Fatal("no error")
		}
	}
	if n := r.fetches.Load(); n != 1 {
		t.Errorf("lookups fetched %d times, want 1", n)
	}
	if _, err := r.in.Install(ctx, "claude", domain.InstallOptions{}); err == nil {
		t.Fatal("no error")
	}
	r.regErr = nil
	if _, err := r.in.Install(ctx, "claude", domain.InstallOptions{}); err != nil {
		t.Fatal(err)
	}
	if n := r.fetches.Load(); n != 3 {
		t.Errorf("fetched %d times, want 3", n)
	}
	if ok, err := r.in.Listed(ctx, "new-agent"); !ok || err != nil {
		t.Errorf("after a good fetch: %v, %v", ok, err)
	}
}

// simpleDisk is a test Disk: a plain tar/tar.gz/zip reader without the
// real extractor's checks (app/files tests those), or a fixed error.
type simpleDisk struct{ unpackErr error }

func (d *simpleDisk) Unpack(ctx context.Context, fsys afero.Fs, src, kind, dst string) error {
	if d.unpackErr != nil {
		return d.unpackErr
	}
	b, err := afero.ReadFile(fsys, src)
	if err != nil {
		return err
	}
	write := func(name string, mode fs.FileMode, r io.Reader) error {
		p := filepath.Join(dst, filepath.FromSlash(name))
		if err := fsys.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		body, err := io.ReadAll(r)
		if err != nil {
			return err
		}
		return afero.WriteFile(fsys, p, body, mode.Perm()|0o600)
	}
	if kind == "zip" {
		zr, err := zip.NewReader(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			return err
		}
		for _, zf := range zr.File {
			if zf.Mode().IsRegular() {
				rc, err := zf.Open()
				if err != nil {
					return err
				}
				err = write(zf.Name, zf.Mode(), rc)
				rc.Close()
				if err != nil {
					return err
				}
			}
		}
		return nil
	}
	var r io.Reader = bytes.NewReader(b)
	if kind == "tar.gz" {
		gz, err := gzip.NewReader(r)
		if err != nil {
			return err
		}
		r = gz
	}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if h.Typeflag == tar.TypeReg {
			if err := write(h.Name, fs.FileMode(h.Mode), tr); err != nil {
				return err
			}
		}
	}
}

func (d *simpleDisk) GuardWriter(_ string, w io.Writer) (io.Writer, error) { return w, nil }

// An install waits for the one of the same agent in progress, but only
// while its caller does: requests whose clients left were each run in
// turn, so a client could queue any number of reinstalls (npm installs,
// downloads) and walk away.
func TestInstallWaitEndsWithItsCaller(t *testing.T) {
	r := newRig(t, npxRegistry)
	orig := r.in.Packages
	var runs atomic.Int32
	started, release := make(chan struct{}), make(chan struct{})
	r.in.Packages = &porttest.FakePackageInstaller{InstallFunc: func(ctx context.Context, prefix, spec string) (domain.InstalledPackage, error) {
		if runs.Add(1) == 1 {
			close(started)
		}
		<-release
		return orig.Install(ctx, prefix, spec)
	}}
	aDone := make(chan error, 1)
	go func() {
		_, err := r.in.Install(context.Background(), "claude", domain.InstallOptions{Reinstall: true})
		aDone <- err
	}()
	<-started
	ctx, cancel := context.WithCancel(context.Background())
	bDone := make(chan error, 1)
	go func() {
		_, err := r.in.Install(ctx, "claude", domain.InstallOptions{Reinstall: true})
		bDone <- err
	}()
	cancel()
	select {
	case err := <-bDone:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("a waiting install whose caller left: %v", err)
		}
	case <-time.After(30 * time.Second): // a hang guard, not a timing check
		t.Fatal("an install whose caller left still waits for its turn")
	}
	close(release)
	if err := <-aDone; err != nil {
		t.Fatal(err)
	}
	if n := runs.Load(); n != 1 {
		t.Errorf("%d npm installs, want 1", n)
	}
}

// TestInstallRegistryVersionStaysInItsComment: a registry version with a
// newline (or other control characters) went as it was into the
// launcher's comment line, so "1.0\ntouch /tmp/x\n#" wrote a launcher that
// ran touch on every start, the verifying --help first. The version is
// now one printable line wherever it goes (launcher, answer, manifest).
func TestInstallRegistryVersionStaysInItsComment(t *testing.T) {
	for _, tc := range []struct{ name, doc string }{
		{"binary", `{"agents":[{"id":"bin-agent","version":"1.0\ntouch /tmp/pwned\n#\u001b]0;x\u0007","distribution":{"binary":{
		 "linux-x86_64":{"archive":"https://dl.test/a.tar.gz","cmd":"bin/bin-agent"}}}}]}`},
		{"npx spec", `{"agents":[{"id":"new-agent","distribution":{"npx":{"package":"new-agent@1.0\ntouch /tmp/pwned\n#"}}}]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, tc.doc)
			r.down.Files["https://dl.test/a.tar.gz"] = tarGz(t, tar.Header{Name: "bin/bin-agent", Typeflag: tar.TypeReg, Mode: 0o755})
			agent := "bin-agent"
			if tc.name != "binary" {
				agent = "new-agent"
			}
			res, err := r.in.Install(context.Background(), agent, domain.InstallOptions{})
			if err != nil {
				t.Fatal(err)
			}
			script := r.launcher(t, agent)
			for i, line := range strings.Split(strings.TrimSuffix(script, "\n"), "\n") {
				if i == 0 && line == "#!/bin/sh" || strings.HasPrefix(line, "# ") || strings.HasPrefix(line, "export ") || strings.HasPrefix(line, "exec '") {
					continue
				}
				t.Errorf("launcher line %d is a command of the registry's: %q\n%s", i+1, line, script)
			}
			if v := res.Artifacts[0].Version; strings.ContainsAny(v, "\n\x1b\a") {
				t.Errorf("version answered = %q", v)
			}
		})
	}
}

// A fetch that ends because its caller left (a client that disconnects
// during a lazy install's lookup) says nothing about the registry: it was
// remembered as a failure, and for 15 s every request for an agent only
// the registry knows answered "context canceled".
func TestRegistryCallerLeavingIsNotAFailure(t *testing.T) {
	r := newRig(t, npxRegistry)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r.regErr = fmt.Errorf("ACP registry: GET http://registry.test/registry.json: %w", context.Canceled)
	if _, err := r.in.Listed(ctx, "new-agent"); err == nil {
		t.Fatal("no error")
	}
	r.regErr = nil
	if ok, err := r.in.Listed(context.Background(), "new-agent"); !ok || err != nil {
		t.Errorf("the next caller's lookup: %v, %v", ok, err)
	}
}

// A step that outlives its bound says which bound, not "context deadline
// exceeded" (what a hanging registry answered after 30 s).
func TestInstallTimeoutsNameTheirBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, binaryRegistry("https://dl.test/a.tar.gz"))
		hang := func(ctx context.Context) error {
			<-ctx.Done()
			return fmt.Errorf("GET x: %w", context.Cause(ctx))
		}
		r.in.Registry = &porttest.FakeRegistry{FetchFunc: func(ctx context.Context) (domain.Registry, error) {
			return domain.Registry{}, hang(ctx)
		}}
		_, err := r.in.Install(context.Background(), "claude", domain.InstallOptions{})
		wantInstallFailed(t, err, "fetch registry", "the ACP registry did not answer within 30s")

		r = newRig(t, binaryRegistry("https://dl.test/a.tar.gz"))
		r.in.Downloader = downloaderFunc(func(ctx context.Context, url string, w io.Writer) (int64, error) { return 0, hang(ctx) })
		_, err = r.in.Install(context.Background(), "bin-agent", domain.InstallOptions{})
		wantInstallFailed(t, err, "download https://dl.test/a.tar.gz", "the download took longer than 10m0s")

		r = newRig(t, npxRegistry)
		r.in.Packages = &porttest.FakePackageInstaller{InstallFunc: func(ctx context.Context, prefix, spec string) (domain.InstalledPackage, error) {
			return domain.InstalledPackage{}, hang(ctx)
		}}
		_, err = r.in.Install(context.Background(), "new-agent", domain.InstallOptions{})
		wantInstallFailed(t, err, "npm install new-agent@2.0.0", "npm install took longer than 10m0s")
	})
}

type downloaderFunc func(ctx context.Context, url string, w io.Writer) (int64, error)

func (f downloaderFunc) Download(ctx context.Context, url string, w io.Writer) (int64, error) {
	return f(ctx, url, w)
}

// Lookups that arrive while the registry is being fetched wait for that
// fetch instead of starting their own: a slow registry and a burst of
// POST /v1/acp/{id}?agent=<unknown> made one fetch (up to 32 MiB, 30 s)
// per request. A caller that leaves does not end the fetch for the others.
func TestRegistryFetchedOnceForConcurrentLookups(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, npxRegistry)
		release := make(chan struct{})
		var fetches atomic.Int32
		r.in.Registry = &porttest.FakeRegistry{FetchFunc: func(ctx context.Context) (domain.Registry, error) {
			fetches.Add(1)
			select {
			case <-release:
			case <-ctx.Done():
				return domain.Registry{}, context.Cause(ctx)
			}
			return domain.ParseRegistry([]byte(npxRegistry))
		}}
		leaving, leave := context.WithCancel(context.Background())
		leftErr := make(chan error, 1)
		go func() {
			_, err := r.in.Listed(leaving, "new-agent")
			leftErr <- err
		}()
		synctest.Wait()
		results := make(chan error, 10)
		for range 10 {
			go func() {
				ok, err := r.in.Listed(context.Background(), "new-agent")
				if err == nil && !ok {
					err = errors.New("not listed")
				}
				results <- err
			}()
		}
		synctest.Wait()
		leave()
		if err := <-leftErr; !errors.Is(err, context.Canceled) {
			t.Errorf("the caller that left: %v", err)
		}
		close(release)
		for range 10 {
			if err := <-results; err != nil {
				t.Error(err)
			}
		}
		if n := fetches.Load(); n != 1 {
			t.Errorf("11 concurrent lookups fetched the registry %d times, want 1", n)
		}
	})
}

// An install killed midway (the daemon or install-agent SIGKILLed, the
// box rebooted) leaves its directory, a partial download of up to
// --max-extract in it. Only a successful install of the agent removed
// it, so every killed or failing attempt added one; now each install
// starts by removing what is not the installed agent's.
func TestInstallRemovesWhatKilledInstallsLeft(t *testing.T) {
	r := newRig(t, npxRegistry)
	ctx := context.Background()
	if _, err := r.in.Install(ctx, "new-agent", domain.InstallOptions{}); err != nil {
		t.Fatal(err)
	}
	store := r.in.storeDir("new-agent")
	stale := filepath.Join(store, "1", "download")
	if err := afero.WriteFile(r.fs, stale, []byte("partial"), 0o644); err != nil {
		t.Fatal(err)
	}
	r.npmErr = errors.New("npm exploded")
	if _, err := r.in.Install(ctx, "new-agent", domain.InstallOptions{Reinstall: true}); err == nil {
		t.Fatal("no error")
	}
	if ok, _ := afero.Exists(r.fs, filepath.Dir(stale)); ok {
		t.Errorf("%s is still there", filepath.Dir(stale))
	}
	if !r.in.Installed("new-agent") {
		t.Errorf("the installed agent went with it:\n%s", r.launcher(t, "new-agent"))
	}
}

// Installs asked of any number of agent names leave no per-agent lock
// behind once they end: a client naming endless unknown agents cannot
// grow the installer's memory.
func TestInstallLocksDoNotAccumulate(t *testing.T) {
	r := newRig(t, npxRegistry)
	for i := range 50 {
		_, err := r.in.Install(context.Background(), fmt.Sprintf("nobody-%d", i), domain.InstallOptions{})
		if !domain.IsKind(err, domain.KindUnsupportedAgent) {
			t.Fatalf("err = %v, want unsupported_agent", err)
		}
	}
	if _, err := r.in.Install(context.Background(), "new-agent", domain.InstallOptions{}); err != nil {
		t.Fatal(err)
	}
	r.in.mu.Lock()
	n := len(r.in.locks)
	r.in.mu.Unlock()
	if n != 0 {
		t.Errorf("%d install locks kept after the installs ended", n)
	}
}
