package domain

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"
)

// LLM provider credentials found on a host, as `sandbox-agent credentials`
// reports them and as GET /v1/agents' credentialsAvailable reads them. The
// rules (which sources, in which order, which fields) are those of the
// reference 0.4.2, observed by running it; the parsers here turn one
// source's bytes into a Credential and do no I/O (app/credentials reads the
// environment and the files, in order).

// The two providers that have a slot of their own; any other provider an
// OpenCode auth file names goes to Credentials.Other.
const (
	ProviderAnthropic = "anthropic"
	ProviderOpenAI    = "openai"
)

// Where a credential was found (Credential.Source).
const (
	SourceEnvironment = "environment"
	SourceClaudeCode  = "claude-code"
	SourceCodex       = "codex"
	SourceAmp         = "amp"
	SourceOpenCode    = "opencode"
)

// How a credential authenticates (Credential.AuthType).
const (
	AuthAPIKey = "api_key"
	AuthOAuth  = "oauth"
)

// Credential is one provider's credential and where it came from. Key is
// the secret itself: print it only through RedactKey, unless the user asked
// for it, and never log it.
type Credential struct {
	Provider string
	Source   string
	AuthType string
	Key      string
}

// Credentials are what discovery found: at most one credential each for
// Anthropic and OpenAI (the first source wins) and OpenCode's other
// providers by name.
type Credentials struct {
	Anthropic *Credential
	OpenAI    *Credential
	Other     map[string]Credential
}

// ForProvider is the credential of a provider: "anthropic", "openai" or
// one of Other.
func (c Credentials) ForProvider(p string) (Credential, bool) {
	var cred *Credential
	switch p {
	case ProviderAnthropic:
		cred = c.Anthropic
	case ProviderOpenAI:
		cred = c.OpenAI
	default:
		o, ok := c.Other[p]
		return o, ok
	}
	if cred == nil {
		return Credential{}, false
	}
	return *cred, true
}

// CredentialsAvailable reports whether an agent has what it needs among c,
// as the reference answers it in GET /v1/agents: any of the providers its
// recipe lists (claude and amp: Anthropic; codex: OpenAI; opencode: either;
// OpenCode's other providers do not count). Agents that handle their own
// auth (pi, cursor, the mock) and agents without a recipe always have it.
func CredentialsAvailable(agent string, c Credentials) bool {
	r, known := Recipes[agent]
	if !known || r.AlwaysCredentials || len(r.CredentialProviders) == 0 {
		return true
	}
	for _, p := range r.CredentialProviders {
		if _, ok := c.ForProvider(p); ok {
			return true
		}
	}
	return false
}

// The environment variables discovery reads, in order: the first one set
// wins for its provider. The OAuth ones only count when OAuth is wanted.
var (
	AnthropicKeyEnv   = []string{"ANTHROPIC_API_KEY", "CLAUDE_API_KEY"}
	AnthropicOAuthEnv = []string{"CLAUDE_CODE_OAUTH_TOKEN", "ANTHROPIC_AUTH_TOKEN"}
	OpenAIKeyEnv      = []string{"OPENAI_API_KEY", "CODEX_API_KEY"}
)

// The files discovery reads, relative to the home directory, in the order
// it reads them (each only while its provider is still missing, but
// OpenCode's, which may add other providers).
var (
	AmpConfigFile      = ".amp/config.json"
	ClaudeConfigFiles  = []string{".claude.json.api", ".claude.json", ".claude.json.nathan"}
	ClaudeOAuthFiles   = []string{".claude/.credentials.json", ".claude-oauth-credentials.json"}
	CodexAuthFile      = ".codex/auth.json"
	OpenCodeAuthFile   = ".local/share/opencode/auth.json"
	claudeConfigFields = []string{"primaryApiKey", "apiKey", "anthropicApiKey", "customApiKey"}
	ampFields          = [][]string{
		{"anthropicApiKey"}, {"anthropic_api_key"}, {"apiKey"}, {"api_key"},
		{"accessToken"}, {"access_token"}, {"token"},
		{"auth", "anthropicApiKey"}, {"auth", "apiKey"}, {"auth", "token"},
		{"anthropic", "apiKey"}, {"anthropic", "token"},
	}
)

// ClaudeConfigKey reads an Anthropic API key from one of Claude Code's
// config files (ClaudeConfigFiles): the first of its key fields holding a
// string that starts with "sk-ant-".
func ClaudeConfigKey(doc []byte) (Credential, bool) {
	d, ok := parseCredentialDoc(doc)
	if !ok {
		return Credential{}, false
	}
	for _, f := range claudeConfigFields {
		if k, ok := d.str(f); ok && strings.HasPrefix(k, "sk-ant-") {
			return Credential{ProviderAnthropic, SourceClaudeCode, AuthAPIKey, k}, true
		}
	}
	return Credential{}, false
}

// ClaudeOAuth reads Claude Code's OAuth token from one of ClaudeOAuthFiles:
// claudeAiOauth.accessToken, unless claudeAiOauth.expiresAt is an RFC 3339
// time before now. (A numeric expiresAt is not checked: the reference
// 0.4.2 does not either.)
func ClaudeOAuth(doc []byte, now time.Time) (Credential, bool) {
	d, ok := parseCredentialDoc(doc)
	if !ok {
		return Credential{}, false
	}
	tok, ok := d.str("claudeAiOauth", "accessToken")
	if !ok {
		return Credential{}, false
	}
	if exp, ok := d.str("claudeAiOauth", "expiresAt"); ok {
		if t, ok := ParseRFC3339(exp); ok && t.Before(now) {
			return Credential{}, false
		}
	}
	return Credential{ProviderAnthropic, SourceClaudeCode, AuthOAuth, tok}, true
}

// CodexAuth reads Codex's auth file: a non-empty OPENAI_API_KEY, else (with
// oauth) tokens.access_token.
func CodexAuth(doc []byte, oauth bool) (Credential, bool) {
	d, ok := parseCredentialDoc(doc)
	if !ok {
		return Credential{}, false
	}
	if k, ok := d.str("OPENAI_API_KEY"); ok && k != "" {
		return Credential{ProviderOpenAI, SourceCodex, AuthAPIKey, k}, true
	}
	if oauth {
		if tok, ok := d.str("tokens", "access_token"); ok {
			return Credential{ProviderOpenAI, SourceCodex, AuthOAuth, tok}, true
		}
	}
	return Credential{}, false
}

// AmpConfig reads an Anthropic key from Amp's config: the first non-empty
// string among its known fields.
func AmpConfig(doc []byte) (Credential, bool) {
	d, ok := parseCredentialDoc(doc)
	if !ok {
		return Credential{}, false
	}
	for _, path := range ampFields {
		if k, ok := d.str(path...); ok && k != "" {
			return Credential{ProviderAnthropic, SourceAmp, AuthAPIKey, k}, true
		}
	}
	return Credential{}, false
}

// OpenCodeAuth reads OpenCode's auth file: an object of providers, each
// {"type":"api","key":K} or {"type":"oauth","access":T,"expires":MS} (with
// oauth; skipped once expires, an integer of milliseconds since the epoch,
// is before now). Anthropic and OpenAI take their slots, the rest go to
// Other.
func OpenCodeAuth(doc []byte, oauth bool, now time.Time) Credentials {
	out := Credentials{Other: map[string]Credential{}}
	d, ok := parseCredentialDoc(doc)
	if !ok {
		return out
	}
	for name, raw := range d {
		p, ok := asObject(raw)
		if !ok {
			continue
		}
		typ, _ := p.str("type")
		var c Credential
		switch {
		case typ == "api":
			k, ok := p.str("key")
			if !ok {
				continue
			}
			c = Credential{name, SourceOpenCode, AuthAPIKey, k}
		case typ == "oauth" && oauth:
			if ms, ok := jsonInt64(p["expires"]); ok && ms < now.UnixMilli() {
				continue
			}
			tok, ok := p.str("access")
			if !ok {
				continue
			}
			c = Credential{name, SourceOpenCode, AuthOAuth, tok}
		default:
			continue
		}
		switch name {
		case ProviderAnthropic:
			out.Anthropic = &c
		case ProviderOpenAI:
			out.OpenAI = &c
		default:
			out.Other[name] = c
		}
	}
	return out
}

// credentialDoc is a JSON object, its values still undecoded, so a large
// config file (Claude Code keeps its history in .claude.json) is decoded
// only along the paths asked for.
type credentialDoc map[string]json.RawMessage

// parseCredentialDoc accepts what the reference's JSON parser accepts
// (StrictJSON: the grammar is checked by the decoding itself) and an
// object at the top.
func parseCredentialDoc(b []byte) (credentialDoc, bool) {
	if !serdeReadable(b) {
		return nil, false
	}
	return asObject(b)
}

func asObject(raw json.RawMessage) (credentialDoc, bool) {
	var d credentialDoc
	if len(raw) == 0 || firstByte(raw) != '{' || json.Unmarshal(raw, &d) != nil {
		return nil, false
	}
	return d, true
}

// str follows path through nested objects to a string; anything else on
// the way (a missing key, null, a number, an array) is no value.
func (d credentialDoc) str(path ...string) (string, bool) {
	cur := d
	for i, k := range path {
		raw, ok := cur[k]
		if !ok {
			return "", false
		}
		if i == len(path)-1 {
			var s string
			if firstByte(raw) != '"' || json.Unmarshal(raw, &s) != nil {
				return "", false
			}
			return s, true
		}
		if cur, ok = asObject(raw); !ok {
			return "", false
		}
	}
	return "", false
}

// jsonInt64 is a JSON number written as an integer that fits in 64 bits,
// as the reference's as_i64 sees it: no fraction or exponent, and not -0
// (which its parser reads as a float).
func jsonInt64(raw json.RawMessage) (int64, bool) {
	s := strings.TrimSpace(string(raw))
	if s == "" || s == "-0" || strings.ContainsAny(s, ".eE") || (s[0] != '-' && (s[0] < '0' || s[0] > '9')) {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil
}

func firstByte(b []byte) byte {
	for _, c := range b {
		switch c {
		case ' ', '\t', '\n', '\r':
			continue
		}
		return c
	}
	return 0
}

// CredentialAgents are the agents `credentials extract --agent` knows.
var CredentialAgents = []string{"claude", "codex", "opencode", "amp"}

// SelectCredential picks the credential `credentials extract` prints for
// --agent and --provider, as the reference does: claude and amp take
// Anthropic's, codex OpenAI's (a --provider naming another is an error);
// opencode takes the --provider named, else OpenAI's, else Anthropic's,
// else its only other provider's (several: an error listing them). With
// no agent, the --provider named.
func SelectCredential(c Credentials, agent, provider string) (Credential, error) {
	only := ""
	switch agent {
	case "":
		return credentialFor(c, provider)
	case "claude", "amp":
		only = ProviderAnthropic
	case "codex":
		only = ProviderOpenAI
	case "opencode":
		if provider != "" {
			return credentialFor(c, provider)
		}
		for _, p := range []*Credential{c.OpenAI, c.Anthropic} {
			if p != nil {
				return *p, nil
			}
		}
		names := make([]string, 0, len(c.Other))
		for n := range c.Other {
			names = append(names, n)
		}
		switch len(names) {
		case 0:
			return Credential{}, errors.New("no credentials found for opencode")
		case 1:
			return c.Other[names[0]], nil
		}
		sort.Strings(names)
		return Credential{}, fmt.Errorf("multiple providers available for opencode: %s (use --provider)", strings.Join(names, ", "))
	default:
		return Credential{}, fmt.Errorf("unknown agent %q (known: %s)", agent, strings.Join(CredentialAgents, ", "))
	}
	if provider != "" && provider != only {
		return Credential{}, fmt.Errorf("agent %s only supports provider %s", agent, only)
	}
	return credentialFor(c, only)
}

func credentialFor(c Credentials, provider string) (Credential, error) {
	if cred, ok := c.ForProvider(provider); ok {
		return cred, nil
	}
	return Credential{}, fmt.Errorf("no credentials found for provider %s", provider)
}
