package image

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
)

// maxSuggestions bounds the main packages named when --main is not one.
const maxSuggestions = 5

// CheckMain makes sure s.Main names exactly one main package, as go build sees it for the target
// (GOOS=linux, s.Arch, the controller's build tags), and returns its import path. go build of a
// library package succeeds and writes an ar archive: without this check that archive would be
// shipped as the controller. The error names the package found and the main packages of the
// module, relative to s.Dir.
func CheckMain(ctx context.Context, s BuildSpec) (string, error) {
	main := s.Main
	if main == "" {
		main = "."
	}
	lines, err := goList(ctx, s, "{{.ImportPath}}\t{{.Name}}", main)
	if err != nil {
		return "", fmt.Errorf("--main %s: %w", main, err)
	}
	switch {
	case len(lines) == 0:
		return "", fmt.Errorf("--main %s: no Go package there", main)
	case len(lines) > 1:
		return "", fmt.Errorf("--main %s matches %d packages: give the one main package of the controller", main, len(lines))
	}
	path, name, _ := strings.Cut(lines[0], "\t")
	if name == "main" {
		return path, nil
	}
	msg := fmt.Sprintf("--main %s is %s (package %s), not a main package: give the directory of the program whose main calls platform.Main", main, path, name)
	if mains := mainPackages(ctx, s); len(mains) > 0 {
		msg += "; main packages here: " + strings.Join(mains, ", ")
	} else {
		msg += " (this module has none: add one, e.g. cmd/agent/main.go with func main() { platform.Main(build) })"
	}
	return "", fmt.Errorf("%s", msg)
}

// mainPackages lists the main packages under s.Dir as ./relative paths, best effort.
func mainPackages(ctx context.Context, s BuildSpec) []string {
	dirs, err := goList(ctx, s, `{{if eq .Name "main"}}{{.Dir}}{{end}}`, "./...")
	if err != nil {
		return nil
	}
	base := s.Dir
	if base == "" {
		base = "."
	}
	abs, err := filepath.Abs(base)
	if err != nil {
		return nil
	}
	var out []string
	for _, d := range dirs {
		if d == "" {
			continue
		}
		if len(out) == maxSuggestions {
			out = append(out, "…")
			break
		}
		rel, err := filepath.Rel(abs, d)
		if err != nil {
			continue
		}
		if rel == "." {
			out = append(out, ".")
		} else {
			out = append(out, "./"+filepath.ToSlash(rel))
		}
	}
	return out
}

// goList runs go list with the build's target and tags and returns its non-empty output lines.
func goList(ctx context.Context, s BuildSpec, format, pattern string) ([]string, error) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		return nil, fmt.Errorf("the go command is not on PATH: %w", err)
	}
	cmd := exec.CommandContext(ctx, gobin, "list", "-tags="+buildTags, "-f", format, pattern)
	cmd.Dir = s.Dir
	cmd.Env = buildEnv(s)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		if msg := strings.TrimSpace(stderr.String()); msg != "" {
			return nil, fmt.Errorf("%s", msg)
		}
		return nil, fmt.Errorf("go list: %w", err)
	}
	var lines []string
	for _, l := range strings.Split(stdout.String(), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	return lines, nil
}
