package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/supervaize/svz/deploy/awsdeploy"
	"github.com/supervaize/svz/internal/testenv"
)

// svzWithStdin runs the CLI in process with stdin as given (a file: /dev/null, a terminal).
func svzWithStdin(t *testing.T, stdin *os.File, args ...string) (string, string, error) {
	t.Helper()
	root := newRootCmd()
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetIn(stdin)
	root.SetArgs(args)
	err := root.ExecuteContext(context.Background())
	return out.String(), errOut.String(), err
}

// svzOnTerminal runs the CLI in process with a terminal as stdin and stderr, as in a shell: when
// the question appears on the terminal, reply is typed. It returns what the terminal showed.
func svzOnTerminal(t *testing.T, question, reply string, args ...string) (string, error) {
	t.Helper()
	control, tty := openPTY(t)
	root := newRootCmd()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(tty)
	root.SetIn(tty)
	root.SetArgs(args)
	done := make(chan error, 1)
	go func() {
		err := root.ExecuteContext(context.Background())
		tty.Close() // the terminal's last user is gone: reads on the other side end
		done <- err
	}()
	var shown bytes.Buffer
	buf := make([]byte, 4096)
	asked := false
	for {
		n, err := control.Read(buf)
		shown.Write(buf[:n])
		if !asked && strings.Contains(shown.String(), question+" [y/N] ") {
			asked = true
			if _, err := io.WriteString(control, reply); err != nil {
				t.Fatal(err)
			}
		}
		if err != nil {
			break
		}
	}
	err := <-done
	if !asked {
		t.Errorf("%v: not asked %q", args, question)
	}
	return strings.ReplaceAll(shown.String(), "\r\n", "\n"), err
}

// TestDeployConfirmWithoutTerminal: /dev/null is a character device but not a terminal: up and
// down do not print a prompt nobody can answer; they ask for --yes, before contacting anything.
func TestDeployConfirmWithoutTerminal(t *testing.T) {
	null, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	t.Setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:1") // contacting AWS would fail differently
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"deploy", "down", "-p", "lambda", "-n", "hello"},
			`deploy down failed at step "confirm": deleting hello-dev on lambda needs confirmation: pass --yes (stdin is not a terminal, so nobody can be asked)`},
		{[]string{"deploy", "up", "-p", "lambda", "-n", "hello", "--main", "../../examples/helloworld"},
			`deploy up failed at step "confirm": changing hello-dev on lambda needs confirmation: pass --yes (stdin is not a terminal, so nobody can be asked)`},
	} {
		_, stderr, err := svzWithStdin(t, null, tc.args...)
		if err == nil || err.Error() != tc.want {
			t.Errorf("%v: %v\nwant %s", tc.args, err, tc.want)
		}
		if strings.Contains(stderr, "[y/N]") || strings.Contains(stderr, "→") {
			t.Errorf("%v: prompted or ran a step:\n%s", tc.args, stderr)
		}
	}
}

// TestDeployConfirmOnTerminal: on a terminal, down asks before contacting anything; up plans,
// lists the changes and asks before changing anything. "n" cancels, "y" proceeds.
func TestDeployConfirmOnTerminal(t *testing.T) {
	moto(t)
	reg := testenv.Need(t, testenv.OCIRegistry)
	name := randomName(t)
	svc := name + "-dev"

	run := func(reply, question string, args ...string) (string, error) {
		return svzOnTerminal(t, question, reply, args...)
	}

	stderr, err := run("n\n", "Delete "+svc+" on lambda?", "deploy", "down", "-p", "lambda", "-n", name)
	if err == nil || err.Error() != `deploy down failed at step "confirm": cancelled: not confirmed` || strings.Contains(stderr, "→") {
		t.Fatalf("down, answered n: %v\n%s", err, stderr)
	}
	stderr, err = run("y\n", "Delete "+svc+" on lambda?", "deploy", "down", "-p", "lambda", "-n", name)
	if err != nil || !strings.Contains(stderr, "✓ delete") {
		t.Fatalf("down, answered y: %v\n%s", err, stderr)
	}

	up := []string{"deploy", "up", "-p", "lambda", "-n", name, "--main", "../../examples/helloworld", "--arch", "amd64",
		"--image-repo", reg + "/svz", "--generate-api-key", "--generate-private-key"}
	stderr, err = run("n\n", "Apply these changes to "+svc+" on lambda?", up...)
	if err == nil || err.Error() != `deploy up failed at step "confirm": cancelled: not confirmed` {
		t.Fatalf("up, answered n: %v\n%s", err, stderr)
	}
	for _, want := range []string{"✓ plan", "  create  secret " + svc + "-api-key (generated)", "  create  lambda-function " + svc + "\n"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("up did not list %q before asking:\n%s", want, stderr)
		}
	}
	if strings.Contains(stderr, "→ push") || strings.Contains(stderr, "storing secrets") {
		t.Errorf("up changed something before the answer:\n%s", stderr)
	}
	cfg, err := awsdeploy.LoadConfig(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := secretsmanager.NewFromConfig(cfg).DescribeSecret(context.Background(), &secretsmanager.DescribeSecretInput{SecretId: aws.String(svc + "-api-key")}); err == nil {
		t.Error("a cancelled up stored a secret")
	}
}
