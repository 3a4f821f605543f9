package lambda

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/supervaize/svz/examples/helloworld/hello"
	"github.com/supervaize/svz/internal/localmode"
	"github.com/supervaize/svz/internal/testenv"
)

func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// TestSampleEvents invokes Hello World, configured by events/env.json as `sam local invoke
// --env-vars events/env.json` does, with every sample event of events/: each must be recognized
// as the source its name says and answered 200. env.json turns local mode on, which refuses a Host
// that is not loopback (WithLoopbackOnly), so every sample names 127.0.0.1:3000.
func TestSampleEvents(t *testing.T) {
	root := repoRoot()
	b, err := os.ReadFile(filepath.Join(root, "events", "env.json"))
	if err != nil {
		t.Fatal(err)
	}
	var vars map[string]map[string]string
	if err := json.Unmarshal(b, &vars); err != nil {
		t.Fatalf("events/env.json: %v", err)
	}
	env := vars["ControllerFunction"]
	if env == nil {
		t.Fatal("events/env.json has no ControllerFunction section")
	}
	getenv := func(k string) string { return env[k] }
	h, err := hello.Build(context.Background(), getenv, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if local, err := localmode.FromEnv(getenv); err != nil || !local {
		t.Fatalf("events/env.json does not turn local mode on (%v): the samples are for sam local", err)
	}
	opts := []Option{WithLoopbackOnly()} // what adapters/platform gives the adapter in local mode
	files, _ := filepath.Glob(filepath.Join(root, "events", "*.json"))
	kinds := map[string]source{"function-url-": srcFunctionURL, "apigw-http-api-": srcHTTPAPI, "apigw-rest-api-": srcRESTAPI, "alb-": srcALB}
	seen := 0
	for _, f := range files {
		name := filepath.Base(f)
		if name == "env.json" {
			continue
		}
		t.Run(name, func(t *testing.T) {
			p, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			var ev event
			if err := json.Unmarshal(p, &ev); err != nil {
				t.Fatal(err)
			}
			k, err := ev.detect()
			if err != nil {
				t.Fatal(err)
			}
			var want source
			for prefix, kind := range kinds {
				if strings.HasPrefix(name, prefix) {
					want = kind
				}
			}
			if k != want {
				t.Fatalf("detected as %s, its name says %s", k, want)
			}
			r, _ := decodeReply(t, invoke(t, h, p, opts...))
			if r.StatusCode != 200 || (strings.Contains(name, "a2a-") && !strings.Contains(r.Body, `"result":`)) {
				t.Fatalf("%d %s", r.StatusCode, r.Body)
			}
			seen++
		})
	}
	if seen < 4 {
		t.Fatalf("only %d sample events", seen)
	}
}

// TestTemplate lints template.yaml with cfn-lint (informational rules included) and checks that
// it stays wired to the code: every SUPERVAIZER_* variable it sets is one the code reads, and its
// function is built by the Makefile target sam build runs.
func TestTemplate(t *testing.T) {
	root := repoRoot()
	tpl, err := os.ReadFile(filepath.Join(root, "template.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var sources strings.Builder
	_ = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go") {
			b, _ := os.ReadFile(path)
			sources.Write(b)
		}
		return nil
	})
	for _, m := range regexp.MustCompile(`(?m)^\s+(SUPERVAIZER_[A-Z_]+):`).FindAllStringSubmatch(string(tpl), -1) {
		if !strings.Contains(sources.String(), `"`+m[1]+`"`) && !strings.Contains(sources.String(), `"`+strings.TrimSuffix(m[1], "_SECRET_ARN")+`"`) {
			t.Errorf("template.yaml sets %s, which no code reads", m[1])
		}
	}
	for _, want := range []string{"Handler: bootstrap", "Runtime: provided.al2023", "BuildMethod: makefile", "  ControllerFunction:\n"} {
		if !strings.Contains(string(tpl), want) {
			t.Errorf("template.yaml lacks %q", want)
		}
	}
	// sam local --env-vars only overrides the variables the template declares.
	b, err := os.ReadFile(filepath.Join(root, "events", "env.json"))
	if err != nil {
		t.Fatal(err)
	}
	var vars map[string]map[string]string
	if err := json.Unmarshal(b, &vars); err != nil {
		t.Fatal(err)
	}
	for k := range vars["ControllerFunction"] {
		if !regexp.MustCompile(`(?m)^\s+` + k + `:`).Match(tpl) {
			t.Errorf("events/env.json sets %s, which template.yaml does not declare (sam local ignores it)", k)
		}
	}
	mk, err := os.ReadFile(filepath.Join(root, "mk", "lambda.mk"))
	if err != nil || !strings.Contains(string(mk), "\nbuild-ControllerFunction:") {
		t.Errorf("mk/lambda.mk has no build-ControllerFunction target (%v)", err)
	}
	lint, err := exec.LookPath("cfn-lint")
	if err != nil {
		if testenv.InCI() {
			t.Fatal("cfn-lint is not installed")
		}
		t.Skip("cfn-lint is not installed")
	}
	cmd := exec.Command(lint, "-c", "I", "--", "template.yaml")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("cfn-lint: %v\n%s", err, out)
	}
}
