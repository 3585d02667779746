// Package agents is the agents use case: resolving an agent id to the
// command that runs it (Agents, which implements acp.Launcher), installing
// agents from the ACP registry, npm or native archives (Installer, with its
// launchers and manifests under the install directory), and the catalogue
// behind GET /v1/agents (Catalog, with the reference's capabilities and
// config options embedded from catalog_reference.json).
//
// It reaches the network and other programs only through the ports
// (Registry, Downloader, PackageInstaller, Commands) and the disk through
// afero.Fs; archives are extracted by the files use case's one extractor,
// which it sees as Disk (wired by the composition root). It imports no sibling app package: which agents are running
// comes in as a function (Catalog.Running), wired by the composition root.
package agents
