package config

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/supervaize/svz/core/grant"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func load(t *testing.T, m map[string]string) (string, error) {
	t.Helper()
	var logs bytes.Buffer
	if _, ok := m["SUPERVAIZER_STORE"]; !ok {
		m["SUPERVAIZER_STORE"] = "memory"
	}
	cfg, err := Load(context.Background(), env(m), slog.New(slog.NewTextHandler(&logs, nil)))
	if err == nil && cfg.OnClose != nil {
		t.Cleanup(func() { _ = cfg.OnClose() })
	}
	return logs.String(), err
}

// Every bad setting stops the start with a message naming the variable; all of them at once.
func TestLoadRefusesBadSettings(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		want []string
	}{
		{"short server id", map[string]string{EnvServerID: "abc"}, []string{"SUPERVAIZER_SERVER_ID must be longer than 5 characters"}},
		{"public url", map[string]string{EnvPublicURL: "ftp://x"}, []string{"SUPERVAIZER_PUBLIC_URL must be an absolute http(s) URL without credentials, query or fragment, such as https://agent.example.com (got ftp://x)"}},
		{"public url with credentials", map[string]string{EnvPublicURL: "https://u:p@x.example"}, []string{"SUPERVAIZER_PUBLIC_URL must be", "(got https://xxxxx@x.example)"}},
		{"body limit", map[string]string{EnvMaxRequestBytes: "12"}, []string{`SUPERVAIZER_MAX_REQUEST_BYTES="12": must be a whole number from 1024 to 33554432 bytes`}},
		{"local mode misspelt", map[string]string{EnvLocalMode: "ture"}, []string{`SUPERVAIZER_LOCAL_MODE="ture" is not a boolean: use true or false`}},
		{"half-configured authorization", map[string]string{EnvServerID: "server-1", grant.EnvIssuer: "https://studio.example", grant.EnvJWKSURL: "https://studio.example/jwks"},
			[]string{"workspace authorization is half configured", "Set SUPERVAIZER_WORKSPACE_AUTH_REQUIRED=true"}},
		{"local mode, half-configured authorization", map[string]string{EnvLocalMode: "true", grant.EnvIssuer: "https://studio.example"},
			[]string{"workspace authorization is half configured: SUPERVAIZER_WORKSPACE_AUTH_ISSUER is set"}},
		{"several at once", map[string]string{EnvServerID: "abc", EnvMaxRequestBytes: "x", grant.EnvLeeway: "-1", EnvStudioAgentIDs: "a="},
			[]string{"SUPERVAIZER_SERVER_ID", "SUPERVAIZER_MAX_REQUEST_BYTES", "SUPERVAIZER_WORKSPACE_AUTH_LEEWAY_SECONDS", "SUPERVAIZER_STUDIO_AGENT_IDS"}},
		{"verification without a server identity", map[string]string{grant.EnvRequired: "true", grant.EnvIssuer: "https://studio.example", grant.EnvJWKSURL: "https://studio.example/jwks"},
			[]string{"SUPERVAIZER_SERVER_ID is required when SUPERVAIZER_WORKSPACE_AUTH_REQUIRED is on"}},
		{"studio without verification", map[string]string{EnvServerID: "server-1", EnvStudioAPIKey: "sk"}, []string{grant.StudioRequiresAuthMessage}},
		{"bad store", map[string]string{EnvServerID: "server-1", "SUPERVAIZER_STORE": "mongo"}, []string{"SUPERVAIZER_STORE"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := load(t, tc.env)
			if err == nil {
				t.Fatal("Load accepted bad settings")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
		})
	}
}

func TestLoadDefaults(t *testing.T) {
	t.Run("local mode", func(t *testing.T) {
		logs, err := load(t, map[string]string{EnvLocalMode: "TRUE"})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(logs, "workspace authorization is BYPASSED") {
			t.Errorf("no bypass warning:\n%s", logs)
		}
	})
	t.Run("generated key is only fingerprinted", func(t *testing.T) {
		var logs bytes.Buffer
		cfg, err := Load(context.Background(), env(map[string]string{"SUPERVAIZER_STORE": "memory"}), slog.New(slog.NewTextHandler(&logs, nil)))
		if err != nil {
			t.Fatal(err)
		}
		defer cfg.OnClose()
		if len(cfg.APIKey) < 32 || strings.Contains(logs.String(), cfg.APIKey) || !strings.Contains(logs.String(), "api_key_fingerprint=") {
			t.Errorf("key %d chars, logs:\n%s", len(cfg.APIKey), logs.String())
		}
		if _, ok := cfg.Authorizer.(grant.NotConfigured); !ok {
			t.Errorf("outside local mode without settings the authorizer is %T, want NotConfigured", cfg.Authorizer)
		}
		if cfg.Gate == nil {
			t.Error("no idempotency gate")
		}
	})
}

// TestLocalMode: one strict parser, and local mode refused on a serverless platform unless it is
// a local emulation.
func TestLocalMode(t *testing.T) {
	refusal := "SUPERVAIZER_LOCAL_MODE=true on %s: local mode bypasses workspace authorization behind a public API key, so it never runs on a serverless platform. " +
		"Remove SUPERVAIZER_LOCAL_MODE from the deployed environment; under a local emulator set AWS_SAM_LOCAL=true (sam local does) or SUPERVAIZER_LOCAL_EMULATOR=true"
	for _, tc := range []struct {
		env     map[string]string
		want    bool
		wantErr string
	}{
		{map[string]string{}, false, ""},
		{map[string]string{EnvLocalMode: " True "}, true, ""},
		{map[string]string{EnvLocalMode: "true "}, true, ""},
		{map[string]string{EnvLocalMode: "1"}, true, ""},
		{map[string]string{EnvLocalMode: "yes"}, true, ""},
		{map[string]string{EnvLocalMode: "off"}, false, ""},
		{map[string]string{EnvLocalMode: "ture"}, false, `SUPERVAIZER_LOCAL_MODE="ture" is not a boolean: use true or false (also accepted: 1/0, yes/no, on/off)`},
		{map[string]string{EnvLocalMode: "true", "AWS_LAMBDA_RUNTIME_API": "127.0.0.1:9001"}, false, fmt.Sprintf(refusal, "AWS Lambda (AWS_LAMBDA_RUNTIME_API is set)")},
		{map[string]string{EnvLocalMode: "true", "K_SERVICE": "svz"}, false, fmt.Sprintf(refusal, "Cloud Run (K_SERVICE is set)")},
		{map[string]string{EnvLocalMode: "true", "FUNCTION_TARGET": "Controller"}, false, fmt.Sprintf(refusal, "Cloud Run functions (FUNCTION_TARGET is set)")},
		{map[string]string{EnvLocalMode: "true", "AWS_LAMBDA_RUNTIME_API": "127.0.0.1:9001", "AWS_SAM_LOCAL": "true"}, true, ""},
		{map[string]string{EnvLocalMode: "true", "K_SERVICE": "svz", EnvLocalEmulator: "true"}, true, ""},
		{map[string]string{EnvLocalMode: "true", "K_SERVICE": "svz", EnvLocalEmulator: "maybe"}, false, `SUPERVAIZER_LOCAL_EMULATOR="maybe" is not a boolean`},
		{map[string]string{EnvLocalMode: "false", "K_SERVICE": "svz"}, false, ""},
	} {
		got, err := LocalMode(env(tc.env))
		if got != tc.want || (err == nil) != (tc.wantErr == "") || err != nil && !strings.HasPrefix(err.Error(), tc.wantErr) {
			t.Errorf("LocalMode(%v) = %v, %v; want %v, %q", tc.env, got, err, tc.want, tc.wantErr)
		}
		// Load refuses what LocalMode refuses, before anything else.
		if tc.wantErr != "" {
			if _, err := load(t, tc.env); err == nil || !strings.HasPrefix(err.Error(), tc.wantErr) {
				t.Errorf("Load(%v) = %v, want %q", tc.env, err, tc.wantErr)
			}
		}
	}
}
