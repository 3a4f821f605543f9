package main

import (
	"context"
	"encoding/json"
	"fmt"
	"go/parser"
	"go/token"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/supervaize/svz/internal/golden"
)

func readBox(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "box", name+".txt"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The mutants of a file, and the same file with all of them compiled in, are exactly the goldens:
// box (whose tests TestRunCompiledInAtOnce runs) and shapes (the forms that nest and look alike).
func TestGenerateAndInstrument(t *testing.T) {
	for _, name := range []string{"box", "shapes"} {
		t.Run(name, func(t *testing.T) {
			src := readBox(t, name+".go")
			ms, err := generate(name+".go", src, nil)
			if err != nil {
				t.Fatal(err)
			}
			var list strings.Builder
			for _, m := range ms {
				fmt.Fprintln(&list, m.String())
			}
			golden.Bytes(t, name+".mutants", []byte(list.String()))
			inst := instrument(src, ms, 1)
			if _, err := parser.ParseFile(token.NewFileSet(), name+".go", inst, 0); err != nil {
				t.Fatalf("the instrumented file does not parse: %v\n%s", err, inst)
			}
			golden.Bytes(t, name+".schemata", []byte(inst))
		})
	}
	// A case's condition is reached where its switch is: coverage is read there.
	ms, err := generate("shapes.go", readBox(t, "shapes.go"), func(l int) bool { return l == 26 || l == 27 })
	if err != nil {
		t.Fatal(err)
	}
	var at []string
	for _, m := range ms {
		at = append(at, fmt.Sprintf("%d:%d %s at %v", m.Line, m.Col, m.Kind, m.at))
	}
	if got, want := strings.Join(at, ", "), "26:7 CONDITION_DROPPED at shapes.go:25:2, 26:7 CONDITION_DROPPED at shapes.go:25:2, 27:3 STATEMENT_DELETED at -"; got != want {
		t.Errorf("mutants of a case: %s, want %s", got, want)
	}
	if _, err := generate("bad.go", []byte("package box\nfunc {"), nil); err == nil || !strings.Contains(err.Error(), "bad.go:2:6: expected") {
		t.Fatalf("a file that does not parse: %v", err)
	}
}

// Only the lines a diff changed are mutated.
func TestGenerateKeepsChangedLines(t *testing.T) {
	ms, err := generate("box.go", readBox(t, "box.go"), func(l int) bool { return l == 18 || l == 23 })
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range ms {
		got = append(got, fmt.Sprintf("%d %s", m.Line, m.Kind))
	}
	want := "18 STATEMENT_DELETED,23 CONDITION_DROPPED,23 CONDITION_DROPPED"
	if strings.Join(got, ",") != want {
		t.Fatalf("mutants %v, want %s", got, want)
	}
}

func TestHunkLines(t *testing.T) {
	diff := "diff --git a/x.go b/x.go\n@@ -3 +3 @@ x\n-a\n+b\n@@ -10,0 +11,2 @@\n+c\n+d\n@@ -20,4 +22,0 @@\n"
	got, err := hunkLines([]byte(diff))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || !got[3] || !got[11] || !got[12] {
		t.Fatalf("lines %v, want 3, 11 and 12 (a deletion adds none)", got)
	}
}

func TestCovers(t *testing.T) {
	// Blocks as a profile lists them: not in source order.
	cv := coverage{
		{file: "a.go", line: 12, col: 5, ran: false},
		{file: "a.go", line: 9, col: 25, ran: true},
		{file: "a.go", line: 5, col: 10, ran: true},
		{file: "a.go", line: 9, col: 3, ran: false},
		{file: "a.go", line: 11, col: 3, ran: false},
		{file: "a.go", line: 11, col: 25, ran: true},
		{file: "b.go", line: 1, col: 1, ran: true},
		{file: "b.go", line: 30, col: 1, ran: true},
	}
	for _, c := range []struct {
		line, col int
		want      bool
	}{
		{5, 10, true},  // a block's first byte
		{8, 2, true},   // past its start, before the next block's
		{5, 9, false},  // before any block
		{1, 1, false},  // before any of this file (b.go's first block starts there)
		{9, 5, false},  // in a block not run, on the line of one that ran, which starts after it
		{9, 30, true},  // in that one, listed before the other
		{11, 30, true}, // the same, listed after
		{10, 4, true},  // in none: the last block before it, on a line before, ran
		{12, 5, false}, // a block listed first
		{13, 1, false}, // after it, at a column before its start
		{40, 1, false}, // b.go's block at 30 ran: each file is its own
	} {
		if got := cv.covers("a.go", c.line, c.col); got != c.want {
			t.Errorf("covers(a.go, %d, %d) = %v, want %v", c.line, c.col, got, c.want)
		}
	}
	if cv.covers("c.go", 1, 1) {
		t.Error("a file of no block is covered")
	}
}

// newBox writes the box package into a module of its own and returns its directory.
func newBox(t *testing.T, files ...string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "box")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(name string, b []byte) {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", []byte("module example.com/box\n\ngo 1.26\n"))
	for _, f := range files {
		write(f, readBox(t, f))
	}
	return dir
}

func statuses(rows []row) string {
	var b strings.Builder
	for _, r := range rows {
		for _, m := range r.Mutants {
			fmt.Fprintf(&b, "%s:%d %s %s: %s\n", filepath.Base(m.File), m.Line, m.Kind, m.Now, m.Status)
		}
	}
	return b.String()
}

const boxStatuses = `box.go:15 STATEMENT_DELETED : KILLED
box.go:16 ERROR_DROPPED nil: KILLED
box.go:18 STATEMENT_DELETED : KILLED
box.go:19 STATEMENT_DELETED : LIVED
box.go:23 CONDITION_DROPPED b.N > 10: LIVED
box.go:23 CONDITION_DROPPED b.N < 100: KILLED
box.go:26 STATEMENT_DELETED : TIMED OUT
box.go:35 STATEMENT_DELETED : NOT COVERED
`

// The mutants of a package, compiled in at once, each run against the tests that ran its line.
func TestRunCompiledInAtOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs a package's tests")
	}
	t.Parallel()
	dir := newBox(t, "box.go", "box_test.go")
	rows, err := run(context.Background(), config{base: "all", workers: 2, coef: 1, grace: 15 * time.Second, progress: io.Discard}, []string{dir})
	if err != nil {
		t.Fatal(err)
	}
	if got := statuses(rows); got != boxStatuses {
		t.Fatalf("statuses:\n%s\nwant:\n%s", got, boxStatuses)
	}
	var out strings.Builder
	printSummary(&out, rows)
	if !strings.Contains(out.String(), "      4      2            1          1             0  66.7%") ||
		!strings.Contains(out.String(), "  lived "+filepath.Join(dir, "box.go")+":23:35 CONDITION_DROPPED  b.N > 10 && b.N < 100  =>  b.N > 10\n") {
		t.Fatalf("summary:\n%s", out.String())
	}
}

// A mutant that cannot be compiled in with the others (a named boolean's condition) makes the
// tool build each alone: the same statuses, and one that does not compile alone.
func TestRunEachAlone(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs a package's tests")
	}
	t.Parallel()
	dir := newBox(t, "box.go", "box_test.go", "flag.go", "flag_test.go")
	var progress strings.Builder
	rows, err := run(context.Background(), config{base: "all", workers: 2, coef: 1, grace: 15 * time.Second, progress: &progress}, []string{dir})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(progress.String(), "mutants: the mutants do not compile in at once, so each is built alone (slower): exit status 1\n") {
		t.Errorf("progress:\n%s", progress.String())
	}
	// Alone, deleting Put's check (or its error) leaves the import of errors unused.
	want := strings.Replace(strings.Replace(boxStatuses, ":15 STATEMENT_DELETED : KILLED", ":15 STATEMENT_DELETED : NOT COMPILED", 1),
		":16 ERROR_DROPPED nil: KILLED", ":16 ERROR_DROPPED nil: NOT COMPILED", 1) + `flag.go:7 CONDITION_DROPPED a: NOT COVERED
flag.go:7 CONDITION_DROPPED b: NOT COVERED
flag.go:14 STATEMENT_DELETED : NOT COMPILED
`
	if got := statuses(rows); got != want {
		t.Fatalf("statuses:\n%s\nwant:\n%s", got, want)
	}
}

func TestTargets(t *testing.T) {
	if _, _, err := targets([]string{"testdata/none"}); err == nil || !strings.Contains(err.Error(), "no package directory or file testdata/none") {
		t.Fatalf("a missing path: %v", err)
	}
	if _, _, err := targets([]string{"mutants_test.go"}); err == nil || !strings.Contains(err.Error(), "non-test .go files") {
		t.Fatalf("a test file: %v", err)
	}
	if _, _, err := targets([]string{"testdata/box.mutants"}); err == nil || !strings.Contains(err.Error(), "testdata/box.mutants: give a package directory or one of its non-test .go files") {
		t.Fatalf("a file not of Go: %v", err)
	}
	pkgs, only, err := targets([]string{"./main.go", "./", ".", "mutants.go", "testdata/../testdata/box"})
	if err != nil || strings.Join(pkgs, ",") != ".,testdata/box" || strings.Join(only["."], ",") != "main.go,mutants.go" || len(only) != 1 {
		t.Fatalf("targets: %v %v %v", pkgs, only, err)
	}
}

func TestPatterns(t *testing.T) {
	for _, c := range []struct {
		units []unit
		want  string
	}{
		{[]unit{{"TestA", ""}}, "^(TestA)$"},
		{[]unit{{"TestA", ""}, {"TestB", ""}}, "^(TestA|TestB)$"},
		{[]unit{{"TestS", "one"}, {"TestA", ""}, {"TestS", "a.b#01"}, {"TestT", "x"}}, "^(TestA)$ ^TestS$/^(one|a\\.b#01)$ ^TestT$/^(x)$"},
	} {
		if got := strings.Join(testRun{units: c.units}.patterns(), " "); got != c.want {
			t.Errorf("patterns of %v: %s, want %s", c.units, got, c.want)
		}
	}
}

// coverOf runs coverTests on the box package made of files, with c's filters.
func coverOf(t *testing.T, c config, files ...string) (*testCoverage, string, error) {
	t.Helper()
	dir := newBox(t, files...)
	c.workers = 2
	tc, err := coverTests(context.Background(), c, t.TempDir(), dir)
	return tc, dir, err
}

// TestCoverTests: each test left by -run and -skip is a unit, run in the package's directory; a
// test of four subtests or more that took splitAfter is split into them; a -skip naming a
// subtest leaves it out of the runs, not its test; and a unit's lines and time are what a
// mutant there runs.
func TestCoverTests(t *testing.T) {
	t.Parallel()
	units := func(tc *testCoverage) string {
		var s []string
		for _, u := range tc.units {
			s = append(s, strings.TrimSuffix(u.top+"/"+u.sub, "/"))
		}
		return strings.Join(s, ",")
	}
	files := []string{"box.go", "box_test.go", "split_test.go"}
	for _, c := range []struct {
		cfg  config
		want string
	}{
		{config{run: "^Test(Put|Mid|Split)$", skip: "TestMid"}, "TestPut,TestSplit/a,TestSplit/b,TestSplit/c,TestSplit/log"},
		{config{run: "^Test(Put|Split)$/x", splitAfter: time.Hour}, "TestPut,TestSplit"},
		{config{run: "^TestSplit$", skip: "TestSplit/log"}, "TestSplit"}, // three subtests run: not split
		{config{skip: "^Test(Wait|Split)$"}, "TestPut,TestMid"},
	} {
		tc, _, err := coverOf(t, c.cfg, files...)
		if err != nil {
			t.Fatal(err)
		}
		if got := units(tc); got != c.want {
			t.Errorf("-run %q -skip %q: units %s, want %s", c.cfg.run, c.cfg.skip, got, c.want)
		}
		if c.want != "TestPut,TestSplit/a,TestSplit/b,TestSplit/c,TestSplit/log" {
			continue
		}
		// Put's log line: TestPut and every subtest ran it, for their time together.
		us, took := tc.running("box.go", 19, 2)
		var sum time.Duration
		for _, d := range tc.took {
			sum += d
		}
		if len(us) != 5 || took != sum || took <= 0 {
			t.Errorf("running box.go:19: %v for %s, want the 5 units for %s", us, took, sum)
		}
		if us, _ := tc.running("box.go", 23, 35); len(us) != 0 {
			t.Errorf("running Mid: %v, want none (skipped)", us)
		}
	}
	for _, c := range []struct {
		cfg   config
		files []string
		want  string
	}{
		{config{run: "("}, files, "-run: error parsing regexp: missing closing ): `(`"},
		{config{skip: "("}, files, "-skip: error parsing regexp: missing closing ): `(`"},
		{config{run: "^TestNone$"}, files, " is left by -run and -skip"},
		{config{}, []string{"box.go", "fail_test.go"}, "^(TestFails)$ fails without a mutant, fix it first: exit status 1\n"},
	} {
		_, dir, err := coverOf(t, c.cfg, c.files...)
		if c.want == " is left by -run and -skip" {
			c.want = "no test of " + dir + c.want
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("-run %q -skip %q on %v: %v, want %q", c.cfg.run, c.cfg.skip, c.files, err, c.want)
		}
	}
	dir := newBox(t, "box.go")
	if err := os.WriteFile(filepath.Join(dir, "bad_test.go"), []byte("package box\n\nimport \"testing\"\n\nfunc TestBad(t *testing.T) { undefined() }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := coverTests(context.Background(), config{workers: 1}, t.TempDir(), dir); err == nil || !strings.HasPrefix(err.Error(), "building the tests: exit status 1\n") || !strings.Contains(err.Error(), "undefined") {
		t.Errorf("tests that do not build: %v", err)
	}
}

// TestRunOptions: -list lists and runs nothing; -json writes the rows; a -skip that names a
// subtest holds for the mutants' runs too; a case's condition runs the tests that reach its
// switch (here the one that skips the case before); progress names each package and mutant; a
// package of no mutant, a file that does not parse and a path that is none are said so.
func TestRunOptions(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs a package's tests")
	}
	t.Parallel()
	dir := newBox(t, "box.go", "box_test.go", "split_test.go")
	var progress strings.Builder
	rows, err := run(context.Background(), config{base: "all", list: true, progress: &progress}, []string{dir})
	if err != nil || len(rows) != 1 || rows[0].Note != "8 mutants (listed)" || rows[0].count("") != 8 {
		t.Fatalf("-list: %+v, %v", rows, err)
	}
	golden.Bytes(t, "box.mutants", []byte(strings.ReplaceAll(progress.String(), filepath.Join(dir, "box.go"), "box.go")))

	progress.Reset()
	for _, f := range []string{"switch.go", "switch_test.go"} {
		if err := os.WriteFile(filepath.Join(dir, f), readBox(t, f), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out := filepath.Join(t.TempDir(), "report.json")
	c := config{base: "all", run: "^Test(Put|Split|Negative|Large)$", skip: "TestSplit/log", workers: 2, coef: 1, grace: 15 * time.Second, out: out, progress: &progress}
	rows, err = run(context.Background(), c, []string{dir})
	if err != nil {
		t.Fatal(err)
	}
	// Only TestSplit/log checks the log, and it is skipped: its deletion lives.
	want := `box.go:15 STATEMENT_DELETED : KILLED
box.go:16 ERROR_DROPPED nil: KILLED
box.go:18 STATEMENT_DELETED : KILLED
box.go:19 STATEMENT_DELETED : LIVED
box.go:23 CONDITION_DROPPED b.N > 10: NOT COVERED
box.go:23 CONDITION_DROPPED b.N < 100: NOT COVERED
box.go:26 STATEMENT_DELETED : NOT COVERED
box.go:35 STATEMENT_DELETED : NOT COVERED
switch.go:8 CONDITION_DROPPED n > 0: KILLED
switch.go:8 CONDITION_DROPPED n < 1000: LIVED
`
	if got := statuses(rows); got != want {
		t.Fatalf("statuses:\n%s\nwant:\n%s", got, want)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var written []row
	if err := json.Unmarshal(b, &written); err != nil || statuses(written) != want || written[0].Pkg != dir {
		t.Fatalf("-json wrote %s (%v)", b, err)
	}
	for _, line := range []string{
		"== " + dir + ": 10 mutants; each test alone with coverage first\n",
		"        KILLED " + filepath.Join(dir, "box.go") + ":15:2 STATEMENT_DELETED  if v < 0 { return errors.New(\"negative\") }\n",
		"   NOT COVERED " + filepath.Join(dir, "box.go") + ":35:2 STATEMENT_DELETED  x++\n",
	} {
		if !strings.Contains(progress.String(), line) {
			t.Errorf("progress lacks %q:\n%s", line, progress.String())
		}
	}

	none := newBox(t)
	if err := os.WriteFile(filepath.Join(none, "none.go"), []byte("package box\n\nconst x = 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if rows, err := run(context.Background(), config{base: "all"}, []string{none}); err != nil || len(rows) != 1 || rows[0].Note != "no mutant" {
		t.Errorf("a package of no mutant: %+v, %v", rows, err)
	}
	if err := os.WriteFile(filepath.Join(none, "bad.go"), []byte("package box\n\nfunc {\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := run(context.Background(), config{base: "all"}, []string{none}); err == nil || !strings.HasPrefix(err.Error(), none+": "+filepath.Join(none, "bad.go")+":3:6: expected") {
		t.Errorf("a file that does not parse: %v", err)
	}
	if rows, err := run(context.Background(), config{base: "all"}, []string{filepath.Join(none, "gone")}); err == nil || rows != nil || !strings.HasPrefix(err.Error(), "no package directory or file ") {
		t.Errorf("a path that is none: %v, %v", rows, err)
	}
}

// TestRunChangedLines: with a base commit, only the lines changed since it are mutated (in the
// working tree), and a package without change says so. git runs in the working directory: the
// repository's root, as make mutate runs the tool.
func TestRunChangedLines(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs a package's tests")
	}
	dir := newBox(t, "box.go", "box_test.go")
	root := filepath.Dir(dir)
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@example.com"}, args...)...)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	git("init", "-q")
	git("add", ".")
	git("commit", "-q", "-m", "box")
	t.Chdir(root)
	var progress strings.Builder
	c := config{base: "HEAD", workers: 2, coef: 1, grace: 15 * time.Second, progress: &progress}
	if rows, err := run(context.Background(), c, []string{"box"}); err != nil || len(rows) != 1 || rows[0].Note != "no change since HEAD" || len(rows[0].Mutants) != 0 {
		t.Fatalf("no change: %+v, %v", rows, err)
	}
	src, err := os.ReadFile("box/box.go")
	if err != nil {
		t.Fatal(err)
	}
	src = []byte(strings.Replace(string(src), `b.log = append(b.log, "put")`, `b.log = append(b.log, "added")`, 1))
	if err := os.WriteFile("box/box.go", src, 0o644); err != nil {
		t.Fatal(err)
	}
	rows, err := run(context.Background(), c, []string{"box"})
	if err != nil || statuses(rows) != "box.go:19 STATEMENT_DELETED : LIVED\n" {
		t.Fatalf("one line changed: %s, %v", statuses(rows), err)
	}
	c.base = "nosuch"
	if _, err := run(context.Background(), c, []string{"box"}); err == nil || !strings.HasPrefix(err.Error(), "box: git diff against nosuch: fatal: ") {
		t.Fatalf("a base that is no commit: %v", err)
	}
}
