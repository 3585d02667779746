//go:build !linux

package process

import "syscall"

func sysProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

func groupHasLiveMember(int) bool { return true }

// waitExited returns at once where waiting without reaping is not wired up;
// the group is then signalled right after the leader is reaped.
func waitExited(int) {}

// sessionGroups is wired up on Linux only.
func sessionGroups(int) []int { return nil }
