package domain

import "strings"

// AgentRecipe is how the installer provides one known agent: where its ACP
// adapter (the "agent process") comes from, whether the native agent binary
// is needed, and where its credentials usually live. Agents the registry
// lists but we do not know get DefaultRecipe.
type AgentRecipe struct {
	ID string
	// RegistryIDs are the ACP registry ids of the adapter, tried in order.
	RegistryIDs []string
	// PathHints are adapter executables used as they are when on PATH.
	PathHints []string
	// FallbackPackage is the pinned npm spec used when the registry has no
	// entry. Empty when the fallback is the native binary itself.
	FallbackPackage string
	// NativeACPArgs, when set, make the native binary the agent process
	// (opencode runs "opencode acp").
	NativeACPArgs []string
	// Native is the native agent binary; nil when there is none.
	Native *NativeRecipe
	// CredentialProviders are the LLM providers whose credentials the
	// agent can use (any one will do; see CredentialsAvailable);
	// AlwaysCredentials means the agent handles its own auth.
	CredentialProviders []string
	AlwaysCredentials   bool
}

// NativeRecipe says how to download a native agent binary. URL templates may
// use {version} and {platform}; {platform} is Platforms[PlatformKey].
type NativeRecipe struct {
	Binary string
	// URL is the download of a given version; LatestURL that of the newest.
	// When LatestURL is empty, VersionURL answers the newest version as text.
	URL, LatestURL, VersionURL string
	Platforms                  map[string]string
	// Member is the executable's file name inside an archive ("" = Binary).
	// It may use {platform}.
	Member string
	// EnvVar, when set, is exported by the adapter's launcher with the
	// native binary's path, so the adapter uses it.
	EnvVar string
}

// Recipes are the known agents' recipes. Fallback packages are pinned
// versions the reference was tested with.
var Recipes = map[string]AgentRecipe{
	"claude": {
		ID:              "claude",
		RegistryIDs:     []string{"claude-acp", "claude-code-acp"},
		PathHints:       []string{"claude-agent-acp", "claude-code-acp"},
		FallbackPackage: "@zed-industries/claude-agent-acp@0.20.0",
		Native: &NativeRecipe{
			Binary:     "claude",
			URL:        "https://storage.googleapis.com/claude-code-dist-86c565f3-f756-42ad-8dfa-d59b1c096819/claude-code-releases/{version}/{platform}/claude",
			VersionURL: "https://storage.googleapis.com/claude-code-dist-86c565f3-f756-42ad-8dfa-d59b1c096819/claude-code-releases/latest",
			Platforms:  map[string]string{"linux-x86_64": "linux-x64", "linux-aarch64": "linux-arm64", "darwin-x86_64": "darwin-x64", "darwin-aarch64": "darwin-arm64"},
			EnvVar:     "CLAUDE_CODE_EXECUTABLE",
		},
		CredentialProviders: []string{ProviderAnthropic},
	},
	"codex": {
		ID:              "codex",
		RegistryIDs:     []string{"codex-acp"},
		PathHints:       []string{"codex-acp"},
		FallbackPackage: "@zed-industries/codex-acp@0.16.0",
		Native: &NativeRecipe{
			Binary:    "codex",
			URL:       "https://github.com/openai/codex/releases/download/{version}/codex-{platform}.tar.gz",
			LatestURL: "https://github.com/openai/codex/releases/latest/download/codex-{platform}.tar.gz",
			Platforms: map[string]string{"linux-x86_64": "x86_64-unknown-linux-musl", "linux-aarch64": "aarch64-unknown-linux-musl", "darwin-x86_64": "x86_64-apple-darwin", "darwin-aarch64": "aarch64-apple-darwin"},
			Member:    "codex-{platform}",
		},
		CredentialProviders: []string{ProviderOpenAI},
	},
	"opencode": {
		ID:            "opencode",
		RegistryIDs:   []string{"opencode"},
		PathHints:     []string{},
		NativeACPArgs: []string{"acp"},
		Native: &NativeRecipe{
			Binary:    "opencode",
			URL:       "https://github.com/anomalyco/opencode/releases/download/{version}/opencode-{platform}",
			LatestURL: "https://github.com/anomalyco/opencode/releases/latest/download/opencode-{platform}",
			Platforms: map[string]string{"linux-x86_64": "linux-x64.tar.gz", "linux-aarch64": "linux-arm64.tar.gz", "darwin-x86_64": "darwin-x64.zip", "darwin-aarch64": "darwin-arm64.zip"},
		},
		CredentialProviders: []string{ProviderAnthropic, ProviderOpenAI},
	},
	"amp": {
		ID:                  "amp",
		RegistryIDs:         []string{"amp-acp"},
		PathHints:           []string{"amp-acp"},
		FallbackPackage:     "amp-acp@0.7.0",
		CredentialProviders: []string{ProviderAnthropic},
	},
	"pi": {
		ID:                "pi",
		RegistryIDs:       []string{"pi-acp"},
		PathHints:         []string{"pi-acp"},
		FallbackPackage:   "pi-acp@0.0.23",
		AlwaysCredentials: true,
	},
	"cursor": {
		ID:                "cursor",
		RegistryIDs:       []string{"cursor-agent-acp"},
		PathHints:         []string{"cursor-agent-acp"},
		FallbackPackage:   "@blowmage/cursor-agent-acp@0.7.1",
		AlwaysCredentials: true,
	},
	MockAgent: {ID: MockAgent, AlwaysCredentials: true},
}

// RecipeFor returns the recipe of a known agent, or the default recipe of an
// agent only the registry knows: looked up under its own id, no fallback.
func RecipeFor(id string) (AgentRecipe, bool) {
	if r, ok := Recipes[id]; ok {
		return r, true
	}
	return AgentRecipe{ID: id, RegistryIDs: []string{id}}, false
}

// ExpandURL fills a native download URL template.
func ExpandURL(tmpl, version, platform string) string {
	return strings.NewReplacer("{version}", version, "{platform}", platform).Replace(tmpl)
}
