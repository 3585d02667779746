//go:build !linux

package fsys

import "github.com/spf13/afero"

// Only Linux's procfs is known here: elsewhere only files are protected.

func isProcfs(string) bool                                  { return false }
func fileOnProcfs(afero.File, uint64, map[uint64]bool) bool { return false }
func openedPath(afero.File) (string, bool)                  { return "", false }
