//go:build !linux

package process

import "syscall"

func sysProcAttr(session bool, cred *Credential) *syscall.SysProcAttr {
	a := &syscall.SysProcAttr{Setpgid: !session, Setsid: session, Setctty: session}
	if cred != nil {
		a.Credential = &syscall.Credential{Uid: cred.UID, Gid: cred.GID, Groups: cred.Groups}
	}
	return a
}

func groupHasLiveMember(int) bool { return true }

// waitExited returns at once where waiting without reaping is not wired up;
// the group is then signalled right after the leader is reaped.
func waitExited(int) {}

// sessionGroups is wired up on Linux only.
func sessionGroups(int) []int { return nil }
