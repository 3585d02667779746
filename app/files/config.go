package files

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"path"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/spf13/afero"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
	"github.com/sandbox-agent-go/sandbox-agent/ports"
)

// ConfigStore keeps MCP server and skills entries per directory
// (docs/api.md section 7), in <directory>/.sandbox-agent/config/mcp.json and
// skills.json: JSON objects of name → entry, keys sorted, two-space indent.
// It only stores; nothing is injected into agents.
//
// Fs is the daemon's filesystem (the same backend as /v1/fs, so --fs-root
// confines config too and --fs memory keeps it in memory); Base is where a
// relative directory resolves (the daemon's working directory, or the
// --fs-root). Writes replace the file atomically (temporary file + rename);
// read-modify-write cycles are serialised per directory (as links resolve
// it, so two spellings of one directory share a lock), so concurrent PUTs
// do not lose entries, and a directory whose disk is slow (or whose config
// "file" is a FIFO an agent made) never holds up another directory. Config
// files are opened without blocking and must be regular files, in a
// directory (400 otherwise).
type ConfigStore struct {
	Fs   afero.Fs
	Base string
	// Secrets, when set, refuses (403) a directory or config file that is,
	// or leads to, one of the daemon's own secrets, as Files does.
	Secrets ports.Secrets

	mu    sync.Mutex
	locks map[string]*dirLock // by config directory; entries live while in use
}

// dirLock serialises one directory's read-modify-write cycles; users
// counts holders and waiters, so the map entry goes when nobody needs it.
type dirLock struct {
	mu    sync.Mutex
	users int
}

// lock takes the lock of the config directory holding p and returns its
// release.
func (s *ConfigStore) lock(p string) func() {
	dir := s.realDir(path.Dir(p))
	s.mu.Lock()
	if s.locks == nil {
		s.locks = map[string]*dirLock{}
	}
	l := s.locks[dir]
	if l == nil {
		l = &dirLock{}
		s.locks[dir] = l
	}
	l.users++
	s.mu.Unlock()
	l.mu.Lock()
	return func() {
		l.mu.Unlock()
		s.mu.Lock()
		if l.users--; l.users == 0 {
			delete(s.locks, dir)
		}
		s.mu.Unlock()
	}
}

// realDir is dir with its symbolic links resolved element by element, so
// that every spelling of one directory (through a link to it, or to one of
// its parents) takes the same lock; without, two spellings raced and lost
// entries. Elements that do not exist yet are kept as named, and a backend
// without links answers dir. It only names a lock: whether dir may be
// reached is for Fs (--fs-root) and the secrets check to say.
func (s *ConfigStore) realDir(dir string) string {
	ls, ok := s.Fs.(afero.Symlinker)
	if !ok {
		return dir
	}
	todo := strings.Split(dir, "/")
	real := "/"
	for hops := 0; len(todo) > 0; {
		next := path.Join(real, todo[0])
		todo = todo[1:]
		fi, _, err := ls.LstatIfPossible(next)
		if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
			real = next
			continue
		}
		dest, err := ls.ReadlinkIfPossible(next)
		if hops++; err != nil || hops > maxLinkHops {
			return dir
		}
		if path.IsAbs(dest) {
			real = "/"
		}
		// A relative target is taken from real, the link's directory
		// with no link left in it, so its ".." are plain parents.
		todo = append(strings.Split(dest, "/"), todo...)
	}
	return real
}

// MCP returns one MCP server entry, or session_not_found "mcp:<name>".
func (s *ConfigStore) MCP(ctx context.Context, dir, name string) (domain.MCPServerConfig, error) {
	return getEntry(s, dir, name, mcpFile)
}

// SetMCP inserts or replaces one MCP server entry.
func (s *ConfigStore) SetMCP(ctx context.Context, dir, name string, c domain.MCPServerConfig) error {
	return setEntry(s, dir, name, &c, mcpFile)
}

// DeleteMCP removes one MCP server entry; a missing one is not an error.
func (s *ConfigStore) DeleteMCP(ctx context.Context, dir, name string) error {
	return setEntry(s, dir, name, nil, mcpFile)
}

// CheckMCP validates an MCP query (directory and name present and not
// blank) without touching the disk, so it can be checked before a body.
func (s *ConfigStore) CheckMCP(dir, name string) error {
	_, err := s.path(dir, name, mcpFile.query, mcpFile.file)
	return err
}

// CheckSkills validates a skills query like CheckMCP.
func (s *ConfigStore) CheckSkills(dir, name string) error {
	_, err := s.path(dir, name, skillsFile.query, skillsFile.file)
	return err
}

// Skills returns one skills entry, or session_not_found "skills:<name>".
func (s *ConfigStore) Skills(ctx context.Context, dir, name string) (domain.SkillsConfig, error) {
	return getEntry(s, dir, name, skillsFile)
}

// SetSkills inserts or replaces one skills entry.
func (s *ConfigStore) SetSkills(ctx context.Context, dir, name string, c domain.SkillsConfig) error {
	return setEntry(s, dir, name, &c, skillsFile)
}

// DeleteSkills removes one skills entry; a missing one is not an error.
func (s *ConfigStore) DeleteSkills(ctx context.Context, dir, name string) error {
	return setEntry(s, dir, name, nil, skillsFile)
}

// configFile describes one kind of per-directory config file.
type configFile[T json.Marshaler] struct {
	file  string // file name under .sandbox-agent/config
	kind  string // "mcp" or "skills": the prefix of not-found ids
	query string // the name's query parameter, for messages
	parse func([]byte) (T, error)
}

var (
	mcpFile    = configFile[domain.MCPServerConfig]{"mcp.json", "mcp", "mcpName", domain.ParseMCPServerConfig}
	skillsFile = configFile[domain.SkillsConfig]{"skills.json", "skills", "skillName", domain.ParseSkillsConfig}
)

// path validates the query and returns the config file's path.
func (s *ConfigStore) path(dir, name, nameParam, file string) (string, error) {
	if strings.TrimSpace(dir) == "" {
		return "", domain.InvalidRequest("missing required 'directory' query parameter")
	}
	if strings.TrimSpace(name) == "" {
		return "", domain.InvalidRequest("missing required '%s' query parameter", nameParam)
	}
	if strings.IndexByte(dir, 0) >= 0 {
		return "", domain.InvalidRequest("directory contains a NUL byte")
	}
	// Names are keys of a JSON object: one that is not UTF-8 would be
	// stored under its encoding ("\ufffd" for each bad byte), where its
	// own name never finds it, and two of them under one key twice, which
	// no route could read (or delete) again.
	if !utf8.ValidString(name) {
		return "", domain.InvalidRequest("%s is not valid UTF-8", nameParam)
	}
	root := dir
	if !path.IsAbs(root) {
		root = path.Join(s.Base, root)
	}
	p := path.Join(path.Clean(root), ".sandbox-agent", "config", file)
	if err := domain.CheckPathLength(p); err != nil {
		return "", domain.InvalidRequest("%v: %s", err, clip(p, 256))
	}
	return p, nil
}

func getEntry[T json.Marshaler](s *ConfigStore, dir, name string, cf configFile[T]) (T, error) {
	var zero T
	p, err := s.path(dir, name, cf.query, cf.file)
	if err == nil {
		err = s.check(p)
	}
	if err != nil {
		return zero, err
	}
	unlock := s.lock(p)
	entries, err := readConfig(s.Fs, s.Secrets, p, cf)
	unlock()
	if err != nil {
		return zero, err
	}
	v, ok := entries[name]
	if !ok {
		id := cf.kind + ":" + name
		return zero, domain.SessionNotFound(id)
	}
	return v, nil
}

// setEntry upserts (v non-nil) or deletes (v nil) one entry. Deleting from
// a file that does not hold the entry writes nothing.
func setEntry[T json.Marshaler](s *ConfigStore, dir, name string, v *T, cf configFile[T]) error {
	p, err := s.path(dir, name, cf.query, cf.file)
	if err == nil {
		err = s.check(p)
	}
	if err != nil {
		return err
	}
	defer s.lock(p)()
	entries, err := readConfig(s.Fs, s.Secrets, p, cf)
	if err != nil {
		return err
	}
	if v == nil {
		if _, ok := entries[name]; !ok {
			return nil
		}
		delete(entries, name)
	} else {
		entries[name] = *v
	}
	b := domain.EncodeConfigFile(entries)
	if int64(len(b)) > maxConfigBytes {
		// Written, it could never be read again: every route of the
		// directory, a DELETE that would shrink it included, would 400.
		return domain.TooLarge(maxConfigBytes, "the config file would be larger than %d bytes: %s", int64(maxConfigBytes), p)
	}
	return writeConfig(s.Fs, p, b)
}

// check refuses a config file whose directory (the one the client named,
// or one of the .sandbox-agent/config directories under it) is something
// else than a directory, or which is, or lies in, one of the daemon's
// secrets.
func (s *ConfigStore) check(p string) error {
	dir := path.Dir(path.Dir(path.Dir(p))) // the directory the client named
	if err := guardPath(s.Secrets, dir, dir, true); err != nil {
		return err
	}
	if err := guardPath(s.Secrets, p, p, true); err != nil {
		return err
	}
	// The first element of the config directory that exists must be a
	// directory: a FIFO, file or device there is the client's mistake.
	for d := path.Dir(p); ; d = path.Dir(d) {
		fi, err := s.Fs.Stat(d)
		if err == nil {
			if !fi.IsDir() {
				return domain.InvalidRequest("%s is not a directory", d)
			}
			return nil
		}
		if d == path.Dir(d) {
			return nil
		}
	}
}

func readConfig[T json.Marshaler](fsys afero.Fs, secrets ports.Secrets, p string, cf configFile[T]) (map[string]T, error) {
	b, err := readRegular(fsys, secrets, p, maxConfigBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return map[string]T{}, nil
	}
	if errors.Is(err, domain.ErrNotRegular) {
		return nil, domain.InvalidRequest("config file is not a regular file: %s", p)
	}
	if err != nil {
		return nil, fsError(p, err)
	}
	entries, err := domain.ParseConfigFile(b, cf.parse)
	if err != nil {
		return nil, domain.InvalidRequest("invalid config file %s: %v", p, err)
	}
	return entries, nil
}

// FileSize is the size of dir's config file named file ("mcp.json",
// "skills.json") now, at most maxConfigBytes; 0 when there is none or it
// cannot be told. Reading one costs several times its size (the HTTP
// adapter charges that to the in-flight budget before the read).
func (s *ConfigStore) FileSize(dir, file string) int64 {
	p, err := s.path(dir, "-", "", file)
	if err != nil {
		return 0
	}
	fi, err := s.Fs.Stat(p)
	if err != nil || !fi.Mode().IsRegular() {
		return 0
	}
	return min(fi.Size(), maxConfigBytes)
}

// maxConfigBytes bounds a config file read into memory, and one written
// (past it, a PUT is 413).
const maxConfigBytes = 16 << 20

// readRegular reads a regular file of at most max bytes, opened without
// blocking (a FIFO or device is refused at once, never waited on), and
// refuses it when it is one of the daemon's secrets.
func readRegular(fsys afero.Fs, secrets ports.Secrets, p string, max int64) ([]byte, error) {
	f, err := openRegular(fsys, p)
	if err != nil {
		return nil, err
	}
	if err := guardFile(secrets, p, f); err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, domain.InvalidRequest("config file is larger than %d bytes: %s", max, p)
	}
	return b, nil
}

// writeConfig replaces the file at p with b through a temporary file in the
// same directory.
func writeConfig(fsys afero.Fs, p string, b []byte) error {
	dir := path.Dir(p)
	if err := fsys.MkdirAll(dir, 0o755); err != nil {
		return fsError(dir, err)
	}
	err := ports.WriteAtomic(fsys, p, ".config-*.tmp", 0o644, func(w io.Writer) error {
		_, err := w.Write(b)
		return err
	}, nil)
	if err != nil {
		return fsError(p, err)
	}
	return nil
}
