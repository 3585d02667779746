package domain

import (
	"path"
	"strings"
	"testing"
	"time"
)

func TestResolveFSPath(t *testing.T) {
	const home = "/home/u"
	tests := []struct {
		in, want string
		wantErr  string
	}{
		{in: ".", want: "/home/u"},
		{in: "a.txt", want: "/home/u/a.txt"},
		{in: "./a/./b/", want: "/home/u/a/b"},
		{in: "a//b", want: "/home/u/a/b"},
		{in: "/etc/passwd", want: "/etc/passwd"},
		{in: "/tmp/x/../y", want: "/tmp/y"},
		{in: "/", want: "/"},
		{in: "//a", want: "/a"},
		{in: "..", wantErr: "invalid relative path: .."},
		{in: "a/../b", wantErr: "invalid relative path: a/../b"},
		{in: "a/..", wantErr: "invalid relative path"},
		{in: "...", want: "/home/u/..."},
		{in: "a..b", want: "/home/u/a..b"},
		{in: "", wantErr: "path is empty"},
		{in: "a\x00b", wantErr: "NUL"},
		{in: "/a\x00", wantErr: "NUL"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ResolveFSPath(home, tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ResolveFSPath(%q) = %q, %v; want error containing %q", tt.in, got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("ResolveFSPath(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
			}
		})
	}
}

func FuzzResolveFSPath(f *testing.F) {
	for _, s := range []string{".", "a", "../x", "/etc/passwd", "a/../../b", "a\x00", "./.././", "//..//", ""} {
		f.Add(s)
	}
	const home = "/home/u"
	f.Fuzz(func(t *testing.T, p string) {
		got, err := ResolveFSPath(home, p)
		if err != nil {
			return
		}
		if strings.IndexByte(got, 0) >= 0 {
			t.Fatalf("result %q holds a NUL byte", got)
		}
		if got != path.Clean(got) || !strings.HasPrefix(got, "/") {
			t.Fatalf("result %q is not clean and absolute", got)
		}
		if !strings.HasPrefix(p, "/") {
			if _, ok := RootRelative(home, got); !ok {
				t.Fatalf("relative %q resolved outside home: %q", p, got)
			}
		}
	})
}

func TestRootRelative(t *testing.T) {
	tests := []struct {
		root, p, want string
		ok            bool
	}{
		{"/srv/root", "/srv/root", ".", true},
		{"/srv/root", "/srv/root/a/b", "a/b", true},
		{"/srv/root", "/srv/root-secret", "", false},
		{"/srv/root", "/srv/root-secret/x", "", false},
		{"/srv/root", "/srv/rootx", "", false},
		{"/srv/root", "/srv", "", false},
		{"/srv/root", "/etc/passwd", "", false},
		{"/", "/etc", "etc", true},
		{"/", "/", ".", true},
		{"/srv/root", "relative", "", false},
	}
	for _, tt := range tests {
		got, ok := RootRelative(tt.root, tt.p)
		if got != tt.want || ok != tt.ok {
			t.Errorf("RootRelative(%q, %q) = %q, %v; want %q, %v", tt.root, tt.p, got, ok, tt.want, tt.ok)
		}
	}
}

func FuzzRootRelative(f *testing.F) {
	f.Add("/srv/root", "/srv/root-secret/x")
	f.Add("/srv/root", "/srv/root/../x")
	f.Add("/", "/a")
	f.Fuzz(func(t *testing.T, root, p string) {
		if !strings.HasPrefix(root, "/") || root != path.Clean(root) || p != path.Clean(p) {
			return
		}
		rel, ok := RootRelative(root, p)
		if !ok {
			return
		}
		if got := path.Join(root, rel); got != p {
			t.Fatalf("RootRelative(%q, %q) = %q, but joined back gives %q", root, p, rel, got)
		}
		if rel == ".." || strings.HasPrefix(rel, "../") {
			t.Fatalf("RootRelative(%q, %q) = %q climbs out", root, p, rel)
		}
	})
}

func TestFormatFSTime(t *testing.T) {
	base := time.Date(2024, 5, 6, 7, 8, 9, 0, time.FixedZone("X", 2*3600))
	tests := []struct {
		ns   int
		want string
	}{
		{0, "2024-05-06T05:08:09+00:00"},
		{120_000_000, "2024-05-06T05:08:09.120+00:00"},
		{123_456_000, "2024-05-06T05:08:09.123456+00:00"},
		{123_456_789, "2024-05-06T05:08:09.123456789+00:00"},
		{1, "2024-05-06T05:08:09.000000001+00:00"},
	}
	for _, tt := range tests {
		got := FormatFSTime(base.Add(time.Duration(tt.ns)))
		if got != tt.want {
			t.Errorf("FormatFSTime(+%dns) = %q, want %q", tt.ns, got, tt.want)
		}
		if _, err := time.Parse(time.RFC3339Nano, got); err != nil {
			t.Errorf("%q is not RFC 3339: %v", got, err)
		}
	}
}
