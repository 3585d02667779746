package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/pflag"

	"github.com/sandbox-agent-go/sandbox-agent/adapters/opencode"
	"github.com/sandbox-agent-go/sandbox-agent/app/acp"
	"github.com/sandbox-agent-go/sandbox-agent/app/agents"
	"github.com/sandbox-agent-go/sandbox-agent/domain"
)

// openCodeFlags are the server's flags for OpenCode's API at /opencode
// (docs/opencode.md).
type openCodeFlags struct {
	disabled  bool
	agent     string
	db        string
	maxDB     int64
	retention time.Duration
}

func (o *openCodeFlags) register(fs *pflag.FlagSet) {
	fs.BoolVar(&o.disabled, "no-opencode", false, "do not serve OpenCode's API at /opencode")
	fs.StringVar(&o.agent, "opencode-agent", "mock", "agent of OpenCode sessions whose client names no provider")
	fs.StringVar(&o.db, "opencode-db", "", "OpenCode sessions database (default $XDG_STATE_HOME/sandbox-agent/opencode.db, ~/.local/state/...; 'memory' keeps nothing across restarts)")
	fs.Int64Var(&o.maxDB, "opencode-max-db", opencode.DefaultStoreMaxBytes, "bytes of OpenCode sessions kept; past it the least recently updated sessions are deleted")
	fs.DurationVar(&o.retention, "opencode-retention", 0, "delete OpenCode sessions not updated for this long (0: keep until --opencode-max-db needs the room)")
}

func (o *openCodeFlags) validate() error {
	switch {
	case o.disabled:
		return nil
	case !domain.ValidAgentID(o.agent):
		return fmt.Errorf("--opencode-agent %q is not an agent id", o.agent)
	case o.maxDB < 1<<20:
		return fmt.Errorf("--opencode-max-db must be at least 1 MiB, got %d", o.maxDB)
	case o.retention < 0:
		return fmt.Errorf("--opencode-retention must not be negative, got %v", o.retention)
	}
	return nil
}

// stateDir is $XDG_STATE_HOME/sandbox-agent (default
// ~/.local/state/sandbox-agent).
func stateDir() string {
	base := os.Getenv("XDG_STATE_HOME")
	if base == "" {
		home, _ := os.UserHomeDir()
		base = filepath.Join(home, ".local", "state")
	}
	return filepath.Join(base, "sandbox-agent")
}

// newOpenCode opens the sessions database and builds the adapter; nil
// (and a no-op stop) when --no-opencode.
func newOpenCode(ctx context.Context, o *openCodeFlags, instances *acp.Instances, catalog *agents.Catalog, limits *limitFlags, maxBody int64, log *slog.Logger) (*opencode.Adapter, func(context.Context), error) {
	if o.disabled {
		return nil, func(context.Context) {}, nil
	}
	path := o.db
	switch path {
	case "":
		path = filepath.Join(stateDir(), "opencode.db")
	case "memory":
		path = ""
	}
	opts := opencode.StoreOptions{Path: path, MaxBytes: o.maxDB, Retention: o.retention}
	var store *opencode.Store
	if o.db == "" {
		// The default file is opened when an OpenCode client first comes
		// (a daemon none talks to writes nothing); if it cannot be (a
		// read-only home, say), sessions are kept in memory.
		opts.Fallback = func(err error) {
			log.Warn("opencode: cannot open the sessions database; keeping sessions in memory (they will not survive a restart); choose a file with --opencode-db", "path", path, "err", err)
		}
		store = opencode.NewStore(opts)
	} else {
		// A file named on the command line must open: said at start.
		var err error
		if store, err = opencode.OpenStore(ctx, opts); err != nil {
			return nil, nil, fmt.Errorf("%w (choose another file with --opencode-db, or --no-opencode)", err)
		}
	}
	wd, err := os.Getwd()
	if err != nil {
		wd = "/"
	}
	home, _ := os.UserHomeDir()
	a, err := opencode.New(opencode.Config{
		Instances: instances,
		Store:     store,
		Agents: func(ctx context.Context) []domain.AgentInfo {
			return catalog.List(ctx, agents.CatalogQuery{Config: true})
		},
		Installed:    catalog.Agents.Installed,
		DefaultAgent: o.agent,
		Directory:    wd,
		Home:         home,
		Version:      version,
		Logger:       log,
		// Its request bodies draw on the daemon's --inflight-bytes budget;
		// its event buffer counts in the memory bound (openCodeEvents).
		MaxBody:    maxBody,
		Inflight:   limits.inflight(),
		EventBytes: limits.openCodeEvents(),
	})
	if err != nil {
		store.Close()
		return nil, nil, err
	}
	log.Debug("opencode: sessions database", "path", path)
	stop := func(ctx context.Context) {
		if err := a.Close(ctx); err != nil && !errors.Is(err, context.Canceled) {
			log.Warn("stopping the OpenCode API", "err", err)
		}
		if err := store.Close(); err != nil {
			log.Warn("closing the OpenCode database", "err", err)
		}
	}
	return a, stop, nil
}
