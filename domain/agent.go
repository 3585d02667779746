package domain

import (
	"encoding/json"
	"strings"
)

// Capabilities are the feature flags the reference reports per agent. The
// field order is the reference's key order, which clients may rely on.
type Capabilities struct {
	PlanMode         bool `json:"planMode"`
	Permissions      bool `json:"permissions"`
	Questions        bool `json:"questions"`
	ToolCalls        bool `json:"toolCalls"`
	ToolResults      bool `json:"toolResults"`
	TextMessages     bool `json:"textMessages"`
	Images           bool `json:"images"`
	FileAttachments  bool `json:"fileAttachments"`
	SessionLifecycle bool `json:"sessionLifecycle"`
	ErrorEvents      bool `json:"errorEvents"`
	Reasoning        bool `json:"reasoning"`
	Status           bool `json:"status"`
	CommandExecution bool `json:"commandExecution"`
	FileChanges      bool `json:"fileChanges"`
	MCPTools         bool `json:"mcpTools"`
	StreamingDeltas  bool `json:"streamingDeltas"`
	ItemStarted      bool `json:"itemStarted"`
	SharedProcess    bool `json:"sharedProcess"`
}

// ServerStatus is present in AgentInfo only while an instance of the agent
// runs.
type ServerStatus struct {
	Status   string `json:"status"`
	UptimeMs int64  `json:"uptimeMs"`
}

// AgentInfo is one entry of GET /v1/agents, in the reference's key order.
// Version, Path and ConfigOptions are filled only when the client asks for
// the configuration (?config=true); absent values are omitted.
type AgentInfo struct {
	ID                   string          `json:"id"`
	Installed            bool            `json:"installed"`
	CredentialsAvailable bool            `json:"credentialsAvailable"`
	Version              string          `json:"version,omitempty"`
	Path                 string          `json:"path,omitempty"`
	Capabilities         Capabilities    `json:"capabilities"`
	ServerStatus         *ServerStatus   `json:"serverStatus,omitempty"`
	ConfigOptions        json.RawMessage `json:"configOptions,omitempty"`
	// ConfigError says what is wrong with the agent's setup on this host,
	// e.g. a launcher whose program no longer exists (the reference's
	// field, unused by it for that).
	ConfigError string `json:"configError,omitempty"`
}

// InstallSource says where an installed artifact came from.
type InstallSource string

// The install sources of the reference's install response.
const (
	SourceRegistry  InstallSource = "registry"   // the ACP registry
	SourceFallback  InstallSource = "fallback"   // a pinned package of ours
	SourceLocalPath InstallSource = "local_path" // found on the host (PATH, an existing file)
	SourceBuiltin   InstallSource = "builtin"    // part of the daemon
)

// ArtifactKind distinguishes the agent itself from its ACP adapter.
type ArtifactKind string

// The artifact kinds of the reference's install response.
const (
	ArtifactNativeAgent  ArtifactKind = "native_agent"
	ArtifactAgentProcess ArtifactKind = "agent_process"
)

// Artifact is one thing an install put on disk.
type Artifact struct {
	Kind    ArtifactKind  `json:"kind"`
	Path    string        `json:"path"`
	Source  InstallSource `json:"source"`
	Version string        `json:"version,omitempty"`
}

// InstallResult answers POST /v1/agents/{agent}/install. The snake_case
// already_installed is the reference's spelling.
type InstallResult struct {
	AlreadyInstalled bool       `json:"already_installed"`
	Artifacts        []Artifact `json:"artifacts"`
}

// InstallOptions is the body of POST /v1/agents/{agent}/install.
type InstallOptions struct {
	// Reinstall installs again even when the agent is present.
	Reinstall bool `json:"reinstall,omitempty"`
	// AgentVersion pins the native agent binary (and asks for it to be
	// installed where the adapter does not need it).
	AgentVersion string `json:"agentVersion,omitempty"`
	// AgentProcessVersion pins the ACP adapter package.
	AgentProcessVersion string `json:"agentProcessVersion,omitempty"`
}

// Validate refuses versions that are not plain versions: AgentVersion
// goes into the native download URL's path, AgentProcessVersion into an
// npm spec ("name@VERSION"), where "npm:other", "file:…", "github:u/r",
// "u/r", a URL or a path would install another package, and "../" would
// walk out of the vendor's release path: agent.install would be any code.
// A version, an npm range or a tag is letters, digits and . - + _ (a range
// also ^ ~ < > = | * and spaces), at most 128 bytes, with no "..".
func (o InstallOptions) Validate() error {
	if !plainVersion(o.AgentVersion, "") {
		return InvalidRequest("agentVersion %q is not a version (letters, digits, '.', '-', '+', '_')", truncateForMessage(o.AgentVersion))
	}
	if !plainVersion(o.AgentProcessVersion, "^~<>=|* ") {
		return InvalidRequest("agentProcessVersion %q is not a version or an npm range (letters, digits, '.', '-', '+', '_', '^', '~', '<', '>', '=', '|', '*', spaces)", truncateForMessage(o.AgentProcessVersion))
	}
	return nil
}

// plainVersion: empty, or at most 128 bytes of letters, digits, ._+-
// and extra, with no "..".
func plainVersion(v, extra string) bool {
	if len(v) > 128 || strings.Contains(v, "..") {
		return false
	}
	for _, c := range v {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', strings.ContainsRune("._+-"+extra, c):
		default:
			return false
		}
	}
	return true
}

// truncateForMessage keeps a refused value's message short.
func truncateForMessage(v string) string {
	if len(v) > 64 {
		return v[:64] + "…"
	}
	return v
}

// InstalledPackage is what an npm install into a prefix produced.
type InstalledPackage struct {
	Name    string
	Version string
	// Bins maps each executable the package declares to its absolute path.
	Bins map[string]string
}

// CommandResult is how a short-lived program (a --help or --version probe)
// ended.
type CommandResult struct {
	Stdout   []byte
	Stderr   []byte
	ExitCode int
}
