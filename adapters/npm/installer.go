package npm

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/spf13/afero"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
	"github.com/sandbox-agent-go/sandbox-agent/ports"
)

// Installer installs packages with "npm install --prefix".
type Installer struct {
	// NPM is the npm executable; "" means "npm" on PATH.
	NPM string
	// Env is npm's environment; nil means the daemon's. npm's own cache
	// (npm_config_cache) makes repeated installs fast and offline-capable.
	Env []string
	// User, when set, runs npm as that user, and Fs (which then makes its
	// writes as that user: fsys.AsUser) creates the prefix and its
	// package.json, so npm can write there. Nil Fs is the host's.
	User *User
	Fs   afero.Fs
}

var _ ports.PackageInstaller = (*Installer)(nil)

// Install implements ports.PackageInstaller.
func (i *Installer) Install(ctx context.Context, prefix, spec string) (domain.InstalledPackage, error) {
	fsys := i.Fs
	if fsys == nil {
		fsys = afero.NewOsFs()
	}
	if err := fsys.MkdirAll(prefix, 0o755); err != nil {
		return domain.InstalledPackage{}, err
	}
	// A package.json of its own keeps npm from treating a parent directory
	// as the project, and records which package the spec resolved to.
	if err := afero.WriteFile(fsys, filepath.Join(prefix, "package.json"), []byte(`{"name":"sandbox-agent-install","private":true}`+"\n"), 0o644); err != nil {
		return domain.InstalledPackage{}, err
	}
	npm := i.NPM
	npm = cmp.Or(npm, "npm")
	env := i.Env
	if env == nil {
		env = os.Environ()
	}
	env = append(env, "npm_config_update_notifier=false", "npm_config_fund=false", "npm_config_audit=false")
	// "--": a spec of the registry's ("--global") is a package, never an
	// option.
	res, err := run(ctx, i.User, env, prefix, npm, "install", "--prefix", prefix, "--save", "--omit=dev", "--no-audit", "--no-fund", "--loglevel=error", "--", spec)
	if err != nil {
		return domain.InstalledPackage{}, fmt.Errorf("npm install %s: %w: %s", spec, err, tail(res))
	}
	if res.ExitCode != 0 {
		return domain.InstalledPackage{}, fmt.Errorf("npm install %s: exit status %d: %s", spec, res.ExitCode, tail(res))
	}
	return describe(prefix)
}

// describe reads what was installed: the one dependency of the prefix's
// package.json, its version and its bins.
func describe(prefix string) (domain.InstalledPackage, error) {
	var root struct {
		Dependencies map[string]string `json:"dependencies"`
	}
	if err := readJSON(filepath.Join(prefix, "package.json"), &root); err != nil {
		return domain.InstalledPackage{}, err
	}
	if len(root.Dependencies) != 1 {
		return domain.InstalledPackage{}, fmt.Errorf("npm install recorded %d packages, want 1", len(root.Dependencies))
	}
	var name string
	for n := range root.Dependencies {
		name = n
	}
	dir := filepath.Join(prefix, "node_modules", filepath.FromSlash(name))
	var pkg struct {
		Name    string          `json:"name"`
		Version string          `json:"version"`
		Bin     json.RawMessage `json:"bin"`
	}
	if err := readJSON(filepath.Join(dir, "package.json"), &pkg); err != nil {
		return domain.InstalledPackage{}, err
	}
	bins := map[string]string{}
	var one string
	var many map[string]string
	switch {
	case len(pkg.Bin) == 0 || string(pkg.Bin) == "null":
	case json.Unmarshal(pkg.Bin, &one) == nil:
		bins[path.Base(name)] = one
	case json.Unmarshal(pkg.Bin, &many) == nil:
		bins = many
	default:
		return domain.InstalledPackage{}, fmt.Errorf("package %s: unreadable \"bin\"", name)
	}
	out := domain.InstalledPackage{Name: name, Version: pkg.Version, Bins: map[string]string{}}
	names := make([]string, 0, len(bins))
	for b := range bins {
		names = append(names, b)
	}
	sort.Strings(names)
	for _, b := range names {
		if strings.ContainsAny(b, "/\\") {
			continue
		}
		// npm links every bin into node_modules/.bin with the exec bit set.
		link := filepath.Join(prefix, "node_modules", ".bin", b)
		if _, err := os.Stat(link); err == nil {
			out.Bins[b] = link
			continue
		}
		rel, ok := domain.SafeArchivePath(bins[b])
		if !ok {
			continue
		}
		out.Bins[b] = filepath.Join(dir, filepath.FromSlash(rel))
	}
	return out, nil
}

func readJSON(p string, v any) error {
	b, err := os.ReadFile(p)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w", filepath.Base(p), err)
	}
	return nil
}

// tail is the end of npm's output, for error messages.
func tail(res domain.CommandResult) string {
	s := strings.TrimSpace(string(res.Stderr) + "\n" + string(res.Stdout))
	lines := strings.Split(s, "\n")
	if len(lines) > 16 {
		lines = lines[len(lines)-16:]
	}
	s = strings.Join(lines, "\n")
	if s == "" {
		return "(no output)"
	}
	return s
}
