package credentials

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/spf13/afero"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
	"github.com/sandbox-agent-go/sandbox-agent/ports"
)

// DefaultMaxFileBytes is the largest credentials file read. Claude Code
// keeps its history in ~/.claude.json, so it can grow to megabytes; one
// past this is skipped (a Problem says so) rather than read into memory.
const DefaultMaxFileBytes = 64 << 20

// Discovery finds credentials: Home is the home directory the files are
// looked for under, LookupEnv reads the environment (os.LookupEnv: a
// variable set to the empty string is set). A zero Now is time.Now; a zero
// MaxFileBytes is DefaultMaxFileBytes. Safe for concurrent use.
//
// It remembers what the config files whose parse depends on nothing else
// (Claude Code's and Amp's) held, by path, size and modification time:
// GET /v1/agents discovers on every listing, and a Claude Code config of
// a megabyte with no key in it cost 12 ms to read and parse each time. A
// file rewritten in place to the same size within the same nanosecond
// would be missed until it changes again.
type Discovery struct {
	Fs           afero.Fs
	Home         string
	LookupEnv    func(string) (string, bool)
	Now          func() time.Time
	MaxFileBytes int64

	mu     sync.Mutex
	parsed map[string]parsedFile // by path
}

// parsedFile is what one config file held when it had this size and
// modification time.
type parsedFile struct {
	size    int64
	modTime time.Time
	cred    domain.Credential
	ok      bool
}

// Options choose what one discovery counts.
type Options struct {
	// OAuth includes OAuth tokens (CLAUDE_CODE_OAUTH_TOKEN and
	// ANTHROPIC_AUTH_TOKEN, Claude Code's and Codex's tokens, OpenCode's
	// oauth entries); `--no-oauth` leaves them out.
	OAuth bool
	// Usable skips empty (or blank) keys, so the next source gets its
	// turn: an ANTHROPIC_API_KEY set to "" is no credential to
	// credentialsAvailable. The reference's extract reports such a key;
	// the CLI keeps its answers.
	Usable bool
}

// Problem is a file discovery found but could not read (permissions, not
// a regular file, too large): it was skipped. Err names the file and says
// why; it never holds the file's contents.
type Problem struct {
	Path string
	Err  error
}

// Result is what one discovery found, and the files it skipped.
type Result struct {
	Credentials domain.Credentials
	Problems    []Problem
}

// Discover looks in the reference's order, the first credential found
// for a provider winning: ANTHROPIC_API_KEY, CLAUDE_API_KEY, (with OAuth)
// CLAUDE_CODE_OAUTH_TOKEN, ANTHROPIC_AUTH_TOKEN; OPENAI_API_KEY,
// CODEX_API_KEY; then Amp's config, Claude Code's config files and (with
// OAuth) its credential files, Codex's auth file, OpenCode's auth file
// (which also brings the other providers). A file is read only while its
// provider is still missing (OpenCode's always); a missing or malformed
// file is skipped silently, an unreadable one is a Problem.
func (d *Discovery) Discover(o Options) Result {
	r := &run{d: d, o: o, now: time.Now()}
	if d.Now != nil {
		r.now = d.Now()
	}
	var c domain.Credentials
	c.Anthropic = r.env(domain.ProviderAnthropic, domain.AnthropicKeyEnv, domain.AuthAPIKey)
	if c.Anthropic == nil && o.OAuth {
		c.Anthropic = r.env(domain.ProviderAnthropic, domain.AnthropicOAuthEnv, domain.AuthOAuth)
	}
	c.OpenAI = r.env(domain.ProviderOpenAI, domain.OpenAIKeyEnv, domain.AuthAPIKey)

	if c.Anthropic == nil {
		c.Anthropic = r.cachedFile(domain.AmpConfigFile, func(b []byte) (domain.Credential, bool) { return domain.AmpConfig(b) })
	}
	for _, f := range domain.ClaudeConfigFiles {
		if c.Anthropic == nil {
			c.Anthropic = r.cachedFile(f, domain.ClaudeConfigKey)
		}
	}
	if o.OAuth {
		for _, f := range domain.ClaudeOAuthFiles {
			if c.Anthropic == nil {
				c.Anthropic = r.file(f, func(b []byte) (domain.Credential, bool) { return domain.ClaudeOAuth(b, r.now) })
			}
		}
	}
	if c.OpenAI == nil {
		c.OpenAI = r.file(domain.CodexAuthFile, func(b []byte) (domain.Credential, bool) { return domain.CodexAuth(b, o.OAuth) })
	}
	oc := domain.Credentials{}
	if b, ok := r.read(domain.OpenCodeAuthFile); ok {
		oc = domain.OpenCodeAuth(b, o.OAuth, r.now)
	}
	if c.Anthropic == nil && oc.Anthropic != nil && r.usable(*oc.Anthropic) {
		c.Anthropic = oc.Anthropic
	}
	if c.OpenAI == nil && oc.OpenAI != nil && r.usable(*oc.OpenAI) {
		c.OpenAI = oc.OpenAI
	}
	c.Other = map[string]domain.Credential{}
	for name, cred := range oc.Other {
		if r.usable(cred) {
			c.Other[name] = cred
		}
	}
	return Result{Credentials: c, Problems: r.problems}
}

// run is one Discover call's state.
type run struct {
	d        *Discovery
	o        Options
	now      time.Time
	problems []Problem
}

func (r *run) usable(c domain.Credential) bool {
	return !r.o.Usable || strings.TrimSpace(c.Key) != ""
}

// env is the first of names set (to valid UTF-8: the reference cannot read
// anything else and skips it) as a credential of provider.
func (r *run) env(provider string, names []string, auth string) *domain.Credential {
	if r.d.LookupEnv == nil {
		return nil
	}
	for _, n := range names {
		v, ok := r.d.LookupEnv(n)
		if !ok || !utf8.ValidString(v) {
			continue
		}
		c := domain.Credential{Provider: provider, Source: domain.SourceEnvironment, AuthType: auth, Key: v}
		if r.usable(c) {
			return &c
		}
	}
	return nil
}

// file reads one file and parses it; nil when it is missing, unreadable,
// malformed, holds no credential or (Usable) an empty one.
func (r *run) file(rel string, parse func([]byte) (domain.Credential, bool)) *domain.Credential {
	b, ok := r.read(rel)
	if !ok {
		return nil
	}
	c, ok := parse(b)
	if !ok || !r.usable(c) {
		return nil
	}
	return &c
}

// cachedFile is file for a parse that depends on the bytes alone: while
// the file keeps its size and modification time, the last parse stands.
func (r *run) cachedFile(rel string, parse func([]byte) (domain.Credential, bool)) *domain.Credential {
	path := filepath.Join(r.d.Home, filepath.FromSlash(rel))
	f, ok := r.open(path)
	if !ok {
		return nil
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		r.problems = append(r.problems, Problem{Path: path, Err: err})
		return nil
	}
	r.d.mu.Lock()
	p, hit := r.d.parsed[path]
	r.d.mu.Unlock()
	if !hit || p.size != fi.Size() || !p.modTime.Equal(fi.ModTime()) {
		b, ok := r.readOpen(path, f)
		if !ok {
			return nil
		}
		p = parsedFile{size: fi.Size(), modTime: fi.ModTime()}
		p.cred, p.ok = parse(b)
		r.d.mu.Lock()
		if r.d.parsed == nil {
			r.d.parsed = map[string]parsedFile{}
		}
		r.d.parsed[path] = p
		r.d.mu.Unlock()
	}
	if !p.ok || !r.usable(p.cred) {
		return nil
	}
	c := p.cred
	return &c
}

// read returns a file's bytes. A file that does not exist (or whose parent
// is not a directory) is skipped silently; any other failure is recorded
// as a Problem.
func (r *run) read(rel string) ([]byte, bool) {
	path := filepath.Join(r.d.Home, filepath.FromSlash(rel))
	f, ok := r.open(path)
	if !ok {
		return nil, false
	}
	defer f.Close()
	return r.readOpen(path, f)
}

// open opens a regular file; see read for what a failure becomes.
func (r *run) open(path string) (afero.File, bool) {
	f, err := openRegular(r.d.Fs, path)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) && !r.underFile(path) {
			r.problems = append(r.problems, Problem{Path: path, Err: err})
		}
		return nil, false
	}
	return f, true
}

// readOpen reads an open file whole, up to MaxFileBytes.
func (r *run) readOpen(path string, f afero.File) ([]byte, bool) {
	limit := r.d.MaxFileBytes
	if limit <= 0 {
		limit = DefaultMaxFileBytes
	}
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		r.problems = append(r.problems, Problem{Path: path, Err: err})
		return nil, false
	}
	if int64(len(b)) > limit {
		r.problems = append(r.problems, Problem{Path: path, Err: fmt.Errorf("%s is larger than %d bytes", path, limit)})
		return nil, false
	}
	return b, true
}

// underFile reports whether a directory on path's way below the home
// directory is a file (~/.claude a file, so ~/.claude/.credentials.json
// cannot exist): the file is missing, not unreadable.
func (r *run) underFile(path string) bool {
	for dir := filepath.Dir(path); len(dir) > len(r.d.Home) && dir != filepath.Dir(dir); dir = filepath.Dir(dir) {
		if fi, err := r.d.Fs.Stat(dir); err == nil && !fi.IsDir() {
			return true
		}
	}
	return false
}

// openRegular opens a regular file without blocking on a FIFO or device
// (ports.RegularOpener when the backend has it; otherwise a stat first:
// only the memory backend lacks it, and it has no FIFOs).
func openRegular(fsys afero.Fs, name string) (afero.File, error) {
	if o, ok := fsys.(ports.RegularOpener); ok {
		return o.OpenRegular(name)
	}
	fi, err := fsys.Stat(name)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, &fs.PathError{Op: "open", Path: name, Err: domain.ErrNotRegular}
	}
	return fsys.Open(name)
}
