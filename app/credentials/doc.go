// Package credentials is the credential discovery use case: which LLM
// provider credentials this host has, found as the reference 0.4.2 finds
// them (the environment first, then the config files of Amp, Claude Code,
// Codex and OpenCode under a home directory, OAuth tokens unless left
// out). `sandbox-agent credentials extract|extract-env` print what it
// finds; GET /v1/agents' credentialsAvailable reads the same discovery
// (through a function the composition root wires into agents.Catalog).
//
// It reads the environment through a lookup function and files through
// afero.Fs; what each source's bytes mean is domain's (domain.ClaudeOAuth,
// ...). It never logs and never puts a key into an error: a file it could
// not read comes back as a Problem naming the file.
package credentials
