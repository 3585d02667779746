// Package npm runs the programs the installer needs: npm itself, to install
// an agent's ACP adapter package into a private prefix (ports.PackageInstaller),
// and short probes of installed programs such as "--help" and "--version"
// (ports.Commands).
//
// Every program runs in its own process group with an empty stdin and
// bounded output; at the context's deadline the whole group is killed, so a
// hung npm or an agent that ignores --help never hangs an install.
package npm
