package domain

import (
	"path"
	"strings"
	"testing"
)

func TestTarEntryPath(t *testing.T) {
	tests := []struct {
		name, want string
		bad        bool
	}{
		{name: "a.txt", want: "a.txt"},
		{name: "./a/b/", want: "a/b"},
		{name: "dir/", want: "dir"},
		{name: "./", want: ""},
		{name: ".", want: ""},
		{name: "a//b", want: "a/b"},
		{name: "..", bad: true},
		{name: "../x", bad: true},
		{name: "a/../../x", bad: true},
		{name: "a/../b", bad: true},
		{name: "/etc/passwd", bad: true},
		{name: "/", bad: true},
		{name: "a\x00b", bad: true},
		{name: "..a/b..", want: "..a/b.."},
	}
	for _, tt := range tests {
		got, err := TarEntryPath(tt.name)
		if tt.bad {
			if err == nil {
				t.Errorf("TarEntryPath(%q) = %q, want an error", tt.name, got)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("TarEntryPath(%q) = %q, %v; want %q", tt.name, got, err, tt.want)
		}
	}
}

func FuzzTarEntryPath(f *testing.F) {
	for _, s := range []string{"a", "./a/", "../a", "/a", "a/../..", "a\x00", "..", "x/./y//z"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		got, err := TarEntryPath(name)
		if err != nil {
			return
		}
		if got == "" {
			return
		}
		if strings.HasPrefix(got, "/") || strings.IndexByte(got, 0) >= 0 {
			t.Fatalf("TarEntryPath(%q) = %q", name, got)
		}
		if got != path.Clean(got) {
			t.Fatalf("TarEntryPath(%q) = %q is not clean", name, got)
		}
		if j := path.Join("/dest", got); !strings.HasPrefix(j, "/dest/") {
			t.Fatalf("TarEntryPath(%q) = %q leaves the destination (%q)", name, got, j)
		}
	})
}

func TestTarSymlinkTarget(t *testing.T) {
	tests := []struct {
		rel, target string
		bad         bool
	}{
		{"link", "file", false},
		{"a/link", "../file", false},
		{"a/b/link", "../../file", false},
		{"a/b/link", "./c/../d", false},
		{"link", "../x", true},
		{"a/link", "../../x", true},
		{"link", "/etc/passwd", true},
		{"link", "", true},
		{"link", "a\x00", true},
		{"link", "a/../../x", true},
		{"", "x", true},
		{"node_modules/.bin/tool", "../pkg/bin/tool.js", false},
	}
	for _, tt := range tests {
		err := TarSymlinkTarget(tt.rel, tt.target)
		if (err != nil) != tt.bad {
			t.Errorf("TarSymlinkTarget(%q, %q) = %v, want bad=%v", tt.rel, tt.target, err, tt.bad)
		}
	}
}

func FuzzTarSymlinkTarget(f *testing.F) {
	f.Add("a/link", "../b")
	f.Add("link", "../../x")
	f.Add("l", "/abs")
	f.Fuzz(func(t *testing.T, name, target string) {
		rel, err := TarEntryPath(name)
		if err != nil {
			return
		}
		if TarSymlinkTarget(rel, target) != nil {
			return
		}
		resolved := path.Join("/dest", path.Dir(rel), target)
		if resolved != "/dest" && !strings.HasPrefix(resolved, "/dest/") {
			t.Fatalf("link %q -> %q accepted but resolves to %q", rel, target, resolved)
		}
	})
}
