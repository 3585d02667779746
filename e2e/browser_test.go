package e2e

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

var (
	chromiumOnce sync.Once
	chromiumPath string
	chromiumErr  error
)

// packagedChromiumDir is where the Chromium of the npm package
// @sparticuz/chromium is unpacked: inside node_modules, so `npm ci` (which
// removes node_modules) also drops an unpacked browser of an older pin.
const packagedChromiumDir = "node_modules/.sparticuz-chromium"

// requireChromium finds a Chromium for the browser tests, in this order:
// $CHROMIUM; Debian's package (/usr/bin/chromium, or chromium on PATH);
// else the one shipped inside the pinned npm package @sparticuz/chromium,
// unpacked once. So a machine with only go and npm runs every browser test;
// when none can be found the test fails with the command that fixes it.
func requireChromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("CHROMIUM"); p != "" {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("CHROMIUM=%s: %v (unset it to use Debian's chromium or the one in e2e's npm packages: cd e2e && npm ci)", p, err)
		}
		return p
	}
	if _, err := os.Stat("/usr/bin/chromium"); err == nil {
		return "/usr/bin/chromium"
	}
	if p, err := exec.LookPath("chromium"); err == nil {
		return p
	}
	requireNodeModules(t)
	chromiumOnce.Do(func() { chromiumPath, chromiumErr = unpackChromium() })
	if chromiumErr != nil {
		t.Fatalf("the browser tests need Chromium: Debian's is not installed and the one in the npm package @sparticuz/chromium "+
			"could not be unpacked.\nFix: (cd e2e && rm -rf node_modules && npm ci), or apt-get install chromium, or set CHROMIUM to a Chromium binary.\n%v", chromiumErr)
	}
	return chromiumPath
}

// unpackChromium unpacks the packaged Chromium into a fresh directory and
// renames it into place, so an interrupted unpack is never used.
func unpackChromium() (string, error) {
	final, err := filepath.Abs(packagedChromiumDir)
	if err != nil {
		return "", err
	}
	bin := filepath.Join(final, "chromium")
	if fi, err := os.Stat(bin); err == nil && fi.Mode().IsRegular() {
		return bin, nil
	}
	tmp, err := os.MkdirTemp(filepath.Dir(final), ".sparticuz-chromium-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	cmd := exec.Command("node", filepath.Join("js", "chromium-path.mjs"))
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("node js/chromium-path.mjs: %v\n%s", err, out.String())
	}
	if got := strings.TrimSpace(out.String()); got != filepath.Join(tmp, "chromium") {
		return "", fmt.Errorf("node js/chromium-path.mjs printed %q, want %s", got, filepath.Join(tmp, "chromium"))
	}
	if err := os.Rename(tmp, final); err != nil {
		if _, serr := os.Stat(bin); serr == nil {
			return bin, nil // another test binary won the race
		}
		return "", err
	}
	return bin, nil
}
