package domain

import (
	"path"
	"strings"
	"testing"
)

func TestParseRegistry(t *testing.T) {
	good := `{"version":"1.0.0","agents":[{"id":"codex-acp","version":"0.9.2","extra":1,"distribution":{"npx":{"package":"@zed-industries/codex-acp@0.9.2"}}},` +
		`{"id":"opencode","distribution":{"binary":{"linux-x86_64":{"archive":"https://x/o.tar.gz","cmd":"./opencode","args":["acp"]}}}}]}`
	r, err := ParseRegistry([]byte(good))
	if err != nil {
		t.Fatal(err)
	}
	if e, ok := r.Find("claude-acp", "codex-acp"); !ok || e.Distribution.Npx.Package != "@zed-industries/codex-acp@0.9.2" {
		t.Errorf("Find = %+v, %v", e, ok)
	}
	if _, ok := r.Find("nope"); ok {
		t.Error("found nope")
	}
	for _, bad := range []string{
		``, `[]`, `{}`, `{"agents":{}}`,
		`{"agents":[{"id":"","distribution":{}}]}`,
		`{"agents":[{"id":"a/b","distribution":{}}]}`,
		`{"agents":[{"id":"a","distribution":{"npx":{"package":" "}}}]}`,
		`{"agents":[{"id":"a","distribution":{"binary":{"linux-x86_64":{"archive":"u"}}}}]}`,
	} {
		if _, err := ParseRegistry([]byte(bad)); err == nil {
			t.Errorf("ParseRegistry(%q): no error", bad)
		}
	}
}

func TestSafeArchivePath(t *testing.T) {
	for name, want := range map[string]string{
		"bin/agent": "bin/agent", "./bin/agent": "bin/agent", "a/./b/../c": "a/c", "dir/": "dir",
		"../x": "", "a/../../x": "", "/etc/passwd": "", "..": "", ".": "", "": "", "c:\\x": "", "a\\..\\..\\x": "", "a\x00b": "",
	} {
		got, ok := SafeArchivePath(name)
		if got != want || ok != (want != "") {
			t.Errorf("SafeArchivePath(%q) = %q, %v; want %q", name, got, ok, want)
		}
	}
}

func FuzzSafeArchivePath(f *testing.F) {
	for _, s := range []string{"bin/agent", "../x", "/abs", "a/../../b", "a\\b", "./", "x/../y"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		got, ok := SafeArchivePath(name)
		if !ok {
			return
		}
		if strings.HasPrefix(got, "/") || got == ".." || strings.HasPrefix(got, "../") || path.Clean(got) != got || got == "." {
			t.Fatalf("SafeArchivePath(%q) = %q escapes", name, got)
		}
		// Joined to any root it stays below it.
		if j := path.Join("/root/dir", got); !strings.HasPrefix(j, "/root/dir/") {
			t.Fatalf("%q joins to %q", got, j)
		}
	})
}

func TestPackageSpecs(t *testing.T) {
	for spec, want := range map[string][2]string{
		"pkg": {"pkg", ""}, "pkg@1.2.3": {"pkg", "1.2.3"}, "@scope/pkg": {"@scope/pkg", ""}, "@scope/pkg@0.20.0": {"@scope/pkg", "0.20.0"},
	} {
		if n, v := SplitPackageSpec(spec); n != want[0] || v != want[1] {
			t.Errorf("SplitPackageSpec(%q) = %q, %q", spec, n, v)
		}
	}
	for _, tc := range [][3]string{
		{"@scope/pkg@1.0.0", "2.0.0", "@scope/pkg@2.0.0"},
		{"pkg", "2.0.0", "pkg@2.0.0"},
		{"pkg@1", "", "pkg@1"},
		{"/tmp/pkg-1.0.0.tgz", "2.0.0", "/tmp/pkg-1.0.0.tgz"},
		{"http://h/pkg.tgz", "2.0.0", "http://h/pkg.tgz"},
	} {
		if got := PackageSpecWithVersion(tc[0], tc[1]); got != tc[2] {
			t.Errorf("PackageSpecWithVersion(%q, %q) = %q, want %q", tc[0], tc[1], got, tc[2])
		}
	}
}

func TestArchiveKindAndPlatform(t *testing.T) {
	for url, want := range map[string]string{
		"https://h/a.tar.gz": "tar.gz", "https://h/a.TGZ": "tar.gz", "https://h/a.zip?x=1": "zip", "https://h/a.tar": "tar", "https://h/claude": "raw",
	} {
		if got := ArchiveKind(url); got != want {
			t.Errorf("ArchiveKind(%q) = %q, want %q", url, got, want)
		}
	}
	if PlatformKey("linux", "amd64") != "linux-x86_64" || PlatformKey("darwin", "arm64") != "darwin-aarch64" || PlatformKey("plan9", "386") != "" {
		t.Error("PlatformKey")
	}
}

// Every known agent but the mock has a recipe the installer can act on.
func TestRecipes(t *testing.T) {
	for _, id := range KnownAgents {
		r, ok := Recipes[id]
		if !ok || r.ID != id {
			t.Errorf("%s: no recipe", id)
			continue
		}
		if id != MockAgent && r.FallbackPackage == "" && r.NativeACPArgs == nil {
			t.Errorf("%s: no fallback", id)
		}
	}
	if r, known := RecipeFor("someone"); known || len(r.RegistryIDs) != 1 || r.RegistryIDs[0] != "someone" {
		t.Errorf("RecipeFor(someone) = %+v, %v", r, known)
	}
}

func TestShownURL(t *testing.T) {
	for in, want := range map[string]string{
		"https://user:s3cret@mirror/registry.json?x=1": "https://mirror/registry.json?x=1",
		"http://tok@127.0.0.1:8080":                    "http://127.0.0.1:8080",
		"http://a@b:c@host/p@q":                        "http://host/p@q",
		"https://cdn.example/registry.json":            "https://cdn.example/registry.json",
		"file:///etc/passwd":                           "file:///etc/passwd",
		"not a url":                                    "not a url",
	} {
		if got := ShownURL(in); got != want {
			t.Errorf("ShownURL(%q) = %q, want %q", in, got, want)
		}
	}
}
