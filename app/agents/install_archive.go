package agents

import (
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"path/filepath"
	"strings"

	"github.com/spf13/afero"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
)

// download fetches url into the file dst.
func (in *Installer) download(ctx context.Context, agent, url, dst string) error {
	in.progress(agent, "download %s", url)
	ctx, cancel := context.WithTimeout(ctx, in.timeouts().Download)
	defer cancel()
	guard, err := newSpaceGuard(in.Space, in.MinFree, dst)
	if err != nil {
		return err
	}
	f, err := in.Fs.Create(dst)
	if err != nil {
		return stepFailed(agent, "download "+url, err)
	}
	_, err = in.Downloader.Download(ctx, url, guard.writer(f))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return stepFailed(agent, "download "+url, err)
	}
	return nil
}

// installArchive downloads a registry binary distribution into prefix and
// returns the command it names.
func (in *Installer) installArchive(ctx context.Context, agent, prefix string, t *domain.BinaryTarget) (launchCommand, error) {
	dist := filepath.Join(prefix, "dist")
	if err := in.Fs.MkdirAll(dist, 0o755); err != nil {
		return launchCommand{}, stepFailed(agent, "create install directory", err)
	}
	tmp := filepath.Join(prefix, "download")
	if err := in.download(ctx, agent, t.Archive, tmp); err != nil {
		return launchCommand{}, err
	}
	cmdName, ok := domain.SafeArchivePath(strings.TrimPrefix(t.Cmd, "./"))
	if !ok {
		return launchCommand{}, stepFailed(agent, "unpack "+t.Archive, fmt.Errorf("command %q leaves the archive", t.Cmd))
	}
	kind := domain.ArchiveKind(t.Archive)
	if kind == "raw" {
		if err := in.Fs.Rename(tmp, filepath.Join(dist, path.Base(cmdName))); err != nil {
			return launchCommand{}, stepFailed(agent, "unpack "+t.Archive, err)
		}
		cmdName = path.Base(cmdName)
	} else {
		in.progress(agent, "unpack %s", path.Base(t.Archive))
		if err := in.unpack(ctx, tmp, kind, dist); err != nil {
			return launchCommand{}, stepFailed(agent, "unpack "+t.Archive, err)
		}
		_ = in.Fs.Remove(tmp)
	}
	cmd, err := findExecutable(in.Fs, dist, cmdName)
	if err != nil {
		return launchCommand{}, stepFailed(agent, "unpack "+t.Archive, err)
	}
	if err := chmodExec(in.Fs, cmd); err != nil {
		return launchCommand{}, stepFailed(agent, "unpack "+t.Archive, err)
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
func (in *Installer) installNative(ctx context.Context, agent string, recipe domain.AgentRecipe, opts domain.InstallOptions) (domain.Artifact, error) {
	n := recipe.Native
	if !opts.Reinstall && opts.AgentVersion == "" {
		if p, src, ok := in.NativePath(agent); ok {
			return domain.Artifact{Kind: domain.ArtifactNativeAgent, Path: p, Source: src, Version: in.Version(ctx, p)}, nil
		}
	}
	platform := n.Platforms[in.Platform]
	if platform == "" {
		return domain.Artifact{}, stepFailed(agent, "native "+n.Binary, fmt.Errorf("no %s build for platform %q", n.Binary, in.Platform))
	}
	tmpDir := filepath.Join(in.Dir, fmt.Sprintf(".native-%s-%d", n.Binary, in.now().UnixNano()))
	if err := in.Fs.MkdirAll(tmpDir, 0o755); err != nil {
		return domain.Artifact{}, stepFailed(agent, "create install directory", err)
	}
	defer func() { _ = in.Fs.RemoveAll(tmpDir) }()

	version := opts.AgentVersion
	var url string
	switch tmpl := in.NativeURLs[agent]; {
	case tmpl != "":
		v := version
		if v == "" {
			v = "latest"
		}
		url = domain.ExpandURL(tmpl, v, platform)
	case version != "":
		url = domain.ExpandURL(n.URL, version, platform)
	case n.LatestURL != "":
		url = domain.ExpandURL(n.LatestURL, "", platform)
	default:
		vf := filepath.Join(tmpDir, "version")
		if err := in.download(ctx, agent, n.VersionURL, vf); err != nil {
			return domain.Artifact{}, err
		}
		b, err := afero.ReadFile(in.Fs, vf)
		if err != nil {
			return domain.Artifact{}, stepFailed(agent, "download "+n.VersionURL, err)
		}
		version = strings.TrimSpace(string(b))
		if version == "" || strings.ContainsAny(version, "/ \n") {
			return domain.Artifact{}, stepFailed(agent, "download "+n.VersionURL, fmt.Errorf("not a version: %q", truncate(version, 80)))
		}
		url = domain.ExpandURL(n.URL, version, platform)
	}

	tmp := filepath.Join(tmpDir, "download")
	if err := in.download(ctx, agent, url, tmp); err != nil {
		return domain.Artifact{}, err
	}
	src := tmp
	if kind := domain.ArchiveKind(url); kind != "raw" {
		x := filepath.Join(tmpDir, "x")
		if err := in.unpack(ctx, tmp, kind, x); err != nil {
			return domain.Artifact{}, stepFailed(agent, "unpack "+url, err)
		}
		member := n.Member
		if member == "" {
			member = n.Binary
		}
		p, err := findExecutable(in.Fs, x, domain.ExpandURL(member, version, platform))
		if err != nil {
			return domain.Artifact{}, stepFailed(agent, "unpack "+url, err)
		}
		src = p
	}
	dst := filepath.Join(in.Dir, n.Binary)
	if err := chmodExec(in.Fs, src); err != nil {
		return domain.Artifact{}, stepFailed(agent, "install "+dst, err)
	}
	if err := in.Fs.Rename(src, dst); err != nil {
		return domain.Artifact{}, stepFailed(agent, "install "+dst, err)
	}
	if v := in.Version(ctx, dst); v != "" {
		version = v
	}
	in.progress(agent, "installed native %s %s", n.Binary, version)
	return domain.Artifact{Kind: domain.ArtifactNativeAgent, Path: dst, Source: domain.SourceFallback, Version: version}, nil
}

// unpack extracts the archive file src of kind ("zip", "tar.gz", "tar")
// into dst through the daemon's one extractor (extract.go): confined to
// dst, links checked against the disk, bytes counted against MaxExtract
// and the free space kept above MinFree. Links are skipped on a backend
// without them (the command is then looked up by name).
func (in *Installer) unpack(ctx context.Context, src, kind, dst string) error {
	fsys := in.Fs
	if err := fsys.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	f, err := openRegular(fsys, src)
	if err != nil {
		return err
	}
	defer f.Close()
	var next archiveReader
	switch kind {
	case "zip":
		fi, err := f.Stat()
		if err != nil {
			return err
		}
		if next, err = zipEntries(f, fi.Size()); err != nil {
			return err
		}
	case "tar.gz":
		gz, err := gzip.NewReader(f)
		if err != nil {
			return fmt.Errorf("gzip: %w", err)
		}
		defer gz.Close()
		next = tarEntries(gz, nil)
	case "tar":
		next = tarEntries(f, nil)
	default:
		return fmt.Errorf("unsupported archive kind %q", kind)
	}
	limit := in.MaxExtract
	if limit <= 0 {
		limit = DefaultMaxExtract
	}
	x := &extraction{limit: limit, ctx: ctx, skipSym: true}
	if kind == "zip" {
		x.format = "zip"
	}
	if x.guard, err = newSpaceGuard(in.Space, in.MinFree, dst); err != nil {
		return err
	}
	view, closeView, err := confine(fsys, dst)
	if err != nil {
		return err
	}
	defer closeView()
	x.view = view
	return x.extract(next)
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}
