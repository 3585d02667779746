package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/lmittmann/tint"
	"github.com/spf13/afero"
	"github.com/spf13/cobra"

	"github.com/sandbox-agent-go/sandbox-agent/adapters/fsys"
	"github.com/sandbox-agent-go/sandbox-agent/adapters/httpapi"
	"github.com/sandbox-agent-go/sandbox-agent/adapters/inspector"
	"github.com/sandbox-agent-go/sandbox-agent/adapters/process"
	"github.com/sandbox-agent-go/sandbox-agent/app/acp"
	"github.com/sandbox-agent-go/sandbox-agent/app/agents"
	"github.com/sandbox-agent-go/sandbox-agent/domain"
)

// newServerCmd is "sandbox-agent server". Its flags are defined in
// server_flags.go.
func newServerCmd() *cobra.Command {
	f := &serverFlags{}
	cmd := &cobra.Command{
		Use:   "server [flags]",
		Short: "Start the daemon",
		Long: `Start the daemon: ACP agents over HTTP on /v1/acp/{server_id}, agent
install, the filesystem and config API, OpenAPI docs on /docs and the
inspector on /ui/. Stops on SIGINT or SIGTERM, stopping every agent.`,
		Example: "  sandbox-agent server --host 127.0.0.1 --port 2468 --token \"$(openssl rand -hex 24)\"",
		Args:    noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			// One re-exec at most, before anything else: with Go's
			// sysmon kept awake (sysmon_linux.go), and without the token
			// on the command line or in the environment (hideToken).
			undo, awake := sysmonEnv(false)
			hideToken(c.Flags(), c.ErrOrStderr()) // returns only if there is nothing to hide
			if awake {
				if err := execSelf(os.Args, os.Environ()); err != nil {
					undo()
					fmt.Fprintf(c.ErrOrStderr(), "sandbox-agent: could not re-execute with Go's sysmon kept awake; going on with the runtime's default: %v\n", err)
				}
			}
			if err := f.applyEnv(c.Flags()); err != nil {
				return err
			}
			return runServer(c.Context(), f, c.OutOrStdout(), c.ErrOrStderr())
		},
	}
	f.register(cmd.Flags())
	return cmd
}

func runServer(ctx context.Context, f *serverFlags, stdout, stderr io.Writer) error {
	logOut := stderr
	if truthy(os.Getenv("SANDBOX_AGENT_LOG_STDOUT")) {
		logOut = stdout
	}
	log, err := newLogger(logOut, f.logFormat, f.logLevel)
	if err != nil {
		return usagef("%v", err)
	}
	slog.SetDefault(log)
	if err := checkPort(f.port); err != nil {
		return err
	}
	if err := checkTokenHeader(f.auth.tokenHeader); err != nil {
		return err
	}
	closeInheritedOnExec()
	procs := sizeScheduler()

	f.corsOrigins = httpapi.NormalizeOrigins(f.corsOrigins)
	cors := httpapi.CORS{Origins: f.corsOrigins, Methods: f.corsMethods, Headers: f.corsHdr, Credentials: f.corsCreds}
	if err := cors.Validate(); err != nil {
		return usagef("%v", err)
	}
	b := readBox(os.DirFS("/"), "self")
	b.nofile = openFileLimit()
	if err := f.limits.resolve(b); err != nil {
		return usagef("%v", err)
	}
	opts, err := acpOptions(f, log)
	if err != nil {
		return usagef("%v", err)
	}
	if err := f.limits.validate(); err != nil {
		return usagef("%v", err)
	}
	if err := f.opencode.validate(); err != nil {
		return usagef("%v", err)
	}
	if err := f.policy.validate(); err != nil {
		return usagef("%v", err)
	}
	f.limits.withOpenCode = !f.opencode.disabled
	goLimit := f.limits.setMemoryLimit(log)
	f.limits.warnFDs(log)
	// The daemon's own secrets: what it reads its credentials and policies
	// from, and its /proc. No API route serves, lists or changes them.
	secrets := fsys.NewSecrets()
	var reloadable []string
	if f.auth.tokenFile != "" {
		reloadable = append(reloadable, "tokens")
	}
	if len(f.policy.specs) > 0 {
		reloadable = append(reloadable, "policies")
	}
	reloads := httpapi.NewReloads(reloadable...)
	ra, err := resolveRunAs(f.runAs)
	if err != nil {
		return err
	}
	agents, err := agentResolver(ctx, f, secrets, ra)
	if err != nil {
		return err
	}
	wireInstaller(ctx, agents, log)
	ra.applyInstaller(agents.Installer)
	tokens, tokenSource, stopTokens, err := startTokens(ctx, f.token, f.tokenFromEnv, f.auth.tokenFile, secrets, reloads, log)
	if err != nil {
		return err
	}
	defer stopTokens()
	if tokenSource == "flag" && !f.tokenHidden {
		log.Warn("--token is visible to every local user (ps, /proc/PID/cmdline); prefer --token-file or " + tokenEnv)
	}
	if f.noToken && tokenSource != "" {
		// -n is the reference's "disable auth"; a token given as well
		// (SDK launchers pass -n while an image may set the variable)
		// wins, so a daemon never ends up open when someone set one.
		log.Warn("--no-token ignored: a token is set, so requests need it", "token_source", tokenSource)
	}
	// startTokens has removed the token from the environment; the name
	// filter stays as a second guard, and every variable whose value holds
	// a current token is dropped at each start (tokens.InValue).
	agents.Installer.Disk = f.fsLimits.limits()
	// One supervisor starts every agent and process; its /proc is the
	// daemon's too.
	sup := startSupervisor(log, secrets.ProtectPID)
	defer sup.Close()
	runner := &process.Runner{BaseEnv: ra.env(baseEnv()), Secret: tokens.InValue, Supervisor: sup, Cred: ra.credential(), DefaultDir: ra.workDir()}
	instances := acp.NewInstances(opts, runner, agents)

	files, configs, closeFs, err := newFilesystem(f, secrets, ra)
	if err != nil {
		return err
	}
	defer closeFs()
	procSvc := newProcesses(f, files, tokens, secrets, sup, ra, log)

	authz, stopPolicies, err := startPolicies(ctx, f.policy, secrets, reloads, log)
	if err != nil {
		return err
	}
	defer stopPolicies()

	catalog := newCatalog(agents, instances, ra)
	openCode, stopOpenCode, err := newOpenCode(ctx, &f.opencode, instances, catalog, &f.limits, f.limits.maxACPBody(f.maxACPBody), log)
	if err != nil {
		return err
	}

	ln, err := net.Listen("tcp", net.JoinHostPort(f.host, f.port))
	if err != nil {
		return listenError(err, f.host, f.port)
	}
	// On a loopback listener, Host must name the loopback (or an
	// --allowed-host): a DNS-rebinding page's requests carry its own name.
	checkHost := isLoopback(ln.Addr()) || len(f.auth.allowedHosts) > 0
	warnIfExposed(log, ln.Addr(), tokens, authz != nil)
	warnOpenCORS(log, f.corsOrigins, tokens, authz != nil)

	httpCfg := httpapi.Config{
		Version:      version,
		Logger:       log,
		Instances:    instances,
		Tokens:       tokens,
		CORS:         cors,
		CheckHost:    checkHost,
		AllowedHosts: f.auth.allowedHosts,
		MaxACPBody:   f.limits.maxACPBody(f.maxACPBody),
		MemoryLimits: f.limits.gauges(goLimit),
		Files:        files,
		Config:       configs,
		MaxUpload:    f.maxUpload,
		UI:           inspector.Handler(),
		Docs:         inspector.Docs(),
		Catalog:      catalog,
		Authorizer:   authz,
		Processes:    procSvc,
		Reloads:      reloads,

		MetricsPublic:      f.metricsPublic,
		HealthPublic:       f.auth.healthPublic,
		TokenHeader:        f.auth.tokenHeader,
		StreamWriteTimeout: f.streamWrite,
	}
	if openCode != nil {
		httpCfg.OpenCode = openCode
	}
	f.limits.applyHTTP(&httpCfg)
	connLimit := f.limits.connLimit()
	httpCfg.ConnLimit = connLimit
	handler := httpapi.New(httpCfg)

	ln = httpapi.WrapListener(connLimit.Listener(ln), httpapi.DefaultMaxHeaderBytes)
	handlers := &inFlight{}
	srv := &http.Server{
		Handler:           handlers.wrap(handler),
		MaxHeaderBytes:    httpapi.DefaultMaxHeaderBytes,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       120 * time.Second,
		Protocols:         serverProtocols(),
		HTTP2:             httpapi.HTTP2Config(),
		// WriteTimeout stays 0: SSE streams set per-write deadlines instead.
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	// The bound address is announced whatever --log-level says: with
	// --port 0 this line is the only way to learn it (the e2e harness reads
	// it), so a quieter level must not hide it.
	announce := log
	if !log.Enabled(ctx, slog.LevelInfo) {
		announce, _ = newLogger(logOut, f.logFormat, "info")
	}
	announce.Info("sandbox-agent listening", "url", "http://"+ln.Addr().String(), "version", version,
		"token", tokenSource != "", "token_source", tokenSource, "host_check", checkHost, "gomaxprocs", procs, "sysmon_awake", sysmonAwake)

	select {
	case err := <-served:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	log.Info("shutting down", "grace", f.stopGrace)
	sctx, cancel := context.WithTimeout(context.Background(), f.stopGrace+1500*time.Millisecond)
	defer cancel()
	stopped := make(chan error, 1)
	go func() { stopped <- instances.Close(sctx) }()
	procsStopped := make(chan struct{})
	go func() {
		pctx, cancel := context.WithTimeout(sctx, f.stopGrace)
		defer cancel()
		stopProcesses(pctx, procSvc, log)
		close(procsStopped)
	}()
	// OpenCode's event streams end now; its database closes once the
	// server's requests are done (below).
	openCodeStopped := make(chan struct{})
	go func() { stopOpenCode(sctx); close(openCodeStopped) }()
	shut := make(chan error, 1)
	go func() { shut <- srv.Shutdown(sctx) }()
	if err := <-stopped; err != nil {
		log.Warn("stopping agents", "err", err)
	}
	<-procsStopped
	// Every agent is gone and every stream has ended, except one stuck
	// writing to a peer that reads nothing: give in-flight answers a
	// moment, then cut what is left instead of waiting for the deadline.
	select {
	case <-shut:
	case <-time.After(500 * time.Millisecond):
	}
	srv.Close()
	// Close cuts the connections but returns before their handlers do: an
	// upload-batch cut mid-extraction still has its stage to remove, and
	// returning now would exit the process first and leave it behind.
	if !handlers.wait(sctx) {
		log.Warn("requests still running at the shutdown deadline", "requests", handlers.count())
	}
	<-openCodeStopped
	log.Info("stopped")
	return nil
}

// inFlight counts the requests whose handlers are running, so shutdown
// can let them finish their cleanup (bounded) once their connections are
// cut. http.Server tracks connections, not handlers.
type inFlight struct {
	mu   sync.Mutex
	n    int
	idle chan struct{} // closed when n drops to 0; made by wait
}

func (f *inFlight) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
			// A WebSocket's connection is hijacked: Close does not cut it,
			// its handler ends with its agent or process, and it has
			// nothing to clean up that the process's exit would leave.
			h.ServeHTTP(w, r)
			return
		}
		f.mu.Lock()
		f.n++
		f.mu.Unlock()
		defer func() {
			f.mu.Lock()
			if f.n--; f.n == 0 && f.idle != nil {
				close(f.idle)
				f.idle = nil
			}
			f.mu.Unlock()
		}()
		h.ServeHTTP(w, r)
	})
}

// wait reports whether every handler returned before ctx ended.
func (f *inFlight) wait(ctx context.Context) bool {
	f.mu.Lock()
	if f.n == 0 {
		f.mu.Unlock()
		return true
	}
	if f.idle == nil {
		f.idle = make(chan struct{})
	}
	idle := f.idle
	f.mu.Unlock()
	select {
	case <-idle:
		return true
	case <-ctx.Done():
		return false
	}
}

func (f *inFlight) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.n
}

func acpOptions(f *serverFlags, log *slog.Logger) (acp.Options, error) {
	opts := acp.DefaultOptions()
	opts.Logger = log
	opts.ReplayBytes = f.replayBytes
	opts.Spill = replaySpill(f.replayDir, log)
	opts.MaxFrameBytes = f.maxFrame
	opts.StopGrace = f.stopGrace
	opts.WriteTimeout = f.stdinWriteTimeout
	f.limits.apply(&opts)
	opts.AsyncMethods = map[string]bool{}
	for _, m := range strings.Split(f.asyncMethods, ",") {
		if m = strings.TrimSpace(m); m != "" {
			opts.AsyncMethods[m] = true
		}
	}
	if v := os.Getenv("SANDBOX_AGENT_ACP_REQUEST_TIMEOUT_MS"); v != "" {
		ms, err := strconv.ParseInt(v, 10, 64)
		if err != nil || ms < 0 {
			return opts, fmt.Errorf("SANDBOX_AGENT_ACP_REQUEST_TIMEOUT_MS must be a non-negative integer, got %q", v)
		}
		opts.RequestTimeout = time.Duration(ms) * time.Millisecond
	}
	return opts, nil
}

// installDir is $XDG_DATA_HOME/sandbox-agent/bin (default
// ~/.local/share/sandbox-agent/bin), where the reference keeps agents.
func installDir() string {
	base := os.Getenv("XDG_DATA_HOME")
	if base == "" {
		home, _ := os.UserHomeDir()
		base = filepath.Join(home, ".local", "share")
	}
	return filepath.Join(base, "sandbox-agent", "bin")
}

func agentResolver(ctx context.Context, f *serverFlags, secrets *fsys.Secrets, ra *runAs) (*agents.Agents, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find own executable: %w", err)
	}
	a := &agents.Agents{Fs: afero.NewOsFs(), InstallDir: ra.installDir(), SelfExe: self}
	if f.agentsFile != "" {
		if a.Operator, err = loadAgentsFile(ctx, f.agentsFile, secrets); err != nil {
			return nil, err
		}
	}
	return a, nil
}

// maxAgentsFile caps the agents file.
const maxAgentsFile = 4 << 20

// loadAgentsFile reads the operator's agents. The file is one of the
// daemon's secrets: its agents' env may hold their API keys.
func loadAgentsFile(ctx context.Context, path string, secrets *fsys.Secrets) ([]domain.OperatorAgent, error) {
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	b, fi, err := fsys.ReadRegular(ctx, path, maxAgentsFile)
	if err != nil {
		return nil, fmt.Errorf("read agents file: %w", err)
	}
	secrets.SetFiles("agents", []fsys.SecretFile{{Path: path, Read: fi, What: "its agents file"}})
	var doc struct {
		Agents []domain.OperatorAgent `json:"agents"`
	}
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("agents file %s: %w", path, err)
	}
	seen := map[string]bool{}
	for i, a := range doc.Agents {
		switch {
		case !domain.ValidAgentID(a.ID):
			return nil, fmt.Errorf("agents file %s: agent %d: id %q must be letters, digits, '.', '_' or '-'", path, i, a.ID)
		case a.Command == "":
			return nil, fmt.Errorf("agents file %s: agent %q: command is required", path, a.ID)
		case seen[a.ID]:
			return nil, fmt.Errorf("agents file %s: agent %q is defined twice", path, a.ID)
		}
		seen[a.ID] = true
	}
	return doc.Agents, nil
}

func truthy(v string) bool {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "1", "true", "yes", "on":
		return true
	}
	return false
}

func newLogger(w io.Writer, format, level string) (*slog.Logger, error) {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	switch format {
	case "auto":
		if isTerminal(w) {
			format = "color"
		} else {
			format = "json"
		}
	}
	switch format {
	case "json":
		return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: lvl})), nil
	case "text":
		return slog.New(tint.NewHandler(w, &tint.Options{Level: lvl, NoColor: true, TimeFormat: time.TimeOnly})), nil
	case "color":
		return slog.New(tint.NewHandler(w, &tint.Options{Level: lvl, TimeFormat: time.TimeOnly})), nil
	}
	return nil, fmt.Errorf("--log-format must be auto, text, color or json, got %q", format)
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
