// Package arch_test checks the layout rules of architecture.md (the
// "Layout" table) over the whole source tree, test files included, so nobody
// has to remember them: which layer may import what, and that every package
// says what it is for.
//
// It parses import clauses with go/parser rather than asking the go tool, so
// files behind any build constraint (other operating systems, wasip1 guests)
// are checked too.
package arch_test

import (
	"bufio"
	"bytes"
	"fmt"
	"go/parser"
	"go/token"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// srcPackage is one directory of Go files, split by whether an import comes
// from a test file.
type srcPackage struct {
	dir       string // slash-separated, relative to the module root
	name      string // package name of the non-test files ("" if none)
	files     []string
	imports   map[string][]string // import path -> files importing it
	testFiles map[string]bool
	doc       map[string]string // file -> package doc comment
}

func modulePath(t *testing.T) string {
	t.Helper()
	f, err := os.Open("go.mod")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "module "); ok {
			return strings.Trim(strings.TrimSpace(rest), `"`)
		}
	}
	t.Fatal("no module line in go.mod")
	return ""
}

// loadTree parses the package clause, doc comment and imports of every .go
// file under the module root, skipping what the go tool skips (testdata,
// dot and underscore directories) and node_modules.
func loadTree(t *testing.T) map[string]*srcPackage {
	t.Helper()
	pkgs := map[string]*srcPackage{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != "." && (name == "testdata" || name == "node_modules" || name == "vendor" ||
				strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly|parser.ParseComments)
		if err != nil {
			return err
		}
		dir := filepath.ToSlash(filepath.Dir(path))
		p := pkgs[dir]
		if p == nil {
			p = &srcPackage{dir: dir, imports: map[string][]string{}, testFiles: map[string]bool{}, doc: map[string]string{}}
			pkgs[dir] = p
		}
		p.files = append(p.files, name)
		isTest := strings.HasSuffix(name, "_test.go")
		if isTest {
			p.testFiles[name] = true
		} else {
			p.name = f.Name.Name
			if f.Doc != nil {
				p.doc[name] = f.Doc.Text()
			}
		}
		for _, imp := range f.Imports {
			ip, _ := strconv.Unquote(imp.Path.Value)
			p.imports[ip] = append(p.imports[ip], name)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return pkgs
}

// useCase is the app package dir belongs to: "app/acp" for app/acp and
// anything below it ("app" itself for the app directory).
func useCase(dir string) string {
	parts := strings.SplitN(dir, "/", 3)
	if len(parts) < 2 {
		return dir
	}
	return parts[0] + "/" + parts[1]
}

// layer is one row of the Layout table as a check: rule returns why an
// import is forbidden for a package of that layer, or "".
type layer struct {
	name  string
	match func(dir string) bool
	rule  func(dir, imp string, inTest bool) string
}

// under reports whether dir is prefix or below it.
func under(dir, prefix string) bool {
	return dir == prefix || strings.HasPrefix(dir, prefix+"/")
}

// isStdlib reports whether an import path belongs to the standard library
// (no dot in its first element).
func isStdlib(imp string) bool {
	first, _, _ := strings.Cut(imp, "/")
	return !strings.Contains(first, ".")
}

// inList reports whether imp is one of list or a package below one.
func inList(imp string, list ...string) bool {
	for _, l := range list {
		if under(imp, l) {
			return true
		}
	}
	return false
}

// Stdlib packages that do I/O or reach outside the process; domain holds
// pure values and functions, so it may import none of them.
var ioStdlib = []string{
	"os", "syscall", "net", "database/sql", "log", "plugin", "unsafe",
	"io/ioutil", "runtime/cgo", "runtime/debug", "crypto/rand",
}

// inboundAdapters are the adapters that drive the use cases (and so may
// import app): the daemon's HTTP API, and OpenCode's API, which httpapi
// mounts without importing it.
var inboundAdapters = map[string]bool{"adapters/httpapi": true, "adapters/opencode": true}

// Third-party modules by the name the table uses.
const (
	afero  = "github.com/spf13/afero"
	huma   = "github.com/danielgtaylor/huma"
	wazero = "github.com/tetratelabs/wazero"
	acpSDK = "github.com/coder/acp-go-sdk"
)

func layers(mod string) []layer {
	own := func(rel string) string { return mod + "/" + rel }
	internal := func(imp string) (string, bool) {
		rel, ok := strings.CutPrefix(imp, mod+"/")
		return rel, ok
	}
	return []layer{
		{
			name:  "domain imports only stdlib without I/O",
			match: func(dir string) bool { return under(dir, "domain") },
			rule: func(dir, imp string, _ bool) string {
				switch {
				case imp == own("domain"):
					return "" // external test package of domain
				case strings.HasPrefix(imp, mod+"/"):
					return "domain imports no other package of the module"
				case !isStdlib(imp):
					return "domain imports no third-party package"
				case inList(imp, ioStdlib...):
					return "domain imports no stdlib package that does I/O"
				}
				return ""
			},
		},
		{
			name:  "ports imports only domain, context, io and afero",
			match: func(dir string) bool { return dir == "ports" },
			rule: func(dir, imp string, _ bool) string {
				if imp == own("domain") || imp == own("ports") || inList(imp, afero) ||
					imp == "context" || imp == "io" || imp == "io/fs" || imp == "path" || imp == "time" || imp == "errors" {
					return ""
				}
				return "ports may import only domain, context, io, io/fs, path, time, errors and afero"
			},
		},
		{
			name:  "ports/porttest (contract suites and fakes) stays clear of app, adapters and technologies",
			match: func(dir string) bool { return under(dir, "ports/porttest") },
			rule: func(dir, imp string, _ bool) string {
				if rel, ok := internal(imp); ok {
					if under(rel, "domain") || under(rel, "ports") {
						return ""
					}
					return "ports/porttest imports only domain and ports of the module"
				}
				if inList(imp, "net/http", "os/exec", huma, wazero) {
					return "ports/porttest must not import net/http, os/exec, huma or wazero"
				}
				if !isStdlib(imp) && !inList(imp, afero) {
					return "ports/porttest imports no third-party package but afero"
				}
				return ""
			},
		},
		{
			name:  "app/* imports domain, ports, afero and stdlib without network or processes, and no sibling use case",
			match: func(dir string) bool { return under(dir, "app") },
			rule: func(dir, imp string, inTest bool) string {
				if rel, ok := internal(imp); ok {
					switch {
					case under(rel, "domain"), under(rel, "ports"), under(rel, useCase(dir)):
						return ""
					case under(rel, "app/internal") && !under(useCase(dir), "app/internal"):
						return "" // scaffolding shared by use cases (it imports none of them)
					case under(rel, "app"):
						return "app packages never import each other: a link between use cases is an interface (or func field) the consumer defines, wired in cmd/sandbox-agent"
					}
					return "app must not import " + rel + " (only domain and ports)"
				}
				if !isStdlib(imp) {
					if inList(imp, afero) {
						return ""
					}
					return "app imports no third-party package but afero"
				}
				if inList(imp, "net", "os/exec", "os/signal", "syscall", "plugin") {
					return "app must not import " + imp + " (network and processes live behind ports)"
				}
				if imp == "os" && !inTest {
					return "app must not import os (the filesystem is afero.Fs, processes are ports.AgentRunner)"
				}
				return ""
			},
		},
		{
			name:  "each adapter imports no other adapter and no extension; only the inbound adapters (httpapi, opencode) import app",
			match: func(dir string) bool { return under(dir, "adapters") },
			rule: func(dir, imp string, _ bool) string {
				rel, ok := internal(imp)
				if !ok {
					return ""
				}
				parts := strings.SplitN(dir, "/", 3)
				self := "adapters/" + parts[1]
				switch {
				case under(rel, "adapters") && !under(rel, self):
					return "adapters never import other adapters"
				case under(rel, "extensions"):
					return "adapters never import extensions"
				case under(rel, "cmd"):
					return "adapters never import the composition root"
				case under(rel, "app") && !inboundAdapters[self]:
					return "only the inbound adapters (httpapi, opencode) import app"
				}
				return ""
			},
		},
		{
			name:  "extensions import domain, ports and wazero only",
			match: func(dir string) bool { return under(dir, "extensions") },
			rule: func(dir, imp string, _ bool) string {
				if rel, ok := internal(imp); ok {
					switch {
					case under(rel, "domain"), under(rel, "ports"), under(rel, "extensions"):
						return ""
					}
					return "extensions must not import " + rel + " (only domain and ports)"
				}
				if !isStdlib(imp) && !inList(imp, wazero) {
					return "extensions import no third-party package but wazero"
				}
				return ""
			},
		},
		{
			// The public Go client is the one package of ours e2e may use:
			// it only speaks HTTP to the built binary (and imports nothing
			// but domain values), so a test through it stays black-box; it is
			// also what Go users of the daemon import, which e2e must prove.
			// Its own helpers (e2e/internal/harness, e2e/internal/proc) and
			// tools (e2e/cmd) are under e2e and follow the same rule.
			name:  "e2e is black-box: stdlib, acp-go-sdk, the public Go client and its own helpers",
			match: func(dir string) bool { return under(dir, "e2e") },
			rule: func(dir, imp string, _ bool) string {
				if rel, ok := internal(imp); ok {
					if under(rel, "e2e") || rel == "adapters/httpclient" {
						return ""
					}
					return "e2e must not import " + rel + " (it drives the built binary)"
				}
				if !isStdlib(imp) && !inList(imp, acpSDK) {
					return "e2e imports no third-party package but acp-go-sdk"
				}
				return ""
			},
		},
	}
}

// TestImportRules checks every import of every package against the layer it
// belongs to.
func TestImportRules(t *testing.T) {
	mod := modulePath(t)
	pkgs := loadTree(t)
	ls := layers(mod)
	dirs := make([]string, 0, len(pkgs))
	for d := range pkgs {
		dirs = append(dirs, d)
	}
	sort.Strings(dirs)
	checked := map[string]bool{}
	for _, dir := range dirs {
		p := pkgs[dir]
		for _, l := range ls {
			if !l.match(dir) {
				continue
			}
			checked[strings.SplitN(dir, "/", 2)[0]] = true
			imps := make([]string, 0, len(p.imports))
			for imp := range p.imports {
				imps = append(imps, imp)
			}
			sort.Strings(imps)
			for _, imp := range imps {
				files := p.imports[imp]
				inTest := true
				for _, f := range files {
					inTest = inTest && p.testFiles[f]
				}
				if why := l.rule(dir, imp, inTest); why != "" {
					t.Errorf("package %s imports %q (in %s): %s [rule: %s]",
						dir, imp, strings.Join(files, ", "), why, l.name)
				}
			}
		}
	}
	// The rules must have something to check, or a rename would silently
	// turn this test into a no-op.
	for _, top := range []string{"domain", "ports", "app", "adapters", "extensions", "e2e"} {
		if !checked[top] {
			t.Errorf("no package found under %s/: the layout table no longer matches the tree", top)
		}
	}
}

// TestRulesCatchViolations feeds each layer an import it must refuse and one
// it must allow, so a rule that stops matching anything is noticed.
func TestRulesCatchViolations(t *testing.T) {
	mod := modulePath(t)
	tests := []struct {
		dir, imp string
		inTest   bool
		allowed  bool
	}{
		{"domain", "os", false, false},
		{"domain", "net/http", true, false},
		{"domain", mod + "/ports", false, false},
		{"domain", afero, false, false},
		{"domain", "encoding/json", false, true},
		{"ports", mod + "/app", false, false},
		{"ports", mod + "/app/acp", false, false},
		{"ports/porttest", mod + "/app/files", true, false},
		{"ports", "net/http", false, false},
		{"ports", afero, false, true},
		{"ports/porttest", "os/exec", false, false},
		{"ports/porttest", mod + "/adapters/process", true, false},
		{"ports/porttest", "testing", false, true},
		{"app/acp", mod + "/adapters/process", false, false},
		{"app/acp", "net/http", false, false},
		{"app/agents", "os/exec", true, false},
		{"app/agents", "net", false, false},
		{"app/files", huma + "/v2", false, false},
		{"app/acp", wazero, false, false},
		{"app/files", "os", false, false},
		{"app/files", "os", true, true},
		{"app/acp", "log/slog", false, true},
		{"app/acp", mod + "/domain", false, true},
		{"app/agents", mod + "/ports", false, true},
		{"app/files", afero, false, true},
		{"app/acp", mod + "/app/acp", true, true},
		{"app/acp", mod + "/app/agents", false, false},
		{"app/agents", mod + "/app/acp", false, false},
		{"app/agents", mod + "/app/acp", true, false},
		{"app/files", mod + "/app/agents", false, false},
		{"app/acp", mod + "/app", false, false},
		{"app/acp", mod + "/app/internal/exits", false, true},
		{"app/processes", mod + "/app/internal/exits", false, true},
		{"app/internal/exits", mod + "/app/acp", false, false},
		{"app/internal/exits", mod + "/app/processes", true, false},
		{"app/internal/exits", "os/exec", false, false},
		{"app/internal/exits", mod + "/domain", false, true},
		{"app/acp", mod + "/app/internal/seqring", false, true},
		{"app/internal/seqring", mod + "/app/internal/exits", false, true},
		{"app/acp", mod + "/extensions/wasmpolicy", false, false},
		{"adapters/process", mod + "/app", false, false},
		{"adapters/process", mod + "/app/acp", false, false},
		{"adapters/registry", mod + "/app/agents", false, false},
		{"adapters/process", mod + "/adapters/fsys", false, false},
		{"adapters/process", mod + "/extensions/wasmpolicy", false, false},
		{"adapters/httpapi", mod + "/app/acp", false, true},
		{"adapters/httpapi", mod + "/app/agents", false, true},
		{"adapters/httpapi", mod + "/app/files", true, true},
		{"adapters/httpapi", mod + "/adapters/inspector", false, false},
		{"adapters/httpapi", mod + "/ports/porttest", true, true},
		{"adapters/opencode", mod + "/app/acp", false, true},
		{"adapters/opencode", mod + "/adapters/httpapi", false, false},
		{"adapters/httpapi", mod + "/adapters/opencode", false, false},
		// The route families below httpapi, and what they share, are httpapi.
		{"adapters/httpapi", mod + "/adapters/httpapi/acpstd", false, true},
		{"adapters/httpapi/acpstd", mod + "/adapters/httpapi/internal/route", false, true},
		{"adapters/httpapi/processapi", mod + "/app/processes", false, true},
		{"adapters/httpapi/acpstd", mod + "/adapters/opencode", false, false},
		{"adapters/httpapi/internal/route", mod + "/adapters/httpclient", false, false},
		{"adapters/npm", mod + "/app/acp", false, false},
		{"adapters/httpclient", mod + "/app", false, false},
		{"adapters/httpclient", mod + "/domain", false, true},
		{"extensions/wasmpolicy", mod + "/app", false, false},
		{"extensions/wasmpolicy", mod + "/adapters/httpapi", true, false},
		{"extensions/wasmpolicy", huma + "/v2", false, false},
		{"extensions/wasmpolicy", wazero + "/api", false, true},
		{"e2e", mod + "/app", true, false},
		{"e2e", mod + "/app/acp", true, false},
		{"extensions/wasmpolicy", mod + "/app/agents", false, false},
		{"e2e", mod + "/adapters/httpclient", true, true},
		{"e2e", mod + "/adapters/httpapi", true, false},
		{"e2e", mod + "/extensions/wasmpolicy", true, false},
		{"e2e", acpSDK, true, true},
		// The shared harness and the e2e tools are held to the same rule.
		{"e2e", mod + "/e2e/internal/harness", true, true},
		{"e2e/internal/harness", mod + "/adapters/httpclient", false, true},
		{"e2e/internal/harness", mod + "/app", false, false},
		{"e2e/internal/harness", mod + "/adapters/process", false, false},
		{"e2e/cmd/soak", mod + "/e2e/internal/harness", false, true},
	}
	for _, tt := range tests {
		var why string
		matched := false
		for _, l := range layers(mod) {
			if l.match(tt.dir) {
				matched = true
				if w := l.rule(tt.dir, tt.imp, tt.inTest); w != "" {
					why = w
				}
			}
		}
		if !matched {
			t.Errorf("%s: no layer matches", tt.dir)
		}
		if got := why == ""; got != tt.allowed {
			t.Errorf("%s importing %s (test=%v): allowed=%v (%q), want %v", tt.dir, tt.imp, tt.inTest, got, why, tt.allowed)
		}
	}
}

// TestPackageDocs checks that every package says what it is for: a library
// package in its doc.go ("Package x ..."), a command in its package comment
// ("Command x ..."), wherever it sits.
func TestPackageDocs(t *testing.T) {
	pkgs := loadTree(t)
	for dir, p := range pkgs {
		if p.name == "" {
			continue // test-only directory, like the module root
		}
		if p.name == "main" {
			found := false
			for _, doc := range p.doc {
				found = found || strings.HasPrefix(doc, "Command ")
			}
			if !found {
				t.Errorf("command %s has no package comment starting \"Command ...\"", dir)
			}
			continue
		}
		doc, ok := p.doc["doc.go"]
		switch {
		case !hasFile(p, "doc.go"):
			t.Errorf("package %s (%s) has no doc.go", dir, p.name)
		case !ok:
			t.Errorf("package %s: doc.go has no package comment", dir)
		case !strings.HasPrefix(doc, fmt.Sprintf("Package %s ", p.name)):
			t.Errorf("package %s: doc.go comment should start \"Package %s ...\", got %q", dir, p.name, firstLine(doc))
		}
	}
}

func hasFile(p *srcPackage, name string) bool {
	for _, f := range p.files {
		if f == name {
			return true
		}
	}
	return false
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}

// rootEntries is what may sit at the top of the repository: the layout of
// ARCHITECTURE.md, the files every Go module and this project's tooling
// need, and docs/ (the pages the README links to). Anything else (a built
// binary, a scratch file) is a mistake the README would have to explain.
var rootEntries = map[string]bool{
	"domain": true, "ports": true, "adapters": true, "app": true, "extensions": true, "cmd": true, "e2e": true,
	"go.mod": true, "go.sum": true, "justfile": true, "README.md": true, "ARCHITECTURE.md": true,
	"arch_test.go": true, "docs_test.go": true, ".ci": true, "docs": true,
}

// TestNoCompiledFiles: no file git tracks is a compiled program (ELF,
// Mach-O or PE). "go build ./cmd/sandbox-agent" run inside cmd/sandbox-agent
// leaves a 30 MB binary beside the sources, and a commit of everything
// once took it in; the root check cannot see it there.
func TestNoCompiledFiles(t *testing.T) {
	out, err := exec.Command("git", "ls-files", "-z").Output()
	if err != nil {
		t.Skipf("not a git checkout: %v", err)
	}
	magics := [][]byte{{0x7f, 'E', 'L', 'F'}, {0xcf, 0xfa, 0xed, 0xfe}, {0xfe, 0xed, 0xfa, 0xcf}, {'M', 'Z'}}
	for _, f := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		head, err := readHead(f, 4)
		if err != nil {
			continue // deleted in the working tree
		}
		for _, m := range magics {
			if bytes.HasPrefix(head, m) {
				t.Errorf("%s is a compiled program: delete it (binaries are built, never committed)", f)
				break
			}
		}
	}
}

// readHead returns up to n bytes from the start of file name.
func readHead(name string, n int) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b := make([]byte, n)
	k, err := io.ReadFull(f, b)
	if err == io.ErrUnexpectedEOF || err == io.EOF {
		err = nil
	}
	return b[:k], err
}

// TestRootEntries: every file git tracks lies under an entry the layout
// allows at the root.
func TestRootEntries(t *testing.T) {
	out, err := exec.Command("git", "ls-files").Output()
	if err != nil {
		t.Skipf("not a git checkout: %v", err)
	}
	seen := map[string]bool{}
	for _, f := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		top, _, _ := strings.Cut(f, "/")
		if !rootEntries[top] && !seen[top] {
			seen[top] = true
			t.Errorf("%q at the repository's root: not in the layout (ARCHITECTURE.md); move it, delete it, or add it there with its reason", top)
		}
	}
}
