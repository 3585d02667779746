package porttest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
	"github.com/sandbox-agent-go/sandbox-agent/ports"
)

// FakeRegistry is a ports.Registry answering from a function.
type FakeRegistry struct {
	FetchFunc func(ctx context.Context) (domain.Registry, error)
}

var _ ports.Registry = (*FakeRegistry)(nil)

// Fetch implements ports.Registry.
func (f *FakeRegistry) Fetch(ctx context.Context) (domain.Registry, error) {
	if err := ctx.Err(); err != nil {
		return domain.Registry{}, err
	}
	return f.FetchFunc(ctx)
}

// RegistryOf is a FakeRegistry serving doc, parsed as the real one would.
func RegistryOf(doc []byte) *FakeRegistry {
	return &FakeRegistry{FetchFunc: func(context.Context) (domain.Registry, error) { return domain.ParseRegistry(doc) }}
}

// FakeDownloader serves Files by URL.
type FakeDownloader struct {
	mu    sync.Mutex
	Files map[string][]byte
	Calls []string
}

var _ ports.Downloader = (*FakeDownloader)(nil)

// Download implements ports.Downloader.
func (f *FakeDownloader) Download(ctx context.Context, url string, w io.Writer) (int64, error) {
	f.mu.Lock()
	f.Calls = append(f.Calls, url)
	b, ok := f.Files[url]
	f.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if !ok {
		return 0, fmt.Errorf("GET %s: 404 Not Found", url)
	}
	n, err := w.Write(b)
	return int64(n), err
}

// FakePackageInstaller installs packages by calling InstallFunc.
type FakePackageInstaller struct {
	InstallFunc func(ctx context.Context, prefix, spec string) (domain.InstalledPackage, error)
}

var _ ports.PackageInstaller = (*FakePackageInstaller)(nil)

// Install implements ports.PackageInstaller.
func (f *FakePackageInstaller) Install(ctx context.Context, prefix, spec string) (domain.InstalledPackage, error) {
	if err := ctx.Err(); err != nil {
		return domain.InstalledPackage{}, err
	}
	return f.InstallFunc(ctx, prefix, spec)
}

// FakeCommands runs programs by calling RunFunc.
type FakeCommands struct {
	RunFunc func(ctx context.Context, name string, args ...string) (domain.CommandResult, error)
}

var _ ports.Commands = (*FakeCommands)(nil)

// Run implements ports.Commands.
func (f *FakeCommands) Run(ctx context.Context, name string, args ...string) (domain.CommandResult, error) {
	if err := ctx.Err(); err != nil {
		return domain.CommandResult{}, err
	}
	return f.RunFunc(ctx, name, args...)
}

// RegistryContract checks a ports.Registry. serve makes a registry whose
// document is doc.
func RegistryContract(t *testing.T, serve func(t *testing.T, doc []byte) ports.Registry) {
	t.Run("parses entries", func(t *testing.T) {
		doc := `{"version":"1","agents":[{"id":"a-acp","version":"1.2.3","distribution":{"npx":{"package":"@x/a@1.2.3","args":["--acp"],"env":{"K":"v"}}}},` +
			`{"id":"b","distribution":{"binary":{"linux-x86_64":{"archive":"https://h/b.tar.gz","cmd":"./b"}}}}]}`
		r := serve(t, []byte(doc))
		got, err := r.Fetch(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		a, ok := got.Find("zzz", "a-acp")
		if !ok || a.Version != "1.2.3" || a.Distribution.Npx == nil || a.Distribution.Npx.Package != "@x/a@1.2.3" || a.Distribution.Npx.Env["K"] != "v" {
			t.Fatalf("entry a = %+v, %v", a, ok)
		}
		b, ok := got.Find("b")
		if !ok || b.Distribution.Binary["linux-x86_64"].Cmd != "./b" {
			t.Fatalf("entry b = %+v, %v", b, ok)
		}
	})
	t.Run("rejects a broken document", func(t *testing.T) {
		for _, doc := range []string{`not json`, `{"agents":[{"id":"../x","distribution":{}}]}`, `{}`} {
			if _, err := serve(t, []byte(doc)).Fetch(context.Background()); err == nil {
				t.Errorf("Fetch of %q: no error", doc)
			}
		}
	})
	t.Run("concurrent fetches", func(t *testing.T) {
		r := serve(t, []byte(`{"agents":[]}`))
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := r.Fetch(context.Background())
				errs <- err
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Error(err)
			}
		}
	})
}

// DownloaderContract checks a ports.Downloader. serve makes a downloader
// serving files and returns the URL of each name.
func DownloaderContract(t *testing.T, serve func(t *testing.T, files map[string][]byte) (ports.Downloader, func(name string) string)) {
	big := bytes.Repeat([]byte("0123456789abcdef"), 1<<16)
	d, url := serve(t, map[string][]byte{"small.txt": []byte("hello\n"), "big.bin": big})
	t.Run("exact bytes", func(t *testing.T) {
		for name, want := range map[string][]byte{"small.txt": []byte("hello\n"), "big.bin": big} {
			var got bytes.Buffer
			n, err := d.Download(context.Background(), url(name), &got)
			if err != nil {
				t.Fatal(err)
			}
			if n != int64(len(want)) || !bytes.Equal(got.Bytes(), want) {
				t.Errorf("%s: got %d bytes, want %d", name, n, len(want))
			}
		}
	})
	t.Run("missing file is an error naming the URL", func(t *testing.T) {
		_, err := d.Download(context.Background(), url("missing"), io.Discard)
		if err == nil || !bytes.Contains([]byte(err.Error()), []byte(url("missing"))) {
			t.Fatalf("err = %v, want one naming %s", err, url("missing"))
		}
	})
	t.Run("cancelled context", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, err := d.Download(ctx, url("small.txt"), io.Discard); err == nil {
			t.Fatal("no error with a cancelled context")
		}
	})
}

// PackageInstallerContract checks a ports.PackageInstaller with a package
// spec that installs a package named name with the executable bin.
func PackageInstallerContract(t *testing.T, p ports.PackageInstaller, spec, name, bin string) {
	t.Run("installs and describes", func(t *testing.T) {
		prefix := t.TempDir()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		got, err := p.Install(ctx, prefix, spec)
		if err != nil {
			t.Fatal(err)
		}
		if got.Name != name || got.Version == "" {
			t.Errorf("package = %s@%s, want %s@<version>", got.Name, got.Version, name)
		}
		path, ok := got.Bins[bin]
		if !ok {
			t.Fatalf("bins = %v, want %q", got.Bins, bin)
		}
		if fi, err := os.Stat(path); err != nil || fi.IsDir() {
			t.Errorf("bin %s: %v", path, err)
		}
	})
	t.Run("a missing package is an error", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		_, err := p.Install(ctx, t.TempDir(), "/nonexistent/sandbox-agent-no-such-package.tgz")
		if err == nil {
			t.Fatal("no error")
		}
	})
}

// Program is a command line for CommandsContract.
type Program struct {
	Name string
	Args []string
}

// CommandsContract checks a ports.Commands with three programs: one that
// prints "hello" and exits 0, one that writes "oops" to stderr and exits 3,
// and one that never ends.
func CommandsContract(t *testing.T, c ports.Commands, hello, fail, hang Program) {
	t.Run("output and exit 0", func(t *testing.T) {
		res, err := c.Run(context.Background(), hello.Name, hello.Args...)
		if err != nil || res.ExitCode != 0 || !bytes.Contains(res.Stdout, []byte("hello")) {
			t.Fatalf("res = %+v, err = %v", res, err)
		}
	})
	t.Run("non-zero exit is a result", func(t *testing.T) {
		res, err := c.Run(context.Background(), fail.Name, fail.Args...)
		if err != nil || res.ExitCode != 3 || !bytes.Contains(res.Stderr, []byte("oops")) {
			t.Fatalf("res = %+v, err = %v", res, err)
		}
	})
	t.Run("deadline ends a hung program", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		done := make(chan error, 1)
		go func() { _, err := c.Run(ctx, hang.Name, hang.Args...); done <- err }()
		select {
		case err := <-done:
			if err == nil {
				t.Fatal("no error for a killed program")
			}
		case <-time.After(30 * time.Second):
			t.Fatal("Run did not return after its deadline")
		}
	})
	t.Run("missing program is an error", func(t *testing.T) {
		if _, err := c.Run(context.Background(), "/nonexistent/sandbox-agent-no-such-program"); err == nil {
			t.Fatal("no error")
		}
	})
}
