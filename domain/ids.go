package domain

import (
	"strings"
	"unicode/utf8"
)

// MaxServerIDLen bounds a client-chosen ACP server id.
const MaxServerIDLen = 512

// ValidServerID reports whether id can name an ACP server instance: any
// non-empty path segment (no slash, no NUL) of valid UTF-8 up to
// MaxServerIDLen bytes. UTF-8 because ids are listed in JSON: an id with
// invalid bytes would be listed as U+FFFD and could never be named again.
func ValidServerID(id string) bool {
	return id != "" && len(id) <= MaxServerIDLen && !strings.ContainsAny(id, "/\x00") && utf8.ValidString(id)
}

// KnownAgents are the agent ids of the reference server, in the order it
// lists them.
var KnownAgents = []string{"claude", "codex", "opencode", "amp", "pi", "cursor", "mock"}

// MockAgent is the built-in agent that needs no install step.
const MockAgent = "mock"

// IsKnownAgent reports whether id is one of KnownAgents.
func IsKnownAgent(id string) bool {
	for _, k := range KnownAgents {
		if k == id {
			return true
		}
	}
	return false
}

// ValidAgentID reports whether id is safe to use as an agent name: it becomes
// part of file names (the launcher "<id>-acp"), so only [A-Za-z0-9._-] are
// allowed, it may not start with a dot, and it is at most 128 bytes.
func ValidAgentID(id string) bool {
	if id == "" || len(id) > 128 || id[0] == '.' {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '.', c == '_', c == '-':
		default:
			return false
		}
	}
	return true
}
