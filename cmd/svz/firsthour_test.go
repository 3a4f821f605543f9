package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestReadmeInstallPutsSVZOnPath: README.md's install block makes `svz` a command before it runs
// `svz init`: the line after `go install ./cmd/svz` puts $(go env GOPATH)/bin on PATH. Its lines
// before `svz init`, but for the go install, run in bash with a GOPATH whose bin holds an svz (the
// one go install would write) and a PATH without it: `svz` must then be found there.
func TestReadmeInstallPutsSVZOnPath(t *testing.T) {
	needTools(t, "bash", "go")
	readme, err := os.ReadFile(filepath.Join(checkout(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	block := regexp.MustCompile("(?s)```sh\n(go install ./cmd/svz[^`]*)```").FindSubmatch(readme)
	if block == nil {
		t.Fatal("README.md has no sh block starting with go install ./cmd/svz")
	}
	before, _, ok := strings.Cut(string(block[1]), "\nsvz init ")
	if !ok {
		t.Fatalf("the install block runs no svz init:\n%s", block[1])
	}
	_, setup, _ := strings.Cut(before, "\n") // the lines after go install
	gopath := t.TempDir()
	bin := filepath.Join(gopath, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bin, "svz"), []byte("#!/bin/sh\necho installed svz\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	goBin, _ := exec.LookPath("go")
	cmd := exec.Command("bash", "-c", setup+"\nsvz")
	cmd.Env = []string{"GOPATH=" + gopath, "HOME=" + t.TempDir(), "GOTOOLCHAIN=local", "GOFLAGS=",
		"PATH=" + filepath.Dir(goBin) + ":/usr/bin:/bin"}
	out, err := cmd.CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "installed svz" {
		t.Fatalf("after the install block's lines %q, svz is not a command: %v\n%s", setup, err, out)
	}
}

// TestWorkbenchDocRunsWhatInitWrites: docs/workbench.md's commands are the ones that work: a `go
// run` of a directory that exists here, and for an agent of its own the command and the main
// function of what svz init writes (`go run .`, platform.MainAgents).
func TestWorkbenchDocRunsWhatInitWrites(t *testing.T) {
	root := checkout(t)
	doc, err := os.ReadFile(filepath.Join(root, "docs", "workbench.md"))
	if err != nil {
		t.Fatal(err)
	}
	block := regexp.MustCompile("(?s)```sh\n(.*?)```").FindSubmatch(doc)
	if block == nil {
		t.Fatal("docs/workbench.md has no sh block")
	}
	files, err := renderScaffold(scaffoldData{Module: "example.com/my-agent", Command: "my-agent", Name: "My Agent", Slug: "my-agent",
		GoVersion: "1.26", SVZVersion: "v0.0.0"})
	if err != nil {
		t.Fatal(err)
	}
	main := string(files["main.go"])
	const run = "SUPERVAIZER_LOCAL_MODE=true go run ."
	if !strings.Contains(main, run) || !strings.Contains(main, "platform.MainAgents(") {
		t.Fatalf("the scaffold's main.go no longer says %q and calls platform.MainAgents: update this test and the doc", run)
	}
	if !strings.Contains(string(block[1]), run+" ") || !strings.Contains(string(block[1]), "platform.MainAgents") {
		t.Errorf("docs/workbench.md does not run a scaffolded agent as svz init writes it (%q, platform.MainAgents):\n%s", run, block[1])
	}
	for _, m := range regexp.MustCompile(`go run (\./\S+)`).FindAllStringSubmatch(string(block[1]), -1) {
		if st, err := os.Stat(filepath.Join(root, m[1])); err != nil || !st.IsDir() {
			t.Errorf("docs/workbench.md runs %s: no such directory in the repository", m[0])
		}
	}
}

// TestDocCurlsEndTheirLine: a `curl -s` in an sh block of README.md or docs/*.md that prints an
// answer ends it with a newline (-w '\n', in the command or in the array of options it expands, or
// an echo as the next command), so that the next prompt or output does not start on its line.
// Probes (-f, -o) print nothing to read.
func TestDocCurlsEndTheirLine(t *testing.T) {
	root := checkout(t)
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	pages = append(pages, filepath.Join(root, "README.md"))
	newline := regexp.MustCompile(`-w '\\n'|-w "\\n"`)
	arrays := regexp.MustCompile(`(?m)^\s*(\w+)=\((.*)\)\s*$`)
	expanded := regexp.MustCompile(`"\$\{(\w+)\[@\]\}"`)
	for _, page := range pages {
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, page)
		for _, m := range regexp.MustCompile("(?s)```sh\n(.*?)```").FindAllStringSubmatch(string(b), -1) {
			block := strings.ReplaceAll(m[1], "\\\n", " ") // one command a line
			ends := map[string]bool{}                      // option arrays that end the line
			for _, a := range arrays.FindAllStringSubmatch(block, -1) {
				ends[a[1]] = newline.MatchString(a[2])
			}
			var lines []string // commands: a line, with the next ones while a quote is open
			var quote byte
			for _, l := range strings.Split(block, "\n") {
				if quote != 0 {
					lines[len(lines)-1] += "\n" + l
				} else {
					lines = append(lines, l)
				}
				quote = openQuote(l, quote)
			}
			for i, line := range lines {
				cmd, _, _ := strings.Cut(strings.TrimSpace(line), " #")
				if !strings.HasPrefix(cmd, "curl -s ") || strings.HasPrefix(cmd, "curl -sf") || strings.Contains(cmd, " -o ") {
					continue
				}
				ok := newline.MatchString(cmd)
				for _, e := range expanded.FindAllStringSubmatch(cmd, -1) {
					ok = ok || ends[e[1]]
				}
				for _, next := range lines[i+1:] {
					if next = strings.TrimSpace(next); next != "" && !strings.HasPrefix(next, "#") {
						ok = ok || next == "echo" || strings.HasPrefix(next, "echo ")
						break
					}
				}
				if !ok {
					t.Errorf("%s: %q prints its answer without a newline: add -w '\\n'", rel, cmd[:min(len(cmd), 90)])
				}
			}
		}
	}
}

// openQuote returns the quote (' or ") still open at the end of the shell line l, given the one
// open at its start (0 for none). A comment (# at the start of a word, outside quotes) ends it.
func openQuote(l string, quote byte) byte {
	for i := 0; i < len(l); i++ {
		c := l[i]
		switch {
		case quote == '\'':
			if c == '\'' {
				quote = 0
			}
		case quote == '"':
			if c == '\\' {
				i++
			} else if c == '"' {
				quote = 0
			}
		case c == '\\':
			i++
		case c == '\'' || c == '"':
			quote = c
		case c == '#' && (i == 0 || l[i-1] == ' ' || l[i-1] == '\t'):
			return 0
		}
	}
	return quote
}
