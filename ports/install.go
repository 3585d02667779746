package ports

import (
	"context"
	"io"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
)

// Registry reads the ACP agent registry.
type Registry interface {
	// Fetch downloads and parses the registry document. It is bounded in
	// time by ctx and by the implementation's own timeouts; failures name
	// the registry's URL. Safe for concurrent use.
	Fetch(ctx context.Context) (domain.Registry, error)
}

// Downloader fetches URLs (agent archives, native binaries, version files).
type Downloader interface {
	// Download writes the body of url to w and returns the bytes written.
	// A non-2xx answer is an error naming the URL and status. It never
	// blocks past ctx; the caller owns and closes w. Safe for concurrent use.
	Download(ctx context.Context, url string, w io.Writer) (int64, error)
}

// PackageInstaller installs npm packages.
type PackageInstaller interface {
	// Install installs spec (name[@version], a tarball path or URL) with its
	// dependencies into prefix (created when missing) and describes the
	// installed package. It returns when the install has ended; at ctx's
	// deadline the install is killed. Errors carry the tail of the
	// installer's output. Concurrent calls must use different prefixes.
	Install(ctx context.Context, prefix, spec string) (domain.InstalledPackage, error)
}

// Commands runs short-lived programs: launcher verification (--help) and
// version probes (--version).
type Commands interface {
	// Run runs name with args and an empty stdin, in its own process group,
	// and waits for it. A non-zero exit is reported in the result, not as an
	// error; the error is for a program that could not start or was killed
	// at ctx's deadline (then the whole group is killed). Output is bounded.
	Run(ctx context.Context, name string, args ...string) (domain.CommandResult, error)
}
