//go:build !linux

package process

import "syscall"

func sysProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

func groupHasLiveMember(int) bool { return true }
