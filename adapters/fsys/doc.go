// Package fsys holds the filesystem backends of the daemon. The filesystem
// port is afero.Fs itself; this package only chooses and builds the
// implementation at start-up:
//
//   - NewOS: the host filesystem, unconfined (the reference's behaviour);
//   - OpenRoot: the host filesystem confined to one directory with os.Root,
//     so no path, symbolic link or ".." can reach outside it (--fs-root);
//   - NewMemory: an in-memory filesystem for tests and demos (--fs memory);
//   - AsUser: a host backend whose writes are made as another user (the
//     daemon's --run-as), so what the API creates is that user's.
//
// It also holds what the daemon needs to keep its own files out of the
// filesystem API: Secrets (ports.Secrets: its credential and policy files
// by device and inode, its /proc by resolving each path) and ReadRegular,
// the one way the daemon reads the files it trusts (regular files only,
// capped, time-bounded); and Spill (ports.Spill: unnamed scratch files in
// --replay-dir for the older part of each ACP instance's replay).
//
// Every backend passes the contract suite in ports/porttest.
package fsys
