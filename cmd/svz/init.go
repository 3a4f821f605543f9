package main

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"strings"
	"text/template"
	"unicode"

	"github.com/spf13/cobra"

	"github.com/supervaize/svz/core/contract"
)

// scaffold is what svz init writes: every *.tmpl is a text/template with [[ ]] delimiters (Go code
// is full of {{ }}), named without .tmpl (and gitignore as .gitignore); other files are copied.
//
//go:embed scaffold
var scaffold embed.FS

// svzModule is this module's path, which scaffolds require.
const svzModule = "github.com/supervaize/svz"

var (
	modulePathRE = regexp.MustCompile(`^[a-z0-9][A-Za-z0-9._~-]*(/[A-Za-z0-9._~-]+)*$`)
	versionRE    = regexp.MustCompile(`^v[0-9]+\.[0-9]+\.[0-9]+([-+][0-9A-Za-z.+-]+)?$`)
)

type initFlags struct {
	module, name, replace, svzVersion string
	noTidy, force                     bool
}

func newInitCmd() *cobra.Command {
	f := &initFlags{}
	cmd := &cobra.Command{
		Use:   "init [DIR] --module PATH",
		Short: "Write a new agent module that builds and passes its tests at once",
		Long: `Write a new Go module for an agent in DIR (default: the current directory, which must hold no
file svz init would write):

  go.mod          requires svz
  main.go         platform.Main: the same binary serves Lambda, Cloud Run and plain HTTP
  agent/          the agent (one surface, one action) and its test (svztest.AssertConfirmIdempotent)
  Makefile        test, run (local mode), build-ControllerFunction (the Lambda bootstrap)
  template.yaml   the SAM template (sam build runs the Makefile)
  README.md, .gitignore

then run go mod tidy there (--no-tidy skips it). Inside another module (a go.mod in DIR's
parents) it stops, since a nested module is rarely meant: --force writes it anyway. The svz version required is this svz's own
(svz version); a build of svz from a checkout requires that checkout through a replace directive
(--replace, found by itself when DIR or the current directory is inside the checkout).`,
		Example: "  svz init myagent --module example.com/myagent\n  cd myagent && make test && SUPERVAIZER_LOCAL_MODE=true go run .",
		Args:    cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := "."
			if len(args) == 1 {
				dir = args[0]
			}
			info, _ := debug.ReadBuildInfo()
			return svzInit(cmd.OutOrStdout(), cmd.ErrOrStderr(), dir, f, info)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.module, "module", "", "module path of the new agent, e.g. example.com/myagent (required)")
	fl.StringVar(&f.name, "name", "", "the agent's name (default: from the module path's last element, e.g. myagent → Myagent)")
	fl.StringVar(&f.replace, "replace", "", "a local svz checkout to require through a replace directive")
	fl.StringVar(&f.svzVersion, "svz-version", "", "the svz version to require (default: this svz's own)")
	fl.BoolVar(&f.noTidy, "no-tidy", false, "do not run go mod tidy")
	fl.BoolVar(&f.force, "force", false, "write the module even inside another module (a nested module)")
	return cmd
}

// scaffoldData fills the templates.
type scaffoldData struct {
	Module, Command, Name, Slug, GoVersion, SVZVersion, Replace string
}

func svzInit(out, errOut io.Writer, dir string, f *initFlags, info *debug.BuildInfo) error {
	if f.module == "" {
		return errors.New("--module is required, e.g. --module example.com/myagent (the new module's path)")
	}
	if !modulePathRE.MatchString(f.module) || strings.Contains(f.module, "//") || strings.Contains(f.module, "..") {
		return fmt.Errorf("--module %q is not a module path such as example.com/myagent", f.module)
	}
	d := scaffoldData{Module: f.module, Command: path.Base(f.module), Name: f.name, GoVersion: "1.26"}
	if d.Name == "" {
		d.Name = nameOf(path.Base(f.module))
	}
	d.Slug = contract.Slugify(d.Name)
	if d.Slug == "" || strings.ContainsAny(d.Name, "\"\\\n") {
		return fmt.Errorf("--name %q gives no agent slug: use letters or digits, e.g. --name \"My Agent\"", d.Name)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	if d.SVZVersion, d.Replace, err = svzRequirement(f, info, abs); err != nil {
		return err
	}

	files, err := renderScaffold(d)
	if err != nil {
		return err
	}
	var taken []string
	for name := range files {
		if _, err := os.Lstat(filepath.Join(abs, name)); err == nil {
			taken = append(taken, name)
		}
	}
	if len(taken) > 0 {
		return fmt.Errorf("%s already holds %s: choose an empty or new directory", dir, strings.Join(taken, ", "))
	}
	if outer := enclosingModule(filepath.Dir(abs)); outer != "" {
		if !f.force {
			return fmt.Errorf("%s is inside the module of %s: the new module would be nested in it. "+
				"Choose a directory outside it (e.g. svz init ../%s …), or pass --force to nest it anyway", dir, outer, filepath.Base(abs))
		}
		fmt.Fprintf(errOut, "warning: %s is inside the module of %s: writing a nested module (--force)\n", dir, outer)
	}
	for name, data := range files {
		p := filepath.Join(abs, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := writeAtomic(p, data, 0o644, false); err != nil {
			return err
		}
	}
	if d.Replace != "" {
		// The checkout's go.sum holds the sums of svz's own requirements: tidy then needs no
		// checksum database for them.
		if sum, err := os.ReadFile(filepath.Join(d.Replace, "go.sum")); err == nil {
			if err := writeAtomic(filepath.Join(abs, "go.sum"), sum, 0o644, false); err != nil {
				return err
			}
		}
	}
	fmt.Fprintf(out, "Wrote the %s agent (slug %s) in %s as module %s.\n", d.Name, d.Slug, dir, d.Module)
	if !f.noTidy {
		tidy := exec.Command("go", "mod", "tidy")
		tidy.Dir, tidy.Stdout, tidy.Stderr = abs, errOut, errOut
		if err := tidy.Run(); err != nil {
			return fmt.Errorf("go mod tidy in %s: %w (the files are written; fix the cause and run it again)", dir, err)
		}
	}
	_, err = fmt.Fprintf(out, "Next:\n  cd %s\n  make test                              # the agent's tests\n  SUPERVAIZER_LOCAL_MODE=true go run .   # try it locally\n", shellPath(dir))
	return err
}

// svzRequirement returns the svz version to require and the checkout to replace it with, if any.
func svzRequirement(f *initFlags, info *debug.BuildInfo, dir string) (version, replace string, err error) {
	version = f.svzVersion
	if version == "" && info != nil && info.Main.Path == svzModule && info.Main.Version != "(devel)" {
		version = info.Main.Version
	}
	replace = f.replace
	if replace == "" && version == "" {
		if replace = findCheckout(dir); replace == "" {
			if wd, err := os.Getwd(); err == nil {
				replace = findCheckout(wd)
			}
		}
		if replace == "" {
			return "", "", errors.New("this svz was built from a checkout and its version is unknown: pass --svz-version (e.g. v0.1.0) " +
				"or --replace with the checkout's directory")
		}
	}
	if replace != "" {
		if replace, err = filepath.Abs(replace); err != nil {
			return "", "", err
		}
		if findCheckout(replace) != replace {
			return "", "", fmt.Errorf("--replace %s is not an svz checkout (no go.mod declaring module %s there)", replace, svzModule)
		}
		if version == "" {
			version = "v0.0.0-00010101000000-000000000000" // any version: the replace directive decides
		}
	}
	if !versionRE.MatchString(version) {
		return "", "", fmt.Errorf("--svz-version %q is not a module version such as v0.1.0", version)
	}
	return version, replace, nil
}

// enclosingModule returns the go.mod of the module holding dir or one of its parents, or "".
func enclosingModule(dir string) string {
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		if st, err := os.Stat(filepath.Join(d, "go.mod")); err == nil && !st.IsDir() {
			return filepath.Join(d, "go.mod")
		}
		if filepath.Dir(d) == d {
			return ""
		}
	}
}

// findCheckout returns the svz checkout holding dir (or one of its parents), or "".
func findCheckout(dir string) string {
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		if b, err := os.ReadFile(filepath.Join(d, "go.mod")); err == nil {
			first, _, _ := strings.Cut(string(b), "\n")
			if strings.TrimSpace(first) == "module "+svzModule {
				return d
			}
			return "" // another module holds dir
		}
		if filepath.Dir(d) == d {
			return ""
		}
	}
}

// nameOf makes an agent name of a module's last element: words split on -, _ and ., capitalised.
func nameOf(base string) string {
	words := strings.FieldsFunc(base, func(r rune) bool { return r == '-' || r == '_' || r == '.' })
	for i, w := range words {
		r := []rune(w)
		r[0] = unicode.ToUpper(r[0])
		words[i] = string(r)
	}
	return strings.Join(words, " ")
}

// renderScaffold returns the scaffold's files by path.
func renderScaffold(d scaffoldData) (map[string][]byte, error) {
	files := map[string][]byte{}
	err := fs.WalkDir(scaffold, "scaffold", func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		data, err := scaffold.ReadFile(p)
		if err != nil {
			return err
		}
		name := strings.TrimPrefix(p, "scaffold/")
		if strings.HasSuffix(name, ".tmpl") {
			name = strings.TrimSuffix(name, ".tmpl")
			t, err := template.New(name).Delims("[[", "]]").Option("missingkey=error").Parse(string(data))
			if err != nil {
				return fmt.Errorf("scaffold %s: %w", p, err)
			}
			var b bytes.Buffer
			if err := t.Execute(&b, d); err != nil {
				return fmt.Errorf("scaffold %s: %w", p, err)
			}
			data = b.Bytes()
		}
		if name == "gitignore" {
			name = ".gitignore"
		}
		files[filepath.FromSlash(name)] = data
		return nil
	})
	return files, err
}
