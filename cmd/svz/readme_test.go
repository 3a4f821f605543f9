package main

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"unicode"
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

// TestDocLinksResolve: every relative link of README.md and docs/*.md, and every docs/X.md#anchor
// the Makefiles, code and docs name in plain text, points at a file that exists and, for an
// anchor, at a heading of that file (GitHub's anchors: lower case, punctuation dropped, spaces to
// hyphens, -1, -2 for repeats).
func TestDocLinksResolve(t *testing.T) {
	root := checkout(t)
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	pages := append([]string{filepath.Join(root, "README.md")}, docs...)
	anchors := map[string]map[string]bool{}
	anchorsOf := func(path string) map[string]bool {
		if a, ok := anchors[path]; ok {
			return a
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		anchors[path] = headingAnchors(string(b))
		return anchors[path]
	}
	reported := map[string]bool{}
	// check resolves target from the directory dir; from is the file that names it.
	check := func(from, dir, target string) {
		rel, _ := filepath.Rel(root, from)
		if reported[rel+" "+target] {
			return
		}
		reported[rel+" "+target] = true
		path, anchor, _ := strings.Cut(target, "#")
		file := from
		if path != "" {
			file = filepath.Join(dir, filepath.FromSlash(path))
		}
		if _, err := os.Stat(file); err != nil {
			t.Errorf("%s links to %s: no such file", rel, target)
			return
		}
		if anchor != "" && strings.HasSuffix(file, ".md") && !anchorsOf(file)[anchor] {
			t.Errorf("%s links to %s: no heading of that file has the anchor #%s", rel, target, anchor)
		}
	}
	for _, page := range pages {
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range mdLink.FindAllStringSubmatch(stripFences(string(b)), -1) {
			if !strings.Contains(m[1], ":") { // not http:, https:, mailto:
				check(page, filepath.Dir(page), m[1])
			}
		}
	}
	// Plain-text mentions such as a make target's help "(docs/grants.md#cost)".
	err = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if ext := filepath.Ext(path); ext != ".go" && ext != ".md" && ext != ".mk" && d.Name() != "Makefile" {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range docAnchorMention.FindAllString(string(b), -1) {
			check(path, root, m) // resolved from the root
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestDocMakeTargetsExist: every `make TARGET` README.md and docs/*.md name (the figures' make
// targets among them) is a target of the Makefile or of mk/*.mk.
func TestDocMakeTargetsExist(t *testing.T) {
	root := checkout(t)
	makefiles, _ := filepath.Glob(filepath.Join(root, "mk", "*.mk"))
	targets := map[string]bool{}
	for _, f := range append(makefiles, filepath.Join(root, "Makefile")) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range makeRule.FindAllStringSubmatch(string(b), -1) {
			targets[m[1]] = true
		}
	}
	if !targets["test"] || !targets["build-ControllerFunction"] {
		t.Fatalf("the rules were not read: %v", targets)
	}
	docs, _ := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	for _, page := range append(docs, filepath.Join(root, "README.md")) {
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range makeMention.FindAllStringSubmatch(stripFences(string(b)), -1) {
			if !targets[m[1]] {
				rel, _ := filepath.Rel(root, page)
				t.Errorf("%s names `make %s`: no such target in the Makefile or mk/*.mk", rel, m[1])
			}
		}
	}
}

var (
	makeRule         = regexp.MustCompile(`(?m)^([a-zA-Z][a-zA-Z0-9_-]*):`)
	makeMention      = regexp.MustCompile("`make (?:-f [^ `]+ )?([a-zA-Z][a-zA-Z0-9_-]*)")
	mdLink           = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	docAnchorMention = regexp.MustCompile(`docs/[a-z0-9-]+\.md#[a-z0-9-]+`)
	fence            = regexp.MustCompile("(?ms)^```.*?^```")
	heading          = regexp.MustCompile(`(?m)^#{1,6}[ \t]+(.+?)[ \t]*$`)
	inlineLink       = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)
)

// stripFences drops fenced code blocks, whose brackets and # lines are code, not links or headings.
func stripFences(s string) string { return fence.ReplaceAllString(s, "") }

// headingAnchors returns the anchors GitHub gives the headings of a Markdown page.
func headingAnchors(page string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	for _, m := range heading.FindAllStringSubmatch(stripFences(page), -1) {
		text := strings.ToLower(inlineLink.ReplaceAllString(m[1], "$1"))
		var b strings.Builder
		for _, r := range text {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				b.WriteRune(r)
			}
		}
		a := b.String()
		if n := seen[a]; n > 0 {
			out[fmt.Sprintf("%s-%d", a, n)] = true
		} else {
			out[a] = true
		}
		seen[a]++
	}
	return out
}

// TestHeadingAnchors pins the anchor rules TestDocLinksResolve relies on.
func TestHeadingAnchors(t *testing.T) {
	got := headingAnchors("# Writing an agent\n\n## `main.go`\n\n```sh\n# not a heading\n```\n## Try it locally: `svz dev keygen` and `svz dev token`\n## Cost\n### Cost\n## The [bill](x.md) per call\n")
	want := map[string]bool{"writing-an-agent": true, "maingo": true, "try-it-locally-svz-dev-keygen-and-svz-dev-token": true,
		"cost": true, "cost-1": true, "the-bill-per-call": true}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("headingAnchors = %v, want %v", got, want)
	}
}
