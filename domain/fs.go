package domain

import (
	"errors"
	"fmt"
	"path"
	"strings"
	"time"
)

// FSEntryType is what a filesystem entry is, as the API reports it: a
// directory, or a file (anything else, symbolic links included in listings,
// counts as a file, as in the reference).
type FSEntryType string

// The entry types of docs/api.md section 6.
const (
	FSFile      FSEntryType = "file"
	FSDirectory FSEntryType = "directory"
)

// FSEntry is one row of a directory listing (lstat: links are not followed).
type FSEntry struct {
	Name      string      `json:"name"`
	Path      string      `json:"path"`
	EntryType FSEntryType `json:"entryType"`
	Size      int64       `json:"size"`
	Modified  string      `json:"modified,omitempty"`
	// Symlink marks a symbolic link; EntryType stays what the reference
	// reports for it ("file"), so existing clients read listings unchanged.
	Symlink bool `json:"symlink,omitempty"`
}

// FSStat is the metadata of one path (stat: links are followed).
type FSStat struct {
	Path      string      `json:"path"`
	EntryType FSEntryType `json:"entryType"`
	Size      int64       `json:"size"`
	Modified  string      `json:"modified,omitempty"`
}

// FSWrite is the result of writing one file.
type FSWrite struct {
	Path         string `json:"path"`
	BytesWritten int64  `json:"bytesWritten"`
}

// FSUpload is the result of extracting a tar archive: the paths written, at
// most MaxUploadPaths of them, and whether more were left out.
type FSUpload struct {
	Paths     []string `json:"paths"`
	Truncated bool     `json:"truncated"`
}

// MaxUploadPaths bounds FSUpload.Paths, as the reference does.
const MaxUploadPaths = 1024

// ErrNotRegular is the cause given when a file that must be a regular file
// (a config file, a file to read) is a FIFO, device, socket or directory.
var ErrNotRegular = errors.New("not a regular file")

// ErrOutsideRoot is the cause a confined filesystem gives when a path, or a
// symbolic link on the way to it, leads outside its root.
var ErrOutsideRoot = errors.New("path escapes the filesystem root")

// The lengths Linux accepts (NAME_MAX, PATH_MAX): a longer name is the
// client's mistake, told as such before any system call.
const (
	MaxNameBytes = 255
	MaxPathBytes = 4095
)

// ErrNameTooLong is the cause given for a path or one of its elements over
// MaxPathBytes or MaxNameBytes.
var ErrNameTooLong = errors.New("name too long")

// CheckPathLength refuses a path longer than MaxPathBytes or holding an
// element longer than MaxNameBytes.
func CheckPathLength(p string) error {
	if len(p) > MaxPathBytes {
		return fmt.Errorf("%w: path is longer than %d bytes", ErrNameTooLong, MaxPathBytes)
	}
	for _, part := range strings.Split(p, "/") {
		if len(part) > MaxNameBytes {
			return fmt.Errorf("%w: a path element is longer than %d bytes", ErrNameTooLong, MaxNameBytes)
		}
	}
	return nil
}

// ResolveFSPath turns a client's path into the absolute path the daemon
// uses. Absolute paths are cleaned and used as given; relative paths are
// joined to base (the home directory, or the --fs-root) and may not contain
// "..", so they cannot climb out of it. NUL bytes are rejected everywhere.
// The message of a returned error can be shown to the client.
func ResolveFSPath(base, p string) (string, error) {
	if strings.IndexByte(p, 0) >= 0 {
		return "", errors.New("path contains a NUL byte")
	}
	if strings.HasPrefix(p, "/") {
		abs := path.Clean(p)
		if err := CheckPathLength(abs); err != nil {
			return "", err
		}
		return abs, nil
	}
	if p == "" {
		return "", errors.New("path is empty")
	}
	for _, part := range strings.Split(p, "/") {
		if part == ".." {
			return "", errors.New("invalid relative path: " + p)
		}
	}
	abs := path.Join(base, p)
	if err := CheckPathLength(abs); err != nil {
		return "", err
	}
	return abs, nil
}

// RootRelative returns p relative to root ("." for root itself), and false
// when p is not inside root. Both must be clean absolute paths; the check is
// on whole path elements, so "/srv/root-secret" is not inside "/srv/root".
func RootRelative(root, p string) (string, bool) {
	if p == root {
		return ".", true
	}
	if root == "/" {
		if strings.HasPrefix(p, "/") && len(p) > 1 {
			return p[1:], true
		}
		return "", false
	}
	if strings.HasPrefix(p, root) && len(p) > len(root) && p[len(root)] == '/' {
		return p[len(root)+1:], true
	}
	return "", false
}

// FormatFSTime formats a modification time as the reference does (chrono's
// to_rfc3339): UTC, a numeric "+00:00" offset, and 0, 3, 6 or 9 fraction
// digits as the value needs.
func FormatFSTime(t time.Time) string {
	t = t.UTC()
	layout := "2006-01-02T15:04:05"
	switch ns := t.Nanosecond(); {
	case ns == 0:
	case ns%1_000_000 == 0:
		layout += ".000"
	case ns%1_000 == 0:
		layout += ".000000"
	default:
		layout += ".000000000"
	}
	return t.Format(layout) + "+00:00"
}
