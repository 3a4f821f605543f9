package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"cloud.google.com/go/compute/metadata"

	"github.com/supervaize/svz/internal/testenv"
)

// svz runs the CLI in process and returns stdout, stderr and the error main would print.
func svz(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	root := newRootCmd()
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetIn(strings.NewReader(""))
	root.SetArgs(args)
	err := root.ExecuteContext(context.Background())
	return out.String(), errOut.String(), err
}

func decode(t *testing.T, out string) map[string]any {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("stdout is not one JSON document: %v\n%s", err, out)
	}
	return v
}

func TestDeployConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"deploy", "plan"}, `deploy plan failed at step "config": --platform is required: cloud-run, app-runner or lambda`},
		{[]string{"deploy", "up", "-p", "lambda"}, `deploy up failed at step "config": --name is required: the service's name, e.g. --name my-agent (its resources are named {name}-{env})`},
		{[]string{"deploy", "status", "-p", "cloud-run", "-n", "hello"}, `deploy status failed at step "config": --project-id is required for cloud-run`},
		{[]string{"deploy", "plan", "-p", "lambda", "-n", "hello", "--arch", "386"}, `deploy plan failed at step "config": --arch "386": want amd64 or arm64`},
		{[]string{"deploy", "plan", "-p", "lambda", "-n", "hello", "--tracing", "on"}, `deploy plan failed at step "config": --tracing "on": want passthrough (the default) or active (X-Ray active tracing, Lambda)`},
		{[]string{"deploy", "up", "-p", "cloud-run", "-n", "hello", "--project-id", "proj", "--tracing", "active"}, `deploy up failed at step "config": --tracing active: Cloud Run needs no switch; point OTEL_EXPORTER_OTLP_ENDPOINT at a collector whose service account holds roles/cloudtrace.agent (docs/observability.md, Sending to Cloud Trace)`},
		{[]string{"deploy", "plan", "-p", "lambda", "-n", "hello", "-o", "yaml"}, `--output "yaml": want text or json`},
		{[]string{"deploy", "down", "-p", "lambda", "-n", "hello"}, `deploy down failed at step "confirm": deleting hello-dev on lambda needs confirmation: pass --yes (stdin is not a terminal, so nobody can be asked)`},
		{[]string{"deploy", "down", "-p", "lambda", "-n", "hello", "--purge"}, `deploy down failed at step "confirm": deleting hello-dev on lambda with its secrets and stored data needs confirmation: pass --yes (stdin is not a terminal, so nobody can be asked)`},
		{[]string{"deploy", "up", "-p", "lambda", "-n", "hello", "--main", "../../examples/helloworld"}, `deploy up failed at step "confirm": changing hello-dev on lambda needs confirmation: pass --yes (stdin is not a terminal, so nobody can be asked)`},
		{[]string{"deploy", "up", "-p", "lambda", "-n", "hello", "--main", "../../examples/helloworld", "--rotate-secrets"}, `deploy up failed at step "confirm": changing hello-dev on lambda and rotating its secrets needs confirmation: pass --yes (stdin is not a terminal, so nobody can be asked)`},
		{[]string{"deploy", "local", "-p", "cloud-run"}, `deploy local failed at step "config": --name is required: the service's name, e.g. --name my-agent (its resources are named {name}-{env})`},
		{[]string{"deploy", "down", "-p", "lambda"}, `deploy down failed at step "config": --name is required: the service's name, e.g. --name my-agent (its resources are named {name}-{env})`},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			_, _, err := svz(t, tc.args...)
			if err == nil || err.Error() != tc.want {
				t.Fatalf("err %v\nwant %s", err, tc.want)
			}
		})
	}
}

func TestDeployJSONFailure(t *testing.T) {
	out, _, err := svz(t, "deploy", "plan", "-p", "lambda", "--output", "json")
	if err == nil {
		t.Fatal("no error")
	}
	v := decode(t, out)
	if v["ok"] != false || v["failed_step"] != "config" || v["command"] != "plan" || v["error"] != "step config: --name is required: the service's name, e.g. --name my-agent (its resources are named {name}-{env})" {
		t.Fatalf("document %v", v)
	}
}

// TestDeployJSONConfirmRefused: a refused confirmation is one JSON document on stdout, like every
// other failure, before anything is connected to.
func TestDeployJSONConfirmRefused(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want map[string]any
	}{
		{[]string{"deploy", "up", "-p", "lambda", "-n", "hello", "--main", "../../examples/helloworld", "--rotate-secrets", "-o", "json"}, map[string]any{
			"ok": false, "command": "up", "failed_step": "confirm",
			"error": "step confirm: changing hello-dev on lambda and rotating its secrets needs confirmation: pass --yes (with --output json nobody is asked)",
		}},
		{[]string{"deploy", "down", "-p", "lambda", "-n", "hello", "-o", "json"}, map[string]any{
			"ok": false, "command": "down", "failed_step": "confirm",
			"error": "step confirm: deleting hello-dev on lambda needs confirmation: pass --yes (with --output json nobody is asked)",
		}},
		{[]string{"deploy", "down", "-p", "app-runner", "-n", "hello", "--purge", "-o", "json"}, map[string]any{
			"ok": false, "command": "down", "failed_step": "confirm",
			"error": "step confirm: deleting hello-dev on app-runner with its secrets and stored data needs confirmation: pass --yes (with --output json nobody is asked)",
		}},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			out, stderr, err := svz(t, tc.args...)
			if got := decode(t, out); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("document %v\nwant %v", got, tc.want)
			}
			want := "deploy " + tc.want["command"].(string) + ` failed at step "confirm": ` + strings.TrimPrefix(tc.want["error"].(string), "step confirm: ")
			if err == nil || err.Error() != want {
				t.Fatalf("err %v\nwant %s", err, want)
			}
			if strings.Contains(stderr, "→") {
				t.Fatalf("a step ran after the refusal:\n%s", stderr)
			}
		})
	}
}

// TestDeployCloudRunRefusesDynamoDB: Cloud Run has no AWS credentials; plan and up say so at step
// config, before connecting to Google Cloud (no credentials needed to be told).
func TestDeployCloudRunRefusesDynamoDB(t *testing.T) {
	t.Setenv("SUPERVAIZER_STORE", "dynamodb")
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", "/nonexistent/adc.json")
	for _, cmd := range []string{"plan", "up"} {
		out, stderr, err := svz(t, "deploy", cmd, "-p", "cloud-run", "-n", "hello", "--project-id", "proj", "-o", "json")
		want := map[string]any{"ok": false, "command": cmd, "failed_step": "config",
			"error": "step config: SUPERVAIZER_STORE=dynamodb: cloud-run has no AWS credentials to reach DynamoDB; use postgres or redis (with SUPERVAIZER_STORE_URL)"}
		if got := decode(t, out); !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: document %v\nwant %v\nstderr %s", cmd, got, want, stderr)
		}
		if err == nil || !strings.HasPrefix(err.Error(), "deploy "+cmd+` failed at step "config": SUPERVAIZER_STORE=dynamodb`) {
			t.Fatalf("%s: err %v", cmd, err)
		}
	}
}

// moto points the AWS default chain at moto_server.
func moto(t *testing.T) {
	endpoint := testenv.Need(t, testenv.AWSEndpoint)
	for k, v := range map[string]string{
		"AWS_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "AWS_REGION": "us-east-1",
		"AWS_SESSION_TOKEN": "", "AWS_PROFILE": "", "AWS_CONFIG_FILE": "/dev/null", "AWS_SHARED_CREDENTIALS_FILE": "/dev/null",
		"SUPERVAIZER_API_KEY": "", "SUPERVAIZER_PRIVATE_KEY": "", "SUPERVAIZE_API_KEY": "",
	} {
		t.Setenv(k, v)
	}
}

func randomName(t *testing.T) string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return "cli" + hex.EncodeToString(b)
}

// TestDeployAgainstMoto runs plan, status and down through the CLI against moto_server and a real
// OCI registry (plan builds ./examples/helloworld but pushes nothing).
func TestDeployAgainstMoto(t *testing.T) {
	moto(t)
	reg := testenv.Need(t, testenv.OCIRegistry)
	name := randomName(t)
	common := []string{"-p", "lambda", "-n", name, "--output", "json"}

	out, stderr, err := svz(t, append([]string{"deploy", "plan", "--main", "../../examples/helloworld", "--arch", "amd64",
		"--image-repo", reg + "/svz", "--generate-api-key", "--generate-private-key"}, common...)...)
	if err != nil {
		t.Fatalf("plan: %v\n%s", err, stderr)
	}
	v := decode(t, out)
	res := v["result"].(map[string]any)
	if v["ok"] != true || !strings.HasPrefix(res["image"].(string), reg+"/svz/"+name+"-dev@sha256:") {
		t.Fatalf("plan document %v", v)
	}
	var lines []string
	for _, c := range res["changes"].([]any) {
		m := c.(map[string]any)
		lines = append(lines, m["action"].(string)+" "+m["resource"].(string))
	}
	want := "no-op image-repository,create secret,create secret,create iam-role,create dynamodb-table,create sqs-queue,create sqs-queue,create lambda-function,create function-url,create lambda-permission,create event-source-mapping,create event-source-mapping"
	if strings.Join(lines, ",") != want {
		t.Fatalf("plan changes %q\nwant %q", strings.Join(lines, ","), want)
	}
	if _, ok := res["api_key"]; ok {
		t.Fatal("plan shows an API key")
	}
	for _, step := range []string{"→ build: building ../../examples/helloworld for linux/amd64", "✓ build", "✓ plan"} {
		if !strings.Contains(stderr, step) {
			t.Errorf("progress lacks %q:\n%s", step, stderr)
		}
	}

	out, _, err = svz(t, append([]string{"deploy", "status"}, common...)...)
	if err == nil || err.Error() != `deploy status failed at step "inspect": `+name+`-dev is not deployed on lambda` {
		t.Fatalf("status: %v", err)
	}
	if v := decode(t, out); v["failed_step"] != "inspect" || v["ok"] != false {
		t.Fatalf("status document %v", v)
	}

	out, _, err = svz(t, append([]string{"deploy", "down", "--yes"}, common...)...)
	if err != nil {
		t.Fatalf("down: %v", err)
	}
	for _, c := range decode(t, out)["result"].(map[string]any)["changes"].([]any) {
		if a := c.(map[string]any)["action"]; a != "no-op" {
			t.Errorf("down of an absent service: %v", c)
		}
	}
}

// TestDeployRefusesLibraryMain: --main must name a main package. go build of a library package
// succeeds and writes an ar archive, which used to ship as the controller. plan, up and local
// refuse it before building or connecting, naming the package and the main packages there are.
func TestDeployRefusesLibraryMain(t *testing.T) {
	dir := t.TempDir()
	for name, src := range map[string]string{
		"go.mod":            "module example.com/myagent\n\ngo 1.26\n",
		"myagent.go":        "package myagent\n\nfunc Name() string { return \"my agent\" }\n",
		"cmd/agent/main.go": "package main\n\nfunc main() {}\n",
		"tools/gen/main.go": "package main\n\nfunc main() {}\n",
	} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Chdir(dir)
	t.Setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:1") // connecting would fail otherwise
	const refusal = `--main . is example.com/myagent (package myagent), not a main package: give the directory of the program whose main calls platform.Main; main packages here: ./cmd/agent, ./tools/gen`
	for _, args := range [][]string{
		{"deploy", "plan", "-p", "lambda", "-n", "hello"},
		{"deploy", "up", "-p", "lambda", "-n", "hello", "--yes"},
		{"deploy", "local", "-p", "cloud-run", "-n", "hello"},
	} {
		_, stderr, err := svz(t, args...)
		want := "deploy " + args[1] + ` failed at step "config": ` + refusal
		if err == nil || err.Error() != want {
			t.Errorf("%v: %v\nwant %s", args, err, want)
		}
		if strings.Contains(stderr, "→") {
			t.Errorf("%v: a step ran:\n%s", args, stderr)
		}
	}
	for main, want := range map[string]string{
		"./nowhere": `--main ./nowhere: `,
		"./...":     `--main ./... matches 3 packages: give the one main package of the controller`,
	} {
		_, _, err := svz(t, "deploy", "plan", "-p", "lambda", "-n", "hello", "--main", main)
		if err == nil || !strings.HasPrefix(err.Error(), `deploy plan failed at step "config": `+want) {
			t.Errorf("--main %s: %v", main, err)
		}
	}
}

// TestDeployCredentialsMessage: without AWS credentials the SDK falls through its chain to the
// instance metadata service, logs its own warnings (IMDSv1 fallback) and fails with an IMDS error.
// svz prints its own message only.
func TestDeployCredentialsMessage(t *testing.T) {
	imds := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "forbidden", http.StatusForbidden)
	}))
	defer imds.Close()
	for k, v := range map[string]string{
		"AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": "", "AWS_SESSION_TOKEN": "", "AWS_PROFILE": "",
		"AWS_CONFIG_FILE": "/dev/null", "AWS_SHARED_CREDENTIALS_FILE": "/dev/null", "AWS_REGION": "us-east-1",
		"AWS_CONTAINER_CREDENTIALS_RELATIVE_URI": "", "AWS_CONTAINER_CREDENTIALS_FULL_URI": "", "AWS_WEB_IDENTITY_TOKEN_FILE": "",
		"AWS_EC2_METADATA_SERVICE_ENDPOINT": imds.URL, "AWS_EC2_METADATA_DISABLED": "",
	} {
		t.Setenv(k, v)
	}
	// The SDK's logger writes to the process's stderr, not to the command's.
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := os.Stderr
	os.Stderr = w
	_, cmdErr, err := svz(t, "deploy", "status", "-p", "lambda", "-n", "hello")
	os.Stderr = stderr
	w.Close()
	leaked, _ := io.ReadAll(r)
	want := `deploy status failed at step "connect": no AWS credentials found: set AWS_PROFILE (after aws sso login or aws configure), ` +
		`or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY; svz deploy reads the AWS default chain ` +
		`(environment, shared config and credentials files, SSO, web identity, container and instance roles)`
	if err == nil || err.Error() != want {
		t.Fatalf("err %v\nwant %s", err, want)
	}
	if len(leaked) > 0 || cmdErr != "" {
		t.Fatalf("printed besides svz's message:\n%s%s", leaked, cmdErr)
	}
}

// TestDeployGoogleCredentialsMessage: without Application Default Credentials, Cloud Run's connect
// step names the fix; a GOOGLE_APPLICATION_CREDENTIALS that cannot be read is reported as itself.
func TestDeployGoogleCredentialsMessage(t *testing.T) {
	t.Setenv("GCE_METADATA_HOST", "")
	if metadata.OnGCE() {
		t.Skip("on Google Cloud the metadata server gives credentials")
	}
	t.Setenv("HOME", t.TempDir()) // no gcloud application_default_credentials.json
	missing := filepath.Join(t.TempDir(), "key.json")
	for _, tc := range []struct{ file, want string }{
		{"", `deploy status failed at step "connect": no Google Cloud credentials found: run gcloud auth application-default login, ` +
			`or set GOOGLE_APPLICATION_CREDENTIALS to a service account key file; svz deploy reads Application Default Credentials ` +
			`(that variable, gcloud's application_default_credentials.json, the metadata server on Google Cloud)`},
		{missing, `deploy status failed at step "connect": application default credentials cannot be used: ` +
			`google: error getting credentials using GOOGLE_APPLICATION_CREDENTIALS environment variable: open ` + missing + `: no such file or directory`},
	} {
		t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", tc.file)
		out, cmdErr, err := svz(t, "deploy", "status", "-p", "cloud-run", "-n", "hello", "--project-id", "p")
		if err == nil || err.Error() != tc.want {
			t.Errorf("GOOGLE_APPLICATION_CREDENTIALS=%q: err %v\nwant %s", tc.file, err, tc.want)
		}
		if out != "" || cmdErr != "" {
			t.Errorf("printed besides svz's message:\n%s%s", out, cmdErr)
		}
	}
}
