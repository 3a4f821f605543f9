package grant

import (
	"context"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/supervaize/svz/core/grant/granttest"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestSettingsFromEnv(t *testing.T) {
	got, err := SettingsFromEnv(env(map[string]string{
		EnvRequired:  " Yes ",
		EnvIssuer:    " https://studio.supervaize.com ",
		EnvAudience:  "supervaizer-server:01SERVER",
		EnvPublicKey: "  PEM  ",
		EnvJWKSURL:   "https://app.supervaize.com/w/acme/api/v1/workspace-agent-grants/jwks/",
		EnvLeeway:    "45",
	}))
	if err != nil {
		t.Fatal(err)
	}
	want := Settings{Required: true, Issuer: "https://studio.supervaize.com", Audience: "supervaizer-server:01SERVER", PublicKeyPEM: "PEM",
		JWKSURL: "https://app.supervaize.com/w/acme/api/v1/workspace-agent-grants/jwks/", Leeway: 45 * time.Second}
	if got != want {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}

	for _, v := range []string{"1", "true", "TRUE", "yes", "on", " On "} {
		if s, _ := SettingsFromEnv(env(map[string]string{EnvRequired: v})); !s.Required {
			t.Errorf("REQUIRED=%q not enabled", v)
		}
	}
	for _, v := range []string{"", "0", "false", "no", "off", "enabled", "y"} {
		if s, _ := SettingsFromEnv(env(map[string]string{EnvRequired: v})); s.Required {
			t.Errorf("REQUIRED=%q enabled", v)
		}
	}
	if s, _ := SettingsFromEnv(env(nil)); s.Leeway != 30*time.Second {
		t.Errorf("default leeway %s, want 30s", s.Leeway)
	}

	for v, want := range map[string]string{
		"30s":                  `SUPERVAIZER_WORKSPACE_AUTH_LEEWAY_SECONDS must be a whole number of seconds, got "30s"`,
		"1.5":                  `SUPERVAIZER_WORKSPACE_AUTH_LEEWAY_SECONDS must be a whole number of seconds, got "1.5"`,
		"-1":                   `SUPERVAIZER_WORKSPACE_AUTH_LEEWAY_SECONDS must be between 0 and 600 seconds, got -1`,
		"601":                  `SUPERVAIZER_WORKSPACE_AUTH_LEEWAY_SECONDS must be between 0 and 600 seconds, got 601`,
		"86400":                `SUPERVAIZER_WORKSPACE_AUTH_LEEWAY_SECONDS must be between 0 and 600 seconds, got 86400`,
		"99999999999999999999": `SUPERVAIZER_WORKSPACE_AUTH_LEEWAY_SECONDS must be a whole number of seconds, got "99999999999999999999"`,
	} {
		_, err := SettingsFromEnv(env(map[string]string{EnvLeeway: v}))
		if err == nil || err.Error() != want {
			t.Errorf("LEEWAY=%q: %v, want %q", v, err, want)
		}
	}
	for _, v := range []string{"0", "600"} {
		if _, err := SettingsFromEnv(env(map[string]string{EnvLeeway: v})); err != nil {
			t.Errorf("LEEWAY=%q: %v", v, err)
		}
	}
}

func TestParseStudioAgentIDs(t *testing.T) {
	good := []struct {
		in   string
		want map[string]string
	}{
		{"", map[string]string{}},
		{"   ", map[string]string{}},
		{"s=studio-agent-1", map[string]string{"s": "studio-agent-1"}},
		{" s = studio-agent-1 , hello-world-ai-agent=01AGENT ", map[string]string{"s": "studio-agent-1", "hello-world-ai-agent": "01AGENT"}},
	}
	for _, tc := range good {
		got, err := ParseStudioAgentIDs(tc.in)
		if err != nil || !maps.Equal(got, tc.want) {
			t.Errorf("ParseStudioAgentIDs(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
	bad := map[string]string{
		"s=1,":        `SUPERVAIZER_STUDIO_AGENT_IDS: entry 2 is empty (expected slug=id,slug=id)`,
		",s=1":        `SUPERVAIZER_STUDIO_AGENT_IDS: entry 1 is empty (expected slug=id,slug=id)`,
		"s=1,,t=2":    `SUPERVAIZER_STUDIO_AGENT_IDS: entry 2 is empty (expected slug=id,slug=id)`,
		"s":           `SUPERVAIZER_STUDIO_AGENT_IDS: entry 1 "s" has no "=" (expected slug=id)`,
		"s:1":         `SUPERVAIZER_STUDIO_AGENT_IDS: entry 1 "s:1" has no "=" (expected slug=id)`,
		"=1":          `SUPERVAIZER_STUDIO_AGENT_IDS: entry 1 "=1" has an empty agent slug`,
		"s=":          `SUPERVAIZER_STUDIO_AGENT_IDS: entry 1 "s=" has an empty Studio agent id`,
		"s= ":         `SUPERVAIZER_STUDIO_AGENT_IDS: entry 1 "s=" has an empty Studio agent id`,
		"s=1=2":       `SUPERVAIZER_STUDIO_AGENT_IDS: entry 1 "s=1=2": slug and id must not contain spaces, control characters or "="`,
		"my agent=1":  `SUPERVAIZER_STUDIO_AGENT_IDS: entry 1 "my agent=1": slug and id must not contain spaces, control characters or "="`,
		"s=1,s=2":     `SUPERVAIZER_STUDIO_AGENT_IDS: agent slug "s" appears twice (ids "1" and "2")`,
		"s=1,s=1":     `SUPERVAIZER_STUDIO_AGENT_IDS: agent slug "s" appears twice (ids "1" and "1")`,
		"s=1,t=1":     `SUPERVAIZER_STUDIO_AGENT_IDS: Studio agent id "1" is given to both "s" and "t"`,
		"s=1;t=2":     `SUPERVAIZER_STUDIO_AGENT_IDS: entry 1 "s=1;t=2": slug and id must not contain spaces, control characters or "="`,
		"s=1\nt=2":    `SUPERVAIZER_STUDIO_AGENT_IDS: entry 1 "s=1\nt=2": slug and id must not contain spaces, control characters or "="`,
		"s=1 ,t=2 ,,": `SUPERVAIZER_STUDIO_AGENT_IDS: entry 3 is empty (expected slug=id,slug=id)`,
	}
	for in, want := range bad {
		got, err := ParseStudioAgentIDs(in)
		if err == nil || err.Error() != want {
			t.Errorf("ParseStudioAgentIDs(%q) = %v, %v\nwant error %q", in, got, err, want)
		}
	}
}

// TestNew: which Authorizer each configuration gets, and the start-up refusals.
func TestNew(t *testing.T) {
	iss := granttest.NewIssuer("k1")
	full := Settings{Required: true, Issuer: testIssuer, PublicKeyPEM: iss.PublicKeyPEM(), Leeway: DefaultLeeway}
	cases := []struct {
		name    string
		cfg     Config
		want    string // "bypass", "not-configured", "verifier"
		wantErr string
	}{
		{"nothing", Config{ServerID: "SRV"}, "not-configured", ""},
		{"local, nothing", Config{ServerID: "SRV", LocalMode: true}, "bypass", ""},
		{"local, lone issuer", Config{ServerID: "SRV", LocalMode: true, Settings: Settings{Issuer: testIssuer}}, "not-configured", ""},
		{"local, lone audience", Config{ServerID: "SRV", LocalMode: true, Settings: Settings{Audience: "a"}}, "not-configured", ""},
		{"local, lone JWKS URL", Config{ServerID: "SRV", LocalMode: true, Settings: Settings{JWKSURL: "https://studio.example/jwks/"}}, "not-configured", ""},
		{"local, lone public key", Config{ServerID: "SRV", LocalMode: true, Settings: Settings{PublicKeyPEM: iss.PublicKeyPEM()}}, "not-configured", ""},
		{"local, leeway only", Config{ServerID: "SRV", LocalMode: true, Settings: Settings{Leeway: time.Minute}}, "bypass", ""},
		{"local, full settings", Config{ServerID: "SRV", LocalMode: true, Settings: full}, "verifier", ""},
		{"local, Studio account, nothing", Config{ServerID: "SRV", LocalMode: true, StudioConnected: true}, "not-configured", ""},
		{"local, required without issuer", Config{ServerID: "SRV", LocalMode: true, Settings: Settings{Required: true, PublicKeyPEM: iss.PublicKeyPEM()}}, "",
			"Workspace authorization is enabled but issuer is not configured (set SUPERVAIZER_WORKSPACE_AUTH_ISSUER)"},
		{"full", Config{ServerID: "SRV", Settings: full}, "verifier", ""},
		{"Studio, full", Config{ServerID: "SRV", StudioConnected: true, Settings: full}, "verifier", ""},
		{"Studio, nothing", Config{ServerID: "SRV", StudioConnected: true}, "", StudioRequiresAuthMessage},
		{"Studio, not required", Config{ServerID: "SRV", StudioConnected: true, Settings: func() Settings { s := full; s.Required = false; return s }()}, "", StudioRequiresAuthMessage},
		{"Studio, no issuer", Config{ServerID: "SRV", StudioConnected: true, Settings: func() Settings { s := full; s.Issuer = ""; return s }()}, "", StudioRequiresAuthMessage},
		{"Studio, no key", Config{ServerID: "SRV", StudioConnected: true, Settings: func() Settings { s := full; s.PublicKeyPEM = ""; return s }()}, "", StudioRequiresAuthMessage},
		{"required, no issuer, no key", Config{ServerID: "SRV", Settings: Settings{Required: true}}, "",
			"Workspace authorization is enabled but issuer is not configured (set SUPERVAIZER_WORKSPACE_AUTH_ISSUER)\n" +
				"Workspace authorization is enabled but no public_key_pem or jwks_url is configured (set SUPERVAIZER_WORKSPACE_AUTH_PUBLIC_KEY or SUPERVAIZER_WORKSPACE_AUTH_JWKS_URL)"},
		{"required, bad key", Config{ServerID: "SRV", Settings: func() Settings { s := full; s.PublicKeyPEM = "nope"; return s }()}, "",
			msgKeyNotLoaded + ": SUPERVAIZER_WORKSPACE_AUTH_PUBLIC_KEY: no PEM block found"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.Options = []Option{WithLogger(quietLog())}
			a, err := New(context.Background(), tc.cfg)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("New = %T, %v\nwant error %q", a, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := "other"
			switch a.(type) {
			case LocalBypass:
				got = "bypass"
			case NotConfigured:
				got = "not-configured"
			case *verifier:
				got = "verifier"
			}
			if got != tc.want {
				t.Fatalf("New = %T, want %s", a, tc.want)
			}
		})
	}
}

func TestNotConfiguredAndBypass(t *testing.T) {
	_, err := NotConfigured{}.Authorize(context.Background(), jobStart("anything"))
	wantRefusal(t, err, CodeNotConfigured, MsgNotConfigured)

	b := LocalBypass{ServerID: "SRV"}
	call := jobStart("")
	call.Workspace = contractWorkspace("team-1", "team")
	got, err := b.Authorize(context.Background(), call)
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"grant_id":"local-mode","workspace_id":"team-1","workspace_slug":"team","agent_id":"LMKyPAS2Q8sKWBY34DS37a",` +
		`"agent_slug":"s","server_id":"SRV","scopes":["supervaizer/action.invoke","job.start"],"agent_workspace_ref":null}`
	if g := mustJSON(t, got); g != want {
		t.Fatalf("bypass context\n got %s\nwant %s", g, want)
	}
	call.AgentSlug, call.Agent = "nope", nil
	_, err = b.Authorize(context.Background(), call)
	wantRefusal(t, err, CodeUnknownAgent, "Unknown agent_slug for workspace authorization: nope")
}

func TestErrorNeverHoldsToken(t *testing.T) {
	iss := granttest.NewIssuer("k1")
	v := newPEMVerifier(t, iss, newClock())
	tok := iss.Token(granttest.Valid(t0, testIssuer, "x"))
	_, err := v.Authorize(context.Background(), jobStart(tok))
	if err == nil || strings.Contains(err.Error(), tok) || strings.Contains(err.Error(), strings.Split(tok, ".")[2]) {
		t.Fatalf("err = %v", err)
	}
}
