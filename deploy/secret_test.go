package deploy

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

func TestGenerateAPIKey(t *testing.T) {
	seen := map[string]bool{}
	for i := 0; i < 50; i++ {
		k, err := GenerateAPIKey()
		if err != nil {
			t.Fatal(err)
		}
		v := k.Reveal()
		if len(v) != 43 || strings.Trim(v, apiKeyAlphabet) != "" {
			t.Fatalf("key %q: want 43 alphanumerics", v)
		}
		if seen[v] {
			t.Fatal("duplicate key")
		}
		seen[v] = true
		if err := CheckAPIKey(k); err != nil {
			t.Fatal(err)
		}
	}
}

func TestGeneratePrivateKey(t *testing.T) {
	k, err := GeneratePrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(k.Reveal(), "-----BEGIN PRIVATE KEY-----\n") {
		t.Fatalf("not PKCS#8 PEM: %.30q", k.Reveal())
	}
	if err := CheckPrivateKey(k); err != nil {
		t.Fatal(err)
	}
}

func TestSecretNeverPrints(t *testing.T) {
	s := NewSecret("hunter2-very-secret-value")
	fp := Fingerprint("hunter2-very-secret-value")
	var logged strings.Builder
	slog.New(slog.NewJSONHandler(&logged, nil)).Info("x", "key", s)
	b, err := json.Marshal(struct{ K Secret }{s})
	if err != nil {
		t.Fatal(err)
	}
	for name, out := range map[string]string{
		"%v": fmt.Sprintf("%v", s), "%+v": fmt.Sprintf("%+v", s), "%#v": fmt.Sprintf("%#v", s), "%s": s.String(),
		"json": string(b), "slog": logged.String(), "struct": fmt.Sprintf("%+v", struct{ K Secret }{s}),
	} {
		if strings.Contains(out, "hunter2") {
			t.Errorf("%s leaks the value: %s", name, out)
		}
		if !strings.Contains(out, fp) {
			t.Errorf("%s lacks the fingerprint %s: %s", name, fp, out)
		}
	}
	if len(fp) != 12 {
		t.Errorf("fingerprint %q", fp)
	}
}

func TestCheckHostValues(t *testing.T) {
	pk, _ := GeneratePrivateKey()
	for _, tc := range []struct {
		name  string
		check func(Secret) error
		value string
		want  string // "" = valid
	}{
		{"short key", CheckAPIKey, "abc", "API key " + Fingerprint("abc") + " is 3 characters long; use 32 or more"},
		{"long key", CheckAPIKey, strings.Repeat("k", 32), ""},
		{"pem", CheckPrivateKey, pk.Reveal(), ""},
		{"not pem", CheckPrivateKey, "hello", "private key " + Fingerprint("hello") + " is not PEM"},
		{"not rsa", CheckPrivateKey, "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n",
			"private key " + Fingerprint("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n") + ": not an RSA key in PKCS#8 or PKCS#1 form"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.check(NewSecret(tc.value))
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tc.want {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestDecideSecret(t *testing.T) {
	apiKey := secretSpecs[0]
	studio := secretSpecs[2]
	long := strings.Repeat("a", 40)
	other := strings.Repeat("b", 40)
	stored := &StoredSecret{Ref: SecretRef{Name: "n", ID: "arn", Version: "v1"}, Value: NewSecret(long)}
	for _, tc := range []struct {
		name    string
		spec    secretSpec
		stored  *StoredSecret
		host    string
		cfg     Config
		action  Action
		value   string // "" = check generated (non-empty) or none
		created bool
		skip    bool
		err     string
	}{
		{name: "absent, no source", spec: apiKey, err: "secret n does not exist: pass --generate-api-key or set SUPERVAIZER_API_KEY on this host (Studio sends it as X-API-Key on every call to the controller)"},
		{name: "absent, generate", spec: apiKey, cfg: Config{GenerateAPIKey: true}, action: Create, created: true},
		{name: "absent, host value", spec: apiKey, host: long, action: Create, value: long},
		{name: "absent, host value wins over generate", spec: apiKey, host: long, cfg: Config{GenerateAPIKey: true}, action: Create, value: long},
		{name: "absent, host value too short", spec: apiKey, host: "short", err: "SUPERVAIZER_API_KEY on this host: API key " + Fingerprint("short") + " is 5 characters long; use 32 or more"},
		{name: "present, kept", spec: apiKey, stored: stored, action: NoOp},
		{name: "present, generate flag keeps it", spec: apiKey, stored: stored, cfg: Config{GenerateAPIKey: true}, action: NoOp},
		{name: "present, same host value", spec: apiKey, stored: stored, host: long, action: NoOp},
		{name: "present, different host value", spec: apiKey, stored: stored, host: other,
			err: "secret n holds " + Fingerprint(long) + " but SUPERVAIZER_API_KEY on this host is " + Fingerprint(other) + ": pass --rotate-secrets to replace it, or unset SUPERVAIZER_API_KEY"},
		{name: "rotate, generated", spec: apiKey, stored: stored, cfg: Config{RotateSecrets: true}, action: Update, created: true},
		{name: "rotate, host value", spec: apiKey, stored: stored, host: other, cfg: Config{RotateSecrets: true}, action: Update, value: other},
		{name: "rotate, host value already current", spec: apiKey, stored: stored, host: long, cfg: Config{RotateSecrets: true}, action: NoOp},
		{name: "optional absent everywhere", spec: studio, skip: true},
		{name: "optional from host", spec: studio, host: "sk", action: Create, value: "sk"},
		{name: "optional stored, host unset", spec: studio, stored: stored, action: NoOp},
		{name: "optional rotate without host value", spec: studio, stored: stored, cfg: Config{RotateSecrets: true}, action: NoOp},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := decideSecret(tc.spec, "n", tc.stored, NewSecret(tc.host), &tc.cfg)
			if tc.err != "" {
				if err == nil || err.Error() != tc.err {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				if tc.host != "" && strings.Contains(err.Error(), tc.host) {
					t.Fatal("the error contains the secret value")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if p.skip != tc.skip {
				t.Fatalf("skip = %v", p.skip)
			}
			if tc.skip {
				return
			}
			if p.change.Action != tc.action || p.created != tc.created {
				t.Fatalf("action %s created %v, want %s %v", p.change.Action, p.created, tc.action, tc.created)
			}
			switch {
			case tc.value != "" && p.value.Reveal() != tc.value:
				t.Fatalf("value %s, want the host value", p.value)
			case tc.created && (p.value.IsZero() || p.value.Equal(NewSecret(long))):
				t.Fatal("no fresh value generated")
			case tc.action == NoOp && !p.value.IsZero():
				t.Fatal("a value to write on a no-op")
			}
		})
	}
}
