package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/sandbox-agent-go/sandbox-agent/adapters/fsys"
	"github.com/sandbox-agent-go/sandbox-agent/adapters/npm"
	"github.com/sandbox-agent-go/sandbox-agent/adapters/registry"
	"github.com/sandbox-agent-go/sandbox-agent/app/acp"
	"github.com/sandbox-agent-go/sandbox-agent/app/agents"
	"github.com/sandbox-agent-go/sandbox-agent/app/files"
	"github.com/sandbox-agent-go/sandbox-agent/domain"
)

func init() {
	extraCommands = append(extraCommands, newInstallAgentCmd)
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
func newInstaller(log *slog.Logger, progress func(agent, msg string)) *agents.Installer {
	url := registryURL()
	reg := registry.New(url)
	native := map[string]string{}
	for id := range domain.Recipes {
		if v := os.Getenv("SANDBOX_AGENT_NATIVE_URL_" + strings.ToUpper(id)); v != "" {
			native[id] = v
		}
	}
	return &agents.Installer{
		Fs:          fsys.NewOS(),
		Disk:        files.Limits{Space: fsys.Statfs{}, MinFree: files.AutoMinFree},
		Dir:         installDir(),
		Registry:    reg,
		Downloader:  reg,
		Packages:    &npm.Installer{},
		Commands:    &npm.Commands{},
		RegistryURL: url,
		Platform:    domain.PlatformKey(runtime.GOOS, runtime.GOARCH),
		LookPath:    lookPath,
		NativeURLs:  native,
		Progress:    progress,
		Logger:      log,
	}
}

// wireInstaller gives the daemon's agent resolver lazy installs, which
// stop when stopping ends (the daemon's shutdown).
func wireInstaller(stopping context.Context, a *agents.Agents, log *slog.Logger) {
	a.Installer = newInstaller(log, nil)
	a.Installer.Stopping = stopping
	a.Logger = log
	a.CheckLaunchers() // logs launchers whose program is gone
	a.LookPath = lookPath
	a.RequirePreinstall = truthy(os.Getenv("SANDBOX_AGENT_REQUIRE_PREINSTALL"))
}

// newCatalog serves /v1/agents from the resolver, the running instances
// and the credential discovery (logging to the server's default logger),
// in the home of the user agents run as (--run-as: where they find their
// credentials).
func newCatalog(a *agents.Agents, instances *acp.Instances, ra *runAs) *agents.Catalog {
	home := homeDir()
	if ra != nil {
		home = ra.home
	}
	return &agents.Catalog{Agents: a, Running: instances.RunningSince, Credentials: credentialDiscovery(slog.Default(), home)}
}

// installFlags are the options of install-agent and api agents install.
type installFlags struct {
	opts domain.InstallOptions
	all  bool
}

func (f *installFlags) register(fs *pflag.FlagSet) {
	fs.BoolVarP(&f.opts.Reinstall, "reinstall", "r", false, "install again even when installed")
	fs.StringVar(&f.opts.AgentVersion, "agent-version", "", "version of the native agent binary (installs it)")
	fs.StringVar(&f.opts.AgentProcessVersion, "agent-process-version", "", "version of the ACP adapter package")
}

// newInstallAgentCmd is "sandbox-agent install-agent <agent>|--all": it
// installs on this host without a daemon, printing progress on stderr and
// the result as JSON on stdout.
func newInstallAgentCmd() *cobra.Command {
	var f installFlags
	cmd := &cobra.Command{
		Use:   "install-agent <agent>|--all [flags]",
		Short: "Install an agent on this host",
		Long: `Install an agent (its ACP adapter, and with --agent-version its native
binary) on this host, without a daemon. Progress goes to stderr, the result
as JSON to stdout.`,
		Example: `  sandbox-agent install-agent claude
  sandbox-agent install-agent codex --agent-process-version 0.16.0
  sandbox-agent install-agent --all -r`,
		Args: argsBetween(0, 1),
		RunE: func(c *cobra.Command, args []string) error {
			return runInstallAgent(c.Context(), f, args, c.OutOrStdout(), c.ErrOrStderr())
		},
	}
	f.register(cmd.Flags())
	cmd.Flags().BoolVar(&f.all, "all", false, "install every known agent")
	return cmd
}

func runInstallAgent(ctx context.Context, f installFlags, pos []string, stdout, stderr io.Writer) error {
	var ids []string
	switch {
	case f.all && len(pos) == 0:
		// The built-in mock is among them; its install is a no-op.
		ids = append([]string(nil), domain.KnownAgents...)
	case !f.all && len(pos) == 1:
		ids = pos
	case f.all:
		return usagef("--all installs every agent; give no agent id with it")
	default:
		return usagef("missing <agent> (or --all)")
	}
	inst := newInstaller(nil, func(agent, msg string) {
		fmt.Fprintf(stderr, "[%s] %s %s\n", time.Now().Format(time.TimeOnly), agent, msg)
	})
	a := &agents.Agents{Fs: inst.Fs, InstallDir: inst.Dir, Installer: inst, LookPath: lookPath}
	results := map[string]domain.InstallResult{}
	var failed []string
	for _, id := range ids {
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
		out = results[ids[0]]
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
	if e.Stderr != "" {
		msg += ": " + e.Stderr
	} else if e.Msg != "" {
		msg += ": " + e.Msg
	}
	return msg
}
