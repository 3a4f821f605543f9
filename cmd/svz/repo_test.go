package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestNoBenchmarkOutputCommitted: no file of the repository's root is a benchmark's output (`go
// test -bench` writes "goos: …" first), and such files, named bench*.txt by the Makefiles and the
// docs, are ignored by git.
func TestNoBenchmarkOutputCommitted(t *testing.T) {
	root := checkout(t)
	git := func(args ...string) ([]byte, error) {
		cmd := exec.Command("git", append([]string{"-C", root}, args...)...)
		return cmd.Output()
	}
	out, err := git("ls-files", "--cached")
	if err != nil {
		t.Skipf("not a git checkout (%v): nothing to check", err)
	}
	for name := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
		if strings.Contains(name, "/") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(root, name))
		if err != nil {
			continue // deleted in the work tree
		}
		if bytes.HasPrefix(b, []byte("goos: ")) {
			t.Errorf("%s is a benchmark's output: remove it from git (git rm --cached %s)", name, name)
		}
	}
	for _, name := range []string{"bench.txt", "bench-calls.txt", "bench-controller.txt", "bench-studio.txt", "bench-new.txt"} {
		if _, err := git("check-ignore", "-q", "--no-index", name); err != nil {
			t.Errorf("%s is not ignored by .gitignore: %v", name, err)
		}
	}
}
