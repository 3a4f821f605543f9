package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"reflect"
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
		{[]string{"deploy", "down", "-p", "lambda", "-n", "hello"}, `deploy down failed at step "confirm": Delete hello-dev on lambda? pass --yes to confirm (no terminal to ask on)`},
		{[]string{"deploy", "down", "-p", "lambda", "-n", "hello", "--purge"}, `deploy down failed at step "confirm": Delete hello-dev on lambda with its secrets and stored data? pass --yes to confirm (no terminal to ask on)`},
		{[]string{"deploy", "up", "-p", "lambda", "-n", "hello", "--rotate-secrets"}, `deploy up failed at step "confirm": Rotate the secrets of hello-dev? Studio must then be given the new API key. pass --yes to confirm (no terminal to ask on)`},
		{[]string{"deploy", "down", "-p", "lambda"}, `deploy down failed at step "config": --name is required`},
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

// TestDeployJSONConfirmRefused: a refused confirmation is one JSON document on stdout, like every
// other failure, before anything is connected to.
func TestDeployJSONConfirmRefused(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want map[string]any
	}{
		{[]string{"deploy", "up", "-p", "lambda", "-n", "hello", "--rotate-secrets", "-o", "json"}, map[string]any{
			"ok": false, "command": "up", "failed_step": "confirm",
			"error": "step confirm: Rotate the secrets of hello-dev? Studio must then be given the new API key. pass --yes to confirm (no terminal to ask on)",
		}},
		{[]string{"deploy", "down", "-p", "lambda", "-n", "hello", "-o", "json"}, map[string]any{
			"ok": false, "command": "down", "failed_step": "confirm",
			"error": "step confirm: Delete hello-dev on lambda? pass --yes to confirm (no terminal to ask on)",
		}},
		{[]string{"deploy", "down", "-p", "app-runner", "-n", "hello", "--purge", "-o", "json"}, map[string]any{
			"ok": false, "command": "down", "failed_step": "confirm",
			"error": "step confirm: Delete hello-dev on app-runner with its secrets and stored data? pass --yes to confirm (no terminal to ask on)",
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
