package domain

import "encoding/json"

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
