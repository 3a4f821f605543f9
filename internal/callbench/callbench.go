// Package callbench sets up the per-call cost measurements: the Hello World controller in normal
// mode (an Ed25519 PEM key, the memory store, a workspace-grant token signed like Studio's) and,
// beside it, the floor every JSON-over-HTTP service pays, a handler that only decodes the request
// body into a map and encodes a result of the same size as Hello World's surface.load answer.
//
// The benchmarks of examples/helloworld/hello and scripts/bench-http both use it, so the
// in-process and the over-HTTP ratios compare the same two handlers.
package callbench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/supervaize/svz/core"
	"github.com/supervaize/svz/core/config"
	"github.com/supervaize/svz/core/grant"
	"github.com/supervaize/svz/core/grant/granttest"
	"github.com/supervaize/svz/examples/helloworld/hello"
)

// Identities of the benchmark controller.
const (
	APIKey        = "bench-api-key-0123456789"
	Issuer        = "https://studio.example"
	ServerID      = "bench-server-1"
	StudioAgentID = "studio-agent-1"
	WorkspaceID   = "workspace-1"
)

// Bench is one controller and its floor, with the requests to send them.
type Bench struct {
	Controller *core.Controller
	Floor      http.Handler
	issuer     *granttest.Issuer
	now        time.Time
	// Token is a valid grant for both calls below.
	Token string
	// SurfaceLoadBody loads Hello World's job.start surface; JobStartBody starts a job of 3 cases
	// without an idempotency key.
	SurfaceLoadBody, JobStartBody []byte
}

// New builds the controller (from environment settings, as a deployment does) and the floor.
// Close the controller when done.
func New(ctx context.Context) (*Bench, error) { return NewWith(ctx, nil) }

// NewWith is New with settings added or replaced (e.g. another SUPERVAIZER_STORE).
func NewWith(ctx context.Context, settings map[string]string) (*Bench, error) {
	iss := granttest.NewIssuer("bench-key")
	env := map[string]string{
		config.EnvAPIKey:         APIKey,
		config.EnvServerID:       ServerID,
		config.EnvStudioAgentIDs: hello.Slug + "=" + StudioAgentID,
		grant.EnvRequired:        "true",
		grant.EnvIssuer:          Issuer,
		grant.EnvPublicKey:       iss.PublicKeyPEM(),
		"SUPERVAIZER_STORE":      "memory",
	}
	maps.Copy(env, settings)
	a, err := hello.NewAgent()
	if err != nil {
		return nil, err
	}
	c, err := config.NewController(ctx, func(k string) string { return env[k] }, slog.New(slog.DiscardHandler), a)
	if err != nil {
		return nil, err
	}
	b := &Bench{Controller: c, issuer: iss, now: time.Now()}
	b.Token = b.NewToken(0)
	b.SurfaceLoadBody = rpcBody(grant.MethodSurfaceLoad, nil)
	b.JobStartBody = rpcBody(grant.MethodActionInvoke, map[string]any{"action": "job.start", "job_id": "job-1", "input": map[string]any{"count": 3}})

	// Both calls must succeed (a JSON-RPC error is an HTTP 200 too); the floor answers with a
	// document as large as the controller's surface.load answer.
	var answer map[string]any
	for _, body := range [][]byte{b.JobStartBody, b.SurfaceLoadBody} {
		rec := httptest.NewRecorder()
		c.ServeHTTP(rec, b.Request(body, b.Token))
		answer = nil
		if err := json.Unmarshal(rec.Body.Bytes(), &answer); err != nil || answer["result"] == nil {
			_ = c.Close()
			return nil, fmt.Errorf("callbench: the controller did not answer a result: %s", rec.Body)
		}
	}
	b.Floor = floor(answer["result"])
	return b, nil
}

// NewToken returns a valid grant for both calls, distinct for each n: a token the controller has
// never seen costs its first verification.
func (b *Bench) NewToken(n int) string {
	claims := granttest.Valid(b.now, Issuer, grant.MethodSurfaceLoad, "job.start", grant.MethodActionInvoke).With(
		"aud", grant.AudiencePrefix+ServerID, "server_id", ServerID, "agent_id", StudioAgentID,
		"agent_slug", hello.Slug, "workspace_id", WorkspaceID, "workspace_slug", nil,
		"exp", b.now.Add(time.Hour).Unix(), "jti", fmt.Sprint("bench-", n))
	return b.issuer.Token(claims)
}

// KeyedJobStartBody is JobStartBody with an idempotency key (a confirm, as Studio sends it).
func KeyedJobStartBody(key string) []byte {
	return rpcBody(grant.MethodActionInvoke, map[string]any{"action": "job.start", "job_id": "job-1", "input": map[string]any{"count": 3},
		"idempotency_key": key})
}

// Request is a POST /a2a of body with the API key and token.
func (b *Bench) Request(body []byte, token string) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/a2a", bytes.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("X-API-Key", APIKey)
	if token != "" {
		r.Header.Set(core.GrantHeader, token)
	}
	return r
}

func rpcBody(method string, over map[string]any) []byte {
	params := map[string]any{
		"request_id": "req-1", "actor": map[string]any{"user_id": "user-1"},
		"workspace": map[string]any{"id": WorkspaceID}, "mission_id": "mission-1",
		"agent_slug": hello.Slug, "surface": "job.start",
	}
	for k, v := range over {
		params[k] = v
	}
	b, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
	if err != nil {
		panic(err) // plain maps of strings and numbers
	}
	return b
}

// floor is the least a JSON-RPC handler does: read the body, decode it into a map, encode an
// answer. It checks nothing and runs no agent.
func floor(result any) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var req map[string]any
		if err := json.Unmarshal(body, &req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		out, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": req["id"], "result": result})
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(out)
	})
}
