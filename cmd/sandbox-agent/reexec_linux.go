package main

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/pflag"
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
//
// A token given as --token (or -t) is handed over the same way: the
// kernel shows the command line in /proc/<daemon>/cmdline to every local
// user, agents run as another user by --run-as included, and ps prints
// it. The new image's command line is the old one without the flag and
// its value; tokenFromEnv says the token came from the flag, so that the
// daemon still treats it as a flag's (its log, its errors). What remains
// is the moment between the start and the re-exec, a few milliseconds.

// tokenFDEnv names the descriptor holding the token across the re-exec.
const tokenFDEnv = "SANDBOX_AGENT_TOKEN_FD_INTERNAL"

// tokenFromEnv, set to "flag" beside tokenFDEnv, says the handed token was
// given as --token.
const tokenFromEnv = "SANDBOX_AGENT_TOKEN_FROM_INTERNAL"

// reexecAllowed is set by main: only the real binary re-executes itself
// (a test calling run in process must not exec the test binary).
var reexecAllowed bool

// hideToken re-executes the daemon without its token in its environment
// (SANDBOX_AGENT_TOKEN) or on its command line (--token, of fs, the
// server's parsed flags) when it has one there. It returns only when there
// was nothing to do or the re-exec could not happen (then it says why on
// stderr and the daemon goes on, with Go's copy of the environment
// cleared, as before).
func hideToken(fs *pflag.FlagSet, stderr io.Writer) {
	if !reexecAllowed {
		return
	}
	if fs.Changed("token") {
		args, ok := withoutFlag(os.Args, fs, "token")
		if !ok {
			fmt.Fprintf(stderr, "sandbox-agent: could not take --token off the command line (it stays visible in /proc/%d/cmdline)\n", os.Getpid())
			return
		}
		tok, _ := fs.GetString("token")
		if err := reexecWithToken(tok, args, "flag"); err != nil {
			fmt.Fprintf(stderr, "sandbox-agent: could not re-execute without --token on the command line (it stays visible in /proc/%d/cmdline): %v\n", os.Getpid(), err)
		}
		return
	}
	tok, ok := os.LookupEnv(tokenEnv)
	if !ok {
		return
	}
	if tok == "" {
		_ = os.Unsetenv(tokenEnv)
		return
	}
	if err := reexecWithToken(tok, os.Args, "env"); err != nil {
		fmt.Fprintf(stderr, "sandbox-agent: could not re-execute without %s in the environment (it stays visible in /proc/%d/environ): %v\n", tokenEnv, os.Getpid(), err)
	}
}

// withoutFlag returns args (a command line, program name first) without
// every occurrence of the long flag name and its value, read as pflag
// reads them from fs: "--name v", "--name=v", its shorthand alone ("-t
// v", "-tv", "-t=v") or last in a group of boolean shorthands ("-nt v").
// Flags of fs that take a value have it skipped, so a value that looks
// like the flag is not taken for it; "--" ends the flags. ok is false
// when the line holds something this cannot read with certainty (an
// unknown flag, the shorthand inside a group before another letter): the
// caller then keeps the line as it is.
func withoutFlag(args []string, fs *pflag.FlagSet, name string) (out []string, ok bool) {
	flag := fs.Lookup(name)
	if flag == nil || len(args) == 0 {
		return args, false
	}
	takesValue := func(f *pflag.Flag) bool { return f.NoOptDefVal == "" }
	out = append(out, args[0])
	for i := 1; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			return append(out, args[i:]...), true
		case strings.HasPrefix(a, "--"):
			long, _, hasValue := strings.Cut(a[2:], "=")
			f := fs.Lookup(long)
			if f == nil {
				return nil, false
			}
			skip := !hasValue && takesValue(f) // the next argument is its value
			if f == flag {
				if skip {
					i++
				}
				continue
			}
			out = append(out, a)
			if skip && i+1 < len(args) {
				i++
				out = append(out, args[i])
			}
		case strings.HasPrefix(a, "-") && len(a) > 1:
			// A group of shorthands: booleans, then at most one that
			// takes a value (the rest of the group, or the next argument).
			group := a[1:]
			valued := false // a shorthand taking a value ended the group
			for j := 0; j < len(group) && !valued; j++ {
				f := fs.ShorthandLookup(group[j : j+1])
				if f == nil {
					return nil, false
				}
				if !takesValue(f) {
					continue
				}
				valued = true
				inline := j+1 < len(group)
				if f == flag {
					if j > 0 {
						// "-nt v": keep the booleans before it.
						out = append(out, "-"+group[:j])
					}
					if !inline {
						i++
					}
					continue
				}
				out = append(out, a)
				if !inline && i+1 < len(args) {
					i++
					out = append(out, args[i])
				}
			}
			if !valued {
				out = append(out, a) // booleans only
			}
		default:
			out = append(out, a) // an argument; the server takes none
		}
	}
	return out, true
}

// reexecWithToken executes this binary again with args and the
// environment without the token's variable, handing tok over in a memfd;
// from is "flag" or "env", where the token was given.
func reexecWithToken(tok string, args []string, from string) error {
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
		if !strings.HasPrefix(kv, tokenEnv+"=") && !strings.HasPrefix(kv, tokenFDEnv+"=") && !strings.HasPrefix(kv, tokenFromEnv+"=") {
			env = append(env, kv)
		}
	}
	env = append(env, tokenFDEnv+"="+strconv.Itoa(fd), tokenFromEnv+"="+from)
	err = execSelf(args, env)
	unix.Close(fd)
	return err
}

// handedToken reads the token the previous image handed over, if any: it
// closes the descriptor and removes tokenFDEnv and tokenFromEnv. ok is
// false when there was none; fromFlag is true when it was given as
// --token.
func handedToken() (tok string, fromFlag, ok bool, err error) {
	fromFlag = os.Getenv(tokenFromEnv) == "flag"
	_ = os.Unsetenv(tokenFromEnv)
	v, ok := os.LookupEnv(tokenFDEnv)
	if !ok {
		return "", false, false, nil
	}
	_ = os.Unsetenv(tokenFDEnv)
	fd, err := strconv.Atoi(v)
	if err != nil || fd < 3 {
		return "", false, true, fmt.Errorf("%s=%q is not a descriptor", tokenFDEnv, v)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return "", false, true, fmt.Errorf("the token handed over at re-exec: %w", err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG || st.Size > maxTokenFile {
		return "", false, true, fmt.Errorf("the token handed over at re-exec: descriptor %d is not the daemon's", fd)
	}
	b := make([]byte, st.Size)
	n, err := unix.Pread(fd, b, 0)
	if err != nil {
		return "", false, true, fmt.Errorf("the token handed over at re-exec: %w", err)
	}
	return string(b[:n]), fromFlag, true, nil
}
