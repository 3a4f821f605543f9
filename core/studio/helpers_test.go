package studio_test

import (
	"context"
	"crypto/rsa"
	"encoding/json"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/supervaize/svz/core/contract"
	"github.com/supervaize/svz/core/studio"
	"github.com/supervaize/svz/examples/helloworld/hello"
	"github.com/supervaize/svz/internal/devstudio"
)

// Secrets of the tests: none may appear in any error or log.
const (
	controllerKey = "controller-api-key-3b1f9e77c2d84a"
	serverID      = "svz-test-server-1"
)

type vectorFile struct {
	Keys    map[string]string `json:"keys"`
	Vectors []struct {
		KeyBits   int    `json:"key_bits"`
		Plain     string `json:"plain"`
		Encrypted string `json:"encrypted"`
	} `json:"vectors"`
}

func vectors(t testing.TB) vectorFile {
	t.Helper()
	b, err := os.ReadFile("testdata/vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var v vectorFile
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// testKey is the 2048-bit key of the reference vectors (generating one per test is slow).
func testKey(t testing.TB) *rsa.PrivateKey {
	t.Helper()
	k, err := studio.ParsePrivateKey(vectors(t).Keys["2048"])
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// standIn starts a Studio stand-in for the test.
func standIn(t testing.TB, cfg devstudio.Config) *devstudio.Server {
	t.Helper()
	s, err := devstudio.Start(context.Background(), cfg, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// logs collects a client's log output, to check that no secret reaches it.
type logs struct{ strings.Builder }

func (l *logs) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(&l.Builder, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

func newClient(t testing.TB, s *devstudio.Server, l *logs, mod func(*studio.Settings)) *studio.Client {
	t.Helper()
	set := studio.Settings{APIURL: s.URL(), WorkspaceID: devstudio.DefaultWorkspace, APIKey: s.APIKey(), Timeout: 30 * time.Second, MaxRetries: 2}
	if mod != nil {
		mod(&set)
	}
	var opts []studio.Option
	if l != nil {
		opts = append(opts, studio.WithLogger(l.logger()))
	}
	c, err := studio.New(set, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// helloPayload is the Studio-connected Hello World's registration payload.
func helloPayload(t testing.TB) contract.AgentRegistrationContract {
	t.Helper()
	a, err := hello.NewStudioAgent()
	if err != nil {
		t.Fatal(err)
	}
	return a.RegistrationPayload("")
}

func newRegistration(t testing.TB, key *rsa.PrivateKey) *studio.ServerRegistration {
	t.Helper()
	reg, err := studio.NewServerRegistration(studio.Server{ServerID: serverID, URL: "http://127.0.0.1:8000/", PublicKey: &key.PublicKey,
		APIKey: controllerKey, Agents: []contract.AgentRegistrationContract{helloPayload(t)}})
	if err != nil {
		t.Fatal(err)
	}
	return reg
}

// noSecret fails when any secret appears in s.
func noSecret(t testing.TB, what, s string, secrets ...string) {
	t.Helper()
	for _, sec := range append(secrets, controllerKey, devstudio.DefaultAPIKey) {
		if strings.Contains(s, sec) {
			t.Errorf("%s holds a secret (%.6s…): %s", what, sec, s)
		}
	}
}
