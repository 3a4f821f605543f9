package main

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"slices"
	"strings"
)

// The kinds of mutant this tool makes: those gremlins (scripts/mutate) does not.
const (
	kindStatement = "STATEMENT_DELETED" // an assignment, a call, a defer, a send, an if without else
	kindCondition = "CONDITION_DROPPED" // one side of && or ||
	kindError     = "ERROR_DROPPED"     // a returned error (err, fmt.Errorf, errors.New) as nil
)

// A mutant is one change of one file: the bytes [start, end) replaced by Now.
type mutant struct {
	File       string `json:"file"` // as given: a path relative to the repository's root
	Line       int    `json:"line"`
	Col        int    `json:"column"`
	Kind       string `json:"type"`
	Was        string `json:"was"` // the source replaced, on one line
	Now        string `json:"now"`
	Status     string `json:"status"`
	start, end int
	// at is where coverage says whether the tests reach the mutant, when not at its own place:
	// a case's condition is in no coverage block, and the block before it is the body of the
	// case before, which runs exactly when this condition is not evaluated; the switch's own
	// place is in the block that reaches the switch.
	at token.Position
	// For a dropped condition, the side kept: 0 the left, 1 the right; op and the sides' ranges.
	side           int
	op             string
	x0, x1, y0, y1 int
}

// String says where the mutant is and what it changed: the source, and what replaced it (a
// dropped condition shows the side kept).
func (m mutant) String() string {
	s := fmt.Sprintf("%s:%d:%d %s  %s", m.File, m.Line, m.Col, m.Kind, m.Was)
	if m.Now != "" {
		s += "  =>  " + oneLine([]byte(m.Now))
	}
	return s
}

// apply returns src with the mutant's change.
func (m mutant) apply(src []byte) []byte {
	out := make([]byte, 0, len(src)+len(m.Now))
	out = append(out, src[:m.start]...)
	out = append(out, m.Now...)
	return append(out, src[m.end:]...)
}

// generate returns the mutants of one file's source, in source order. keep, when not nil, says
// which lines may be mutated (a mutant is kept when its first line is).
func generate(file string, src []byte, keep func(line int) bool) ([]mutant, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, file, src, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	var ms []mutant
	off := func(p token.Pos) int { return fset.Position(p).Offset }
	type caseList struct{ start, end, sw token.Pos }
	var cases []caseList
	add := func(kind string, n ast.Node, now string) *mutant {
		p := fset.Position(n.Pos())
		if keep != nil && !keep(p.Line) {
			return nil
		}
		start, end := off(n.Pos()), off(n.End())
		ms = append(ms, mutant{File: file, Line: p.Line, Col: p.Column, Kind: kind,
			Was: oneLine(src[start:end]), Now: now, start: start, end: end})
		for _, c := range cases {
			if n.Pos() >= c.start && n.Pos() < c.end {
				ms[len(ms)-1].at = fset.Position(c.sw)
			}
		}
		return &ms[len(ms)-1]
	}
	stmts := func(list []ast.Stmt) {
		for _, s := range list {
			if deletable(s) {
				add(kindStatement, s, "")
			}
		}
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.SwitchStmt:
			for _, cl := range n.Body.List {
				if l := cl.(*ast.CaseClause).List; len(l) > 0 {
					cases = append(cases, caseList{l[0].Pos(), l[len(l)-1].End(), n.Pos()})
				}
			}
		case *ast.BlockStmt:
			stmts(n.List)
		case *ast.CaseClause:
			stmts(n.Body)
		case *ast.CommClause:
			stmts(n.Body)
		case *ast.GenDecl:
			// A constant's expression cannot call the function that switches a mutant on.
			return n.Tok != token.CONST
		case *ast.BinaryExpr:
			if n.Op == token.LAND || n.Op == token.LOR {
				// The side kept is written as it was; the other is gone.
				for side, e := range []ast.Expr{n.X, n.Y} {
					if m := add(kindCondition, n, string(src[off(e.Pos()):off(e.End())])); m != nil {
						m.side, m.op = side, n.Op.String()
						m.x0, m.x1, m.y0, m.y1 = off(n.X.Pos()), off(n.X.End()), off(n.Y.Pos()), off(n.Y.End())
					}
				}
			}
		case *ast.ReturnStmt:
			for _, r := range n.Results {
				if isError(r) {
					add(kindError, r, "nil")
				}
			}
		}
		return true
	})
	// ast.Inspect visits a binary expression before the statements of a function literal inside
	// it; source order reads better and is stable.
	slices.SortStableFunc(ms, func(a, b mutant) int { return a.start - b.start })
	return ms, nil
}

// deletable reports whether deleting s is a mutant worth running: s changes state or checks it,
// and deleting it compiles more often than not. A `:=` declares (its deletion does not compile),
// a go statement's deletion hangs the tests, a lock's deletion is seen only under -race, and a
// log line is not behaviour the tests check.
func deletable(s ast.Stmt) bool {
	switch s := s.(type) {
	case *ast.AssignStmt:
		return s.Tok != token.DEFINE
	case *ast.ExprStmt:
		switch x := s.X.(type) {
		case *ast.CallExpr:
			if id, ok := x.Fun.(*ast.Ident); ok && id.Name == "panic" {
				return false // a panic may end a function that needs its terminating statement
			}
			return !lockOrLog(x)
		case *ast.UnaryExpr:
			return x.Op == token.ARROW // a receive: a wait
		}
		return false
	case *ast.DeferStmt:
		return !lockOrLog(s.Call)
	case *ast.IncDecStmt, *ast.SendStmt:
		return true
	case *ast.IfStmt:
		return s.Else == nil
	}
	return false
}

var skippedMethods = []string{
	"Lock", "Unlock", "RLock", "RUnlock",
	"Debug", "Info", "Warn", "Error", "DebugContext", "InfoContext", "WarnContext", "ErrorContext", "Log", "LogAttrs",
}

func lockOrLog(call *ast.CallExpr) bool {
	sel, ok := call.Fun.(*ast.SelectorExpr)
	return ok && slices.Contains(skippedMethods, sel.Sel.Name)
}

// isError reports whether a returned expression is an error worth replacing by nil: a variable
// named err or a new error.
func isError(e ast.Expr) bool {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name == "err"
	case *ast.CallExpr:
		sel, ok := e.Fun.(*ast.SelectorExpr)
		if !ok {
			return false
		}
		pkg, ok := sel.X.(*ast.Ident)
		return ok && (pkg.Name == "fmt" && sel.Sel.Name == "Errorf" || pkg.Name == "errors" && sel.Sel.Name == "New")
	}
	return false
}

// oneLine returns source on one line, its runs of white space as one space, cut at 80 runes.
func oneLine(b []byte) string {
	r := []rune(strings.Join(strings.Fields(string(bytes.TrimSpace(b))), " "))
	if len(r) > 80 {
		return string(r[:77]) + "..."
	}
	return string(r)
}

// helperFile is the file added to a package whose mutants are compiled in at once (schemata):
// SVZ_MUTANT names the one switched on in a run of its test binary.
const helperFile = `package %s

import (
	"os"
	"strconv"
)

var _svzMutant, _ = strconv.Atoi(os.Getenv("SVZ_MUTANT"))

func _svzMutantOn(id int) bool { return _svzMutant == id }

func _svzMutantNil[T any](id int, v T) T {
	if _svzMutant == id {
		var zero T
		return zero
	}
	return v
}
`

// instrument returns src with every mutant of ms compiled in, each behind its own switch:
// mutant i (of the package's list) is on when SVZ_MUTANT is base+i. ms are one file's, in
// source order; nested mutants (a condition inside a deleted statement) nest their switches.
func instrument(src []byte, ms []mutant, base int) string {
	type site struct {
		m  []int // the mutants of one node: one, or the two sides of a condition
		m0 mutant
	}
	var sites []site
	for i, m := range ms {
		// The two sides of one condition are the only mutants of one range.
		if n := len(sites); n > 0 && sites[n-1].m0.start == m.start && sites[n-1].m0.end == m.end {
			sites[n-1].m = append(sites[n-1].m, i)
			continue
		}
		sites = append(sites, site{m: []int{i}, m0: m})
	}
	// sites are in source order, outer nodes first: generate sorts its mutants by start, stably,
	// after ast.Inspect visited each node before what it holds.
	var render func(lo, hi, after int) string
	var inst func(k int) string
	render = func(lo, hi, after int) string {
		var b strings.Builder
		at := lo
		for k := after + 1; k < len(sites); k++ {
			s := sites[k].m0
			if s.start < at {
				continue // inside a node rendered already
			}
			if s.start >= hi {
				break // AST nodes nest: a node that starts before hi ends before it too
			}
			b.Write(src[at:s.start])
			b.WriteString(inst(k))
			at = s.end
		}
		b.Write(src[at:hi])
		return b.String()
	}
	inst = func(k int) string {
		s := sites[k]
		id := func(j int) int { return base + s.m[j] }
		switch s.m0.Kind {
		case kindStatement:
			return fmt.Sprintf("if !_svzMutantOn(%d) { %s }", id(0), render(s.m0.start, s.m0.end, k))
		case kindError:
			return fmt.Sprintf("_svzMutantNil(%d, %s)", id(0), render(s.m0.start, s.m0.end, k))
		}
		x, y := render(s.m0.x0, s.m0.x1, k), render(s.m0.y0, s.m0.y1, k)
		var b strings.Builder
		b.WriteString("func() bool { _svzX := func() bool { return " + x + " }; _svzY := func() bool { return " + y + " }; ")
		for j := range s.m {
			fn := "_svzX"
			if ms[s.m[j]].side == 1 {
				fn = "_svzY"
			}
			fmt.Fprintf(&b, "if _svzMutantOn(%d) { return %s() }; ", id(j), fn)
		}
		b.WriteString("return _svzX() " + s.m0.op + " _svzY() }()")
		return b.String()
	}
	return render(0, len(src), -1)
}
