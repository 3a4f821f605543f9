package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"

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
		{[]string{"deploy", "up", "-p", "lambda"}, `deploy up failed at step "config": --name is required`},
		{[]string{"deploy", "status", "-p", "cloud-run", "-n", "hello"}, `deploy status failed at step "config": --project-id is required for cloud-run`},
		{[]string{"deploy", "plan", "-p", "lambda", "-n", "hello", "--arch", "386"}, `deploy plan failed at step "config": --arch "386": want amd64 or arm64`},
		{[]string{"deploy", "plan", "-p", "lambda", "-n", "hello", "-o", "yaml"}, `--output "yaml": want text or json`},
		{[]string{"deploy", "down", "-p", "lambda", "-n", "hello"}, "Delete hello-dev on lambda? pass --yes to confirm (no terminal to ask on)"},
		{[]string{"deploy", "down", "-p", "lambda", "-n", "hello", "--purge"}, "Delete hello-dev on lambda with its secrets and stored data? pass --yes to confirm (no terminal to ask on)"},
		{[]string{"deploy", "up", "-p", "lambda", "-n", "hello", "--rotate-secrets"}, "Rotate the secrets of hello-dev? Studio must then be given the new API key. pass --yes to confirm (no terminal to ask on)"},
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
	if v["ok"] != false || v["failed_step"] != "config" || v["command"] != "plan" || v["error"] != "step config: --name is required" {
		t.Fatalf("document %v", v)
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
	want := "no-op image-repository,create secret,create secret,create iam-role,create dynamodb-table,create lambda-function,create function-url,create lambda-permission"
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
