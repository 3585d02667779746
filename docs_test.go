package arch_test

// The docs are part of the code: ARCHITECTURE.md names every package, the
// README names every top-level folder, every relative link of the manual
// resolves (anchors included), and nothing in the repository points at
// files outside it. These tests keep that true as the tree changes.

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// tableSection returns the first-column entries of the tables under the
// "## title" heading of a markdown file, with their backquotes removed.
func tableSection(t *testing.T, file, title string) []string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var rows []string
	in := false
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "## ") {
			in = strings.TrimPrefix(line, "## ") == title
			continue
		}
		if !in || !strings.HasPrefix(line, "|") {
			continue
		}
		cells := strings.Split(line, "|")
		if len(cells) < 3 {
			continue
		}
		first := strings.TrimSpace(cells[1])
		if !strings.HasPrefix(first, "`") {
			continue // the header row and the separator
		}
		name, _, _ := strings.Cut(strings.TrimPrefix(first, "`"), "`")
		rows = append(rows, name)
	}
	if len(rows) == 0 {
		t.Fatalf("%s has no table under \"## %s\"", file, title)
	}
	return rows
}

// TestArchitectureNamesEveryPackage: every directory holding a Go package
// (non-test files; the go tool's rules, as loadTree walks them) has a row
// in ARCHITECTURE.md's "Packages" table, and every row names one. Packages
// below adapters/httpapi/ count like any other: a new sub-package gets its
// row when it is added.
func TestArchitectureNamesEveryPackage(t *testing.T) {
	rows := tableSection(t, "ARCHITECTURE.md", "Packages")
	named := map[string]bool{}
	for _, r := range rows {
		if named[r] {
			t.Errorf("ARCHITECTURE.md names package %s twice", r)
		}
		named[r] = true
	}
	var dirs []string
	for dir, p := range loadTree(t) {
		if p.name != "" {
			dirs = append(dirs, dir)
		}
	}
	sort.Strings(dirs)
	has := map[string]bool{".": true} // the root holds these tests only
	for _, dir := range dirs {
		has[dir] = true
		if !named[dir] {
			t.Errorf("package %s is not in ARCHITECTURE.md's \"Packages\" table: add a row saying what it is for", dir)
		}
	}
	for _, r := range rows {
		if !has[r] {
			t.Errorf("ARCHITECTURE.md's \"Packages\" table names %s, which is no package of the module", r)
		}
	}
}

// TestREADMENamesTopLevelFolders: every folder the layout allows at the
// root (rootEntries) that exists is listed, with its reason, in the
// README's "Repository layout" table.
func TestREADMENamesTopLevelFolders(t *testing.T) {
	listed := map[string]bool{}
	for _, r := range tableSection(t, "README.md", "Repository layout") {
		listed[strings.TrimSuffix(r, "/")] = true
	}
	for entry := range rootEntries {
		if fi, err := os.Stat(entry); err != nil || !fi.IsDir() {
			continue
		}
		if !listed[entry] {
			t.Errorf("the README's \"Repository layout\" table does not list %s/", entry)
		}
	}
}

// docFiles are the manual's pages: the README, ARCHITECTURE.md and docs/.
func docFiles(t *testing.T) []string {
	t.Helper()
	pages, err := filepath.Glob("docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	return append([]string{"README.md", "ARCHITECTURE.md"}, pages...)
}

var (
	mdLink     = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	codeSpan   = regexp.MustCompile("`[^`]*`")
	slugStrip  = regexp.MustCompile(`[^\p{L}\p{N}\- _]`)
	mdHeading  = regexp.MustCompile(`^#{1,6} +(.*?) *#*$`)
	schemeLink = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)
)

// slug is GitHub's anchor for a heading: lowercase, punctuation dropped
// (backquotes, dots, slashes, ...), spaces turned into hyphens.
func slug(heading string) string {
	s := strings.ToLower(strings.TrimSpace(heading))
	s = slugStrip.ReplaceAllString(s, "")
	return strings.Map(func(r rune) rune {
		if unicode.IsSpace(r) {
			return '-'
		}
		return r
	}, s)
}

// anchors returns the anchors of a markdown file's headings, with
// GitHub's -1, -2 suffixes for repeated ones.
func anchors(t *testing.T, file string) map[string]bool {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out, seen := map[string]bool{}, map[string]int{}
	fenced := false
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		m := mdHeading.FindStringSubmatch(line)
		if fenced || m == nil {
			continue
		}
		a := slug(m[1])
		if n := seen[a]; n > 0 {
			out[a+"-"+strconv.Itoa(n)] = true
		} else {
			out[a] = true
		}
		seen[a]++
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// links returns the relative link targets of a markdown file, outside
// fenced code blocks and code spans, with their line numbers.
func links(t *testing.T, file string) map[string][]int {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]int{}
	fenced := false
	for i, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced {
			continue
		}
		for _, m := range mdLink.FindAllStringSubmatch(codeSpan.ReplaceAllString(line, ""), -1) {
			target := m[1]
			if schemeLink.MatchString(target) {
				continue // http:, https:, mailto:
			}
			out[target] = append(out[target], i+1)
		}
	}
	return out
}

// TestDocLinks: every relative link in the README, ARCHITECTURE.md and
// docs/ points to a file or directory of the repository, and an anchor
// (#section) to a heading of the page it names.
func TestDocLinks(t *testing.T) {
	root, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	cache := map[string]map[string]bool{}
	for _, file := range docFiles(t) {
		for target, lines := range links(t, file) {
			path, anchor, _ := strings.Cut(target, "#")
			dest := file
			if path != "" {
				dest = filepath.Join(filepath.Dir(file), filepath.FromSlash(path))
				abs, _ := filepath.Abs(dest)
				if abs != root && !strings.HasPrefix(abs, root+string(filepath.Separator)) {
					t.Errorf("%s:%v: link %q leaves the repository", file, lines, target)
					continue
				}
				if _, err := os.Stat(dest); err != nil {
					t.Errorf("%s:%v: link %q: no such file", file, lines, target)
					continue
				}
			}
			if anchor == "" {
				continue
			}
			if !strings.HasSuffix(dest, ".md") {
				t.Errorf("%s:%v: link %q: an anchor into a file that is not markdown", file, lines, target)
				continue
			}
			if cache[dest] == nil {
				cache[dest] = anchors(t, dest)
			}
			if !cache[dest][anchor] {
				t.Errorf("%s:%v: link %q: %s has no heading with that anchor", file, lines, target, dest)
			}
		}
	}
}

// The development machine's shared folders, which a clone does not have.
// Built from parts so that this file does not match itself.
var outside = regexp.MustCompile(`\.\./` + `shared\b|/` + `work/(shared|wt|main|\.library)\b`)

// TestNoOutsideReferences: no markdown or Go file the repository tracks
// cites a file outside it: the HTTP contract, the design notes and the
// references live in the repository (docs/) or not at all. Markdown may
// not mention /work/ at all (an example path there reads like one);
// Go tests use /work/... freely as paths on in-memory filesystems, so Go
// files are held to the folders that exist only on the development machine.
func TestNoOutsideReferences(t *testing.T) {
	out, err := exec.Command("git", "ls-files", "*.md", "*.go").Output()
	if err != nil {
		t.Skipf("not a git checkout: %v", err)
	}
	work := regexp.MustCompile(`(^|[\s"'(\x60])/` + `work/`)
	for _, f := range strings.Fields(string(out)) {
		if strings.Contains(f, "node_modules/") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			if outside.MatchString(line) || (strings.HasSuffix(f, ".md") && work.MatchString(line)) {
				t.Errorf("%s:%d cites a file outside the repository: %s", f, i+1, strings.TrimSpace(line))
			}
		}
	}
}
