//go:build !unix

package npm

import "os/exec"

func setGroup(*exec.Cmd, *User) {}
