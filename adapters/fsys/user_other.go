//go:build !linux

package fsys

import "github.com/spf13/afero"

// AsUser needs Linux (per-thread filesystem credentials); the daemon
// refuses --run-as elsewhere, so this returns fs unchanged.
func AsUser(fs afero.Fs, uid, gid uint32, groups []uint32) afero.Fs { return fs }
