package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/supervaize/svz/internal/testenv"
)

// checkout is this svz checkout (the tests run in cmd/svz).
func checkout(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

func goTool(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go %s in %s: %v\n%s", strings.Join(args, " "), dir, err, out)
	}
	return string(out)
}

// TestInitScaffoldBuildsAndPasses writes a new agent module requiring this checkout, then runs
// what its README says: its own tests, its vet, the Lambda bootstrap build of its Makefile.
func TestInitScaffoldBuildsAndPasses(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a new module")
	}
	if _, err := exec.LookPath("make"); err != nil {
		if testenv.InCI() {
			t.Fatal("make is not installed")
		}
		t.Skip("make is not installed")
	}
	dir := filepath.Join(t.TempDir(), "lead-scout")
	var out, errOut bytes.Buffer
	err := svzInit(&out, &errOut, dir, &initFlags{module: "example.com/agents/lead-scout", replace: checkout(t)}, nil)
	if err != nil {
		t.Fatalf("init: %v\n%s", err, errOut.String())
	}
	if !strings.HasPrefix(out.String(), "Wrote the Lead Scout agent (slug lead-scout) in "+dir+" as module example.com/agents/lead-scout.\n") {
		t.Fatalf("output:\n%s", out.String())
	}
	for _, f := range []string{"go.mod", "go.sum", "main.go", "agent/agent.go", "agent/agent_test.go", "Makefile", "template.yaml", "README.md", ".gitignore"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("the scaffold has no %s: %v", f, err)
		}
	}
	mod, _ := os.ReadFile(filepath.Join(dir, "go.mod"))
	if !strings.Contains(string(mod), "replace github.com/supervaize/svz => "+checkout(t)) {
		t.Fatalf("go.mod:\n%s", mod)
	}
	goTool(t, dir, "vet", "./...")
	if got := goTool(t, dir, "test", "-count=1", "-v", "./..."); !strings.Contains(got, "--- PASS: TestJobStartIsIdempotent") {
		t.Fatalf("the scaffold's tests:\n%s", got)
	}
	// As sam build runs it (ARTIFACTS_DIR set), then by hand (into bin/, which git ignores).
	artifacts := t.TempDir()
	for _, tc := range []struct{ arg, bootstrap string }{
		{"ARTIFACTS_DIR=" + artifacts, filepath.Join(artifacts, "bootstrap")},
		{"", filepath.Join(dir, "bin", "bootstrap")},
	} {
		make := makeIn(dir, "build-ControllerFunction", "GOARCH="+runtime.GOARCH)
		if tc.arg != "" {
			make.Args = append(make.Args, tc.arg)
		}
		if b, err := make.CombinedOutput(); err != nil {
			t.Fatalf("make build-ControllerFunction %s: %v\n%s", tc.arg, err, b)
		}
		if st, err := os.Stat(tc.bootstrap); err != nil || st.Size() == 0 {
			t.Fatalf("make build-ControllerFunction %s: no Lambda bootstrap: %v", tc.arg, err)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(dir, ".gitignore")); !strings.Contains("\n"+string(b), "\nbootstrap\n") {
		t.Errorf(".gitignore does not ignore the bootstrap:\n%s", b)
	}
	empty := makeIn(dir, "build-ControllerFunction", "ARTIFACTS_DIR=")
	if b, err := empty.CombinedOutput(); err == nil || !strings.HasPrefix(string(b), "ARTIFACTS_DIR is empty: unset it for bin/, or give the output directory (sam build sets it)\n") {
		t.Errorf("make build-ControllerFunction ARTIFACTS_DIR=: %v\n%s", err, b)
	}
}

// makeIn is make with args in dir, as a user runs it from a shell: without the settings of a make
// that runs this test (make test), which would turn on its recursive "Entering directory" lines.
func makeIn(dir string, args ...string) *exec.Cmd {
	cmd := exec.Command("make", args...)
	cmd.Dir = dir
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); k != "MAKELEVEL" && k != "MAKEFLAGS" && k != "MFLAGS" {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	return cmd
}

// TestScaffoldTemplateIsTheRepositorys: the SAM template an agent gets is this repository's.
func TestScaffoldTemplateIsTheRepositorys(t *testing.T) {
	repo, _ := os.ReadFile(filepath.Join(checkout(t), "template.yaml"))
	ours, _ := scaffold.ReadFile("scaffold/template.yaml")
	if len(repo) == 0 || !bytes.Equal(repo, ours) {
		t.Fatal("cmd/svz/scaffold/template.yaml differs from template.yaml: cp template.yaml cmd/svz/scaffold/template.yaml")
	}
}

func TestInitRefusals(t *testing.T) {
	occupied := t.TempDir()
	if err := os.WriteFile(filepath.Join(occupied, "main.go"), []byte("package main\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	outside := t.TempDir() // not inside an svz checkout
	released := &debug.BuildInfo{Main: debug.Module{Path: svzModule, Version: "v0.4.1"}}
	for _, tc := range []struct {
		name string
		dir  string
		f    initFlags
		info *debug.BuildInfo
		want string
	}{
		{"no module", outside, initFlags{}, released, "--module is required, e.g. --module example.com/myagent"},
		{"bad module", outside, initFlags{module: "Example com/x"}, released, `--module "Example com/x" is not a module path such as example.com/myagent`},
		{"no slug", outside, initFlags{module: "example.com/x", name: "!!!"}, released, `--name "!!!" gives no agent slug`},
		{"occupied", occupied, initFlags{module: "example.com/x", noTidy: true}, released, "already holds main.go: choose an empty or new directory"},
		{"devel outside a checkout", outside, initFlags{module: "example.com/x"}, &debug.BuildInfo{Main: debug.Module{Path: svzModule, Version: "(devel)"}},
			"this svz was built from a checkout and its version is unknown: pass --svz-version"},
		{"replace not a checkout", outside, initFlags{module: "example.com/x", replace: outside}, released, "is not an svz checkout"},
		{"bad version", outside, initFlags{module: "example.com/x", svzVersion: "latest"}, released, `--svz-version "latest" is not a module version`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wd, _ := os.Getwd()
			if err := os.Chdir(outside); err != nil { // findCheckout also looks from the working directory
				t.Fatal(err)
			}
			defer os.Chdir(wd)
			err := svzInit(&bytes.Buffer{}, &bytes.Buffer{}, tc.dir, &tc.f, tc.info)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want %q", err, tc.want)
			}
		})
	}
	if b, _ := os.ReadFile(filepath.Join(occupied, "main.go")); string(b) != "package main\n" {
		t.Fatal("init touched an existing file")
	}

	// A released svz requires itself, no replace.
	dir := filepath.Join(outside, "x")
	if err := svzInit(&bytes.Buffer{}, &bytes.Buffer{}, dir, &initFlags{module: "example.com/x", noTidy: true}, released); err != nil {
		t.Fatal(err)
	}
	mod, _ := os.ReadFile(filepath.Join(dir, "go.mod"))
	if string(mod) != "module example.com/x\n\ngo 1.26\n\nrequire github.com/supervaize/svz v0.4.1\n\n" {
		t.Fatalf("go.mod:\n%q", mod)
	}
}

func TestVersionAndCompletion(t *testing.T) {
	var b bytes.Buffer
	info := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: svzModule, Version: "v0.4.1"},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "0123abcd"}, {Key: "vcs.modified", Value: "true"}, {Key: "vcs.time", Value: "2026-11-30T10:00:00Z"}}}
	if err := printVersion(&b, info, "", ""); err != nil {
		t.Fatal(err)
	}
	want := "svz v0.4.1\n  revision  0123abcd (modified)\n  time      2026-11-30T10:00:00Z\n  go        go1.26.8 " + runtime.GOOS + "/" + runtime.GOARCH + "\n"
	if b.String() != want {
		t.Fatalf("version:\n%s\nwant\n%s", b.String(), want)
	}
	// A checkout built without VCS information, stamped by the Makefile.
	b.Reset()
	info = &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: svzModule, Version: "(devel)"}}
	if err := printVersion(&b, info, "v0.4.1-3-g0123abc-dirty", "0123abcd0123abcd"); err != nil {
		t.Fatal(err)
	}
	want = "svz v0.4.1-3-g0123abc-dirty\n  revision  0123abcd0123abcd\n  go        go1.26.8 " + runtime.GOOS + "/" + runtime.GOARCH + "\n"
	if b.String() != want {
		t.Fatalf("stamped version:\n%s\nwant\n%s", b.String(), want)
	}
	out, err := runRoot(t, "version")
	if err != nil || !strings.HasPrefix(out, "svz ") {
		t.Fatalf("svz version: %v %q", err, out)
	}

	for _, shell := range []string{"bash", "zsh", "fish", "powershell"} {
		out, err := runRoot(t, "completion", shell)
		if err != nil || !strings.Contains(out, "svz") || len(out) < 1000 {
			t.Fatalf("svz completion %s: %v (%d bytes)", shell, err, len(out))
		}
		if shell == "bash" {
			if bash, err := exec.LookPath("bash"); err == nil {
				cmd := exec.Command(bash, "-n")
				cmd.Stdin = strings.NewReader(out)
				if b, err := cmd.CombinedOutput(); err != nil {
					t.Fatalf("bash -n: %v\n%s", err, b)
				}
			}
		}
	}
}

// runRoot runs `svz args...` and returns stdout.
func runRoot(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := newRootCmd()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&bytes.Buffer{})
	cmd.SetArgs(args)
	err := cmd.Execute()
	return out.String(), err
}

// TestInitInsideAModule: svz init stops inside another module (a nested module is rarely meant)
// and writes it, with a warning, under --force.
func TestInitInsideAModule(t *testing.T) {
	outer := t.TempDir()
	if err := os.WriteFile(filepath.Join(outer, "go.mod"), []byte("module example.com/outer\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	released := &debug.BuildInfo{Main: debug.Module{Path: svzModule, Version: "v0.4.1"}}
	dir := filepath.Join(outer, "sub", "my-agent")
	var out, errOut bytes.Buffer
	err := svzInit(&out, &errOut, dir, &initFlags{module: "example.com/my-agent", noTidy: true}, released)
	want := dir + " is inside the module of " + filepath.Join(outer, "go.mod") + ": the new module would be nested in it. " +
		"Choose a directory outside it (e.g. svz init ../my-agent …), or pass --force to nest it anyway"
	if err == nil || err.Error() != want {
		t.Fatalf("err = %v\nwant %s", err, want)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("init wrote %s before refusing: %v", dir, err)
	}

	if err := svzInit(&out, &errOut, dir, &initFlags{module: "example.com/my-agent", noTidy: true, force: true}, released); err != nil {
		t.Fatal(err)
	}
	if got := errOut.String(); got != "warning: "+dir+" is inside the module of "+filepath.Join(outer, "go.mod")+": writing a nested module (--force)\n" {
		t.Errorf("stderr = %q", got)
	}
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
		t.Errorf("no go.mod with --force: %v", err)
	}
}
