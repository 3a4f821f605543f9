package studio_test

import (
	"context"
	"crypto/rsa"
	"errors"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/supervaize/svz/core/contract"
	"github.com/supervaize/svz/core/studio"
	"github.com/supervaize/svz/internal/devstudio"
)

// countingTransport counts agent lookups and can fail the next ones at the connection.
type countingTransport struct {
	lookups atomic.Int32
	failing atomic.Int32 // connection failures still to inject
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if strings.Contains(r.URL.Path, "/agents/") {
		c.lookups.Add(1)
		if c.failing.Load() > 0 {
			c.failing.Add(-1)
			return nil, errors.New("injected: connection reset by peer")
		}
	}
	return http.DefaultTransport.RoundTrip(r)
}

const secretValue = "sk-secret-parameter-value-42"

// registered starts a stand-in serving params, registers Hello World with it and returns a
// client whose agent lookups are counted, and the outcome.
func registered(t *testing.T, params map[string]map[string]string) (*studio.Client, *countingTransport, *studio.Outcome, *devstudio.Server) {
	t.Helper()
	s := standIn(t, devstudio.Config{Parameters: params})
	ct := &countingTransport{}
	c, err := studio.New(studio.Settings{APIURL: s.URL(), WorkspaceID: devstudio.DefaultWorkspace, APIKey: s.APIKey(), Timeout: 30 * time.Second},
		studio.WithHTTPClient(&http.Client{Transport: ct}))
	if err != nil {
		t.Fatal(err)
	}
	out, err := c.Register(context.Background(), newRegistration(t, testKey(t)), studio.Expect{})
	if err != nil {
		t.Fatal(err)
	}
	return c, ct, out, s
}

func TestParametersLookup(t *testing.T) {
	const slug = "hello-world-ai-agent"
	c, ct, out, _ := registered(t, map[string]map[string]string{slug: {"HELLO_GREETING": "Bonjour", "API_TOKEN": secretValue}})
	var exported sync.Map
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var clock atomic.Int64
	clock.Store(now.UnixNano())
	p, err := studio.NewParameters(studio.ParametersConfig{Client: c, Key: testKey(t), TTL: time.Minute,
		Agents: []studio.AgentParameters{{Slug: slug, StudioID: out.AgentIDs[slug], Declared: []contract.Parameter{
			{Name: "HELLO_GREETING"}, {Name: "API_TOKEN", IsEnvironment: true, IsSecret: true}}}},
		Export: func(k, v string) error { exported.Store(k, v); return nil },
		Now:    func() time.Time { return time.Unix(0, clock.Load()) }})
	if err != nil {
		t.Fatal(err)
	}
	if ct.lookups.Load() != 0 {
		t.Fatal("looked up before the first need")
	}
	// Concurrent first needs share one lookup.
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			got, err := p.AgentParameters(context.Background(), slug)
			if err != nil || !reflect.DeepEqual(got, map[string]string{"HELLO_GREETING": "Bonjour", "API_TOKEN": secretValue}) {
				t.Errorf("%v %v", got, err)
			}
		})
	}
	wg.Wait()
	if n := ct.lookups.Load(); n != 1 {
		t.Fatalf("%d lookups, want 1", n)
	}
	if v, _ := exported.Load("API_TOKEN"); v != secretValue {
		t.Errorf("environment parameter exported as %v", v)
	}
	if _, ok := exported.Load("HELLO_GREETING"); ok {
		t.Error("a non-environment parameter was exported")
	}
	// Within the lifetime: cached. After it: looked up again, once.
	clock.Add(int64(59 * time.Second))
	_, _ = p.AgentParameters(context.Background(), slug)
	clock.Add(int64(2 * time.Second))
	_, _ = p.AgentParameters(context.Background(), slug)
	_, _ = p.AgentParameters(context.Background(), slug)
	if n := ct.lookups.Load(); n != 2 {
		t.Fatalf("%d lookups, want 2", n)
	}
	// A failed lookup is not kept: the next need tries again (connection failures are retried
	// by the client first).
	clock.Add(int64(2 * time.Minute))
	ct.failing.Store(10)
	if _, err := p.AgentParameters(context.Background(), slug); err == nil || !strings.Contains(err.Error(), "studio: agent lookup (GET http://") {
		t.Fatalf("failed lookup: %v", err)
	}
	ct.failing.Store(0)
	if got, err := p.AgentParameters(context.Background(), slug); err != nil || got["HELLO_GREETING"] != "Bonjour" {
		t.Fatalf("after recovery: %v %v", got, err)
	}
}

func TestParametersRefusals(t *testing.T) {
	const slug = "hello-world-ai-agent"
	c, _, out, _ := registered(t, map[string]map[string]string{slug: {"HELLO_GREETING": "Bonjour", "UNDECLARED": secretValue}})
	declared := []contract.Parameter{{Name: "HELLO_GREETING"}}
	for _, tc := range []struct {
		name string
		cfg  studio.ParametersConfig
		want string
	}{
		{"undeclared", studio.ParametersConfig{Key: testKey(t), Agents: []studio.AgentParameters{{Slug: slug, StudioID: out.AgentIDs[slug], Declared: declared}}},
			`agent "hello-world-ai-agent": Studio sent parameter "UNDECLARED", which the agent does not declare: add it to AgentConfig.Parameters`},
		{"no key", studio.ParametersConfig{Agents: []studio.AgentParameters{{Slug: slug, StudioID: out.AgentIDs[slug], Declared: declared}}},
			"SUPERVAIZER_PRIVATE_KEY is required to decrypt"},
		{"another key", studio.ParametersConfig{Key: otherKey(t), Agents: []studio.AgentParameters{{Slug: slug, StudioID: out.AgentIDs[slug], Declared: declared}}},
			"parameters_encrypted: encrypted value is too short for an RSA-encrypted key of this controller's key size, an IV and one AES block (was it encrypted to another public key?)"},
		{"unknown id", studio.ParametersConfig{Key: testKey(t), Agents: []studio.AgentParameters{{Slug: slug, StudioID: "studio-agent-unknown", Declared: declared}}},
			"studio: agent lookup (GET http://"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.Client = c
			p, err := studio.NewParameters(tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			_, err = p.AgentParameters(context.Background(), slug)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("%v, want %q", err, tc.want)
			}
			noSecret(t, "error", err.Error(), secretValue)
		})
	}
	// By slug, without a Studio id; an agent Studio has not configured has no values.
	_, _, _, s := registered(t, nil)
	c2 := newClient(t, s, nil, nil)
	p, _ := studio.NewParameters(studio.ParametersConfig{Client: c2, Key: testKey(t), Agents: []studio.AgentParameters{{Slug: slug, Declared: declared}}})
	if got, err := p.AgentParameters(context.Background(), slug); err != nil || len(got) != 0 {
		t.Fatalf("unconfigured agent: %v %v", got, err)
	}
	if err := p.Prefetch(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// otherKey is the 3072-bit key of the reference vectors: not the key the controller registered.
func otherKey(t *testing.T) *rsa.PrivateKey {
	t.Helper()
	k, err := studio.ParsePrivateKey(vectors(t).Keys["3072"])
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestDecodeAgent(t *testing.T) {
	for _, body := range []string{`{"id":"a1","onboarding_status":"configured","parameters_encrypted":"x"}`,
		`{"object":{"id":"a1","onboarding_status":"configured","parameters_encrypted":"x"}}`, `{"data":{"id":"a1","onboarding_status":"configured","parameters_encrypted":"x"}}`} {
		rec, err := studio.DecodeAgent([]byte(body), "a1")
		if err != nil || rec.ID != "a1" || rec.OnboardingStatus != "configured" || rec.ParametersEncrypted != "x" {
			t.Errorf("%s: %+v %v", body, rec, err)
		}
	}
	for body, want := range map[string]string{
		`[]`:                     "is not an object",
		`{"slug":"s"}`:           "has no id",
		`{"id":7}`:               "member id of the agent Studio returned is not a string",
		`{"id":"a2"}`:            "Agent ID mismatch: a1 != a2",
		`{"id":"a1","status":1}`: "member status",
	} {
		if _, err := studio.DecodeAgent([]byte(body), "a1"); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", body, err, want)
		}
	}
}

func FuzzDecodeAgent(f *testing.F) {
	f.Add([]byte(`{"object":{"id":"a1","onboarding_status":"configured","parameters_encrypted":"x"}}`))
	f.Add([]byte(`{"data":null,"id":"a1"}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		rec, err := studio.DecodeAgent(body, "a1")
		if err == nil && rec.ID != "a1" {
			t.Fatalf("accepted id %q", rec.ID)
		}
		if err != nil && strings.ContainsAny(err.Error(), "\n\r") {
			t.Fatalf("error breaks lines: %q", err)
		}
	})
}
