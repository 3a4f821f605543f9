//go:build svz_nostudioregister

package config_test

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/supervaize/svz/examples/helloworld/hello"
	"github.com/supervaize/svz/internal/devstudio"
)

// TestRegistrationOmitted: a build without Studio registration (the Lambda build) refuses to
// register at start, saying how to fix it, and serves as a serverless instance does.
func TestRegistrationOmitted(t *testing.T) {
	s, err := devstudio.Start(context.Background(), devstudio.Config{}, "")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	env := s.Env("", "http://127.0.0.1:8000")
	env["SUPERVAIZER_SERVER_ID"] = "omitted-test-server"
	env["SUPERVAIZER_STORE"] = "memory"
	build := func() error {
		h, err := hello.Build(context.Background(), func(k string) string { return env[k] }, slog.New(slog.NewTextHandler(io.Discard, nil)))
		if err == nil {
			_ = h.(io.Closer).Close()
		}
		return err
	}
	if err := build(); err == nil || !strings.Contains(err.Error(), "built without Studio registration (build tag svz_nostudioregister): set SUPERVAIZER_STUDIO_REGISTER=off") {
		t.Fatalf("plain HTTP: %v", err)
	}
	env["AWS_LAMBDA_RUNTIME_API"] = "127.0.0.1:9001"
	env["SUPERVAIZER_PRIVATE_KEY"] = ""
	if err := build(); err == nil || !strings.Contains(err.Error(), "SUPERVAIZER_PRIVATE_KEY is required: agent") {
		t.Fatalf("serverless without a key: %v", err)
	}
	if len(s.Events()) != 0 {
		t.Error("Studio was called")
	}
}
