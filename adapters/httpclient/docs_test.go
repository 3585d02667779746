package httpclient_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"regexp"
	"strings"
	"testing"
)

// exampleBodies returns the body of each example function of
// example_test.go as a reader sees it: dedented, without its output
// comment.
func exampleBodies(t *testing.T) map[string]string {
	t.Helper()
	src, err := os.ReadFile("example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "example_test.go", src, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	bodies := map[string]string{}
	for _, d := range f.Decls {
		fn, ok := d.(*ast.FuncDecl)
		if !ok || !strings.HasPrefix(fn.Name.Name, "Example") {
			continue
		}
		body := string(src[fset.Position(fn.Body.Lbrace).Offset+1 : fset.Position(fn.Body.Rbrace).Offset])
		body, output, _ := strings.Cut(body, "\t// Output:")
		if strings.TrimSpace(output) == "" {
			t.Errorf("%s has no output to check: go test compiles it but does not run it", fn.Name.Name)
		}
		var lines []string
		for l := range strings.SplitSeq(strings.Trim(body, "\n"), "\n") {
			lines = append(lines, strings.TrimPrefix(l, "\t"))
		}
		bodies[fn.Name.Name] = strings.TrimSpace(strings.Join(lines, "\n"))
	}
	return bodies
}

// TestGoClientDocExamples: every Go block of docs/go-client.md is the
// body of the example named in the comment just before it
// (<!-- ExampleClient_WriteFile -->), which go test compiles and runs
// against a daemon, checking its output: the doc's code compiles and does
// what it says.
func TestGoClientDocExamples(t *testing.T) {
	doc, err := os.ReadFile("../../docs/go-client.md")
	if err != nil {
		t.Fatal(err)
	}
	bodies := exampleBodies(t)
	blocks := regexp.MustCompile("(?s)<!-- (Example\\w*) -->\\n```go\\n(.*?)```").FindAllStringSubmatch(string(doc), -1)
	if n := strings.Count(string(doc), "```go"); n != len(blocks) || n == 0 {
		t.Fatalf("%d Go blocks in docs/go-client.md, %d of them marked with the example they show", n, len(blocks))
	}
	for _, b := range blocks {
		want, ok := bodies[b[1]]
		switch {
		case !ok:
			t.Errorf("docs/go-client.md shows %s, which example_test.go does not have", b[1])
		case strings.TrimSpace(b[2]) != want:
			t.Errorf("docs/go-client.md's block for %s is not its body; the body is:\n%s", b[1], want)
		}
	}
}

// TestExportedIdentifiersDocumented: every exported function, method of
// an exported type, type, constant and variable of the package has a doc
// comment, which go doc shows to its users.
func TestExportedIdentifiersDocumented(t *testing.T) {
	fset := token.NewFileSet()
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if !d.Name.IsExported() || d.Doc != nil {
					continue
				}
				if d.Recv != nil {
					recv := d.Recv.List[0].Type
					if star, ok := recv.(*ast.StarExpr); ok {
						recv = star.X
					}
					if id, ok := recv.(*ast.Ident); !ok || !id.IsExported() {
						continue
					}
				}
				t.Errorf("%s: %s has no doc comment", fset.Position(d.Pos()), d.Name.Name)
			case *ast.GenDecl:
				for _, s := range d.Specs {
					var names []*ast.Ident
					var doc, comment *ast.CommentGroup
					switch s := s.(type) {
					case *ast.TypeSpec:
						names, doc, comment = []*ast.Ident{s.Name}, s.Doc, s.Comment
					case *ast.ValueSpec:
						names, doc, comment = s.Names, s.Doc, s.Comment
					}
					for _, n := range names {
						if n.IsExported() && doc == nil && comment == nil && d.Doc == nil {
							t.Errorf("%s: %s has no doc comment", fset.Position(n.Pos()), n.Name)
						}
					}
				}
			}
		}
	}
}
