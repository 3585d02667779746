//go:build !linux

package process

import (
	"bufio"
	"errors"
	"syscall"
)

func sysProcAttr(bool) *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

func groupHasLiveMember(int) bool { return true }

// SuperviseCommand is the hidden subcommand running Supervise.
const SuperviseCommand = "_supervise-agent"

// Supervise is Linux only (it needs PR_SET_CHILD_SUBREAPER); elsewhere
// agents run without a supervisor.
func Supervise([]string) int { return 127 }

const supervised = false

func readReport(*bufio.Reader) (string, string, error) { return "", "", errors.New("no supervisor") }
