package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/pflag"

	"github.com/sandbox-agent-go/sandbox-agent/adapters/fsys"
	"github.com/sandbox-agent-go/sandbox-agent/app/files"
	"github.com/sandbox-agent-go/sandbox-agent/ports"
)

// fsLimits are the server flags bounding what writes may take from the
// disk: --max-extract, --max-extract-depth and --min-free.
type fsLimits struct {
	maxExtract, minFree int64
	maxDepth            int
}

func (l *fsLimits) register(fs *pflag.FlagSet) {
	fs.Int64Var(&l.maxExtract, "max-extract", files.DefaultMaxExtract, "largest total size in bytes, holes included, one upload-batch or agent archive may expand to (413 past it)")
	fs.IntVar(&l.maxDepth, "max-extract-depth", files.DefaultMaxDepth, "most path elements one upload-batch or agent archive entry may have (400 past it)")
	fs.Int64Var(&l.minFree, "min-free", files.AutoMinFree, "bytes a PUT, extraction or install must leave free on its filesystem (507 otherwise); -1: 1 GiB or 5% of the filesystem, whichever is smaller; 0: no check")
	setMin(fs, "min-free", "-1")
}

// limits are the disk limits of the host filesystem, for Files and for
// agent installs (the installer's agents.Disk).
func (l fsLimits) limits() files.Limits {
	return files.Limits{MaxExtract: l.maxExtract, MaxDepth: l.maxDepth, Space: fsys.Statfs{}, MinFree: l.minFree}
}

// newFilesystem builds the filesystem behind /v1/fs and /v1/config from
// --fs and --fs-root. The same backend serves both, so --fs-root confines
// config files too and --fs memory keeps them in memory.
//
//   - default (--fs os): the host filesystem; relative fs paths resolve
//     against $HOME (the --run-as user's) and relative config directories
//     against the working directory, as in the reference;
//   - --fs-root DIR: every path confined to DIR with os.Root; relative fs
//     paths and config directories both resolve against DIR;
//   - --fs memory: an in-memory filesystem holding only $HOME and the
//     working directory (with their parents), for tests and demos; no
//     free-space check.
//
// On the host backends, secrets keeps the daemon's own files and /proc out
// of both APIs; with --run-as, they make their writes as that user
// (fsys.AsUser): what the API creates is the user's.
//
// The returned func releases the backend.
func newFilesystem(f *serverFlags, secrets ports.Secrets, ra *runAs) (*files.Files, *files.ConfigStore, func(), error) {
	home, err := os.UserHomeDir()
	cwd, cwdErr := os.Getwd()
	if cwdErr != nil {
		cwd = "/"
	}
	if err != nil {
		home = cwd // no $HOME: relative paths land in the working directory
	}
	if abs, err := filepath.Abs(home); err == nil {
		home = abs
	}
	if f.fsLimits.maxDepth < 1 {
		return nil, nil, nil, usagef("--max-extract-depth must be at least 1, got %d", f.fsLimits.maxDepth)
	}
	if ra != nil {
		home = ra.home
	}
	switch {
	case f.fsRoot != "":
		if f.fsBackend != "os" {
			return nil, nil, nil, usagef("--fs-root confines the host filesystem; it cannot be combined with --fs %s", f.fsBackend)
		}
		root, err := fsys.OpenRoot(f.fsRoot)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("--fs-root: %w", err)
		}
		view := ra.writer(root)
		fl := &files.Files{Fs: view, Home: root.Dir(), Root: root.Dir(), Limits: f.fsLimits.limits(), MaxUpload: f.maxUpload, Secrets: secrets}
		return fl, &files.ConfigStore{Fs: view, Base: root.Dir(), Secrets: secrets}, func() { root.Close() }, nil
	case f.fsBackend == "memory":
		mem := fsys.NewMemory()
		for _, dir := range []string{home, cwd} {
			if err := mem.MkdirAll(dir, 0o755); err != nil {
				return nil, nil, nil, fmt.Errorf("memory filesystem: %w", err)
			}
		}
		fl := &files.Files{Fs: mem, Home: home, Limits: files.Limits{MaxExtract: f.fsLimits.maxExtract, MaxDepth: f.fsLimits.maxDepth}, MaxUpload: f.maxUpload}
		return fl, &files.ConfigStore{Fs: mem, Base: cwd}, func() {}, nil
	case f.fsBackend == "os":
		host := ra.writer(fsys.NewOS())
		fl := &files.Files{Fs: host, Home: home, Limits: f.fsLimits.limits(), MaxUpload: f.maxUpload, Secrets: secrets}
		return fl, &files.ConfigStore{Fs: host, Base: cwd, Secrets: secrets}, func() {}, nil
	}
	return nil, nil, nil, usagef("--fs must be os or memory, got %q", f.fsBackend)
}
