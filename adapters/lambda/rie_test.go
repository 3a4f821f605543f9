package lambda

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/supervaize/svz/adapters/internal/testkit"
	"github.com/supervaize/svz/internal/testenv"
)

// The RIE tests run real bootstraps under the AWS Lambda Runtime Interface Emulator, which
// speaks the Runtime API the way Lambda does. The echo bootstrap is this test binary itself,
// started by the emulator with bootstrapEnv set.
const bootstrapEnv = "SVZ_LAMBDA_TEST_BOOTSTRAP"

func TestMain(m *testing.M) {
	switch os.Getenv(bootstrapEnv) {
	case "":
		os.Exit(m.Run())
	case "echo":
		Start(echo())
	case "echo-stream":
		Start(echo(), WithStreaming())
	case "init-error":
		err := errors.New("platform: SUPERVAIZER_API_KEY_SECRET_ARN: secret arn:aws:secretsmanager:eu-west-3:123456789012:secret:missing cannot be read")
		if rerr := ReportInitError(context.Background(), os.Getenv("AWS_LAMBDA_RUNTIME_API"), err); rerr != nil {
			fmt.Fprintln(os.Stderr, rerr)
		}
		os.Exit(1)
	}
	fmt.Fprintln(os.Stderr, "unknown", bootstrapEnv)
	os.Exit(2)
}

// emulator is one running aws-lambda-rie with its bootstrap.
type emulator struct {
	url  string
	logs *testkit.LogBuffer
}

// startEmulator runs bootstrap under the emulator with env added to the test's environment (the
// emulator hands its environment to the bootstrap).
func startEmulator(t *testing.T, bootstrap string, env ...string) *emulator {
	t.Helper()
	addr, logs := testkit.RIE(t, testenv.Need(t, testenv.RIE), env, bootstrap)
	return &emulator{url: "http://" + addr + "/2015-03-31/functions/function/invocations", logs: logs}
}

// invoke sends one event and returns the emulator's answer: the function's response payload.
func (e *emulator) invoke(t *testing.T, payload []byte) (int, []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.url, bytes.NewReader(payload))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("invoke: %v", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("invoke: %v", err)
	}
	return resp.StatusCode, b
}

// TestEmulatorMatchesInProcess runs every event source through the real runtime loop and checks
// the payload is byte for byte what the in-process handler returns.
func TestEmulatorMatchesInProcess(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	em := startEmulator(t, self, bootstrapEnv+"=echo")
	binary := functionURLEvent("GET", "/binary", "", "")
	panicking := functionURLEvent("GET", "/panic", "", "")
	for name, ev := range map[string]any{
		"function URL": functionURLEvent("POST", "/a2a/x%20y", "b=2&a=1&a=3", `{"jsonrpc":"2.0"}`),
		"HTTP API":     httpAPIEvent(),
		"REST API":     restEvent(),
		"ALB":          albEvent(true),
		"ALB single":   albEvent(false),
		"binary":       binary,
		"panic":        panicking,
	} {
		t.Run(name, func(t *testing.T) {
			p := payload(t, ev)
			status, got := em.invoke(t, p)
			want := invoke(t, echo(), p)
			if name == "panic" {
				got, want = maskTimestamp(got), maskTimestamp(want)
			}
			if status != http.StatusOK || !bytes.Equal(got, want) {
				t.Fatalf("emulator: %d %s\nin process: %s", status, got, want)
			}
		})
	}
}

func TestEmulatorDeadline(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// The emulator counts from its own start (not the invocation's), and a loaded machine runs
	// the handler late: the deadline is checked against the times around both, to the
	// millisecond the runtime API gives it in.
	from := time.Now()
	em := startEmulator(t, self, bootstrapEnv+"=echo", "AWS_LAMBDA_FUNCTION_TIMEOUT=7")
	_, out := em.invoke(t, payload(t, functionURLEvent("GET", "/deadline", "", "")))
	to := time.Now()
	r, _ := decodeReply(t, out)
	testkit.WantDeadline(t, testkit.ParseDeadline(t, r.Body), from, to, 7*time.Second, time.Millisecond)
}

func TestEmulatorStreaming(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	em := startEmulator(t, self, bootstrapEnv+"=echo-stream")
	_, out := em.invoke(t, payload(t, functionURLEvent("GET", "/events", "", "")))
	want := "{\"statusCode\":200,\"headers\":{\"Content-Type\":\"text/event-stream\"}}\x00\x00\x00\x00\x00\x00\x00\x00" +
		"event: one\ndata: {}\n\nevent: two\ndata: {}\n\n"
	if string(out) != want {
		t.Fatalf("streamed payload %q, want %q", out, want)
	}
	// Other sources stay buffered even in streaming mode.
	_, out = em.invoke(t, payload(t, albEvent(true)))
	if r, _ := decodeReply(t, out); r.StatusCode != http.StatusCreated {
		t.Fatalf("ALB in streaming mode: %s", out)
	}
}

func TestEmulatorInitError(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	em := startEmulator(t, self, bootstrapEnv+"=init-error")
	status, out := em.invoke(t, payload(t, functionURLEvent("GET", "/", "", "")))
	want := `{"errorMessage":"platform: SUPERVAIZER_API_KEY_SECRET_ARN: secret arn:aws:secretsmanager:eu-west-3:123456789012:secret:missing cannot be read","errorType":"Runtime.InitError","stackTrace":[]}`
	if status != http.StatusBadGateway || string(out) != want {
		t.Fatalf("invoke after a failed init: %d %s", status, out)
	}
}
