// Command mutants makes the mutants gremlins does not, runs a package's tests on each and reports
// those the tests did not notice. gremlins (scripts/mutate) changes operators; blind samples of
// hand-made mutants showed that most of what lives is of other kinds: a statement gone (an
// assignment, a call, a defer, a send, a check), one side of a && or || chain dropped, an error
// returned as nil. This tool makes exactly those (mutants.go says which statements), so that
// `make mutate` asks of every changed line what a reviewer would.
//
//	go run ./scripts/mutants [-base COMMIT|all] [-run RE] [-skip RE] [-workers N] DIR|FILE...
//
// Each argument is a package directory or files of one (only those files are mutated). A mutant
// is built with `go test -c -overlay` (the tree is never written) and its test binary run in the
// package's directory, as go test does. Lines no test of the package runs are not covered (one
// coverage run first, whose time also sets each mutant's time-out); a mutant that does not
// compile (a deleted statement was a variable's only use) is counted apart and left out of the
// efficacy, as are time-outs. The summary goes to stdout, progress to stderr.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"go/parser"
	"go/token"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// The statuses of a mutant, as gremlins names them.
const (
	statusKilled      = "KILLED"
	statusLived       = "LIVED"
	statusNotCovered  = "NOT COVERED"
	statusTimedOut    = "TIMED OUT"
	statusNotCompiled = "NOT COMPILED"
)

type config struct {
	base    string // a commit: only the lines changed since it; "all": every line
	run     string
	skip    string
	workers int
	coef    float64
	out     string        // where the JSON report goes, if anywhere
	list    bool          // only list the mutants
	grace   time.Duration // added to each mutant's time-out: a binary's start on a loaded machine
	// A test of at least splitSubtests subtests that takes at least splitAfter is split into them.
	splitAfter time.Duration
	progress   io.Writer
}

func main() {
	var c config
	flag.StringVar(&c.base, "base", "all", "mutate the lines changed since this commit, or every line (all)")
	flag.StringVar(&c.run, "run", "", "a go test -run regexp for every test run")
	flag.StringVar(&c.skip, "skip", "", "a go test -skip regexp for every test run")
	flag.IntVar(&c.workers, "workers", 1, "mutants built and tested at once")
	flag.Float64Var(&c.coef, "timeout-coefficient", 4, "a mutant's tests time out after this many times the coverage run's time")
	flag.StringVar(&c.out, "json", "", "write every mutant and its status to this file")
	flag.BoolVar(&c.list, "list", false, "list the mutants without running any")
	flag.Parse()
	c.progress = os.Stderr
	c.grace = 5 * time.Second
	c.splitAfter = time.Second
	if flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "mutants: give package directories or files to mutate (e.g. ./core/jobs)")
		os.Exit(2)
	}
	if c.workers < 1 {
		fmt.Fprintln(os.Stderr, "mutants: -workers must be 1 or more")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rows, err := run(ctx, c, flag.Args())
	printSummary(os.Stdout, rows)
	if err != nil {
		fmt.Fprintln(os.Stderr, "mutants:", err)
		os.Exit(1)
	}
}

// A row is one package's result.
type row struct {
	Pkg     string   `json:"package"`
	Mutants []mutant `json:"mutants"`
	Note    string   `json:"note,omitempty"` // why the package has no figures
}

func (r row) count(status string) int {
	n := 0
	for _, m := range r.Mutants {
		if m.Status == status {
			n++
		}
	}
	return n
}

// run mutates each package of args in turn.
func run(ctx context.Context, c config, args []string) ([]row, error) {
	pkgs, only, err := targets(args)
	if err != nil {
		return nil, err
	}
	var rows []row
	for _, dir := range pkgs {
		r, err := runPackage(ctx, c, dir, only[dir])
		rows = append(rows, r)
		if err != nil {
			return rows, fmt.Errorf("%s: %w", dir, err)
		}
	}
	if c.out != "" {
		b, err := json.MarshalIndent(rows, "", "  ")
		if err != nil {
			return rows, err
		}
		if err := os.WriteFile(c.out, b, 0o644); err != nil {
			return rows, err
		}
	}
	return rows, nil
}

// targets splits arguments into package directories (in order, once each) and, for file
// arguments, the files kept in each.
func targets(args []string) (pkgs []string, only map[string][]string, err error) {
	only = map[string][]string{}
	for _, a := range args {
		a = filepath.Clean(a)
		st, err := os.Stat(a)
		if err != nil {
			return nil, nil, fmt.Errorf("no package directory or file %s", a)
		}
		dir := a
		if !st.IsDir() {
			if !strings.HasSuffix(a, ".go") || strings.HasSuffix(a, "_test.go") {
				return nil, nil, fmt.Errorf("%s: give a package directory or one of its non-test .go files", a)
			}
			dir = filepath.Dir(a)
			only[dir] = append(only[dir], filepath.Base(a))
		}
		if !slices.Contains(pkgs, dir) {
			pkgs = append(pkgs, dir)
		}
	}
	return pkgs, only, nil
}

func runPackage(ctx context.Context, c config, dir string, files []string) (row, error) {
	r := row{Pkg: dir}
	if len(files) == 0 {
		all, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			return r, err
		}
		for _, f := range all {
			if !strings.HasSuffix(f, "_test.go") {
				files = append(files, filepath.Base(f))
			}
		}
	}
	srcs := map[string][]byte{}
	for _, name := range files {
		path := filepath.Join(dir, name)
		src, err := os.ReadFile(path)
		if err != nil {
			return r, err
		}
		var keep func(int) bool
		if c.base != "all" {
			lines, err := changedLines(ctx, c.base, path)
			if err != nil {
				return r, err
			}
			if len(lines) == 0 {
				continue
			}
			keep = func(l int) bool { return lines[l] }
		}
		ms, err := generate(path, src, keep)
		if err != nil {
			return r, err
		}
		srcs[path] = src
		r.Mutants = append(r.Mutants, ms...)
	}
	if len(r.Mutants) == 0 {
		r.Note = "no mutant"
		if c.base != "all" {
			r.Note = "no change since " + c.base
		}
		return r, nil
	}

	if c.list {
		for _, m := range r.Mutants {
			fmt.Fprintln(c.progress, m.String())
		}
		r.Note = fmt.Sprintf("%d mutants (listed)", len(r.Mutants))
		return r, nil
	}
	work, err := os.MkdirTemp("", "svz-mutants-")
	if err != nil {
		return r, err
	}
	defer os.RemoveAll(work)
	fmt.Fprintf(c.progress, "== %s: %d mutants; each test alone with coverage first\n", dir, len(r.Mutants))
	tests, err := coverTests(ctx, c, work, dir)
	if err != nil {
		return r, err
	}
	bin, err := buildSchemata(ctx, work, dir, r.Mutants, srcs)
	if err != nil {
		fmt.Fprintf(c.progress, "mutants: the mutants do not compile in at once, so each is built alone (slower): %v\n", err)
	}

	jobs := make(chan int)
	var wg sync.WaitGroup
	var mu sync.Mutex
	for w := range c.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				m := &r.Mutants[i]
				st := statusNotCovered
				line, col := m.Line, m.Col
				if m.at.IsValid() {
					line, col = m.at.Line, m.at.Column
				}
				if units, took := tests.running(filepath.Base(m.File), line, col); len(units) > 0 {
					timeout := time.Duration(c.coef*float64(took)) + c.grace
					t := testRun{dir: dir, units: units, skip: c.skip, timeout: timeout}
					if bin != "" {
						st = t.run(ctx, bin, i+1)
					} else {
						st = runAlone(ctx, filepath.Join(work, strconv.Itoa(w)), t, *m, srcs[m.File])
					}
				}
				mu.Lock()
				m.Status = st
				fmt.Fprintf(c.progress, "%14s %s\n", st, m.String())
				mu.Unlock()
			}
		}()
	}
	for i := range r.Mutants {
		if ctx.Err() != nil {
			break
		}
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	return r, ctx.Err()
}

// buildSchemata builds the package's test binary with every mutant compiled in (mutant i+1 of
// ms switched on by SVZ_MUTANT=i+1), through an overlay: the tree is never written.
func buildSchemata(ctx context.Context, work, dir string, ms []mutant, srcs map[string][]byte) (string, error) {
	byFile := map[string][]mutant{}
	first := map[string]int{}
	for i, m := range ms {
		if _, ok := first[m.File]; !ok {
			first[m.File] = i + 1
		}
		byFile[m.File] = append(byFile[m.File], m)
	}
	replace := map[string]string{}
	pkgName := ""
	for file, fms := range byFile {
		abs, err := filepath.Abs(file)
		if err != nil {
			return "", err
		}
		f, err := parser.ParseFile(token.NewFileSet(), file, srcs[file], parser.PackageClauseOnly)
		if err != nil {
			return "", err
		}
		pkgName = f.Name.Name
		out := filepath.Join(work, "schemata", filepath.Base(file))
		if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
			return "", err
		}
		if err := os.WriteFile(out, []byte(instrument(srcs[file], fms, first[file])), 0o644); err != nil {
			return "", err
		}
		replace[abs] = out
	}
	absDir, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	helper := filepath.Join(work, "schemata", "zz_svz_mutant.go")
	if err := os.WriteFile(helper, fmt.Appendf(nil, helperFile, pkgName), 0o644); err != nil {
		return "", err
	}
	replace[filepath.Join(absDir, "zz_svz_mutant.go")] = helper
	ov, err := json.Marshal(map[string]map[string]string{"Replace": replace})
	if err != nil {
		return "", err
	}
	overlay := filepath.Join(work, "schemata.json")
	if err := os.WriteFile(overlay, ov, 0o644); err != nil {
		return "", err
	}
	bin := filepath.Join(work, "mutants.test")
	if out, err := goTest(ctx, dir, "-c", "-o", bin, "-overlay", overlay).CombinedOutput(); err != nil {
		return "", fmt.Errorf("%w\n%s", err, tail(out))
	}
	return bin, nil
}

// goTest returns `go test args...` for the package in dir, run there (so that dir may be in
// another module than the working directory's). Output paths in args must be absolute.
func goTest(ctx context.Context, dir string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "go", append([]string{"test"}, args...)...)
	cmd.Dir = dir
	return cmd
}

// A unit is a test run alone: a top-level test, or one subtest of one (a long test of many
// subtests, such as a suite of scenarios, is split so that a mutant runs only the scenarios
// that ran its line).
type unit struct{ top, sub string }

// A testRun runs some of a package's tests in its directory, as go test does.
type testRun struct {
	dir     string
	units   []unit
	skip    string
	timeout time.Duration
}

// patterns returns the -test.run patterns that run the units: one for the whole top-level tests,
// one per split test.
func (t testRun) patterns() []string {
	var whole []string
	subs := map[string][]string{}
	var split []string
	for _, u := range t.units {
		if u.sub == "" {
			whole = append(whole, u.top)
			continue
		}
		if subs[u.top] == nil {
			split = append(split, u.top)
		}
		subs[u.top] = append(subs[u.top], regexp.QuoteMeta(u.sub))
	}
	var pats []string
	if len(whole) > 0 {
		pats = append(pats, "^("+strings.Join(whole, "|")+")$")
	}
	for _, top := range split {
		pats = append(pats, "^"+top+"$/^("+strings.Join(subs[top], "|")+")$")
	}
	return pats
}

// run runs the tests with mutant id switched on (0: none) and says whether they noticed.
func (t testRun) run(ctx context.Context, bin string, id int) string {
	tctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	for _, pat := range t.patterns() {
		args := []string{"-test.count=1", "-test.run=" + pat}
		if t.skip != "" {
			args = append(args, "-test.skip="+t.skip)
		}
		test := exec.Command(bin, args...)
		test.Dir = t.dir
		test.Env = append(os.Environ(), "SVZ_MUTANT="+strconv.Itoa(id))
		// The tests may start children (crash tests): a time-out kills the whole group.
		test.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := test.Start(); err != nil {
			return statusNotCompiled
		}
		done := make(chan error, 1)
		go func() { done <- test.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				return statusKilled
			}
		case <-tctx.Done():
			_ = syscall.Kill(-test.Process.Pid, syscall.SIGKILL)
			<-done
			return statusTimedOut
		}
	}
	return statusLived
}

// runAlone builds the package's test binary with one mutant in place of its file and runs it:
// the fallback when the mutants do not compile in at once.
func runAlone(ctx context.Context, work string, t testRun, m mutant, src []byte) string {
	if err := os.MkdirAll(work, 0o755); err != nil {
		return statusNotCompiled
	}
	abs, err := filepath.Abs(m.File)
	if err != nil {
		return statusNotCompiled
	}
	file := filepath.Join(work, filepath.Base(m.File))
	overlay := filepath.Join(work, "overlay.json")
	ov, _ := json.Marshal(map[string]map[string]string{"Replace": {abs: file}})
	if os.WriteFile(file, m.apply(src), 0o644) != nil || os.WriteFile(overlay, ov, 0o644) != nil {
		return statusNotCompiled
	}
	bin, err := filepath.Abs(filepath.Join(work, "pkg.test"))
	if err != nil {
		return statusNotCompiled
	}
	if goTest(ctx, t.dir, "-c", "-o", bin, "-overlay", overlay).Run() != nil {
		return statusNotCompiled
	}
	return t.run(ctx, bin, 0)
}

// testCoverage is what each test unit of a package ran, and how long it took.
type testCoverage struct {
	units []unit
	took  []time.Duration
	cover []coverage
}

// A test of at least this many subtests that takes at least config.splitAfter is split into them.
const splitSubtests = 4

var runLine = regexp.MustCompile(`(?m)^=== RUN   ([^/\s]+)/([^/\s]+)$`)

// coverTests runs each top-level test of the package alone (those RUN and SKIP keep), with
// coverage, on the unchanged code, and then each subtest of the long ones: a mutant runs only
// the units that ran its line.
func coverTests(ctx context.Context, c config, work, dir string) (*testCoverage, error) {
	bin := filepath.Join(work, "cover.test")
	if out, err := goTest(ctx, dir, "-c", "-cover", "-o", bin).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("building the tests: %w\n%s", err, tail(out))
	}
	cmd := exec.CommandContext(ctx, bin, "-test.list=.")
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("listing the tests: %w", err)
	}
	var runRE, skipRE *regexp.Regexp
	if c.run != "" {
		if runRE, err = regexp.Compile(strings.SplitN(c.run, "/", 2)[0]); err != nil {
			return nil, fmt.Errorf("-run: %w", err)
		}
	}
	if c.skip != "" && !strings.Contains(c.skip, "/") {
		if skipRE, err = regexp.Compile(c.skip); err != nil {
			return nil, fmt.Errorf("-skip: %w", err)
		}
	}
	var tops []unit
	for _, name := range strings.Fields(string(out)) {
		if !strings.HasPrefix(name, "Test") || runRE != nil && !runRE.MatchString(name) || skipRE != nil && skipRE.MatchString(name) {
			continue
		}
		tops = append(tops, unit{top: name})
	}
	if len(tops) == 0 {
		return nil, fmt.Errorf("no test of %s is left by -run and -skip", dir)
	}
	whole, err := coverUnits(ctx, c, bin, work, dir, tops)
	if err != nil {
		return nil, err
	}
	tc := &testCoverage{}
	var subs []unit
	for i, r := range whole {
		var found []unit
		for _, m := range runLine.FindAllStringSubmatch(r.out, -1) {
			if m[1] == tops[i].top && !slices.Contains(found, unit{m[1], m[2]}) {
				found = append(found, unit{m[1], m[2]})
			}
		}
		if len(found) >= splitSubtests && r.took >= c.splitAfter {
			subs = append(subs, found...)
			continue
		}
		tc.units, tc.took, tc.cover = append(tc.units, tops[i]), append(tc.took, r.took), append(tc.cover, r.cover)
	}
	split, err := coverUnits(ctx, c, bin, work, dir, subs)
	if err != nil {
		return nil, err
	}
	for i, r := range split {
		tc.units, tc.took, tc.cover = append(tc.units, subs[i]), append(tc.took, r.took), append(tc.cover, r.cover)
	}
	return tc, nil
}

type unitCoverage struct {
	took  time.Duration
	cover coverage
	out   string
}

// coverUnits runs each unit alone with coverage (and -test.v, whose output names the subtests).
func coverUnits(ctx context.Context, c config, bin, work, dir string, units []unit) ([]unitCoverage, error) {
	res := make([]unitCoverage, len(units))
	errs := make([]error, len(units))
	next := make(chan int)
	var wg sync.WaitGroup
	for range c.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				prof, err := os.CreateTemp(work, "cover-*.out")
				if err != nil {
					errs[i] = err
					continue
				}
				prof.Close()
				pat := testRun{units: units[i : i+1]}.patterns()[0]
				began := time.Now()
				cmd := exec.CommandContext(ctx, bin, "-test.count=1", "-test.v", "-test.run="+pat, "-test.coverprofile="+prof.Name())
				if c.skip != "" {
					cmd.Args = append(cmd.Args, "-test.skip="+c.skip)
				}
				cmd.Dir = dir
				out, err := cmd.CombinedOutput()
				if err != nil {
					errs[i] = fmt.Errorf("%s fails without a mutant, fix it first: %w\n%s", pat, err, tail(out))
					continue
				}
				res[i].took, res[i].out = time.Since(began), string(out)
				res[i].cover, errs[i] = readCoverage(prof.Name())
			}
		}()
	}
	for i := range units {
		next <- i
	}
	close(next)
	wg.Wait()
	return res, errors.Join(errs...)
}

// running returns the units that ran a position, and how long they took together.
func (tc *testCoverage) running(file string, line, col int) ([]unit, time.Duration) {
	var units []unit
	var took time.Duration
	for i, cv := range tc.cover {
		if cv.covers(file, line, col) {
			units = append(units, tc.units[i])
			took += tc.took[i]
		}
	}
	return units, took
}

// changedLines returns the lines of path (relative to the repository's root) that changed
// since base: added or modified, in the working tree.
func changedLines(ctx context.Context, base, path string) (map[int]bool, error) {
	out, err := exec.CommandContext(ctx, "git", "diff", "-U0", "--merge-base", base, "--", path).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return nil, fmt.Errorf("git diff against %s: %s", base, strings.TrimSpace(string(ee.Stderr)))
		}
		return nil, fmt.Errorf("git diff against %s: %w", base, err)
	}
	return hunkLines(out)
}

var hunk = regexp.MustCompile(`^@@ -\d+(?:,\d+)? \+(\d+)(?:,(\d+))? @@`)

// hunkLines reads the new side's lines of a unified diff with no context.
func hunkLines(diff []byte) (map[int]bool, error) {
	lines := map[int]bool{}
	sc := bufio.NewScanner(strings.NewReader(string(diff)))
	for sc.Scan() {
		m := hunk.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		start, _ := strconv.Atoi(m[1])
		n := 1
		if m[2] != "" {
			n, _ = strconv.Atoi(m[2])
		}
		for l := start; l < start+n; l++ {
			lines[l] = true
		}
	}
	return lines, sc.Err()
}

// A coverage block of one file, where it starts, and whether the tests ran it (count > 0).
type block struct {
	file      string
	line, col int
	ran       bool
}

type coverage []block

// covers reports whether the tests ran the position: whether the last block that starts at or
// before it in the file ran. A package's blocks do not overlap, so that is the block holding
// the position, or, for a position in no block, the last one before it (a case's condition,
// in no block either, is asked at its switch: see mutant.at).
func (cv coverage) covers(file string, line, col int) bool {
	var last *block
	for i := range cv {
		b := &cv[i]
		if b.file != file || line < b.line || line == b.line && col < b.col {
			continue
		}
		if last == nil || b.line > last.line || b.line == last.line && b.col > last.col {
			last = b
		}
	}
	return last != nil && last.ran
}

var coverLine = regexp.MustCompile(`^(.+):(\d+)\.(\d+),(\d+)\.(\d+) \d+ (\d+)$`)

// readCoverage reads a go test -coverprofile file; blocks are named by their file's base name
// (a profile of one package).
func readCoverage(path string) (coverage, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var cv coverage
	for _, l := range strings.Split(string(b), "\n") {
		m := coverLine.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		n := func(i int) int { v, _ := strconv.Atoi(m[i]); return v }
		cv = append(cv, block{file: filepath.Base(m[1]), line: n(2), col: n(3), ran: m[6] != "0"})
	}
	return cv, nil
}

func printSummary(w io.Writer, rows []row) {
	fmt.Fprintf(w, "%-36s %7s %6s %12s %10s %13s  %s\n", "package", "killed", "lived", "not covered", "timed out", "not compiled", "efficacy")
	var lived []string
	for _, r := range rows {
		if r.Note != "" {
			fmt.Fprintf(w, "%-36s %7s %6s %12s %10s %13s  %s\n", r.Pkg, "-", "-", "-", "-", "-", r.Note)
			continue
		}
		k, l := r.count(statusKilled), r.count(statusLived)
		eff := "-"
		if k+l > 0 {
			eff = fmt.Sprintf("%.1f%%", 100*float64(k)/float64(k+l))
		}
		fmt.Fprintf(w, "%-36s %7d %6d %12d %10d %13d  %s\n", r.Pkg, k, l, r.count(statusNotCovered), r.count(statusTimedOut), r.count(statusNotCompiled), eff)
		for _, m := range r.Mutants {
			if m.Status == statusLived {
				lived = append(lived, "  lived "+m.String())
			}
		}
	}
	for _, l := range lived {
		fmt.Fprintln(w, l)
	}
}

// tail returns the last lines of a command's output, enough to say why it failed.
func tail(out []byte) string {
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	if len(lines) > 30 {
		lines = lines[len(lines)-30:]
	}
	return strings.Join(lines, "\n")
}
