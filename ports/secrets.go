package ports

import (
	"io/fs"

	"github.com/spf13/afero"
)

// Secrets recognises the daemon's own secrets on the host filesystem: the
// files it reads its credentials and policies from, and everything under
// its own /proc entries (its environment, command line, memory and open
// descriptors). The files and config use cases ask it before they serve,
// list, write, move or delete a path a client named, and the processes use
// case before it runs anything in a client's directory, so that no grant of
// a policy turns a secret into data.
//
// Files are recognised by what they are, not by their name: a hard link,
// a rename or a symbolic link (or a chain of them, /dev/fd and /proc/self
// included) leads to the same answer. A name that does not exist is not a
// secret unless it lies inside a protected place.
//
// Every method answers "" when the file is not a secret, else a short
// description of whose secret it is ("the daemon's token file"), for the
// 403 the use case builds. Each call stats the host filesystem a few times
// and never blocks beyond that; safe for concurrent use.
type Secrets interface {
	// Secret judges the absolute host path name, resolved link by link as
	// the kernel would. A path that passes through a protected place on
	// the way counts. With follow, the operation acts on what name leads
	// to (read, stat, list, write through a link). Without, it acts on the
	// entry name itself (delete, move, replace): its last link is not
	// followed, and a directory counts when a protected file lies in it.
	Secret(name string, follow bool) string
	// SecretInfo judges a file by what it is (an Lstat or Stat result),
	// without resolving any path: the cheap check for entries met one by
	// one under a directory already judged.
	SecretInfo(fi fs.FileInfo) string
	// SecretFile judges a file already opened (by what it is), so that a
	// link swapped between Secret and the open is still caught.
	SecretFile(f afero.File) string
	// Hide returns the entries of the directory dir (absolute, as Readdir
	// returned them, links not followed) minus those that are secrets or
	// lead to one. It may reuse entries' backing array.
	Hide(dir string, entries []fs.FileInfo) []fs.FileInfo
}
