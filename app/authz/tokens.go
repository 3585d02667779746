package authz

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"strconv"
	"strings"
	"sync/atomic"
)

// Tokens is the set of bearer tokens the built-in check accepts. It can
// be replaced while requests are checked (a token file reloaded on
// SIGHUP); an empty set means no token is configured.
type Tokens struct {
	hashes atomic.Pointer[[][sha256.Size]byte]
}

// NewTokens returns a set holding the non-empty tokens given.
func NewTokens(tokens ...string) *Tokens {
	t := &Tokens{}
	t.Set(tokens)
	return t
}

// Set replaces the accepted tokens.
func (t *Tokens) Set(tokens []string) {
	hs := make([][sha256.Size]byte, 0, len(tokens))
	for _, tok := range tokens {
		if tok != "" {
			hs = append(hs, sha256.Sum256([]byte("Bearer "+tok)))
		}
	}
	t.hashes.Store(&hs)
}

// Configured reports whether any token is set.
func (t *Tokens) Configured() bool {
	if t == nil {
		return false
	}
	hs := t.hashes.Load()
	return hs != nil && len(*hs) > 0
}

// Check reports whether an Authorization header value is "Bearer <token>"
// for one of the tokens. Both sides are hashed first and every token is
// compared, so the time taken depends neither on the presented value's
// length nor on which token (if any) it matches.
func (t *Tokens) Check(authorization string) bool {
	if t == nil {
		return false
	}
	hs := t.hashes.Load()
	if hs == nil {
		return false
	}
	got := sha256.Sum256([]byte(authorization))
	ok := 0
	for i := range *hs {
		ok |= subtle.ConstantTimeCompare(got[:], (*hs)[i][:])
	}
	return ok == 1
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
		if strings.ContainsFunc(line, func(r rune) bool { return r < 0x21 || r == 0x7f }) {
			return nil, errors.New("line " + strconv.Itoa(i+1) + ": a token may not contain spaces or control characters")
		}
		out = append(out, line)
	}
	if len(out) == 0 {
		return nil, errors.New("no token in the file (one token per line; '#' starts a comment)")
	}
	return out, nil
}
