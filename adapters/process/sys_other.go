//go:build !linux

package process

import (
	"bufio"
	"errors"
	"syscall"
)

func sysProcAttr(bool) *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

func groupHasLiveMember(int) bool { return true }

// waitExited returns at once where waiting without reaping is not wired up;
// the group is then signalled right after the leader is reaped.
func waitExited(int) {}

// sessionGroups is wired up on Linux only.
func sessionGroups(int) []int { return nil }

// SuperviseCommand is the hidden subcommand running Supervise.
const SuperviseCommand = "_supervise-agent"

// Supervise is Linux only (it needs PR_SET_CHILD_SUBREAPER); elsewhere
// agents run without a supervisor.
func Supervise([]string) int { return 127 }

const supervised = false

func readReport(*bufio.Reader) (string, string, error) { return "", "", errors.New("no supervisor") }
