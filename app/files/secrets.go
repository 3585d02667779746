package files

import (
	"fmt"
	"io/fs"

	"github.com/spf13/afero"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
	"github.com/sandbox-agent-go/sandbox-agent/ports"
)

// The daemon's own secrets (its token files, policy modules and configs,
// agents file, and its /proc) are never data, whatever a policy grants:
// every operation asks ports.Secrets about the paths it touches before it
// touches them, a read checks the file it opened once more (so a link
// swapped in between is caught), and a listing leaves them out. A nil
// Secrets (the memory backend, which holds no host file) refuses nothing.

// secretError is the 403 for a path that is, or leads to, a secret.
func secretError(shown, why string) error {
	return domain.PermissionDenied(fmt.Sprintf("%s is one of the daemon's own secrets (%s)", shown, why))
}

// guardPath refuses p (shown as shown) when it is a secret; see
// ports.Secrets.Secret for follow.
func guardPath(s ports.Secrets, shown, p string, follow bool) error {
	if s == nil {
		return nil
	}
	if why := s.Secret(p, follow); why != "" {
		return secretError(shown, why)
	}
	return nil
}

// guardFile refuses an opened file that is a secret, closing it.
func guardFile(s ports.Secrets, shown string, f afero.File) error {
	if s == nil {
		return nil
	}
	if why := s.SecretFile(f); why != "" {
		f.Close()
		return secretError(shown, why)
	}
	return nil
}

// guardInfo refuses a file found by a stat that is a secret.
func guardInfo(s ports.Secrets, shown string, fi fs.FileInfo) error {
	if s == nil || fi == nil {
		return nil
	}
	if why := s.SecretInfo(fi); why != "" {
		return secretError(shown, why)
	}
	return nil
}
