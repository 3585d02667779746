//go:build !linux

package main

import (
	"io"
	"os"

	"github.com/spf13/pflag"
)

// Outside Linux the daemon does not re-execute itself (that relies on
// memfd_create and /proc/self/exe): the variable is only removed from
// Go's copy of the environment, so children do not inherit it, and a
// --token stays on the command line.

const tokenFDEnv = "SANDBOX_AGENT_TOKEN_FD_INTERNAL"

var reexecAllowed bool

func hideToken(*pflag.FlagSet, io.Writer) {}

func handedToken() (string, bool, bool, error) {
	_ = os.Unsetenv(tokenFDEnv)
	return "", false, false, nil
}
