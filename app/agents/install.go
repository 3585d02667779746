package agents

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/spf13/afero"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
	"github.com/sandbox-agent-go/sandbox-agent/ports"
)

// InstallTimeouts bound each install step, so a stuck network or package
// manager ends in a clear install_failed instead of a hang.
type InstallTimeouts struct {
	Registry time.Duration // fetch the registry document
	Download time.Duration // one archive or binary download
	Package  time.Duration // one npm install
	Verify   time.Duration // one "--help" or "--version" probe
}

// DefaultInstallTimeouts are generous enough for slow mirrors.
func DefaultInstallTimeouts() InstallTimeouts {
	return InstallTimeouts{Registry: 30 * time.Second, Download: 10 * time.Minute, Package: 10 * time.Minute, Verify: 60 * time.Second}
}

// Installer provides agents on disk: the ACP adapter ("agent process") from
// the ACP registry or a pinned fallback, and the native agent binary where
// it is needed. The result of every install is a launcher script at
// <Dir>/agent_processes/<agent>-acp, verified with --help before it counts,
// plus a manifest recording what was installed.
//
// Installs of one agent are serialised; installs of different agents run in
// parallel.
type Installer struct {
	// Stopping, when set, ends with the daemon: a Detached install, which
	// outlives its caller, still stops then (its partial work removed)
	// rather than holding the shutdown until its deadline.
	Stopping context.Context

	// Fs holds the install directory Dir ($XDG_DATA_HOME/sandbox-agent/bin).
	Fs  afero.Fs
	Dir string

	// The ports an install goes through: the registry document, archive
	// downloads, npm packages, and the commands that verify launchers and
	// probe versions.
	Registry   ports.Registry
	Downloader ports.Downloader
	Packages   ports.PackageInstaller
	Commands   ports.Commands

	// RegistryURL names the registry in messages.
	RegistryURL string
	// Platform is the registry platform key (domain.PlatformKey).
	Platform string
	// LookPath finds an executable on PATH; nil finds nothing.
	LookPath func(name string) (string, bool)
	// NativeURLs override a known agent's native download URL template
	// (with {version} and {platform}), for mirrors and tests.
	NativeURLs map[string]string
	// Timeouts bound each step; zero fields take DefaultInstallTimeouts'.
	Timeouts InstallTimeouts
	// Progress, when set, hears one line per install step (the CLI prints
	// them; the daemon logs them).
	Progress func(agent, msg string)
	// Logger, when set, hears each step too.
	Logger *slog.Logger
	// Now is the clock for manifests; nil means time.Now.
	Now func() time.Time
	// Disk extracts archives and keeps downloads above the free-space
	// floor (files.Limits, wired by cmd); nil leaves downloads unguarded
	// and archives unextractable.
	Disk Disk

	mu       sync.Mutex
	locks    map[string]*installLock // per agent being installed or waiting: one install at a time
	fetching *registryFetch          // the registry fetch in progress, if any
	cached   *domain.Registry
	cachedAt time.Time
	failed   error // the last failed fetch, answered to lookups for a while
	failedAt time.Time
}

// registryTTL is how long a fetched registry answers lookups (listing and
// lazy installs); explicit reinstalls always fetch. A failed fetch answers
// lookups of unknown ids for registryFailTTL, so a dead network does not
// slow every request down.
const (
	registryTTL     = time.Minute
	registryFailTTL = 15 * time.Second
)

// storeDir holds an agent's installed packages and its manifest.
func (inst *Installer) storeDir(agent string) string {
	return filepath.Join(inst.Dir, "packages", agent)
}

// installLock is one agent's install lock, and how many callers hold or
// wait for it: the last one out removes it, so installs asked of any
// number of agent names (unknown ones included) leave no entry behind.
type installLock struct {
	ch    chan struct{}
	users int // guarded by Installer.mu
}

// lock returns agent's install lock; the caller calls unlock when it no
// longer holds it nor waits for it.
func (inst *Installer) lock(agent string) (ch chan struct{}, unlock func()) {
	inst.mu.Lock()
	defer inst.mu.Unlock()
	if inst.locks == nil {
		inst.locks = map[string]*installLock{}
	}
	l := inst.locks[agent]
	if l == nil {
		l = &installLock{ch: make(chan struct{}, 1)}
		inst.locks[agent] = l
	}
	l.users++
	return l.ch, func() {
		inst.mu.Lock()
		defer inst.mu.Unlock()
		if l.users--; l.users == 0 {
			delete(inst.locks, agent)
		}
	}
}

type detachedKey struct{}

// Detached marks ctx for an install that, once its turn comes, runs to
// its end whatever happens to ctx (the HTTP API's: a half-finished install
// helps nobody), while it waits for that turn only as long as ctx lasts.
func Detached(ctx context.Context) context.Context {
	return context.WithValue(ctx, detachedKey{}, true)
}

func (inst *Installer) now() time.Time {
	if inst.Now != nil {
		return inst.Now()
	}
	return time.Now()
}

func (inst *Installer) timeouts() InstallTimeouts {
	t, d := inst.Timeouts, DefaultInstallTimeouts()
	t.Registry = cmp.Or(max(t.Registry, 0), d.Registry)
	t.Download = cmp.Or(max(t.Download, 0), d.Download)
	t.Package = cmp.Or(max(t.Package, 0), d.Package)
	t.Verify = cmp.Or(max(t.Verify, 0), d.Verify)
	return t
}

func (inst *Installer) progress(agent, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if inst.Progress != nil {
		inst.Progress(agent, msg)
	}
	if inst.Logger != nil {
		inst.Logger.Info("install", "agent", agent, "step", msg)
	}
}

// registry returns the registry document, from the cache unless fresh.
// lookup also answers a recent failure again instead of fetching.
func (inst *Installer) registry(ctx context.Context, fresh, lookup bool) (domain.Registry, error) {
	inst.mu.Lock()
	if !fresh && inst.cached != nil && inst.now().Sub(inst.cachedAt) < registryTTL {
		r := *inst.cached
		inst.mu.Unlock()
		return r, nil
	}
	if lookup && inst.failed != nil && inst.now().Sub(inst.failedAt) < registryFailTTL {
		err := inst.failed
		inst.mu.Unlock()
		return domain.Registry{}, err
	}
	if inst.Registry == nil {
		inst.mu.Unlock()
		return domain.Registry{}, errors.New("no ACP registry configured")
	}
	if err := ctx.Err(); err != nil {
		inst.mu.Unlock()
		return domain.Registry{}, err
	}
	// One fetch at a time: callers arriving meanwhile (a burst of lazy
	// installs, a slow registry) wait for it rather than each fetching.
	// It runs on its own, bounded by its timeout, so a caller that leaves
	// ends neither it nor the others' wait, and its failure is the
	// registry's, never a caller's cancellation.
	f := inst.fetching
	if f == nil {
		f = &registryFetch{done: make(chan struct{})}
		inst.fetching = f
		go inst.fetch(context.WithoutCancel(ctx), f)
	}
	inst.mu.Unlock()
	select {
	case <-f.done:
		return f.r, f.err
	case <-ctx.Done():
		return domain.Registry{}, ctx.Err()
	}
}

// registryFetch is one fetch of the registry that callers wait for.
type registryFetch struct {
	done chan struct{} // closed when r and err are set
	r    domain.Registry
	err  error
}

// fetch runs f, records its outcome and releases its waiters.
func (inst *Installer) fetch(ctx context.Context, f *registryFetch) {
	d := inst.timeouts().Registry
	ctx, cancel := context.WithTimeoutCause(ctx, d, fmt.Errorf("the ACP registry did not answer within %v", d))
	defer cancel()
	r, err := inst.Registry.Fetch(ctx)
	inst.mu.Lock()
	if err != nil {
		inst.failed, inst.failedAt = err, inst.now()
	} else {
		inst.cached, inst.cachedAt, inst.failed = &r, inst.now(), nil
	}
	inst.fetching = nil
	f.r, f.err = r, err
	inst.mu.Unlock()
	close(f.done)
}

// Listed reports whether the registry has an entry for agent (under the
// agent's registry ids). A registry that cannot be read is an error.
func (inst *Installer) Listed(ctx context.Context, agent string) (bool, error) {
	r, err := inst.registry(ctx, false, true)
	if err != nil {
		return false, err
	}
	recipe, _ := domain.RecipeFor(agent)
	_, ok := r.Find(recipe.RegistryIDs...)
	return ok, nil
}

// Installed reports whether agent has a usable launcher (one whose
// program still exists; see checkLauncher).
func (inst *Installer) Installed(agent string) bool {
	ok, _ := checkLauncher(inst.Fs, launcherPath(inst.Dir, agent))
	return ok
}

// NativePath finds the native binary of a known agent: the installed one,
// else one on PATH.
func (inst *Installer) NativePath(agent string) (string, domain.InstallSource, bool) {
	return nativeBinary(inst.Fs, inst.Dir, inst.LookPath, agent)
}

// Install provides agent. With a usable launcher and no Reinstall it
// changes nothing and answers already_installed. Errors are install_failed
// (with the failing step and its stderr tail in details) or, for an agent
// that neither we nor the registry know, unsupported_agent. Callers go
// through Agents.Install, which answers for the built-in mock.
func (inst *Installer) Install(ctx context.Context, agent string, opts domain.InstallOptions) (domain.InstallResult, error) {
	if !domain.ValidAgentID(agent) {
		return domain.InstallResult{}, domain.UnsupportedAgent(agent)
	}
	// One install of an agent at a time; a caller that leaves while it
	// waits for its turn is not run later (a client could otherwise queue
	// any number of reinstalls and walk away).
	l, unlock := inst.lock(agent)
	defer unlock()
	select {
	case l <- struct{}{}:
	case <-ctx.Done():
		return domain.InstallResult{}, ctx.Err()
	}
	defer func() { <-l }()
	if ctx.Value(detachedKey{}) == true {
		ctx = context.WithoutCancel(ctx)
		if inst.Stopping != nil {
			var cancel context.CancelFunc
			ctx, cancel = context.WithCancel(ctx)
			defer cancel()
			defer context.AfterFunc(inst.Stopping, cancel)()
		}
	}

	if !opts.Reinstall && inst.Installed(agent) {
		return domain.InstallResult{AlreadyInstalled: true, Artifacts: []domain.Artifact{}}, nil
	}
	recipe, known := domain.RecipeFor(agent)
	inst.progress(agent, "resolving %s in the ACP registry %s", agent, domain.ShownURL(inst.RegistryURL))
	reg, err := inst.registry(ctx, opts.Reinstall, false)
	if err != nil {
		if !known {
			return domain.InstallResult{}, domain.UnlistedAgent(agent, err)
		}
		// The first thing a newcomer without network meets: say what
		// would make it work, not only what failed.
		return domain.InstallResult{}, stepFailed(agent, "fetch registry", fmt.Errorf(
			"%w (installing an agent needs the ACP registry and the npm registry: allow them, or point SANDBOX_AGENT_ACP_REGISTRY_URL at a mirror; or install it ahead of time where they are reachable, with \"sandbox-agent install-agent %s\"; the built-in mock agent needs no install)", err, agent))
	}
	plan, err := inst.plan(agent, recipe, reg, opts)
	if err != nil {
		return domain.InstallResult{}, err
	}
	if !known && plan.kind == "" {
		return domain.InstallResult{}, domain.UnsupportedAgent(agent)
	}
	return inst.execute(ctx, agent, recipe, plan, opts)
}

// installPlan is the chosen way to get the agent process.
type installPlan struct {
	kind    string // "npx", "binary", "native", or "" when there is none
	source  domain.InstallSource
	version string // version recorded for the agent process
	npx     *domain.NpxDistribution
	binary  *domain.BinaryTarget
	native  bool // install (or find) the native binary
}

func (inst *Installer) plan(agent string, recipe domain.AgentRecipe, reg domain.Registry, opts domain.InstallOptions) (installPlan, error) {
	p := installPlan{native: recipe.Native != nil && opts.AgentVersion != ""}
	if entry, ok := reg.Find(recipe.RegistryIDs...); ok {
		version := entry.Version
		if opts.AgentProcessVersion != "" {
			version = opts.AgentProcessVersion
		}
		if d := entry.Distribution.Npx; d != nil {
			npx := *d
			npx.Package = domain.PackageSpecWithVersion(npx.Package, opts.AgentProcessVersion)
			if version == "" {
				_, version = domain.SplitPackageSpec(npx.Package)
			}
			p.kind, p.source, p.version, p.npx = "npx", domain.SourceRegistry, version, &npx
			return p, nil
		}
		if t, ok := entry.Distribution.Binary[inst.Platform]; ok {
			p.kind, p.source, p.version, p.binary = "binary", domain.SourceRegistry, version, &t
			return p, nil
		}
		inst.progress(agent, "registry entry %s has no distribution for platform %q; using the fallback", entry.ID, inst.Platform)
	}
	switch {
	case recipe.FallbackPackage != "":
		spec := domain.PackageSpecWithVersion(recipe.FallbackPackage, opts.AgentProcessVersion)
		_, version := domain.SplitPackageSpec(spec)
		p.kind, p.source, p.version, p.npx = "npx", domain.SourceFallback, version, &domain.NpxDistribution{Package: spec}
	case recipe.NativeACPArgs != nil:
		p.kind, p.source, p.native = "native", domain.SourceFallback, true
	}
	return p, nil
}

// execute runs a plan: native binary first (the launcher may point at it),
// then the agent process, its launcher, verification and the manifest.
func (inst *Installer) execute(ctx context.Context, agent string, recipe domain.AgentRecipe, p installPlan, opts domain.InstallOptions) (domain.InstallResult, error) {
	res := domain.InstallResult{Artifacts: []domain.Artifact{}}
	if err := inst.Fs.MkdirAll(launcherDir(inst.Dir), 0o755); err != nil {
		return res, stepFailed(agent, "create install directory", err)
	}
	var native *domain.Artifact
	if p.native {
		a, err := inst.installNative(ctx, agent, recipe, opts)
		if err != nil {
			return res, err
		}
		native = &a
		if a.Source != domain.SourceLocalPath || opts.AgentVersion != "" {
			res.Artifacts = append(res.Artifacts, a)
		}
	} else if path, src, ok := inst.NativePath(agent); ok && src == domain.SourceFallback {
		native = &domain.Artifact{Kind: domain.ArtifactNativeAgent, Path: path, Source: src}
	}

	store := inst.storeDir(agent)
	// What an install killed midway left (a partial download) goes now:
	// only a successful install pruned it, so each killed or failed
	// attempt after one added its own.
	inst.pruneStore(store, inst.liveStamp(agent, store))
	stamp := filepath.Join(store, fmt.Sprintf("%d", inst.now().UnixNano()))
	ok := false
	defer func() {
		if !ok {
			_ = inst.Fs.RemoveAll(stamp)
		}
	}()

	var cmd launchCommand
	switch p.kind {
	case "npx":
		c, version, err := inst.installPackage(ctx, agent, stamp, p.npx)
		if err != nil {
			return res, err
		}
		cmd = c
		p.version = cmp.Or(p.version, version)
	case "binary":
		c, err := inst.installArchive(ctx, agent, stamp, p.binary)
		if err != nil {
			return res, err
		}
		cmd = c
	case "native":
		cmd = launchCommand{path: native.Path, args: recipe.NativeACPArgs}
		p.version = native.Version
	default:
		return res, stepFailed(agent, "resolve", fmt.Errorf("the ACP registry has no entry for %s and there is no fallback", agent))
	}
	// The version comes from the registry, a package or a program's
	// output; it is recorded and shown as one printable line.
	p.version = oneLine(p.version)
	if native != nil && recipe.Native != nil && recipe.Native.EnvVar != "" {
		if cmd.env == nil {
			cmd.env = map[string]string{}
		}
		cmd.env[recipe.Native.EnvVar] = native.Path
	}

	launcher := launcherPath(inst.Dir, agent)
	if err := inst.writeLauncher(ctx, agent, launcher, cmd, p); err != nil {
		return res, err
	}
	res.Artifacts = append(res.Artifacts, domain.Artifact{Kind: domain.ArtifactAgentProcess, Path: launcher, Source: p.source, Version: p.version})
	m := manifest{Agent: agent, InstalledAt: inst.now().UTC().Format(time.RFC3339), Artifacts: res.Artifacts, Command: cmd.path, Args: cmd.args}
	if p.npx != nil {
		m.Package = p.npx.Package
	}
	if err := inst.writeManifest(agent, m); err != nil {
		return res, stepFailed(agent, "write manifest", err)
	}
	ok = true
	inst.pruneStore(store, filepath.Base(stamp))
	inst.progress(agent, "installed %s (%s %s)", agent, p.source, p.version)
	return res, nil
}

// launchCommand is what a launcher execs.
type launchCommand struct {
	path string
	args []string
	env  map[string]string
}

// installPackage npm-installs spec into a fresh prefix and picks its bin.
func (inst *Installer) installPackage(ctx context.Context, agent, prefix string, d *domain.NpxDistribution) (launchCommand, string, error) {
	inst.progress(agent, "npm install %s", d.Package)
	bound := inst.timeouts().Package
	ctx, cancel := context.WithTimeoutCause(ctx, bound, fmt.Errorf("npm install took longer than %v", bound))
	defer cancel()
	pkg, err := inst.Packages.Install(ctx, prefix, d.Package)
	if err != nil {
		return launchCommand{}, "", stepFailed(agent, "npm install "+d.Package, err)
	}
	bin, err := pickBin(pkg)
	if err != nil {
		return launchCommand{}, "", stepFailed(agent, "npm install "+d.Package, err)
	}
	return launchCommand{path: bin, args: d.Args, env: copyEnv(d.Env)}, pkg.Version, nil
}

// pickBin chooses the package's executable: its only bin, else the bin
// named after the package, else the first by name.
func pickBin(pkg domain.InstalledPackage) (string, error) {
	if len(pkg.Bins) == 0 {
		return "", fmt.Errorf("package %s declares no executable (bin)", pkg.Name)
	}
	base := pkg.Name[strings.LastIndex(pkg.Name, "/")+1:]
	if p, ok := pkg.Bins[base]; ok {
		return p, nil
	}
	names := make([]string, 0, len(pkg.Bins))
	for n := range pkg.Bins {
		names = append(names, n)
	}
	sort.Strings(names)
	return pkg.Bins[names[0]], nil
}

func copyEnv(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// pruneStore removes every earlier install of an agent, keeping keep and
// the manifest. Failures only leave disk space behind.
func (inst *Installer) pruneStore(store, keep string) {
	entries, err := afero.ReadDir(inst.Fs, store)
	if err != nil {
		return
	}
	for _, e := range entries {
		if e.Name() != keep && e.Name() != manifestName {
			_ = inst.Fs.RemoveAll(filepath.Join(store, e.Name()))
		}
	}
}

// liveStamp is the directory of store that agent's launcher runs from,
// or "" when it runs from none.
func (inst *Installer) liveStamp(agent, store string) string {
	b, err := afero.ReadFile(inst.Fs, launcherPath(inst.Dir, agent))
	if err != nil {
		return ""
	}
	rel, err := filepath.Rel(store, execTarget(string(b)))
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return ""
	}
	return strings.Split(filepath.ToSlash(rel), "/")[0]
}

// stepFailed is an install_failed error naming the step that failed, with
// the tail of what it said.
func stepFailed(agent, step string, err error) error {
	// Hitting a limit is not a failure of the step: the client is told
	// which limit (413 --max-extract, 507 --min-free).
	if e, ok := domain.AsError(err); ok && (e.Kind == domain.KindPayloadTooLarge || e.Kind == domain.KindInsufficientStorage) {
		return e
	}
	msg := err.Error()
	const max = 8 << 10
	if len(msg) > max {
		msg = "..." + msg[len(msg)-max:]
	}
	return domain.InstallStepFailed(agent, step, msg).Because(fmt.Errorf("install %s: %s: %w", agent, step, err))
}

func isFile(fs afero.Fs, p string) bool {
	if fs == nil {
		return false
	}
	fi, err := fs.Stat(p)
	return err == nil && !fi.IsDir()
}

// chmodExec makes p executable for everyone who can read it.
func chmodExec(fs afero.Fs, p string) error {
	return fs.Chmod(p, 0o755)
}
