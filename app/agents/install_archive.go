package agents

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
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

// maxUnpackedBytes bounds what one archive may expand to, so a hostile
// archive cannot fill the disk.
const maxUnpackedBytes = 4 << 30

// download fetches url into the file dst.
func (in *Installer) download(ctx context.Context, agent, url, dst string) error {
	in.progress(agent, "download %s", url)
	ctx, cancel := context.WithTimeout(ctx, in.timeouts().Download)
	defer cancel()
	f, err := in.Fs.Create(dst)
	if err != nil {
		return stepFailed(agent, "download "+url, err)
	}
	_, err = in.Downloader.Download(ctx, url, f)
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
		if err := unpack(in.Fs, tmp, kind, dist); err != nil {
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
		if err := unpack(in.Fs, tmp, kind, x); err != nil {
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
// into dst. Entries that would land outside dst (absolute names, "..",
// links pointing out) are refused and end the unpacking.
func unpack(fsys afero.Fs, src, kind, dst string) error {
	if err := fsys.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	f, err := fsys.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	budget := &budget{left: maxUnpackedBytes}
	switch kind {
	case "zip":
		fi, err := f.Stat()
		if err != nil {
			return err
		}
		return unzip(fsys, f, fi.Size(), dst, budget)
	case "tar.gz":
		gz, err := gzip.NewReader(f)
		if err != nil {
			return fmt.Errorf("gzip: %w", err)
		}
		defer gz.Close()
		return untar(fsys, gz, dst, budget)
	case "tar":
		return untar(fsys, f, dst, budget)
	}
	return fmt.Errorf("unsupported archive kind %q", kind)
}

type budget struct{ left int64 }

func (b *budget) copy(w io.Writer, r io.Reader) error {
	n, err := io.Copy(w, io.LimitReader(r, b.left+1))
	b.left -= n
	if b.left < 0 {
		return fmt.Errorf("archive expands to more than %d bytes", int64(maxUnpackedBytes))
	}
	return err
}

func unzip(fsys afero.Fs, r io.ReaderAt, size int64, dst string, b *budget) error {
	zr, err := zip.NewReader(r, size)
	if err != nil {
		return fmt.Errorf("zip: %w", err)
	}
	for _, zf := range zr.File {
		name, ok := domain.SafeArchivePath(zf.Name)
		if !ok {
			return fmt.Errorf("archive entry %q escapes the target", zf.Name)
		}
		target := filepath.Join(dst, filepath.FromSlash(name))
		mode := zf.Mode()
		switch {
		case mode.IsDir():
			if err := fsys.MkdirAll(target, 0o755); err != nil {
				return err
			}
		case mode&fs.ModeSymlink != 0:
			rc, err := zf.Open()
			if err != nil {
				return err
			}
			var link bytes.Buffer
			_, err = io.Copy(&link, io.LimitReader(rc, 4096))
			rc.Close()
			if err != nil {
				return err
			}
			if err := symlink(fsys, dst, name, link.String()); err != nil {
				return err
			}
		default:
			rc, err := zf.Open()
			if err != nil {
				return err
			}
			err = writeFile(fsys, target, rc, mode, b)
			rc.Close()
			if err != nil {
				return err
			}
		}
	}
	return nil
}

func untar(fsys afero.Fs, r io.Reader, dst string, b *budget) error {
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("tar: %w", err)
		}
		name, ok := domain.SafeArchivePath(h.Name)
		if !ok {
			if path.Clean(strings.ReplaceAll(h.Name, "\\", "/")) == "." {
				continue // the "./" entry many tars start with
			}
			return fmt.Errorf("archive entry %q escapes the target", h.Name)
		}
		target := filepath.Join(dst, filepath.FromSlash(name))
		switch h.Typeflag {
		case tar.TypeDir:
			if err := fsys.MkdirAll(target, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := writeFile(fsys, target, tr, h.FileInfo().Mode(), b); err != nil {
				return err
			}
		case tar.TypeSymlink:
			if err := symlink(fsys, dst, name, h.Linkname); err != nil {
				return err
			}
		case tar.TypeLink:
			old, ok := domain.SafeArchivePath(h.Linkname)
			if !ok {
				return fmt.Errorf("archive link %q -> %q escapes the target", h.Name, h.Linkname)
			}
			src, err := fsys.Open(filepath.Join(dst, filepath.FromSlash(old)))
			if err != nil {
				return fmt.Errorf("archive link %q: %w", h.Name, err)
			}
			err = writeFile(fsys, target, src, h.FileInfo().Mode(), b)
			src.Close()
			if err != nil {
				return err
			}
		default:
			// Devices, fifos and the like have no place in an agent archive.
		}
	}
}

func writeFile(fsys afero.Fs, target string, r io.Reader, mode fs.FileMode, b *budget) error {
	if err := fsys.MkdirAll(filepath.Dir(target), 0o755); err != nil {
		return err
	}
	perm := fs.FileMode(0o644)
	if mode&0o111 != 0 {
		perm = 0o755
	}
	f, err := fsys.Create(target)
	if err != nil {
		return err
	}
	err = b.copy(f, r)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return fsys.Chmod(target, perm)
}

// symlink creates a link at name inside root when its target stays inside
// root; filesystems without links get nothing (the command is then looked
// up by name).
func symlink(fsys afero.Fs, root, name, target string) error {
	if strings.HasPrefix(target, "/") {
		return fmt.Errorf("archive link %q -> %q escapes the target", name, target)
	}
	if _, ok := domain.SafeArchivePath(path.Join(path.Dir(name), target)); !ok {
		return fmt.Errorf("archive link %q -> %q escapes the target", name, target)
	}
	l, ok := fsys.(afero.Linker)
	if !ok {
		return nil
	}
	p := filepath.Join(root, filepath.FromSlash(name))
	if err := fsys.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	return l.SymlinkIfPossible(target, p)
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}
