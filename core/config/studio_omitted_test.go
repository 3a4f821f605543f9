//go:build svz_nostudio

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

// TestStudioOmitted: a build without the Studio client (the SAM Lambda build) refuses what needs
// it, saying how to fix it, and calls no Studio.
func TestStudioOmitted(t *testing.T) {
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
	if err := build(); err == nil || !strings.Contains(err.Error(), "built without the Studio client (build tag svz_nostudio): it cannot register with Studio at start") {
		t.Fatalf("plain HTTP: %v", err)
	}
	env["AWS_LAMBDA_RUNTIME_API"] = "127.0.0.1:9001"
	if err := build(); err == nil || !strings.Contains(err.Error(), `agent "hello-world-ai-agent" declares parameters, which only the Studio client can look up`) {
		t.Fatalf("serverless, an agent with parameters: %v", err)
	}
	if len(s.Events()) != 0 {
		t.Error("Studio was called")
	}
}
