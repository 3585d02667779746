package main

import (
	"os"
	"os/user"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

	"github.com/spf13/afero"

	"github.com/sandbox-agent-go/sandbox-agent/adapters/fsys"
	"github.com/sandbox-agent-go/sandbox-agent/adapters/npm"
	"github.com/sandbox-agent-go/sandbox-agent/adapters/process"
	"github.com/sandbox-agent-go/sandbox-agent/app/agents"
)

// runAs is the user agents and processes run as (--run-as): its uid, gid,
// supplementary groups, name and home, resolved from /etc/passwd and
// /etc/group at start.
type runAs struct {
	name string
	home string
	cred process.Credential
}

// resolveRunAs resolves --run-as (a name or a uid); nil without it. It is
// refused unless the daemon runs as root on Linux (only root can start
// processes as another user, and the supervisor and the filesystem's
// writes as the user need Linux), and when it names root.
func resolveRunAs(spec string) (*runAs, error) {
	spec = strings.TrimSpace(spec)
	if spec == "" {
		return nil, nil
	}
	if runtime.GOOS != "linux" {
		return nil, usagef("--run-as is supported on Linux only")
	}
	if uid := os.Geteuid(); uid != 0 {
		return nil, usagef("--run-as needs the daemon to run as root (it runs as uid %d); without root, agents and processes already run as the daemon's own user", uid)
	}
	lookup := user.Lookup
	if _, err := strconv.ParseUint(spec, 10, 32); err == nil {
		lookup = user.LookupId
	}
	u, err := lookup(spec)
	if err != nil {
		return nil, usagef("--run-as %s: no such user (%v)", spec, err)
	}
	uid, uerr := strconv.ParseUint(u.Uid, 10, 32)
	gid, gerr := strconv.ParseUint(u.Gid, 10, 32)
	if uerr != nil || gerr != nil {
		return nil, usagef("--run-as %s: uid %q or gid %q is not a number", spec, u.Uid, u.Gid)
	}
	if uid == 0 {
		return nil, usagef("--run-as %s names root; name an unprivileged user (agents and processes run as root without the flag)", spec)
	}
	r := &runAs{name: u.Username, home: u.HomeDir, cred: process.Credential{UID: uint32(uid), GID: uint32(gid)}}
	if r.home == "" {
		r.home = "/"
	}
	ids, _ := u.GroupIds() // none readable: the primary group alone
	r.cred.Groups = []uint32{uint32(gid)}
	for _, id := range ids {
		if g, err := strconv.ParseUint(id, 10, 32); err == nil && g != gid {
			r.cred.Groups = append(r.cred.Groups, uint32(g))
		}
	}
	return r, nil
}

// credential is the user's credential, nil without --run-as.
func (r *runAs) credential() *process.Credential {
	if r == nil {
		return nil
	}
	c := r.cred
	return &c
}

// workDir is where agents start unless told otherwise: the user's home
// (the daemon's own working directory may be closed to the user); ""
// (the daemon's) without --run-as.
func (r *runAs) workDir() string {
	if r == nil {
		return ""
	}
	return r.home
}

// env is the environment agents and processes start from: the daemon's
// (base), with HOME, USER and LOGNAME the user's, and without the daemon's
// own XDG directories, which the user cannot use.
func (r *runAs) env(base []string) []string {
	if r == nil {
		return base
	}
	out := process.FilterEnv(base, "HOME", "USER", "LOGNAME", "MAIL", "XDG_DATA_HOME", "XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_STATE_HOME", "XDG_RUNTIME_DIR")
	return append(out, "HOME="+r.home, "USER="+r.name, "LOGNAME="+r.name)
}

// writer is fs with its writes made as the user (fsys.AsUser); fs itself
// without --run-as.
func (r *runAs) writer(fs afero.Fs) afero.Fs {
	if r == nil {
		return fs
	}
	return fsys.AsUser(fs, r.cred.UID, r.cred.GID, r.cred.Groups)
}

// installDir is where agents are installed and launchers looked up: the
// user's own data directory with --run-as (the daemon's may not even be
// reachable by the user: /root is 0700), else the daemon's.
func (r *runAs) installDir() string {
	if r == nil {
		return installDir()
	}
	return filepath.Join(r.home, ".local", "share", "sandbox-agent", "bin")
}

// applyInstaller makes installs the user's: files written as the user
// (fsys.AsUser), npm and the launcher probes run as the user, in its
// environment. An agent's install scripts then never run as root.
func (r *runAs) applyInstaller(inst *agents.Installer) {
	if r == nil || inst == nil {
		return
	}
	inst.Dir = r.installDir()
	inst.Fs = fsys.AsUser(fsys.NewOS(), r.cred.UID, r.cred.GID, r.cred.Groups)
	u := &npm.User{UID: r.cred.UID, GID: r.cred.GID, Groups: r.cred.Groups}
	env := r.env(process.FilterEnv(os.Environ(), tokenEnv))
	inst.Packages = &npm.Installer{User: u, Fs: inst.Fs, Env: env}
	inst.Commands = &npm.Commands{User: u, Env: env}
}
