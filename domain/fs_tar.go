package domain

import (
	"errors"
	"path"
	"strings"
)

// TarEntryPath validates the name of a tar entry and returns it as a clean
// path relative to the extraction directory ("" for the directory itself,
// e.g. "./"). Absolute names, ".." elements and NUL bytes are rejected, so
// the result never leaves the extraction directory lexically.
func TarEntryPath(name string) (string, error) {
	if strings.IndexByte(name, 0) >= 0 {
		return "", errors.New("name contains a NUL byte")
	}
	if strings.HasPrefix(name, "/") {
		return "", errors.New("absolute names are not allowed")
	}
	parts := make([]string, 0, strings.Count(name, "/")+1)
	for _, part := range strings.Split(name, "/") {
		switch part {
		case "", ".":
		case "..":
			return "", errors.New(`".." is not allowed`)
		default:
			parts = append(parts, part)
		}
	}
	rel := strings.Join(parts, "/")
	if err := CheckPathLength(rel); err != nil {
		return "", err
	}
	return rel, nil
}

// TarSymlinkTarget validates the target of a symbolic link entry at rel (a
// result of TarEntryPath): it must be relative and, read lexically from the
// link's directory, stay inside the extraction directory. Links that pass
// through other links are checked against the disk by the app, which this
// pure check cannot see.
func TarSymlinkTarget(rel, target string) error {
	switch {
	case target == "":
		return errors.New("link target is empty")
	case strings.IndexByte(target, 0) >= 0:
		return errors.New("link target contains a NUL byte")
	case strings.HasPrefix(target, "/"):
		return errors.New("link target is absolute")
	}
	if rel == "" {
		return errors.New("the extraction directory cannot be a link")
	}
	resolved := path.Join(path.Dir(rel), target)
	if resolved == ".." || strings.HasPrefix(resolved, "../") {
		return errors.New("link target leaves the destination")
	}
	return nil
}
