package studio_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/supervaize/svz/core/contract"
	"github.com/supervaize/svz/core/studio"
	"github.com/supervaize/svz/internal/devstudio"
)

// The cost of a serverless instance's first need of its parameters, against a Studio stand-in on
// loopback (make bench-studio). BenchmarkLoopbackGET is the floor of the same run: one plain GET
// round trip to the same server. The lookup adds the agent lookup's JSON and the hybrid
// decryption (one RSA-2048 OAEP private-key operation, BenchmarkDecrypt); later needs are a map
// read under a mutex (BenchmarkParametersCached).

func benchSetup(b *testing.B) (*devstudio.Server, *studio.Client, studio.AgentParameters) {
	b.Helper()
	s := standIn(b, devstudio.Config{Parameters: map[string]map[string]string{"hello-world-ai-agent": {"HELLO_GREETING": "Bonjour", "API_TOKEN": "sk-123"}},
		Logger: slog.New(slog.DiscardHandler)})
	c, err := studio.New(studio.Settings{APIURL: s.URL(), WorkspaceID: devstudio.DefaultWorkspace, APIKey: s.APIKey(), Timeout: time.Minute},
		studio.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		b.Fatal(err)
	}
	out, err := c.Register(context.Background(), newRegistration(b, testKey(b)), studio.Expect{})
	if err != nil {
		b.Fatal(err)
	}
	return s, c, studio.AgentParameters{Slug: "hello-world-ai-agent", StudioID: out.AgentIDs["hello-world-ai-agent"],
		Declared: []contract.Parameter{{Name: "HELLO_GREETING"}, {Name: "API_TOKEN"}}}
}

func BenchmarkLoopbackGET(b *testing.B) {
	s, _, _ := benchSetup(b)
	for b.Loop() {
		resp, err := http.Get(s.JWKSURL(devstudio.DefaultWorkspace))
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
}

func BenchmarkParametersFirstNeed(b *testing.B) {
	_, c, a := benchSetup(b)
	key := testKey(b)
	for b.Loop() {
		p, _ := studio.NewParameters(studio.ParametersConfig{Client: c, Key: key, Agents: []studio.AgentParameters{a}, Logger: slog.New(slog.DiscardHandler)})
		if v, err := p.AgentParameters(context.Background(), a.Slug); err != nil || v["HELLO_GREETING"] != "Bonjour" {
			b.Fatal(v, err)
		}
	}
}

func BenchmarkParametersCached(b *testing.B) {
	_, c, a := benchSetup(b)
	p, _ := studio.NewParameters(studio.ParametersConfig{Client: c, Key: testKey(b), Agents: []studio.AgentParameters{a}, Logger: slog.New(slog.DiscardHandler)})
	if _, err := p.AgentParameters(context.Background(), a.Slug); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := p.AgentParameters(context.Background(), a.Slug); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecrypt(b *testing.B) {
	key := testKey(b)
	enc, err := devstudio.Encrypt(&key.PublicKey, []byte(`[{"name":"HELLO_GREETING","value":"Bonjour"}]`))
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := studio.Decrypt(key, enc); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkParsePrivateKey is what a Studio-connected instance adds to its cold start: reading
// SUPERVAIZER_PRIVATE_KEY (the lookup itself waits for the first need).
func BenchmarkParsePrivateKey(b *testing.B) {
	pem := vectors(b).Keys["2048"]
	for b.Loop() {
		if _, err := studio.ParsePrivateKey(pem); err != nil {
			b.Fatal(err)
		}
	}
}
