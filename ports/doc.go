// Package ports holds the interfaces the app packages need from the world
// they do not control: agent processes (AgentRunner, AgentProcess; used by
// app/acp), the user's processes on pipes or a terminal (ProcessStarter,
// Process, ProcessIO; used by app/processes), the ACP registry, downloads,
// npm packages and short-lived commands for installs and version probes
// (Registry, Downloader,
// PackageInstaller, Commands; used by app/agents), and untrusted policy code
// (Authorizer, and its optional ability BodylessAuthorizer; implemented by
// extensions/wasmpolicy, consulted by app/authz for adapters/httpapi). Each is written from the consumer's side, small and
// stdlib-shaped; ports/porttest holds the contract suites every
// implementation (real adapter and test fake alike) must pass, and the
// shared fakes.
//
// The filesystem port is afero.Fs itself and is not wrapped here; fs.go
// names the optional abilities a backend adds, used by app/files (Confiner:
// a confined view for archive extraction, whose own views may confine
// further, one directory handle each; HardLinker: hard links in it;
// DirRenamer: one rename between two such views; RegularOpener: opens
// that cannot block on a FIFO) and the free space of a filesystem
// (DiskSpace), all implemented by adapters/fsys; secrets.go the daemon's
// own secrets (Secrets), which app/files and app/processes refuse to
// touch; spill.go the scratch files the ACP replay buffers keep their
// older bytes in (Spill, SpillFile; adapters/fsys).
package ports
