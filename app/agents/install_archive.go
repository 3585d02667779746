package agents

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"path/filepath"
	"strings"

	"github.com/spf13/afero"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
)

// download fetches url into the file dst.
func (inst *Installer) download(ctx context.Context, agent, url, dst string) error {
	step := "download " + domain.ShownURL(url)
	inst.progress(agent, "%s", step)
	d := inst.timeouts().Download
	ctx, cancel := context.WithTimeoutCause(ctx, d, fmt.Errorf("the download took longer than %v", d))
	defer cancel()
	f, err := inst.Fs.Create(dst)
	if err != nil {
		return stepFailed(agent, step, err)
	}
	w, err := inst.guard(dst, f)
	if err != nil {
		f.Close()
		_ = inst.Fs.Remove(dst)
		return err
	}
	_, err = inst.Downloader.Download(ctx, url, w)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return stepFailed(agent, step, err)
	}
	return nil
}

// installArchive downloads a registry binary distribution into prefix and
// returns the command it names.
func (inst *Installer) installArchive(ctx context.Context, agent, prefix string, t *domain.BinaryTarget) (launchCommand, error) {
	dist := filepath.Join(prefix, "dist")
	if err := inst.Fs.MkdirAll(dist, 0o755); err != nil {
		return launchCommand{}, stepFailed(agent, "create install directory", err)
	}
	tmp := filepath.Join(prefix, "download")
	if err := inst.download(ctx, agent, t.Archive, tmp); err != nil {
		return launchCommand{}, err
	}
	step := "unpack " + domain.ShownURL(t.Archive)
	cmdName, ok := domain.SafeArchivePath(strings.TrimPrefix(t.Cmd, "./"))
	if !ok {
		return launchCommand{}, stepFailed(agent, step, fmt.Errorf("command %q leaves the archive", t.Cmd))
	}
	kind := domain.ArchiveKind(t.Archive)
	if kind == "raw" {
		if err := inst.Fs.Rename(tmp, filepath.Join(dist, path.Base(cmdName))); err != nil {
			return launchCommand{}, stepFailed(agent, step, err)
		}
		cmdName = path.Base(cmdName)
	} else {
		inst.progress(agent, "unpack %s", path.Base(t.Archive))
		if err := inst.unpack(ctx, tmp, kind, dist); err != nil {
			return launchCommand{}, stepFailed(agent, step, err)
		}
		_ = inst.Fs.Remove(tmp)
	}
	cmd, err := findExecutable(inst.Fs, dist, cmdName)
	if err != nil {
		return launchCommand{}, stepFailed(agent, step, err)
	}
	if err := chmodExec(inst.Fs, cmd); err != nil {
		return launchCommand{}, stepFailed(agent, step, err)
	}
	return launchCommand{path: cmd, args: t.Args, env: copyEnv(t.Env)}, nil
}

// findExecutable returns root/name when it is a file, else the first file
// under root whose base name is name's.
func findExecutable(fsys afero.Fs, root, name string) (string, error) {
	if p := filepath.Join(root, filepath.FromSlash(name)); isFile(fsys, p) {
		return p, nil
	}
	base := path.Base(name)
	var found string
	errFound := errors.New("found")
	err := afero.Walk(fsys, root, func(p string, fi fs.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if !fi.IsDir() && fi.Name() == base {
			found = p
			return errFound
		}
		return nil
	})
	if found != "" {
		return found, nil
	}
	if err != nil && !errors.Is(err, errFound) {
		return "", err
	}
	return "", fmt.Errorf("the archive has no %q", name)
}

// installNative provides the native binary of a known agent at
// <Dir>/<binary>: an existing one is reused unless a version is asked for.
func (inst *Installer) installNative(ctx context.Context, agent string, recipe domain.AgentRecipe, opts domain.InstallOptions) (domain.Artifact, error) {
	n := recipe.Native
	if !opts.Reinstall && opts.AgentVersion == "" {
		if p, src, ok := inst.NativePath(agent); ok {
			return domain.Artifact{Kind: domain.ArtifactNativeAgent, Path: p, Source: src, Version: inst.Version(ctx, p)}, nil
		}
	}
	platform := n.Platforms[inst.Platform]
	if platform == "" {
		return domain.Artifact{}, stepFailed(agent, "native "+n.Binary, fmt.Errorf("no %s build for platform %q", n.Binary, inst.Platform))
	}
	tmpDir := filepath.Join(inst.Dir, fmt.Sprintf(".native-%s-%d", n.Binary, inst.now().UnixNano()))
	if err := inst.Fs.MkdirAll(tmpDir, 0o755); err != nil {
		return domain.Artifact{}, stepFailed(agent, "create install directory", err)
	}
	defer func() { _ = inst.Fs.RemoveAll(tmpDir) }()

	version := opts.AgentVersion
	var url string
	switch tmpl := inst.NativeURLs[agent]; {
	case tmpl != "":
		v := version
		v = cmp.Or(v, "latest")
		url = domain.ExpandURL(tmpl, v, platform)
	case version != "":
		url = domain.ExpandURL(n.URL, version, platform)
	case n.LatestURL != "":
		url = domain.ExpandURL(n.LatestURL, "", platform)
	default:
		vf := filepath.Join(tmpDir, "version")
		if err := inst.download(ctx, agent, n.VersionURL, vf); err != nil {
			return domain.Artifact{}, err
		}
		b, err := afero.ReadFile(inst.Fs, vf)
		if err != nil {
			return domain.Artifact{}, stepFailed(agent, "download "+domain.ShownURL(n.VersionURL), err)
		}
		version = strings.TrimSpace(string(b))
		if version == "" || strings.ContainsAny(version, "/ \n") {
			return domain.Artifact{}, stepFailed(agent, "download "+domain.ShownURL(n.VersionURL), fmt.Errorf("not a version: %q", truncate(version, 80)))
		}
		url = domain.ExpandURL(n.URL, version, platform)
	}

	tmp := filepath.Join(tmpDir, "download")
	if err := inst.download(ctx, agent, url, tmp); err != nil {
		return domain.Artifact{}, err
	}
	src := tmp
	if kind := domain.ArchiveKind(url); kind != "raw" {
		x := filepath.Join(tmpDir, "x")
		if err := inst.unpack(ctx, tmp, kind, x); err != nil {
			return domain.Artifact{}, stepFailed(agent, "unpack "+domain.ShownURL(url), err)
		}
		member := n.Member
		member = cmp.Or(member, n.Binary)
		p, err := findExecutable(inst.Fs, x, domain.ExpandURL(member, version, platform))
		if err != nil {
			return domain.Artifact{}, stepFailed(agent, "unpack "+domain.ShownURL(url), err)
		}
		src = p
	}
	dst := filepath.Join(inst.Dir, n.Binary)
	if err := chmodExec(inst.Fs, src); err != nil {
		return domain.Artifact{}, stepFailed(agent, "install "+dst, err)
	}
	if err := inst.Fs.Rename(src, dst); err != nil {
		return domain.Artifact{}, stepFailed(agent, "install "+dst, err)
	}
	if v := inst.Version(ctx, dst); v != "" {
		version = v
	}
	inst.progress(agent, "installed native %s %s", n.Binary, version)
	return domain.Artifact{Kind: domain.ArtifactNativeAgent, Path: dst, Source: domain.SourceFallback, Version: version}, nil
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

// Disk is what installs need from the files use case, wired by the
// composition root: the daemon's one archive extractor (confined to its
// target, counted against --max-extract) and the free-space floor
// (--min-free). Both fail with domain errors (413, 507) that reach the
// client as they are.
type Disk interface {
	// Unpack extracts the archive file src of kind ("zip", "tar.gz",
	// "tar") into the directory dst of fsys; links are skipped where fsys
	// has none. It never writes outside dst.
	Unpack(ctx context.Context, fsys afero.Fs, src, kind, dst string) error
	// GuardWriter wraps w, a writer to a new file at path, so that writing
	// stops with insufficient_storage below the floor.
	GuardWriter(path string, w io.Writer) (io.Writer, error)
}

// unpack extracts through Disk.
func (inst *Installer) unpack(ctx context.Context, src, kind, dst string) error {
	if inst.Disk == nil {
		return errors.New("no archive extractor configured")
	}
	return inst.Disk.Unpack(ctx, inst.Fs, src, kind, dst)
}

// guard wraps a download's writer with the free-space floor, if any.
func (inst *Installer) guard(path string, w io.Writer) (io.Writer, error) {
	if inst.Disk == nil {
		return w, nil
	}
	return inst.Disk.GuardWriter(path, w)
}
