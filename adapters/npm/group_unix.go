//go:build unix

package npm

import (
	"os/exec"
	"syscall"
)

// setGroup puts the program in its own process group (run as user when
// set) and makes cancellation kill the whole group.
func setGroup(cmd *exec.Cmd, user *User) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if user != nil {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: user.UID, Gid: user.GID, Groups: user.Groups}
	}
	cmd.Cancel = func() error {
		if cmd.Process == nil {
			return nil
		}
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}
