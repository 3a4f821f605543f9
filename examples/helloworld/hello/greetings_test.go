package hello

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/supervaize/svz/core/config"
	"github.com/supervaize/svz/core/grant/granttest"
	"github.com/supervaize/svz/internal/golden"
)

const greetings = "/api/agents/" + Slug + "/data/greetings/"

// greetingsController is Hello World with workspace authorization on (the DataResource routes are
// never served without it) on an in-memory store.
func greetingsController(t *testing.T, studio *granttest.Issuer) http.Handler {
	t.Helper()
	env := map[string]string{
		"SUPERVAIZER_API_KEY":                   key,
		"SUPERVAIZER_SERVER_ID":                 "server-greetings",
		"SUPERVAIZER_STORE":                     "memory",
		"SUPERVAIZER_WORKSPACE_AUTH_REQUIRED":   "true",
		"SUPERVAIZER_WORKSPACE_AUTH_ISSUER":     "https://studio.test",
		"SUPERVAIZER_WORKSPACE_AUTH_PUBLIC_KEY": studio.PublicKeyPEM(),
		"SUPERVAIZER_STUDIO_AGENT_IDS":          Slug + "=studio-hello",
	}
	a, err := NewAgent()
	if err != nil {
		t.Fatal(err)
	}
	c, err := config.NewController(context.Background(), func(k string) string { return env[k] }, slog.New(slog.NewTextHandler(io.Discard, nil)), a)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// greetingsClient sends DataResource calls for one workspace.
type greetingsClient struct {
	t      *testing.T
	h      http.Handler
	studio *granttest.Issuer
	ws     string
}

func (g greetingsClient) do(method, path, body string, hdr ...string) (int, string) {
	g.t.Helper()
	now := time.Now()
	claims := granttest.Valid(now, "https://studio.test", "resource.greetings.list", "resource.greetings.get", "resource.greetings.create",
		"resource.greetings.update", "resource.greetings.delete", "resource.greetings.import").
		With("aud", "supervaizer-server:server-greetings", "server_id", "server-greetings", "agent_slug", Slug, "agent_id", "studio-hello", "workspace_id", g.ws)
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	req.Header.Set("X-API-Key", key)
	req.Header.Set("X-Supervaize-Workspace-Authorization", "Bearer "+g.studio.Token(claims))
	req.Header.Set("X-Supervaize-Workspace-Id", g.ws)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	rec := httptest.NewRecorder()
	g.h.ServeHTTP(rec, req)
	return rec.Code, rec.Body.String()
}

func (g greetingsClient) want(method, path, body string, status int, want string, hdr ...string) {
	g.t.Helper()
	code, got := g.do(method, path, body, hdr...)
	if code != status || (want != "" && got != want) {
		g.t.Fatalf("%s %s: %d %.300s\nwant %d %s", method, path, code, got, status, want)
	}
}

// TestGreetings: the greetings live in the store per verified workspace, list page by page beyond
// one store page, narrow to a mission only with its metadata, and refuse bad input with a clear
// detail.
func TestGreetings(t *testing.T) {
	studio := granttest.NewIssuer("k1")
	h := greetingsController(t, studio)
	a := greetingsClient{t, h, studio, "workspace-a"}
	b := greetingsClient{t, h, studio, "workspace/b"}

	a.want("POST", greetings, `{"id":"hi","text":"Hi from A"}`, 201, `{"id":"hi","text":"Hi from A"}`)
	b.want("GET", greetings, "", 200, `[]`)
	b.want("GET", greetings+"hi", "", 404, `{"detail":"greetings 'hi' not found"}`)
	b.want("POST", greetings, `{"id":"hi","text":"Hi from B"}`, 201, `{"id":"hi","text":"Hi from B"}`)
	a.want("GET", greetings+"hi", "", 200, `{"id":"hi","text":"Hi from A"}`)
	b.want("DELETE", greetings+"hi", "", 200, `{"deleted":true}`)
	a.want("GET", greetings, "", 200, `[{"id":"hi","text":"Hi from A"}]`)

	// Generated ids, and refusals.
	code, body := a.do("POST", greetings, `{"text":"no id"}`)
	if code != 201 || !strings.HasPrefix(body, `{"id":"greeting-`) {
		t.Fatalf("generated id: %d %s", code, body)
	}
	a.want("POST", greetings, `{"id":"Bad Id","text":"x"}`, 422, `{"detail":"id must be 1 to 64 lowercase letters, digits, _ or -, starting with a letter or digit"}`)
	a.want("POST", greetings, `{"text":"`+strings.Repeat("é", 281)+`"}`, 422, `{"detail":"text is longer than 280 characters"}`)
	a.want("PUT", greetings+"hi", `{"text":""}`, 422, `{"detail":"text is required: send {\"text\": \"Hello!\"}"}`)
	a.want("PUT", greetings+"Bad%20Id", `{"text":"x"}`, 404, `{"detail":"greetings 'Bad Id' not found"}`)
	a.want("POST", greetings+"import/", `[{"id":"ok","text":"x"},{"id":"ok2","text":""}]`, 422, `{"detail":"record 1: text is required: send {\"text\": \"Hello!\"}"}`)
	a.want("GET", greetings+"ok", "", 404, "") // a refused import stores nothing

	// More greetings than one store page (1000): the listing walks the pages.
	var batch strings.Builder
	batch.WriteString("[")
	for i := range 1100 {
		if i > 0 {
			batch.WriteString(",")
		}
		fmt.Fprintf(&batch, `{"id":"g%04d","text":"Greeting %d"}`, i, i)
	}
	batch.WriteString("]")
	a.want("POST", greetings+"import/", batch.String(), 200, `{"created":1100,"skipped":[]}`)
	a.want("GET", greetings+"?skip=1049&limit=2", "", 200, `[{"id":"g1049","text":"Greeting 1049"},{"id":"g1050","text":"Greeting 1050"}]`)
	code, body = a.do("GET", greetings+"?limit=1000&skip=1000", "")
	if code != 200 || strings.Count(body, `"id"`) != 102 || !strings.HasSuffix(body, `{"id":"hi","text":"Hi from A"}]`) {
		t.Fatalf("last page: %d %.300s", code, body)
	}

	// A mission's greetings: tagged on create, narrowed only with the mission's metadata.
	meta := base64.RawURLEncoding.EncodeToString([]byte(`{"audience":"team"}`))
	a.want("POST", greetings, `{"id":"m","text":"In the mission"}`, 201, `{"id":"m","text":"In the mission","mission_id":"mission-1"}`,
		"X-Supervaize-Mission-Id", "mission-1")
	a.want("GET", greetings, "", 200, `[{"id":"m","text":"In the mission","mission_id":"mission-1"}]`,
		"X-Supervaize-Mission-Id", "mission-1", "X-Supervaize-Mission-Metadata", meta)
	a.want("GET", greetings, "", 200, `[]`, "X-Supervaize-Mission-Id", "mission-2", "X-Supervaize-Mission-Metadata", meta)
	code, body = a.do("GET", greetings+"?skip=1100", "", "X-Supervaize-Mission-Id", "mission-2")
	if code != 200 || !strings.HasSuffix(body, `{"id":"hi","text":"Hi from A"},{"id":"m","text":"In the mission","mission_id":"mission-1"}]`) {
		t.Fatalf("without metadata the listing is not narrowed: %d %.300s", code, body)
	}
	a.want("PUT", greetings+"m", `{"text":"Edited","mission_id":"other"}`, 200, `{"id":"m","text":"Edited","mission_id":"mission-1"}`)
}

// TestGreetingsDeclaration pins Hello World's agent registration entry (the agent info route),
// where the greetings declaration appears under data_resources.
func TestGreetingsDeclaration(t *testing.T) {
	h := localController(t, nil)
	req := httptest.NewRequest(http.MethodGet, "/api/supervaizer/agents/"+Slug+"/", nil)
	req.Header.Set("X-API-Key", key)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
	golden.JSON(t, "agent_info.json", rec.Body.Bytes())
}
