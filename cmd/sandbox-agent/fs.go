package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/sandbox-agent-go/sandbox-agent/adapters/fsys"
	"github.com/sandbox-agent-go/sandbox-agent/app/files"
)

// newFilesystem builds the filesystem behind /v1/fs and /v1/config from
// --fs and --fs-root. The same backend serves both, so --fs-root confines
// config files too and --fs memory keeps them in memory.
//
//   - default (--fs os): the host filesystem; relative fs paths resolve
//     against $HOME and relative config directories against the working
//     directory, as in the reference;
//   - --fs-root DIR: every path confined to DIR with os.Root; relative fs
//     paths and config directories both resolve against DIR;
//   - --fs memory: an empty in-memory filesystem holding $HOME and the
//     working directory, for tests and demos.
//
// The returned func releases the backend.
func newFilesystem(f *serverFlags) (*files.Files, *files.ConfigStore, func(), error) {
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
	switch {
	case f.fsRoot != "":
		if f.fsBackend != "os" {
			return nil, nil, nil, usagef("--fs-root confines the host filesystem; it cannot be combined with --fs %s", f.fsBackend)
		}
		root, err := fsys.OpenRoot(f.fsRoot)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("--fs-root: %w", err)
		}
		return &files.Files{Fs: root, Home: root.Dir()}, &files.ConfigStore{Fs: root, Base: root.Dir()}, func() { root.Close() }, nil
	case f.fsBackend == "memory":
		mem := fsys.NewMemory()
		for _, dir := range []string{home, cwd} {
			if err := mem.MkdirAll(dir, 0o755); err != nil {
				return nil, nil, nil, fmt.Errorf("memory filesystem: %w", err)
			}
		}
		return &files.Files{Fs: mem, Home: home}, &files.ConfigStore{Fs: mem, Base: cwd}, func() {}, nil
	case f.fsBackend == "os":
		host := fsys.NewOS()
		return &files.Files{Fs: host, Home: home}, &files.ConfigStore{Fs: host, Base: cwd}, func() {}, nil
	}
	return nil, nil, nil, usagef("--fs must be os or memory, got %q", f.fsBackend)
}
