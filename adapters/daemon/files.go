package daemon

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// StateDir is where daemons are recorded: $XDG_STATE_HOME/sandbox-agent/daemon,
// or ~/.local/state/sandbox-agent/daemon when the variable is unset or not
// an absolute path (as the XDG base directory spec says to treat it).
func StateDir(getenv func(string) string, home string) string {
	base := getenv("XDG_STATE_HOME")
	if !filepath.IsAbs(base) {
		base = filepath.Join(home, ".local", "state")
	}
	return filepath.Join(base, "sandbox-agent", "daemon")
}

// Files are the paths of one address's daemon: daemon-<host>-<port> with
// every byte of host but letters and digits as '-' (as the reference names
// them), then .pid (the pid, for scripts), .json (the Record), .log (its
// output; the previous run's is kept as .log.1) and .lock.
type Files struct {
	Pid, Record, Log, Lock string
}

// FilesFor names the files of the daemon at host:port under dir.
func FilesFor(dir, host string, port int) Files {
	var b strings.Builder
	for _, c := range []byte(host) {
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' {
			b.WriteByte(c)
		} else {
			b.WriteByte('-')
		}
	}
	base := filepath.Join(dir, "daemon-"+b.String()+"-"+strconv.Itoa(port))
	return Files{Pid: base + ".pid", Record: base + ".json", Log: base + ".log", Lock: base + ".lock"}
}

// Record is what start writes about the daemon it started: enough to find
// it, tell it from a process that took its pid later, and report it.
type Record struct {
	PID int `json:"pid"`
	// StartTicks and BootID identify the process beyond its pid (Linux:
	// /proc/<pid>/stat's start time in clock ticks since boot, and
	// /proc/sys/kernel/random/boot_id); empty where unknown.
	StartTicks uint64    `json:"start_ticks,omitempty"`
	BootID     string    `json:"boot_id,omitempty"`
	Version    string    `json:"version"`
	URL        string    `json:"url"`
	Exe        string    `json:"exe"`
	Log        string    `json:"log"`
	Started    time.Time `json:"started"`
}

// errNoRecord: no daemon is recorded at this address.
var errNoRecord = errors.New("no pid file")

// errNotOurs: a state file or directory another user owns or can write.
// It is not trusted, and not removed either: it is an error, not a stale
// pid file.
var errNotOurs = errors.New("not trusted")

// checkOwner refuses what another user owns, or (a directory) what users
// other than its owner can write: whoever writes a record can make stop
// signal any process of the user running it (or, run by root, any process
// at all).
func checkOwner(path string, fi fs.FileInfo) error {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	if uid := os.Geteuid(); int(st.Uid) != uid {
		return fmt.Errorf("%s is owned by uid %d, not by uid %d: %w", path, st.Uid, uid, errNotOurs)
	}
	if fi.IsDir() && fi.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("%s is writable by others (mode %v; chmod 700 it): %w", path, fi.Mode().Perm(), errNotOurs)
	}
	return nil
}

// checkStateDir refuses a state directory (or what a symlink there names)
// that is not a directory of this user's that only they can write.
func checkStateDir(dir string) error {
	fi, err := os.Stat(dir)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s is not a directory", dir)
	}
	return checkOwner(dir, fi)
}

// readRecord reads the record; errNoRecord when there is none (a pid file
// alone, without its record, is reported as a record that cannot be read).
func (f Files) readRecord() (Record, error) {
	b, err := readSmall(f.Record)
	if errors.Is(err, fs.ErrNotExist) {
		if _, perr := os.Lstat(f.Pid); perr == nil {
			return Record{}, fmt.Errorf("%s has no record beside it (%s)", f.Pid, f.Record)
		}
		return Record{}, errNoRecord
	}
	if err != nil {
		return Record{}, err
	}
	var r Record
	if err := json.Unmarshal(b, &r); err != nil {
		return Record{}, fmt.Errorf("%s: %w", f.Record, err)
	}
	if r.PID <= 1 {
		// Never a daemon start started (its child); and kill(-1) is
		// every process there is.
		return Record{}, fmt.Errorf("%s names no daemon (pid %d)", f.Record, r.PID)
	}
	return r, nil
}

// readSmall reads a state file of at most 64 KiB (a record is a few
// hundred bytes; anything larger is not ours) that this user owns
// (checkOwner, on the file opened). Only a regular file is read:
// the open does not block (O_NONBLOCK), so a FIFO put in its place cannot
// hang status, stop or start.
func readSmall(path string) ([]byte, error) {
	file, err := openRegular(path)
	if err != nil {
		return nil, err
	}
	defer file.Close()
	fi, err := file.Stat()
	if err != nil {
		return nil, err
	}
	if err := checkOwner(path, fi); err != nil {
		return nil, err
	}
	b, err := io.ReadAll(io.LimitReader(file, 64<<10+1))
	if err == nil && len(b) > 64<<10 {
		err = fmt.Errorf("%s is larger than 64 KiB", path)
	}
	return b, err
}

// openRegular opens path for reading without blocking and refuses what
// is not a regular file.
func openRegular(path string) (*os.File, error) {
	file, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	fi, err := file.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = fmt.Errorf("%s is not a regular file (%s)", path, fi.Mode().Type())
	}
	if err != nil {
		file.Close()
		return nil, err
	}
	return file, nil
}

// writeRecord writes the record, then the pid file, each through a
// temporary file and a rename (a reader sees the old file or the new one),
// readable by the owner only.
func (f Files) writeRecord(r Record) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := writeAtomic(f.Record, append(b, '\n')); err != nil {
		return err
	}
	return writeAtomic(f.Pid, []byte(strconv.Itoa(r.PID)+"\n"))
}

// remove deletes the pid file and the record (the log stays).
func (f Files) remove() error {
	return errors.Join(removeIfExists(f.Pid), removeIfExists(f.Record))
}

func removeIfExists(p string) error {
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

func writeAtomic(path string, b []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	_, werr := tmp.Write(b)
	if cerr := tmp.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(tmp.Name(), path)
	}
	if werr != nil {
		os.Remove(tmp.Name())
	}
	return werr
}

// rotateLog keeps the previous run's log as .log.1 and opens a fresh one
// for the new daemon (owner-only: a daemon's log names paths and agents).
func (f Files) rotateLog() (*os.File, error) {
	if err := os.Rename(f.Log, f.Log+".1"); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	return os.OpenFile(f.Log, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|os.O_APPEND, 0o600)
}

// logTail is the last lines of the log (at most 64 KiB of it), for a start
// that failed.
func logTail(path string, lines int) string {
	file, err := openRegular(path)
	if err != nil {
		return ""
	}
	defer file.Close()
	const window = 64 << 10
	if fi, err := file.Stat(); err == nil && fi.Size() > window {
		_, _ = file.Seek(fi.Size()-window, io.SeekStart)
	}
	b, _ := io.ReadAll(io.LimitReader(file, window))
	all := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, "\n")
}
