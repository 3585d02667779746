// Package files is the filesystem use case: Files serves /v1/fs/* (list,
// stat, read, write, delete, mkdir, move, tar upload), and ConfigStore keeps
// the MCP server and skills config files of /v1/config/* (docs/api.md sections 6
// and 7). Both work on the same afero.Fs (the host, an os.Root-confined
// directory for --fs-root, or memory) and share one mapping of filesystem
// errors to domain kinds, which is why they are one package.
//
// It also holds the daemon's one archive extractor (extract.go): upload-batch
// uses it with all-or-nothing staging, and agent installs reach it through
// Limits (agents.Disk, wired by the composition root), so both follow the
// same rules and limits (--max-extract, --min-free).
//
// It imports no sibling app package; from ports only the filesystem's
// optional abilities (ports.Confiner, ports.RegularOpener), DiskSpace and
// WriteAtomic, through which every whole-file write (uploads, config
// files) goes, so readers never see half a file: the filesystem port is
// afero.Fs itself.
package files
