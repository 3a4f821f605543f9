package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadmeShowsTheScaffold: the agent code README.md shows is what `svz init my-agent --module
// example.com/my-agent` writes, file for file; TestInitScaffoldBuildsAndPasses builds and tests
// that code, so the README's code compiles and its test passes.
func TestReadmeShowsTheScaffold(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join(checkout(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	files, err := renderScaffold(scaffoldData{Module: "example.com/my-agent", Command: "my-agent", Name: "My Agent", Slug: "my-agent",
		GoVersion: "1.26", SVZVersion: "v0.0.0"})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"agent/agent.go", "main.go", "agent/agent_test.go"} {
		block := "`" + name + "`:\n\n```go\n" + string(files[filepath.FromSlash(name)]) + "```\n"
		if !strings.Contains(string(readme), block) {
			t.Errorf("README.md does not show %s as svz init writes it; it should contain:\n%s", name, block)
		}
	}
}
