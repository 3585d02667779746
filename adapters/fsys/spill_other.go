//go:build !linux

package fsys

import (
	"errors"
	"os"
)

func openUnnamed(string) (*os.File, error) { return nil, errors.ErrUnsupported }

func punchHole(*os.File, int64, int64) error { return errors.ErrUnsupported }

func onTmpfs(string) bool { return false }
