package files

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"path"
	"strings"
	"sync"

	"github.com/spf13/afero"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
)

// ConfigStore keeps MCP server and skills entries per directory
// (api.md section 7), in <directory>/.sandbox-agent/config/mcp.json and
// skills.json: JSON objects of name → entry, keys sorted, two-space indent.
// It only stores; nothing is injected into agents.
//
// Fs is the daemon's filesystem (the same backend as /v1/fs, so --fs-root
// confines config too and --fs memory keeps it in memory); Base is where a
// relative directory resolves (the daemon's working directory, or the
// --fs-root). Writes replace the file atomically (temporary file + rename);
// read-modify-write cycles are serialised, so concurrent PUTs do not lose
// entries.
type ConfigStore struct {
	Fs   afero.Fs
	Base string

	mu sync.Mutex
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
	root := dir
	if !path.IsAbs(root) {
		root = path.Join(s.Base, root)
	}
	return path.Join(path.Clean(root), ".sandbox-agent", "config", file), nil
}

func getEntry[T json.Marshaler](s *ConfigStore, dir, name string, cf configFile[T]) (T, error) {
	var zero T
	p, err := s.path(dir, name, cf.query, cf.file)
	if err != nil {
		return zero, err
	}
	s.mu.Lock()
	entries, err := readConfig(s.Fs, p, cf)
	s.mu.Unlock()
	if err != nil {
		return zero, err
	}
	v, ok := entries[name]
	if !ok {
		id := cf.kind + ":" + name
		return zero, &domain.Error{Kind: domain.KindSessionNotFound, Msg: id, SessionID: id}
	}
	return v, nil
}

// setEntry upserts (v non-nil) or deletes (v nil) one entry. Deleting from
// a file that does not hold the entry writes nothing.
func setEntry[T json.Marshaler](s *ConfigStore, dir, name string, v *T, cf configFile[T]) error {
	p, err := s.path(dir, name, cf.query, cf.file)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	entries, err := readConfig(s.Fs, p, cf)
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
	return writeConfig(s.Fs, p, domain.EncodeConfigFile(entries))
}

func readConfig[T json.Marshaler](fsys afero.Fs, p string, cf configFile[T]) (map[string]T, error) {
	b, err := afero.ReadFile(fsys, p)
	if errors.Is(err, fs.ErrNotExist) {
		return map[string]T{}, nil
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

// writeConfig replaces the file at p with b through a temporary file in the
// same directory.
func writeConfig(fsys afero.Fs, p string, b []byte) error {
	dir := path.Dir(p)
	if err := fsys.MkdirAll(dir, 0o755); err != nil {
		return fsError(dir, err)
	}
	tmp, err := afero.TempFile(fsys, dir, ".config-*.tmp")
	if err != nil {
		return fsError(dir, err)
	}
	_, werr := tmp.Write(b)
	cerr := tmp.Close()
	if err := errors.Join(werr, cerr); err != nil {
		_ = fsys.Remove(tmp.Name())
		return fsError(p, err)
	}
	if err := fsys.Chmod(tmp.Name(), 0o644); err != nil {
		_ = fsys.Remove(tmp.Name())
		return fsError(p, err)
	}
	if err := fsys.Rename(tmp.Name(), p); err != nil {
		_ = fsys.Remove(tmp.Name())
		return fsError(p, err)
	}
	return nil
}
