package fsys

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"testing"

	"github.com/sandbox-agent-go/sandbox-agent/ports"
	"github.com/sandbox-agent-go/sandbox-agent/ports/porttest"
)

// protect reads file as the daemon does and protects what it read.
func protect(t *testing.T, s *Secrets, group string, files ...string) {
	t.Helper()
	var list []SecretFile
	for _, f := range files {
		_, fi, err := ReadRegular(t.Context(), f, 1<<20)
		must(t, err)
		list = append(list, SecretFile{Path: f, Read: fi, What: "its " + group})
	}
	s.SetFiles(group, list)
}

func TestSecretsContract(t *testing.T) {
	porttest.SecretsContract(t, func(t *testing.T) (ports.Secrets, string, string, string) {
		dir := t.TempDir()
		secret, plain := filepath.Join(dir, "tokens"), filepath.Join(dir, "notes")
		must(t, os.WriteFile(secret, []byte("tok\n"), 0o600))
		must(t, os.WriteFile(plain, []byte("hello\n"), 0o644))
		s := NewSecrets()
		protect(t, s, "tokens", secret)
		return s, dir, secret, plain
	})
}

// TestSecretsFiles: a protected file is recognised by what it is, under
// any name: a hard link, a symbolic link (and a chain of them, relative or
// absolute, with ".." after a link), a rename; and what replaces it at
// its path is protected before it is read. A copy is another file.
func TestSecretsFiles(t *testing.T) {
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens")
	must(t, os.WriteFile(tokens, []byte("admin\n"), 0o600))
	s := NewSecrets()
	protect(t, s, "tokens", tokens)
	sub := filepath.Join(dir, "sub")
	must(t, os.Mkdir(sub, 0o755))
	must(t, os.Link(tokens, filepath.Join(dir, "hard")))
	must(t, os.Symlink(tokens, filepath.Join(dir, "abs")))
	must(t, os.Symlink("../tokens", filepath.Join(sub, "rel")))
	must(t, os.Symlink("sub/rel", filepath.Join(dir, "chain")))
	must(t, os.Symlink(sub, filepath.Join(dir, "sublink")))
	must(t, os.WriteFile(filepath.Join(dir, "copy"), []byte("admin\n"), 0o600))

	for _, c := range []struct {
		name   string
		follow bool
		want   bool
	}{
		{"tokens", true, true},
		{"hard", true, true},
		{"hard", false, true}, // deleting a hard link is removing the file's name, refused too
		{"abs", true, true},
		{"abs", false, false}, // the link itself: deleting or moving it touches nothing
		{"sub/rel", true, true},
		{"chain", true, true},
		{"sublink/../tokens", true, true}, // ".." after a link is the parent of where it led
		{"sublink/rel", true, true},
		{"copy", true, false},
		{"missing", true, false},
		{"tokens/x", true, false}, // not a directory: opens nothing
		{".", true, false},        // reading the directory is fine
		{".", false, true},        // removing it would take the file along
		{"sub", false, false},
	} {
		if got := s.Secret(filepath.Join(dir, c.name), c.follow) != ""; got != c.want {
			t.Errorf("Secret(%s, follow %v) = %v, want %v", c.name, c.follow, got, c.want)
		}
	}

	// Renamed: the file read stays protected under its new name, and the
	// new file at the configured path is protected before any reload.
	must(t, os.Rename(tokens, filepath.Join(dir, "tokens.old")))
	must(t, os.WriteFile(tokens, []byte("next\n"), 0o600))
	for _, name := range []string{"tokens.old", "tokens", "hard"} {
		if s.Secret(filepath.Join(dir, name), true) == "" {
			t.Errorf("after the rename, %s is not protected", name)
		}
	}
	// A successful reload replaces the group: the old tokens are revoked,
	// so their file is data again.
	protect(t, s, "tokens", tokens)
	if s.Secret(filepath.Join(dir, "tokens.old"), true) != "" {
		t.Error("a revoked token file is still protected")
	}
	if s.Secret("/", false) == "" {
		t.Error("removing / would not take the token file along")
	}
	if why := s.Secret(tokens, true); why != "its tokens" {
		t.Errorf("why = %q", why)
	}
}

// TestSecretsProc: the daemon's /proc entries under every name that
// leads there, and only those.
func TestSecretsProc(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("procfs is Linux's")
	}
	s := NewSecrets()
	pid := strconv.Itoa(os.Getpid())
	tid := otherThread(t)
	dir := t.TempDir()
	must(t, os.Symlink("/proc/self/environ", filepath.Join(dir, "env")))
	must(t, os.Symlink("../../../../../../../../proc/"+pid, filepath.Join(dir, "me")))
	must(t, os.Symlink("/dev/fd", filepath.Join(dir, "fds")))
	protected := []string{
		"/proc/self", "/proc/self/environ", "/proc/self/cmdline", "/proc/self/mem", "/proc/self/maps", "/proc/self/fd/0",
		"/proc/" + pid, "/proc/" + pid + "/environ", "/proc/" + pid + "/task/" + tid + "/environ",
		"/proc/" + tid, "/proc/" + tid + "/environ", // a thread id resolves though it is not listed
		"/proc/thread-self/environ", "/proc/net/tcp", "/proc/mounts",
		"/dev/fd/0", "/dev/stdin", "/dev/stdout",
		"/proc/1/../self/environ", "/proc/self/root/proc/self/environ",
		filepath.Join(dir, "env"), filepath.Join(dir, "me", "cmdline"), filepath.Join(dir, "fds", "1"), dir + "/fds/..",
	}
	for _, p := range protected {
		if why := s.Secret(p, true); why != whyProc {
			t.Errorf("Secret(%s) = %q, want %q", p, why, whyProc)
		}
	}
	open := []string{"/proc", "/proc/cpuinfo", "/proc/sys/kernel/hostname", filepath.Join(dir, "missing")}
	if os.Getpid() != 1 {
		open = append(open, "/proc/1/cmdline")
	}
	for _, p := range open {
		if why := s.Secret(p, true); why != "" {
			t.Errorf("Secret(%s) = %q, want nothing", p, why)
		}
	}

	// An opened file is judged by where the kernel opened it.
	f, err := os.Open(filepath.Join(dir, "env"))
	must(t, err)
	if why := s.SecretFile(f); why != whyProc {
		t.Errorf("SecretFile(/proc/self/environ) = %q", why)
	}
	f.Close()
	f, err = os.Open("/proc/cpuinfo")
	must(t, err)
	if why := s.SecretFile(f); why != "" {
		t.Errorf("SecretFile(/proc/cpuinfo) = %q", why)
	}
	f.Close()

	// A listing of /proc leaves out the daemon and every link to it.
	d, err := os.Open("/proc")
	must(t, err)
	infos, err := d.Readdir(-1)
	d.Close()
	must(t, err)
	var names []string
	for _, fi := range s.Hide("/proc", infos) {
		names = append(names, fi.Name())
	}
	for _, n := range []string{"self", "thread-self", pid, "net", "mounts"} {
		if slices.Contains(names, n) {
			t.Errorf("/proc listing shows %s", n)
		}
	}
	if !slices.Contains(names, "cpuinfo") || !slices.Contains(names, "sys") {
		t.Errorf("/proc listing lost the rest: %v", names)
	}
}

// otherThread is the id of a thread of this process other than its main
// one.
func otherThread(t *testing.T) string {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/task")
	must(t, err)
	for _, e := range ents {
		if e.Name() != strconv.Itoa(os.Getpid()) {
			return e.Name()
		}
	}
	t.Fatal("a Go test binary has one thread")
	return ""
}

// TestSecretsHelperPID: a helper process's /proc is protected from when
// it is registered until it is released.
func TestSecretsHelperPID(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("procfs is Linux's")
	}
	cmd := exec.Command("sleep", "30")
	must(t, cmd.Start())
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	s := NewSecrets()
	p := "/proc/" + strconv.Itoa(cmd.Process.Pid) + "/environ"
	if s.Secret(p, true) != "" {
		t.Fatal("protected before registration")
	}
	release := s.ProtectPID(cmd.Process.Pid)
	if s.Secret(p, true) == "" {
		t.Error("not protected once registered")
	}
	release()
	release()
	if s.Secret(p, true) != "" {
		t.Error("still protected once released")
	}
}

// TestSecretsHide: a listing leaves out the protected file, its hard
// links and the links leading to it, and nothing else.
func TestSecretsHide(t *testing.T) {
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens")
	must(t, os.WriteFile(tokens, []byte("a\n"), 0o600))
	must(t, os.Link(tokens, filepath.Join(dir, "hard")))
	must(t, os.Symlink("tokens", filepath.Join(dir, "link")))
	must(t, os.Symlink("nowhere", filepath.Join(dir, "dangling")))
	must(t, os.WriteFile(filepath.Join(dir, "notes"), nil, 0o644))
	s := NewSecrets()
	protect(t, s, "tokens", tokens)
	d, err := os.Open(dir)
	must(t, err)
	infos, err := d.Readdir(-1)
	d.Close()
	must(t, err)
	var names []string
	for _, fi := range s.Hide(dir, infos) {
		names = append(names, fi.Name())
	}
	slices.Sort(names)
	if want := []string{"dangling", "notes"}; !slices.Equal(names, want) {
		t.Errorf("listing = %v, want %v", names, want)
	}
}

// BenchmarkSecretPath: the check every fs request pays, for a path five
// elements deep with two protected files.
func BenchmarkSecretPath(b *testing.B) {
	dir := b.TempDir()
	deep := filepath.Join(dir, "a", "b", "c")
	must(b, os.MkdirAll(deep, 0o755))
	p := filepath.Join(deep, "file")
	must(b, os.WriteFile(p, []byte("x"), 0o644))
	t1, t2 := filepath.Join(dir, "t1"), filepath.Join(dir, "t2")
	must(b, os.WriteFile(t1, []byte("x"), 0o600))
	must(b, os.WriteFile(t2, []byte("x"), 0o600))
	s := NewSecrets()
	s.SetFiles("x", []SecretFile{{Path: t1, What: "t1"}, {Path: t2, What: "t2"}})
	for b.Loop() {
		if s.Secret(p, true) != "" {
			b.Fatal("secret")
		}
	}
}

// TestSecretsTree: a protected directory (the policy compilation cache,
// whose files the daemon maps as machine code) is protected with all it
// holds and will hold: a name under it (existing or not, through a link
// to it or to a directory on the way), the directory itself, a directory
// holding it when moved or deleted, and its entry in a listing. Its
// sibling is plain.
func TestSecretsTree(t *testing.T) {
	dir := t.TempDir()
	cache := filepath.Join(dir, "cache", "wasm")
	must(t, os.MkdirAll(cache, 0o700))
	must(t, os.WriteFile(filepath.Join(cache, "abc"), []byte("code"), 0o600))
	must(t, os.Mkdir(filepath.Join(dir, "cache", "other"), 0o755))
	must(t, os.Symlink("cache/wasm", filepath.Join(dir, "link")))
	must(t, os.Symlink("cache", filepath.Join(dir, "up")))
	s := NewSecrets()
	s.SetFiles("cache", []SecretFile{{Path: cache, What: "its cache", Tree: true}})

	for _, c := range []struct {
		name   string
		follow bool
		want   bool
	}{
		{cache + "/abc", true, true},
		{cache + "/abc", false, true},
		{cache + "/new", true, true},
		{cache + "/new/deeper", true, true},
		{cache, true, true},
		{cache, false, true},
		{dir + "/link/abc", true, true},
		{dir + "/link", true, true},
		{dir + "/up/wasm/x", false, true},
		{dir + "/cache", false, true}, // a move or delete takes the cache along
		{dir, false, true},
		{dir + "/cache", true, false}, // reading or listing the parent is fine
		{dir + "/cache/other/x", true, false},
		{dir + "/cache/wasm2", true, false},
		{dir + "/link", false, false}, // the link itself, not what it leads to
	} {
		if got := s.Secret(c.name, c.follow) != ""; got != c.want {
			t.Errorf("Secret(%s, %v) = %v, want %v", c.name, c.follow, got, c.want)
		}
	}
	fi, err := os.Stat(cache)
	must(t, err)
	if s.SecretInfo(fi) == "" {
		t.Error("SecretInfo(cache directory) is plain")
	}
	entries, err := os.ReadDir(filepath.Join(dir, "cache"))
	must(t, err)
	var infos []os.FileInfo
	for _, e := range entries {
		fi, err := e.Info()
		must(t, err)
		infos = append(infos, fi)
	}
	var names []string
	for _, fi := range s.Hide(filepath.Join(dir, "cache"), infos) {
		names = append(names, fi.Name())
	}
	if !slices.Equal(names, []string{"other"}) {
		t.Errorf("listing shows %v", names)
	}
}
