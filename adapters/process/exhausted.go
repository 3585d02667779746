package process

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
)

// exhausted says which resource of the system a start failed for, as the
// overloaded error (503, Retry-After) a client can act on, or nil when err
// is not a shortage. what names what was being started ("agent process",
// "process"). A start that ran out of something used to be a 502
// stream_error whose message was the bare errno ("pipe2: too many open
// files", "resource temporarily unavailable"): a client could not tell a
// full sandbox from a broken agent, nor that waiting would help.
//
// The errnos: EMFILE, the daemon's own open-file limit (pipes, a
// terminal, the supervisor's end); ENFILE, the system's; EAGAIN from fork,
// clone or execve, a limit on processes (RLIMIT_NPROC of the user the
// process runs as, a pids cgroup, threads-max); ENOMEM, memory (the
// sub-supervisor's stack, the kernel's structures for a new process).
func exhausted(what string, err error) *domain.Error {
	switch {
	case errors.Is(err, syscall.EMFILE):
		limit := rlimit(unix.RLIMIT_NOFILE)
		msg := "cannot start the " + what + ": the daemon is out of file descriptors"
		if errors.Is(err, errFDHeadroom) {
			msg += " (the last " + strconv.Itoa(headroomOf(limit)) + " of its open-file limit of " + strconv.Itoa(limit) + " are kept for connections and files)"
		} else if limit > 0 {
			msg += " (its open-file limit is " + strconv.Itoa(limit) + ")"
		}
		msg += "; close event streams, processes or agents, or raise `ulimit -n`"
		return exhaustedError(domain.ResourceFileDescriptors, limit, msg, err)
	case errors.Is(err, syscall.ENFILE):
		return exhaustedError(domain.ResourceFileDescriptors, 0,
			"cannot start the "+what+": the system is out of file descriptors (fs.file-max)", err)
	case errors.Is(err, syscall.EAGAIN):
		return exhaustedError(domain.ResourceProcesses, 0, "cannot start the "+what+": the limit on processes is reached "+
			"(RLIMIT_NPROC of the user it runs as, less what the daemon keeps for its own threads, or the sandbox's pids limit); "+
			"stop processes or agents, or retry later", err)
	case errors.Is(err, syscall.ENOMEM):
		return exhaustedError(domain.ResourceMemory, 0,
			"cannot start the "+what+": the system is out of memory", err)
	}
	return nil
}

// errFDHeadroom is a start refused by fdHeadroom; exhausted reads it as
// EMFILE.
var errFDHeadroom = fmt.Errorf("fewer descriptors left than the daemon keeps for its connections and files: %w", syscall.EMFILE)

// fdHeadroom refuses a start (errFDHeadroom) when fewer descriptors than
// an eighth of the open-file limit (8 to 256) are free. Agents and
// processes hold three each for as long as they live; without a
// headroom they could take every descriptor, and then no connection
// could be accepted (not even for /v1/health: only the listener's one
// reserved descriptor could answer, a 503 at a time) and no file served.
// --max-conns keeps half the table from connections; this keeps some of
// it from starts. Where the count cannot be read (no /proc), nothing is
// refused.
func fdHeadroom() error {
	limit := rlimit(unix.RLIMIT_NOFILE)
	if limit <= 0 {
		return nil
	}
	open, ok := countOpenFDs()
	if !ok {
		return nil
	}
	if limit-open < headroomOf(limit) {
		return errFDHeadroom
	}
	return nil
}

// headroomOf is fdHeadroom's arithmetic: an eighth of limit, 8 to 256.
func headroomOf(limit int) int { return min(max(limit/8, 8), 256) }

// countOpenFDs counts this process's open descriptors.
func countOpenFDs() (int, bool) {
	d, err := os.Open("/proc/self/fd")
	if err != nil {
		return 0, false
	}
	defer d.Close()
	n := 0
	for {
		names, err := d.Readdirnames(1024)
		n += len(names)
		if err != nil {
			// The count includes the directory's own descriptor, which
			// is closed when the start goes on.
			return n - 1, err == io.EOF
		}
	}
}

func exhaustedError(resource string, limit int, msg string, cause error) *domain.Error {
	return domain.Exhausted(resource, limit, msg).Because(cause)
}

// rlimit is the soft limit of resource, or 0 when there is none or it
// cannot be read (or does not fit an int).
func rlimit(resource int) int {
	var rl unix.Rlimit
	if unix.Getrlimit(resource, &rl) != nil || rl.Cur == unix.RLIM_INFINITY || rl.Cur > 1<<31 {
		return 0
	}
	return int(rl.Cur)
}
