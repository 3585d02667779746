package porttest

import (
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/afero"

	"github.com/sandbox-agent-go/sandbox-agent/ports"
)

// FakeSecrets is a ports.Secrets that knows secrets by path alone: Paths
// maps an absolute path to why it is protected; a path inside a protected
// one counts too (as /proc/<pid>/... does). It follows no link and knows no
// identity: SecretInfo and SecretFile match by name (the base name of a
// protected path, the opened file's name), the nearest a fake can get.
type FakeSecrets struct {
	Paths map[string]string
}

var _ ports.Secrets = (*FakeSecrets)(nil)

// Secret implements ports.Secrets.
func (f *FakeSecrets) Secret(name string, follow bool) string {
	name = path.Clean(name)
	for p, why := range f.Paths {
		if name == p || strings.HasPrefix(name, p+"/") {
			return why
		}
		if !follow && strings.HasPrefix(p, name+"/") {
			return why
		}
	}
	return ""
}

// SecretInfo implements ports.Secrets.
func (f *FakeSecrets) SecretInfo(fi fs.FileInfo) string {
	for p, why := range f.Paths {
		if path.Base(p) == fi.Name() {
			return why
		}
	}
	return ""
}

// SecretFile implements ports.Secrets.
func (f *FakeSecrets) SecretFile(file afero.File) string { return f.Secret(file.Name(), true) }

// Hide implements ports.Secrets.
func (f *FakeSecrets) Hide(dir string, entries []fs.FileInfo) []fs.FileInfo {
	out := entries[:0]
	for _, fi := range entries {
		if f.Secret(path.Join(dir, fi.Name()), true) == "" {
			out = append(out, fi)
		}
	}
	return out
}

// NewSecrets builds, for one subtest, a Secrets protecting the file secret
// and not the file plain, both existing directly in the directory dir
// (absolute paths on the host filesystem).
type NewSecrets func(t *testing.T) (s ports.Secrets, dir, secret, plain string)

// SecretsContract checks what the files use case relies on from a Secrets,
// by path: a secret is refused whatever the operation, a plain file or a
// missing one is not, a directory holding a secret may be read but not
// removed, an opened secret is recognised, and a listing leaves it out.
func SecretsContract(t *testing.T, newSecrets NewSecrets) {
	t.Run("paths", func(t *testing.T) {
		s, dir, secret, plain := newSecrets(t)
		for _, c := range []struct {
			name   string
			follow bool
			secret bool
		}{
			{secret, true, true},
			{secret, false, true},
			{plain, true, false},
			{plain, false, false},
			{filepath.Join(dir, "missing"), true, false},
			{dir, true, false},
			{dir, false, true},
		} {
			if got := s.Secret(c.name, c.follow) != ""; got != c.secret {
				t.Errorf("Secret(%s, follow %v) = %v, want %v", c.name, c.follow, got, c.secret)
			}
		}
	})
	t.Run("opened files", func(t *testing.T) {
		s, _, secret, plain := newSecrets(t)
		for _, c := range []struct {
			name   string
			secret bool
		}{{secret, true}, {plain, false}} {
			f, err := os.Open(c.name)
			if err != nil {
				t.Fatal(err)
			}
			if got := s.SecretFile(f) != ""; got != c.secret {
				t.Errorf("SecretFile(%s) = %v, want %v", c.name, got, c.secret)
			}
			f.Close()
		}
	})
	t.Run("stat results", func(t *testing.T) {
		s, _, secret, plain := newSecrets(t)
		for _, c := range []struct {
			name   string
			secret bool
		}{{secret, true}, {plain, false}} {
			fi, err := os.Lstat(c.name)
			if err != nil {
				t.Fatal(err)
			}
			if got := s.SecretInfo(fi) != ""; got != c.secret {
				t.Errorf("SecretInfo(%s) = %v, want %v", c.name, got, c.secret)
			}
		}
	})
	t.Run("listings", func(t *testing.T) {
		s, dir, secret, plain := newSecrets(t)
		d, err := os.Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		infos, err := d.Readdir(-1)
		d.Close()
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, fi := range s.Hide(dir, infos) {
			names = append(names, fi.Name())
		}
		if slices.Contains(names, filepath.Base(secret)) || !slices.Contains(names, filepath.Base(plain)) {
			t.Errorf("Hide(%s) = %v", dir, names)
		}
	})
}
