package config

import (
	"bytes"
	"context"
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
		{"public url", map[string]string{EnvPublicURL: "ftp://x"}, []string{"SUPERVAIZER_PUBLIC_URL must be an absolute http(s) URL"}},
		{"public url with credentials", map[string]string{EnvPublicURL: "https://u:p@x.example"}, []string{"SUPERVAIZER_PUBLIC_URL"}},
		{"body limit", map[string]string{EnvMaxRequestBytes: "12"}, []string{"SUPERVAIZER_MAX_REQUEST_BYTES must be a number of bytes between 1024 and 33554432"}},
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
	t.Run("local-mode spelling", func(t *testing.T) {
		if LocalMode(env(map[string]string{EnvLocalMode: "1"})) || LocalMode(env(map[string]string{EnvLocalMode: "yes"})) || !LocalMode(env(map[string]string{EnvLocalMode: " True "})) {
			t.Error("SUPERVAIZER_LOCAL_MODE accepts only true")
		}
	})
}
