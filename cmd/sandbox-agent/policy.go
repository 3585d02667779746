package main

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/sandbox-agent-go/sandbox-agent/adapters/fsys"
	"github.com/sandbox-agent-go/sandbox-agent/adapters/httpapi"
	"github.com/sandbox-agent-go/sandbox-agent/extensions/wasmpolicy"
	"github.com/sandbox-agent-go/sandbox-agent/ports"
)

func init() { extraCommands = append(extraCommands, newPolicyCmd) }

// policyFlags are the server's --policy (repeatable), --policy-cache and
// --policy-recheck.
type policyFlags struct {
	specs   []string
	cache   string
	recheck time.Duration
}

// minPolicyRecheck is the shortest --policy-recheck: each one runs the
// chain once per open stream.
const minPolicyRecheck = time.Second

func (p *policyFlags) register(fs *pflag.FlagSet) {
	fs.Var((*policySpecs)(&p.specs), "policy", "auth policy: FILE.wasm[,config=FILE][,fail=open][,timeout=25ms][,memory=MiB][,instances=N][,cache=off] (repeatable; run in order before the token check: the first deny or grant decides)")
	fs.StringVar(&p.cache, "policy-cache", defaultPolicyCache(), "directory caching compiled policy modules (empty: memory only)")
	fs.DurationVar(&p.recheck, "policy-recheck", 30*time.Second, "with --policy: ask the chain again this often about every open event stream and WebSocket, ending those it now refuses (an expired token); 0: only at a reload")
}

// validate refuses a recheck interval that is negative or so short the
// rechecks would keep a core busy.
func (p *policyFlags) validate() error {
	if p.recheck < 0 || (p.recheck > 0 && p.recheck < minPolicyRecheck) {
		return fmt.Errorf("--policy-recheck must be 0 or at least %v, got %v", minPolicyRecheck, p.recheck)
	}
	return nil
}

// policySpecs is the repeatable --policy flag; each value is checked as it
// is parsed, so a bad spec is a usage error.
type policySpecs []string

func (p *policySpecs) String() string { return strings.Join(*p, " ") }
func (p *policySpecs) Type() string   { return "spec" }
func (p *policySpecs) Set(v string) error {
	if _, err := wasmpolicy.ParseSpec(v); err != nil {
		return err
	}
	*p = append(*p, v)
	return nil
}

// defaultPolicyCache is $XDG_CACHE_HOME/sandbox-agent/wasm (~/.cache/...).
func defaultPolicyCache() string {
	dir, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(dir, "sandbox-agent", "wasm")
}

func (p *policyFlags) parse() ([]wasmpolicy.Spec, error) {
	specs := make([]wasmpolicy.Spec, 0, len(p.specs))
	for _, v := range p.specs {
		s, err := wasmpolicy.ParseSpec(v)
		if err != nil {
			return nil, err
		}
		specs = append(specs, s)
	}
	return specs, nil
}

// newPolicyHost opens the compilation cache, falling back to memory when
// its directory cannot be used. Modules and configuration files are read
// with fsys.ReadRegular (regular files only, capped, time-bounded); read,
// when set, is told of each file read.
func newPolicyHost(cache string, log *slog.Logger, read func(path string, fi fs.FileInfo)) (*wasmpolicy.Host, error) {
	host, err := wasmpolicy.NewHost(cache, log)
	if err != nil && cache != "" {
		log.Warn("policy compilation cache unavailable; compiling in memory", "err", err)
		host, err = wasmpolicy.NewHost("", log)
	}
	if err != nil {
		return nil, err
	}
	host.Read = func(ctx context.Context, name string, max int64) ([]byte, error) {
		b, fi, err := fsys.ReadRegular(ctx, name, max)
		if err == nil && read != nil {
			read(name, fi)
		}
		return b, err
	}
	return host, nil
}

const whatPolicy = "its auth policies"

// policyFiles collects the files one load of the policies read, for the
// daemon's secrets.
type policyFiles struct {
	mu    sync.Mutex
	files []fsys.SecretFile
}

func (p *policyFiles) read(path string, fi fs.FileInfo) {
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	p.mu.Lock()
	p.files = append(p.files, fsys.SecretFile{Path: path, Read: fi, What: whatPolicy})
	p.mu.Unlock()
}

// take returns what was read since the last take.
func (p *policyFiles) take() []fsys.SecretFile {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := p.files
	p.files = nil
	return out
}

// startPolicies loads the --policy modules and reloads them on SIGHUP
// until ctx ends, keeping the old ones when the new ones fail to load
// (logged, and counted in reloads). The modules and configuration files
// in use are among the daemon's secrets. Without policies it returns a nil
// Authorizer, so the HTTP adapter adds no step at all. stop ends the
// reload goroutine and closes the policies.
func startPolicies(ctx context.Context, pf policyFlags, secrets *fsys.Secrets, reloads *httpapi.Reloads, log *slog.Logger) (authz ports.Authorizer, stop func(), err error) {
	if len(pf.specs) == 0 {
		return nil, func() {}, nil
	}
	specs, err := pf.parse()
	if err != nil {
		return nil, nil, usagef("%v", err)
	}
	files := &policyFiles{}
	host, err := newPolicyHost(pf.cache, log, files.read)
	if err != nil {
		return nil, nil, err
	}
	if pf.cache != "" {
		// The cache holds compiled modules the daemon maps as machine
		// code, checked by nothing but a CRC: a client allowed to write
		// files there would run its code in the daemon at the next start,
		// past every policy.
		abs, err := filepath.Abs(pf.cache)
		if err != nil {
			abs = pf.cache
		}
		secrets.SetFiles("policy-cache", []fsys.SecretFile{{Path: abs, What: "its policy compilation cache", Tree: true}})
	}
	set, err := host.Load(ctx, specs)
	if err != nil {
		_ = host.Close(ctx)
		return nil, nil, fmt.Errorf("load auth policies: %w", err)
	}
	secrets.SetFiles("policies", files.take())
	log.Info("auth policies loaded", "policies", policyNames(set))
	current := wasmpolicy.NewReloadable(set)

	stopHUP := onSIGHUP(ctx, func(ctx context.Context) {
		files.take()
		err := reloadPolicies(ctx, host, current, pf, log)
		reloads.Count("policies", err)
		if err == nil {
			secrets.SetFiles("policies", files.take())
		}
	})
	stopRecheck := recheckStreams(ctx, pf.recheck, reloads)
	stop = func() {
		stopRecheck()
		stopHUP()
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = current.Close(cctx)
		_ = host.Close(cctx)
	}
	return current, stop, nil
}

// recheckStreams runs the auth chain again over the open streams every
// interval (Reloads.Recheck) until ctx ends or stop is called: a stream is
// otherwise decided when it opens and at a reload, and a policy whose
// answer changes with time alone (a token that expires) would let a
// stream opened before the change go on for as long as its socket lives.
// No interval (0), no goroutine.
func recheckStreams(ctx context.Context, every time.Duration, reloads *httpapi.Reloads) (stop func()) {
	if every <= 0 {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				reloads.Recheck(ctx)
			}
		}
	}()
	return func() {
		cancel()
		<-done
	}
}

// reloadPolicies reads the modules and their configs again and swaps them
// in; on any failure the running policies stay.
func reloadPolicies(ctx context.Context, host *wasmpolicy.Host, current *wasmpolicy.Reloadable, pf policyFlags, log *slog.Logger) error {
	specs, err := pf.parse()
	if err == nil {
		var set *wasmpolicy.Set
		if set, err = host.Load(ctx, specs); err == nil {
			if err := current.Swap(ctx, set); err != nil {
				log.Warn("closing the previous auth policies", "err", err)
			}
			log.Info("auth policies reloaded", "policies", policyNames(set))
			return nil
		}
	}
	log.Error("reloading auth policies failed; keeping the previous ones", "err", err)
	return err
}

func policyNames(set *wasmpolicy.Set) string {
	var names []string
	for _, p := range set.Policies() {
		names = append(names, p.Name())
	}
	return strings.Join(names, ",")
}

// newPolicyCmd is "sandbox-agent policy test".
func newPolicyCmd() *cobra.Command {
	group := &cobra.Command{
		Use:   "policy",
		Short: "Work with auth policies (WASM modules)",
	}
	var cache string
	var verbose bool
	test := &cobra.Command{
		Use:   "test POLICY CASES",
		Short: "Check an auth policy against request cases",
		Long: `Runs the policy POLICY (FILE.wasm[,config=FILE][,...], as for server --policy)
against CASES, a JSON file holding an array of
  {"name": "...", "request": {AuthRequest}, "config": {...}?,
   "want": {"decision"?: "deny"|"pass"|"grant", "allow"?: bool, "status"?: N, "message"?: "...", "principal"?: "..."}}
("allow": true accepts pass or grant; a request's "action", "implies", "fsPath",
"fsDest" and "principal" are what the daemon would decide and pass on.)
and prints one line per case. Exits 1 when any case does not match.`,
		Example: "  sandbox-agent policy test readonly.wasm,config=readonly.json cases.json",
		Args:    argsBetween(2, 2),
		RunE: func(c *cobra.Command, args []string) error {
			return runPolicyTest(c.Context(), args[0], args[1], cache, verbose, c.OutOrStdout(), c.ErrOrStderr())
		},
	}
	test.Flags().StringVar(&cache, "policy-cache", defaultPolicyCache(), "directory caching compiled policy modules (empty: memory only)")
	test.Flags().BoolVarP(&verbose, "verbose", "v", false, "show the policy's log lines (at debug level and up)")
	group.AddCommand(test)
	return group
}

// runPolicyTest is `sandbox-agent policy test`.
func runPolicyTest(ctx context.Context, policy, casesFile, cache string, verbose bool, stdout, stderr io.Writer) error {
	spec, err := wasmpolicy.ParseSpec(policy)
	if err != nil {
		return usagef("%v", err)
	}
	if spec.CallTimeout == 0 {
		// A CI machine under load must not turn a right answer into a
		// timeout; timeout= in POLICY still tests the limit itself.
		spec.CallTimeout = time.Second
	}
	cases, err := wasmpolicy.ReadCases(casesFile)
	if err != nil {
		return err
	}
	level := slog.LevelWarn
	if verbose {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	host, err := newPolicyHost(cache, log, nil)
	if err != nil {
		return err
	}
	defer host.Close(context.Background())
	failed, err := host.RunCases(ctx, spec, cases, stdout)
	if err != nil {
		return err
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d policy cases failed", failed, len(cases))
	}
	fmt.Fprintf(stdout, "PASS  %d cases\n", len(cases))
	return nil
}
