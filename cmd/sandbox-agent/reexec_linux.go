package main

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// The token given as SANDBOX_AGENT_TOKEN must not stay readable in
// /proc/<daemon>/environ: the kernel shows there the environment the
// process was started with, which os.Unsetenv does not change, and every
// process of the same user (an agent, a process of the API) can read it.
// So the server, when started with the variable, executes itself again
// (same pid: exec, not fork) with the variable removed, and hands the
// token to the new image in a memfd: an anonymous in-memory file, never on
// a command line or in an environment. Its descriptor number travels in
// tokenFDEnv; the new image reads the token, closes the descriptor and
// removes that variable too.

// tokenFDEnv names the descriptor holding the token across the re-exec.
const tokenFDEnv = "SANDBOX_AGENT_TOKEN_FD_INTERNAL"

// reexecAllowed is set by main: only the real binary re-executes itself
// (a test calling run in process must not exec the test binary).
var reexecAllowed bool

// hideEnvToken re-executes the daemon without SANDBOX_AGENT_TOKEN in its
// environment when it has one. It returns only when there was nothing to
// do or the re-exec could not happen (then it says why on stderr and the
// daemon goes on with Go's copy of the environment cleared, as before).
func hideEnvToken(stderr io.Writer) {
	tok, ok := os.LookupEnv(tokenEnv)
	if !ok || !reexecAllowed {
		return
	}
	if tok == "" {
		_ = os.Unsetenv(tokenEnv)
		return
	}
	if err := reexecWithToken(tok); err != nil {
		fmt.Fprintf(stderr, "sandbox-agent: could not re-execute without %s in the environment (it stays visible in /proc/%d/environ): %v\n", tokenEnv, os.Getpid(), err)
	}
}

func reexecWithToken(tok string) error {
	// No MFD_CLOEXEC: the descriptor must survive the exec.
	fd, err := unix.MemfdCreate("sandbox-agent-token", 0)
	if err != nil {
		return fmt.Errorf("memfd_create: %w", err)
	}
	if _, err := unix.Pwrite(fd, []byte(tok), 0); err != nil {
		unix.Close(fd)
		return fmt.Errorf("write memfd: %w", err)
	}
	env := make([]string, 0, len(os.Environ())+1)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, tokenEnv+"=") && !strings.HasPrefix(kv, tokenFDEnv+"=") {
			env = append(env, kv)
		}
	}
	env = append(env, tokenFDEnv+"="+strconv.Itoa(fd))
	// /proc/self/exe is this very binary, even if its file was replaced
	// or removed since it started.
	err = syscall.Exec("/proc/self/exe", os.Args, env)
	unix.Close(fd)
	return fmt.Errorf("exec: %w", err)
}

// handedToken reads the token the previous image handed over, if any: it
// closes the descriptor and removes tokenFDEnv. ok is false when there was
// none.
func handedToken() (tok string, ok bool, err error) {
	v, ok := os.LookupEnv(tokenFDEnv)
	if !ok {
		return "", false, nil
	}
	_ = os.Unsetenv(tokenFDEnv)
	fd, err := strconv.Atoi(v)
	if err != nil || fd < 3 {
		return "", true, fmt.Errorf("%s=%q is not a descriptor", tokenFDEnv, v)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return "", true, fmt.Errorf("the token handed over at re-exec: %w", err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG || st.Size > maxTokenFile {
		return "", true, fmt.Errorf("the token handed over at re-exec: descriptor %d is not the daemon's", fd)
	}
	b := make([]byte, st.Size)
	n, err := unix.Pread(fd, b, 0)
	if err != nil {
		return "", true, fmt.Errorf("the token handed over at re-exec: %w", err)
	}
	return string(b[:n]), true, nil
}
