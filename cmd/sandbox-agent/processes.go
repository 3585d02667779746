package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/sandbox-agent-go/sandbox-agent/adapters/process"
	"github.com/sandbox-agent-go/sandbox-agent/app/authz"
	"github.com/sandbox-agent-go/sandbox-agent/app/files"
	"github.com/sandbox-agent-go/sandbox-agent/app/processes"
	"github.com/sandbox-agent-go/sandbox-agent/ports"
)

// newProcesses wires the processes API: processes start from the daemon's
// environment minus its own secrets (by name, and any variable whose value
// holds a current token, judged at each start; with --run-as, as that
// user, with its HOME), and with a host filesystem their working directory
// is resolved (and, under --fs-root, confined) exactly as /v1/fs paths
// are, defaulting to the root, else to the --run-as user's home. Whatever
// the backend, a working directory or command in one of the daemon's
// secrets (its /proc) is refused.
func newProcesses(f *serverFlags, fsys *files.Files, tokens *authz.Tokens, secrets ports.Secrets, sup *process.Supervisor, ra *runAs, log *slog.Logger) *processes.Service {
	opts := processes.Options{Logger: log, Secrets: secrets}
	f.limits.applyProcesses(&opts)
	if f.fsBackend == "os" || f.fsRoot != "" {
		opts.ResolveDir = fsys.Dir
	}
	switch {
	case f.fsRoot != "":
		opts.DefaultDir = fsys.Home
	case ra != nil:
		opts.DefaultDir = ra.home
	}
	starter := &process.Starter{BaseEnv: ra.env(baseEnv()), Secret: tokens.InValue, Supervisor: sup, Cred: ra.credential()}
	return processes.New(starter, opts)
}

// baseEnv is the environment agents and processes start from: the
// daemon's, without the variables that carried its token.
func baseEnv() []string {
	return process.FilterEnv(os.Environ(), tokenEnv, tokenFDEnv)
}

// stopProcesses stops every process within ctx (SIGTERM, then SIGKILL).
func stopProcesses(ctx context.Context, p *processes.Service, log *slog.Logger) {
	if err := p.Close(ctx); err != nil {
		log.Warn("stopping processes", "err", err)
	}
}
