package authz

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
)

// Tokens is the set of bearer tokens the built-in check accepts. It can
// be replaced while requests are checked (a token file reloaded on
// SIGHUP); an empty set means no token is configured.
type Tokens struct {
	cur atomic.Pointer[tokenSet]
}

// tokenSet is one generation of tokens: the hashes the check compares,
// and the tokens themselves, which InValue looks for in the environment
// of what the daemon starts.
type tokenSet struct {
	hashes [][sha256.Size]byte
	plain  []string
}

// NewTokens returns a set holding the non-empty tokens given.
func NewTokens(tokens ...string) *Tokens {
	t := &Tokens{}
	t.Set(tokens)
	return t
}

// Set replaces the accepted tokens.
func (t *Tokens) Set(tokens []string) {
	set := &tokenSet{}
	for _, tok := range tokens {
		if tok != "" {
			set.hashes = append(set.hashes, sha256.Sum256([]byte(tok)))
			set.plain = append(set.plain, tok)
		}
	}
	t.cur.Store(set)
}

// Configured reports whether any token is set.
func (t *Tokens) Configured() bool {
	if t == nil {
		return false
	}
	set := t.cur.Load()
	return set != nil && len(set.hashes) > 0
}

// InValue reports whether v holds one of the current tokens anywhere in
// it ("Bearer <token>", a URL with the token in its query, the token
// itself). The process starters drop every environment variable for
// which it is true, at each start, so a token file reloaded since is
// taken into account. Not constant-time: it guards what the daemon hands
// out, not a request.
func (t *Tokens) InValue(v string) bool {
	if t == nil {
		return false
	}
	set := t.cur.Load()
	if set == nil {
		return false
	}
	for _, tok := range set.plain {
		if strings.Contains(v, tok) {
			return true
		}
	}
	return false
}

// Check reports whether an Authorization header value presents one of
// the tokens in the bearer scheme (domain.BearerToken: "Bearer <token>",
// the scheme in any case, one or more spaces before the token). Both
// sides are hashed first and every token is compared, so the time taken
// depends neither on the presented token's length nor on which token (if
// any) it matches: only on the presented value itself, which the caller
// knows.
func (t *Tokens) Check(authorization string) bool {
	if t == nil {
		return false
	}
	set := t.cur.Load()
	if set == nil {
		return false
	}
	tok, bearer := domain.BearerToken(authorization)
	if !bearer {
		return false
	}
	got := sha256.Sum256([]byte(tok))
	ok := 0
	for i := range set.hashes {
		ok |= subtle.ConstantTimeCompare(got[:], set.hashes[i][:])
	}
	return ok == 1
}

// CheckToken refuses a token with a control character or a space: no
// client could send it in a header (Go refuses control characters, and
// spaces around it are trimmed), so a daemon holding it could never be
// reached and a client sending it fails as if the daemon were down.
func CheckToken(tok string) error {
	if strings.ContainsFunc(tok, func(r rune) bool { return r < 0x21 || r == 0x7f }) {
		return errors.New("a token may not contain spaces or control characters")
	}
	return nil
}

// ParseTokenFile reads a token file: one token per line; surrounding
// spaces and tabs (and a CR) are trimmed, and empty lines and lines
// starting with '#' are skipped. A file with no token is an error, as is
// a token with a control character or an inner space (it could never be
// sent in a header).
func ParseTokenFile(b []byte) ([]string, error) {
	var out []string
	for i, line := range strings.Split(string(b), "\n") {
		line = strings.Trim(line, " \t\r")
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if err := CheckToken(line); err != nil {
			return nil, errors.New("line " + strconv.Itoa(i+1) + ": " + err.Error())
		}
		out = append(out, line)
	}
	if len(out) == 0 {
		return nil, errors.New("no token in the file (one token per line; '#' starts a comment)")
	}
	return out, nil
}
