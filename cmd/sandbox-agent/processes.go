package main

import (
	"context"
	"log/slog"
	"os"
	"strings"

	"github.com/sandbox-agent-go/sandbox-agent/adapters/process"
	"github.com/sandbox-agent-go/sandbox-agent/app/files"
	"github.com/sandbox-agent-go/sandbox-agent/app/processes"
)

// newProcesses wires the processes API: processes start from the daemon's
// environment minus its own secrets (with --run-as, as that user, with its
// HOME), and with a host filesystem their working directory is resolved
// (and, under --fs-root, confined) exactly as /v1/fs paths are, defaulting
// to the root, else to the --run-as user's home.
func newProcesses(f *serverFlags, fsys *files.Files, sup *process.Supervisor, ra *runAs, log *slog.Logger) *processes.Service {
	opts := processes.Options{Logger: log}
	if f.fsBackend == "os" || f.fsRoot != "" {
		opts.ResolveDir = fsys.Dir
	}
	switch {
	case f.fsRoot != "":
		opts.DefaultDir = fsys.Home
	case ra != nil:
		opts.DefaultDir = ra.home
	}
	starter := &process.Starter{BaseEnv: ra.env(secretFreeEnv(os.Environ(), f.token)), Supervisor: sup, Cred: ra.credential()}
	return processes.New(starter, opts)
}

// secretFreeEnv is env without the daemon's token: neither
// SANDBOX_AGENT_TOKEN nor any variable holding the token's value.
func secretFreeEnv(env []string, token string) []string {
	env = process.FilterEnv(env, "SANDBOX_AGENT_TOKEN")
	if token == "" {
		return env
	}
	out := env[:0:0]
	for _, kv := range env {
		if _, v, _ := strings.Cut(kv, "="); v == token {
			continue
		}
		out = append(out, kv)
	}
	return out
}

// stopProcesses stops every process within ctx (SIGTERM, then SIGKILL).
func stopProcesses(ctx context.Context, p *processes.Service, log *slog.Logger) {
	if err := p.Close(ctx); err != nil {
		log.Warn("stopping processes", "err", err)
	}
}
