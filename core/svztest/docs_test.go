package svztest_test

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/printer"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestAgentsDocSignatures: the Go signatures docs/agents.md gives (`h.Invoke(t testing.TB, …)
// *Result`, `svztest.New(…)`, `a2ui.Failed(…)`) are the code's, names and types, and every
// exported call of svztest but its options has one: an author copies them as they are.
func TestAgentsDocSignatures(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "agents.md"))
	if err != nil {
		t.Fatal(err)
	}
	code := map[string]string{} // "h.Invoke", "svztest.New", "a2ui.Failed" → the signature
	options := map[string]bool{}
	exported(t, filepath.Join("..", "svztest"), "svztest", code, options)
	exported(t, filepath.Join("..", "a2ui"), "a2ui", code, options)

	documented := map[string]bool{}
	span := regexp.MustCompile("`((h|svztest|a2ui)\\.([A-Z]\\w*)([^`]*))`")
	for _, m := range span.FindAllStringSubmatch(string(doc), -1) {
		name := m[2] + "." + m[3]
		sig, ok := signature("func " + m[3] + m[4])
		if !ok {
			continue // a call (h.Invoke(t, "job.start", input)) or a type, not a signature
		}
		documented[name] = true
		switch want, ok := code[name]; {
		case !ok:
			t.Errorf("docs/agents.md gives the signature of %s, which the code does not have: `%s`", name, m[1])
		case sig != want:
			t.Errorf("docs/agents.md gives %s as\n\t%s\nthe code has\n\t%s", name, sig, want)
		}
	}
	for name := range code {
		if !strings.HasPrefix(name, "a2ui.") && !options[name] && name != "h.String" && !documented[name] {
			t.Errorf("docs/agents.md's testing table gives no signature of %s: %s", name, code[name])
		}
	}
	for _, name := range []string{"h.Invoke", "h.AssertConfirmIdempotent", "svztest.AssertConfirmIdempotent", "h.WaitJob", "a2ui.Failed"} {
		if !documented[name] {
			t.Errorf("docs/agents.md gives no signature of %s", name)
		}
	}
}

// signature parses src, "func Name(params) results", as a function's signature and prints it
// as gofmt does; false unless every parameter is named (a call parses as unnamed types).
func signature(src string) (string, bool) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "", "package p\n"+src+"\n", 0)
	if err != nil || len(f.Decls) != 1 {
		return "", false
	}
	fn, ok := f.Decls[0].(*ast.FuncDecl)
	if !ok || fn.Body != nil || (len(fn.Type.Params.List) == 0 && fn.Type.Results == nil) {
		return "", false
	}
	for _, p := range fn.Type.Params.List {
		if len(p.Names) == 0 {
			return "", false
		}
	}
	return printFunc(fset, fn), true
}

// exported adds the exported functions of the package in dir to code, as "pkg.Name" (methods of
// *Harness as "h.Name"), and to options those returning an Option.
func exported(t *testing.T, dir, pkg string, code map[string]string, options map[string]bool) {
	t.Helper()
	fset := token.NewFileSet()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || !fn.Name.IsExported() {
				continue
			}
			name := pkg + "." + fn.Name.Name
			if fn.Recv != nil { // of the harness only
				star, _ := fn.Recv.List[0].Type.(*ast.StarExpr)
				if star == nil {
					continue
				}
				if id, _ := star.X.(*ast.Ident); id == nil || id.Name != "Harness" {
					continue
				}
				name = "h." + fn.Name.Name
			}
			if r := fn.Type.Results; r != nil && len(r.List) == 1 {
				if id, ok := r.List[0].Type.(*ast.Ident); ok && id.Name == "Option" {
					options[name] = true
				}
			}
			code[name] = printFunc(fset, &ast.FuncDecl{Name: fn.Name, Type: fn.Type})
		}
	}
}

func printFunc(fset *token.FileSet, fn *ast.FuncDecl) string {
	var b bytes.Buffer
	if err := printer.Fprint(&b, fset, &ast.FuncDecl{Name: fn.Name, Type: fn.Type}); err != nil {
		return err.Error()
	}
	return b.String()
}
