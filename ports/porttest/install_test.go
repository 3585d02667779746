package porttest

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
	"github.com/sandbox-agent-go/sandbox-agent/ports"
)

func TestFakeRegistry(t *testing.T) {
	RegistryContract(t, func(t *testing.T, doc []byte) ports.Registry { return RegistryOf(doc) })
}

func TestFakeDownloader(t *testing.T) {
	DownloaderContract(t, func(t *testing.T, files map[string][]byte) (ports.Downloader, func(string) string) {
		d := &FakeDownloader{Files: map[string][]byte{}}
		for name, b := range files {
			d.Files["fake://"+name] = b
		}
		return d, func(name string) string { return "fake://" + name }
	})
}

func TestFakePackageInstaller(t *testing.T) {
	p := &FakePackageInstaller{InstallFunc: func(ctx context.Context, prefix, spec string) (domain.InstalledPackage, error) {
		if spec != "fixture@1.0.0" {
			return domain.InstalledPackage{}, errors.New("npm install " + spec + ": 404")
		}
		bin := filepath.Join(prefix, "node_modules", ".bin", "fixture")
		if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
			return domain.InstalledPackage{}, err
		}
		if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
			return domain.InstalledPackage{}, err
		}
		return domain.InstalledPackage{Name: "fixture", Version: "1.0.0", Bins: map[string]string{"fixture": bin}}, nil
	}}
	PackageInstallerContract(t, p, "fixture@1.0.0", "fixture", "fixture")
}

func TestFakeCommands(t *testing.T) {
	c := &FakeCommands{RunFunc: func(ctx context.Context, name string, args ...string) (domain.CommandResult, error) {
		switch name {
		case "hello":
			return domain.CommandResult{Stdout: []byte("hello " + strings.Join(args, " "))}, nil
		case "fail":
			return domain.CommandResult{Stderr: []byte("oops"), ExitCode: 3}, nil
		case "hang":
			<-ctx.Done()
			return domain.CommandResult{}, ctx.Err()
		}
		return domain.CommandResult{}, errors.New(name + ": not found")
	}}
	CommandsContract(t, c, Program{Name: "hello"}, Program{Name: "fail"}, Program{Name: "hang"})
}

func TestFakeDiskSpace(t *testing.T) {
	DiskSpaceContract(t, &FakeDiskSpace{SpaceFunc: func(string) (int64, int64, error) { return 1 << 20, 1 << 30, nil }}, "/x")
}
