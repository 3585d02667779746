package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"time"

	"github.com/spf13/afero"

	"github.com/sandbox-agent-go/sandbox-agent/adapters/npm"
	"github.com/sandbox-agent-go/sandbox-agent/adapters/registry"
	"github.com/sandbox-agent-go/sandbox-agent/app"
	"github.com/sandbox-agent-go/sandbox-agent/domain"
)

func init() {
	extraCommands["install-agent"] = runInstallAgent
}

// registryURL is SANDBOX_AGENT_ACP_REGISTRY_URL, else the public registry.
func registryURL() string {
	if u := strings.TrimSpace(os.Getenv("SANDBOX_AGENT_ACP_REGISTRY_URL")); u != "" {
		return u
	}
	return registry.DefaultURL
}

// lookPath finds an executable on PATH.
func lookPath(name string) (string, bool) {
	p, err := exec.LookPath(name)
	return p, err == nil
}

// newInstaller wires the installer's ports to the network, npm and the
// host filesystem. SANDBOX_AGENT_NATIVE_URL_<AGENT> (e.g. ..._OPENCODE)
// overrides a native download URL template ({version}, {platform}).
func newInstaller(log *slog.Logger, progress func(agent, msg string)) *app.Installer {
	url := registryURL()
	reg := registry.New(url)
	native := map[string]string{}
	for id := range domain.Recipes {
		if v := os.Getenv("SANDBOX_AGENT_NATIVE_URL_" + strings.ToUpper(id)); v != "" {
			native[id] = v
		}
	}
	return &app.Installer{
		Fs:          afero.NewOsFs(),
		Dir:         installDir(),
		Registry:    reg,
		Downloader:  reg,
		Packages:    &npm.Installer{},
		Commands:    &npm.Commands{},
		SelfExe:     selfExe(),
		RegistryURL: url,
		Platform:    domain.PlatformKey(runtime.GOOS, runtime.GOARCH),
		LookPath:    lookPath,
		NativeURLs:  native,
		Progress:    progress,
		Logger:      log,
	}
}

// wireInstaller gives the daemon's agent resolver lazy installs.
func wireInstaller(a *app.Agents, log *slog.Logger) {
	a.Installer = newInstaller(log, nil)
	a.LookPath = lookPath
	a.RequirePreinstall = truthy(os.Getenv("SANDBOX_AGENT_REQUIRE_PREINSTALL"))
}

// newCatalog serves /v1/agents from the resolver and the running instances.
func newCatalog(a *app.Agents, instances *app.Instances) *app.Catalog {
	home, _ := os.UserHomeDir()
	return &app.Catalog{Agents: a, Running: instances.RunningSince, Getenv: os.Getenv, Home: home}
}

// installFlags are the options of install-agent and api agents install.
type installFlags struct {
	opts domain.InstallOptions
	all  bool
}

func (f *installFlags) register(fs *flag.FlagSet) {
	fs.BoolVar(&f.opts.Reinstall, "reinstall", false, "install again even when installed")
	fs.BoolVar(&f.opts.Reinstall, "r", false, "alias of --reinstall")
	fs.StringVar(&f.opts.AgentVersion, "agent-version", "", "version of the native agent binary (installs it)")
	fs.StringVar(&f.opts.AgentProcessVersion, "agent-process-version", "", "version of the ACP adapter package")
}

// parseInterleaved parses flags that may come before or after positional
// arguments ("install-agent claude -r" and "install-agent -r claude").
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return pos, nil
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

// runInstallAgent is "sandbox-agent install-agent <agent>|--all [...]": it
// installs on this host without a daemon, printing progress on stderr and
// the result as JSON on stdout.
func runInstallAgent(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
	var f installFlags
	fs := flag.NewFlagSet("install-agent", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: sandbox-agent install-agent <agent>|--all [-r|--reinstall] [--agent-version V] [--agent-process-version V]")
		fs.PrintDefaults()
	}
	f.register(fs)
	fs.BoolVar(&f.all, "all", false, "install every known agent")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return usagef("%v", err)
	}
	var agents []string
	switch {
	case f.all && len(pos) == 0:
		for _, id := range domain.KnownAgents {
			if id != domain.MockAgent {
				agents = append(agents, id)
			}
		}
	case !f.all && len(pos) == 1:
		agents = pos
	default:
		fs.Usage()
		return usagef("install-agent needs one agent id or --all")
	}
	inst := newInstaller(nil, func(agent, msg string) {
		fmt.Fprintf(stderr, "[%s] %s %s\n", time.Now().Format(time.TimeOnly), agent, msg)
	})
	a := &app.Agents{Fs: inst.Fs, InstallDir: inst.Dir, Installer: inst, LookPath: lookPath}
	results := map[string]domain.InstallResult{}
	var failed []string
	for _, id := range agents {
		res, err := a.Install(ctx, id, f.opts)
		if err != nil {
			fmt.Fprintf(stderr, "%s: %s\n", id, describeInstallError(err))
			failed = append(failed, id)
			continue
		}
		results[id] = res
	}
	var out any = results
	if !f.all && len(results) == 1 {
		out = results[agents[0]]
	}
	if len(results) > 0 {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(out); err != nil {
			return err
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("install failed: %s", strings.Join(failed, ", "))
	}
	return nil
}

// describeInstallError prints a domain error as the API would: kind,
// step and the stderr tail.
func describeInstallError(err error) string {
	e, ok := domain.AsError(err)
	if !ok {
		return err.Error()
	}
	msg := string(e.Kind)
	if s, ok := e.Details["stderr"].(string); ok && s != "" {
		msg += ": " + s
	} else if m, ok := e.Details["message"].(string); ok && m != "" {
		msg += ": " + m
	}
	return msg
}

// selfExe is this binary's path ("" if the OS cannot tell).
func selfExe() string {
	p, _ := os.Executable()
	return p
}
