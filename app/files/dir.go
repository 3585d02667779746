package files

import (
	"context"
	"errors"
	"io/fs"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
)

// Dir resolves p as every /v1/fs path is resolved and checks through Fs
// that it is a directory, so the working directory of a process obeys the
// same rules and the same --fs-root confinement as the filesystem API
// (a path or link leading outside the root is refused).
func (f *Files) Dir(ctx context.Context, p string) (string, error) {
	target, err := f.Resolve(p)
	if err != nil {
		return "", err
	}
	fi, err := f.Fs.Stat(target)
	if errors.Is(err, fs.ErrNotExist) {
		// A missing working directory is a bad argument of the request
		// (400), not a missing resource at its URL (404 not_found).
		return "", domain.InvalidRequest("path not found: %s", target).Because(err)
	}
	if err != nil {
		return "", fsError(target, err)
	}
	if !fi.IsDir() {
		return "", domain.InvalidRequest("path is not a directory: %s", target)
	}
	return target, ctx.Err()
}
