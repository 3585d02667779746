package domain

import (
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"strings"
)

// Registry is the ACP agent registry document
// (https://cdn.agentclientprotocol.com/registry/v1/latest/registry.json):
// agents with a distribution to install them from. Unknown fields are
// ignored so newer registries still parse.
type Registry struct {
	Version string          `json:"version,omitempty"`
	Agents  []RegistryEntry `json:"agents"`
}

// RegistryEntry is one agent of the registry.
type RegistryEntry struct {
	ID           string       `json:"id"`
	Name         string       `json:"name,omitempty"`
	Version      string       `json:"version,omitempty"`
	Description  string       `json:"description,omitempty"`
	Distribution Distribution `json:"distribution"`
}

// Distribution says how to get an agent: an npm package run with npx, or a
// per-platform archive holding an executable.
type Distribution struct {
	Npx    *NpxDistribution        `json:"npx,omitempty"`
	Binary map[string]BinaryTarget `json:"binary,omitempty"`
}

// NpxDistribution is an npm package whose bin is the agent.
type NpxDistribution struct {
	Package string            `json:"package"`
	Args    []string          `json:"args,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
}

// BinaryTarget is an archive for one platform; Cmd is the executable's path
// inside it.
type BinaryTarget struct {
	Archive string            `json:"archive"`
	Cmd     string            `json:"cmd"`
	Args    []string          `json:"args,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
}

// ParseRegistry decodes a registry document and checks what the installer
// relies on: every entry has a valid id, and every distribution names a
// package or an archive and command.
func ParseRegistry(b []byte) (Registry, error) {
	var r Registry
	if err := json.Unmarshal(b, &r); err != nil {
		return Registry{}, fmt.Errorf("parse registry: %w", err)
	}
	if r.Agents == nil {
		return Registry{}, errors.New("parse registry: no \"agents\" array")
	}
	for i, a := range r.Agents {
		if !ValidAgentID(a.ID) {
			return Registry{}, fmt.Errorf("parse registry: agent %d: invalid id %q", i, a.ID)
		}
		if a.Distribution.Npx != nil && strings.TrimSpace(a.Distribution.Npx.Package) == "" {
			return Registry{}, fmt.Errorf("parse registry: agent %q: npx distribution without package", a.ID)
		}
		for p, t := range a.Distribution.Binary {
			if t.Archive == "" || t.Cmd == "" {
				return Registry{}, fmt.Errorf("parse registry: agent %q: binary %s needs archive and cmd", a.ID, p)
			}
		}
	}
	return r, nil
}

// Find returns the first entry whose id is one of ids, trying ids in order.
func (r Registry) Find(ids ...string) (RegistryEntry, bool) {
	for _, id := range ids {
		for _, a := range r.Agents {
			if a.ID == id {
				return a, true
			}
		}
	}
	return RegistryEntry{}, false
}

// PlatformKey is the registry's name for a Go GOOS/GOARCH pair
// ("linux-x86_64", "darwin-aarch64", ...), or "" for platforms it has no
// name for.
func PlatformKey(goos, goarch string) string {
	os := map[string]string{"linux": "linux", "darwin": "darwin", "windows": "windows"}[goos]
	arch := map[string]string{"amd64": "x86_64", "arm64": "aarch64"}[goarch]
	if os == "" || arch == "" {
		return ""
	}
	return os + "-" + arch
}

// ArchiveKind tells how to unpack an archive from its URL: "zip", "tar.gz",
// "tar", or "raw" for a bare executable.
func ArchiveKind(url string) string {
	p := strings.ToLower(url)
	if i := strings.IndexAny(p, "?#"); i >= 0 {
		p = p[:i]
	}
	switch {
	case strings.HasSuffix(p, ".zip"):
		return "zip"
	case strings.HasSuffix(p, ".tar.gz"), strings.HasSuffix(p, ".tgz"):
		return "tar.gz"
	case strings.HasSuffix(p, ".tar"):
		return "tar"
	}
	return "raw"
}

// SafeArchivePath cleans an archive entry name and reports whether it stays
// inside the target directory: relative, no "..", no drive or NUL.
func SafeArchivePath(name string) (string, bool) {
	name = strings.ReplaceAll(name, "\\", "/")
	if name == "" || strings.ContainsRune(name, 0) || strings.HasPrefix(name, "/") || strings.Contains(name, ":") {
		return "", false
	}
	clean := path.Clean(name)
	if clean == "." || clean == ".." || strings.HasPrefix(clean, "../") {
		return "", false
	}
	return clean, true
}

// SplitPackageSpec splits an npm spec "name@version" (also "@scope/name@v")
// into name and version; version is "" when the spec has none.
func SplitPackageSpec(spec string) (name, version string) {
	at := strings.LastIndex(spec, "@")
	if at <= 0 { // no "@", or only the scope's leading "@"
		return spec, ""
	}
	return spec[:at], spec[at+1:]
}

// PackageSpecWithVersion pins spec to version when version is set. Specs
// that are paths or URLs (tarballs) are returned unchanged.
func PackageSpecWithVersion(spec, version string) string {
	if version == "" || strings.Contains(spec, ":") || strings.HasPrefix(spec, ".") || strings.HasPrefix(spec, "/") {
		return spec
	}
	name, _ := SplitPackageSpec(spec)
	return name + "@" + version
}

// ShownURL is rawURL as messages show it: without the user and password
// a mirror's URL may carry (https://user:token@mirror/registry.json), since
// install errors reach API clients and logs. Plain string work rather than
// url.Parse with User cleared: a malformed URL (a bad escape in the
// password) fails to parse, and its credentials must go all the same; the
// authority is what precedes the first '/', '?' or '#', its userinfo what
// precedes its last '@', as RFC 3986 and net/url read them.
func ShownURL(rawURL string) string {
	scheme, rest, ok := strings.Cut(rawURL, "://")
	if !ok {
		return rawURL
	}
	authority, path := rest, ""
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		authority, path = rest[:i], rest[i:]
	}
	if at := strings.LastIndex(authority, "@"); at >= 0 {
		authority = authority[at+1:]
	}
	return scheme + "://" + authority + path
}
