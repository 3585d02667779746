package agents

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/spf13/afero"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
	"github.com/sandbox-agent-go/sandbox-agent/ports"
)

// launcherScript is the shell script that starts an agent process: fixed
// environment, then exec of the command with its arguments and the
// launcher's own.
func launcherScript(agent string, cmd launchCommand, p installPlan) ([]byte, error) {
	var b bytes.Buffer
	b.WriteString("#!/bin/sh\n")
	// The comment holds text of the registry's: one line, or what follows
	// a newline would run.
	fmt.Fprintf(&b, "# ACP launcher for %s (%s %s), written by sandbox-agent.\n", oneLine(agent), p.source, oneLine(p.version))
	fmt.Fprintf(&b, "# Reinstall with: sandbox-agent install-agent %s --reinstall\n", agent)
	keys := make([]string, 0, len(cmd.env))
	for k := range cmd.env {
		if !validEnvName(k) {
			return nil, fmt.Errorf("invalid environment variable name %q", k)
		}
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "export %s=%s\n", k, shellQuote(cmd.env[k]))
	}
	b.WriteString("exec " + shellQuote(cmd.path))
	for _, a := range cmd.args {
		b.WriteString(" " + shellQuote(a))
	}
	b.WriteString(" \"$@\"\n")
	return b.Bytes(), nil
}

// oneLine makes s safe for one line of a script comment, a log or a
// terminal: control characters (a newline ends the launcher's comment,
// an escape sequence rewrites a terminal) become '?', and it is cut to
// 128 bytes.
func oneLine(s string) string {
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || r == utf8.RuneError {
			return '?'
		}
		return r
	}, s)
	return strings.ToValidUTF8(truncate(s, 128), "") // a rune cut in two goes
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func validEnvName(k string) bool {
	if k == "" {
		return false
	}
	for i, c := range k {
		if !(c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// writeLauncher writes the launcher next to its final place, verifies it
// with --help, and only then moves it into place: an unverified launcher
// never counts as an install.
func (inst *Installer) writeLauncher(ctx context.Context, agent, launcher string, cmd launchCommand, p installPlan) error {
	script, err := launcherScript(agent, cmd, p)
	if err != nil {
		return stepFailed(agent, "write launcher", err)
	}
	step := "verify " + filepath.Base(launcher) + " --help"
	verify := func(tmp string) error {
		inst.progress(agent, "%s", step)
		vctx, cancel := context.WithTimeout(ctx, inst.timeouts().Verify)
		defer cancel()
		res, err := inst.Commands.Run(vctx, tmp, "--help")
		if err == nil && res.ExitCode != 0 {
			err = fmt.Errorf("exit status %d: %s", res.ExitCode, tailLines(string(res.Stderr)+string(res.Stdout), 16))
		}
		if err != nil {
			return &verifyError{err}
		}
		return nil
	}
	err = ports.WriteAtomic(inst.Fs, launcher, "."+filepath.Base(launcher)+"-*.tmp", 0o755, func(w io.Writer) error {
		_, err := w.Write(script)
		return err
	}, verify)
	var ve *verifyError
	if errors.As(err, &ve) {
		return stepFailed(agent, step, ve.err)
	}
	if err != nil {
		return stepFailed(agent, "write launcher", err)
	}
	return nil
}

// verifyError marks the launcher's --help check failing, as opposed to
// writing it.
type verifyError struct{ err error }

func (e *verifyError) Error() string { return e.err.Error() }

// tailLines keeps the last n lines of s.
func tailLines(s string, n int) string {
	s = strings.TrimRight(s, "\n")
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// manifest records one agent's install next to its packages.
type manifest struct {
	Agent       string            `json:"agent"`
	InstalledAt string            `json:"installedAt"`
	Package     string            `json:"package,omitempty"`
	Command     string            `json:"command"`
	Args        []string          `json:"args,omitempty"`
	Artifacts   []domain.Artifact `json:"artifacts"`
}

const manifestName = "manifest.json"

func (inst *Installer) writeManifest(agent string, m manifest) error {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	dir := inst.storeDir(agent)
	if err := inst.Fs.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return ports.WriteAtomic(inst.Fs, filepath.Join(dir, manifestName), ".manifest-*.tmp", 0o644, func(w io.Writer) error {
		_, err := w.Write(append(b, '\n'))
		return err
	}, nil)
}

// AgentProcessVersion is the recorded version of an installed agent
// process, or "" when none was recorded.
func (inst *Installer) AgentProcessVersion(agent string) string {
	b, err := afero.ReadFile(inst.Fs, filepath.Join(inst.storeDir(agent), manifestName))
	if err != nil {
		return ""
	}
	var m manifest
	if json.Unmarshal(b, &m) != nil {
		return ""
	}
	for _, a := range m.Artifacts {
		if a.Kind == domain.ArtifactAgentProcess {
			return a.Version
		}
	}
	return ""
}

// Version runs "<path> --version" and returns its first line, without a
// trailing " (...)" remark; "" when the program does not say.
func (inst *Installer) Version(ctx context.Context, path string) string {
	if inst.Commands == nil {
		return ""
	}
	ctx, cancel := context.WithTimeout(ctx, inst.timeouts().Verify)
	defer cancel()
	res, err := inst.Commands.Run(ctx, path, "--version")
	if err != nil || res.ExitCode != 0 {
		return ""
	}
	return parseVersion(string(res.Stdout) + "\n" + string(res.Stderr))
}

func parseVersion(out string) string {
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		if i := strings.Index(line, " ("); i >= 0 {
			line = line[:i]
		}
		return truncate(line, 200)
	}
	return ""
}
