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
	iss := granttest.NewIssuer("k1")
	pem := iss.PublicKeyPEM()
	got, err := SettingsFromEnv(env(map[string]string{
		EnvRequired:  " Yes ",
		EnvIssuer:    " https://studio.supervaize.com ",
		EnvAudience:  "supervaizer-server:01SERVER",
		EnvPublicKey: "  " + pem + "  ",
		EnvJWKSURL:   "https://app.supervaize.com/w/acme/api/v1/workspace-agent-grants/jwks/",
		EnvLeeway:    "45",
	}))
	if err != nil {
		t.Fatal(err)
	}
	want := Settings{Required: true, Issuer: "https://studio.supervaize.com", Audience: "supervaizer-server:01SERVER", PublicKeyPEM: strings.TrimSpace(pem),
		JWKSURL: "https://app.supervaize.com/w/acme/api/v1/workspace-agent-grants/jwks/", Leeway: 45 * time.Second}
	if got != want {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}

	for _, v := range []string{"1", "true", "TRUE", "yes", "on", " On "} {
		if s, err := SettingsFromEnv(env(map[string]string{EnvRequired: v})); err != nil || !s.Required {
			t.Errorf("REQUIRED=%q: %v, enabled %v", v, err, s.Required)
		}
	}
	for _, v := range []string{"", "0", "false", "no", "off"} {
		if s, err := SettingsFromEnv(env(map[string]string{EnvRequired: v})); err != nil || s.Required {
			t.Errorf("REQUIRED=%q: %v, enabled %v", v, err, s.Required)
		}
	}
	// A misspelt boolean is an error, never read as false.
	for _, v := range []string{"ture", "enabled", "y", "2"} {
		_, err := SettingsFromEnv(env(map[string]string{EnvRequired: v}))
		want := `SUPERVAIZER_WORKSPACE_AUTH_REQUIRED="` + v + `" is not a boolean: use true or false (also accepted: 1/0, yes/no, on/off)`
		if err == nil || err.Error() != want {
			t.Errorf("REQUIRED=%q: %v, want %q", v, err, want)
		}
	}
	if s, _ := SettingsFromEnv(env(nil)); s.Leeway != 30*time.Second {
		t.Errorf("default leeway %s, want 30s", s.Leeway)
	}

	for _, v := range []string{"30s", "1.5", "-1", "601", "86400", "99999999999999999999"} {
		_, err := SettingsFromEnv(env(map[string]string{EnvLeeway: v}))
		want := `SUPERVAIZER_WORKSPACE_AUTH_LEEWAY_SECONDS="` + v + `": must be a whole number from 0 to 600`
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

// TestSettingsCheck: a key or a JWKS URL is checked whenever it is set, and trust settings without
// REQUIRED=true (which would refuse every call) are refused, naming the fix.
func TestSettingsCheck(t *testing.T) {
	pem := granttest.NewIssuer("k1").PublicKeyPEM()
	const half = "workspace authorization is half configured: "
	const fix = " set but SUPERVAIZER_WORKSPACE_AUTH_REQUIRED is not true, so every /a2a call would be refused as workspace_authorization_not_configured " +
		"(any trust setting also switches the local-mode bypass off). Set SUPERVAIZER_WORKSPACE_AUTH_REQUIRED=true to verify tokens, or unset "
	for _, tc := range []struct {
		name string
		env  map[string]string
		want string
	}{
		{"issuer and key, no REQUIRED", map[string]string{EnvIssuer: testIssuer, EnvPublicKey: pem},
			half + "SUPERVAIZER_WORKSPACE_AUTH_ISSUER, SUPERVAIZER_WORKSPACE_AUTH_PUBLIC_KEY are" + fix +
				"SUPERVAIZER_WORKSPACE_AUTH_ISSUER, SUPERVAIZER_WORKSPACE_AUTH_PUBLIC_KEY to run without verification"},
		{"lone audience, REQUIRED=false", map[string]string{EnvAudience: "a", EnvRequired: "false"},
			half + "SUPERVAIZER_WORKSPACE_AUTH_AUDIENCE is" + fix + "SUPERVAIZER_WORKSPACE_AUTH_AUDIENCE to run without verification"},
		{"bad key without REQUIRED", map[string]string{EnvPublicKey: "nope"},
			msgKeyNotLoaded + ": SUPERVAIZER_WORKSPACE_AUTH_PUBLIC_KEY: no PEM block found (set it to Studio's Ed25519 public key: a -----BEGIN PUBLIC KEY----- block; svz dev keygen writes one)\n" +
				half + "SUPERVAIZER_WORKSPACE_AUTH_PUBLIC_KEY is" + fix + "SUPERVAIZER_WORKSPACE_AUTH_PUBLIC_KEY to run without verification"},
		{"bad key with REQUIRED", map[string]string{EnvRequired: "true", EnvIssuer: testIssuer, EnvPublicKey: "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----"},
			msgKeyNotLoaded + `: SUPERVAIZER_WORKSPACE_AUTH_PUBLIC_KEY: PEM block is "PRIVATE KEY", want "PUBLIC KEY" (SubjectPublicKeyInfo) (set it to Studio's Ed25519 public key: a -----BEGIN PUBLIC KEY----- block; svz dev keygen writes one)`},
		{"plain http JWKS", map[string]string{EnvRequired: "true", EnvIssuer: testIssuer, EnvJWKSURL: "http://studio.example/jwks"},
			`SUPERVAIZER_WORKSPACE_AUTH_JWKS_URL: the JWKS URL must use https (plain http is allowed only for loopback addresses such as 127.0.0.1), got host "studio.example"`},
		{"JWKS with an IP that is not loopback", map[string]string{EnvRequired: "true", EnvIssuer: testIssuer, EnvJWKSURL: "http://10.0.0.5/jwks"},
			`SUPERVAIZER_WORKSPACE_AUTH_JWKS_URL: the JWKS URL must use https (plain http is allowed only for loopback addresses such as 127.0.0.1), got host "10.0.0.5"`},
		{"JWKS with credentials", map[string]string{EnvRequired: "true", EnvIssuer: testIssuer, EnvJWKSURL: "https://user:hunter2secret@studio.example/jwks"},
			`SUPERVAIZER_WORKSPACE_AUTH_JWKS_URL: the JWKS URL must not carry credentials`},
		{"JWKS not a URL", map[string]string{EnvRequired: "true", EnvIssuer: testIssuer, EnvJWKSURL: "https://user:hunter2%zz@studio.example/jwks"},
			`SUPERVAIZER_WORKSPACE_AUTH_JWKS_URL is not a valid URL (value not shown: it may hold a credential); Studio's is https://app.supervaize.com/w/<workspace-slug>/api/v1/workspace-agent-grants/jwks/`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := SettingsFromEnv(env(tc.env))
			if err == nil || err.Error() != tc.want {
				t.Fatalf("got  %v\nwant %s", err, tc.want)
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Fatalf("the error shows the password: %v", err)
			}
		})
	}
	for _, ok := range []map[string]string{
		{},
		{EnvLeeway: "10"},
		{EnvRequired: "true", EnvIssuer: testIssuer, EnvPublicKey: pem},
		{EnvRequired: "true", EnvIssuer: testIssuer, EnvJWKSURL: "http://127.0.0.1:8765/studio-grant.jwks.json"},
		{EnvRequired: "true", EnvIssuer: testIssuer, EnvJWKSURL: "http://[::1]:8765/jwks"},
	} {
		if _, err := SettingsFromEnv(env(ok)); err != nil {
			t.Errorf("%v: %v", ok, err)
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
