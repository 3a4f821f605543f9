package core_test

import (
	"encoding/json"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/supervaize/svz/core"
	"github.com/supervaize/svz/core/contract"
	"github.com/supervaize/svz/core/grant"
	"github.com/supervaize/svz/internal/golden"
)

// TestDiscovery is spec §12.2 cases 1–3 with exact documents, relative and absolute.
func TestDiscovery(t *testing.T) {
	for _, tc := range []struct {
		name, public, prefix string
	}{
		{"relative", "", ""},
		{"absolute", "https://agents.example.com/", "https://agents.example.com"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newController(t, core.Config{PublicURL: tc.public, StudioAgentIDs: map[string]string{"s": "studio-agent-1"}}, handlers{})
			status, hdr, body := get(t, c, "/.well-known/agents.json", nil)
			if status != 200 || hdr.Get("Content-Type") != "application/json" {
				t.Fatalf("agents.json: %d %v", status, hdr)
			}
			golden.JSON(t, "agents_"+tc.name+".json", body)

			_, _, card := get(t, c, "/.well-known/agents/v1.0/s_agent.json", nil)
			golden.JSON(t, "card_"+tc.name+".json", card)
			_, _, legacy := get(t, c, "/.well-known/agents/s_agent.json", nil)
			if string(legacy) != string(card) {
				t.Error("the unversioned card route differs from the versioned one")
			}

			_, _, health := get(t, c, "/.well-known/health", nil)
			golden.JSON(t, "health.json", health)

			// The card's "Get agent info" route, behind the API key.
			if status, _, body := get(t, c, "/api/supervaizer/agents/s/", nil); status != 401 {
				t.Errorf("agent info without a key: %d %s", status, body)
			}
			if status, _, _ := get(t, c, "/api/supervaizer/agents/nope/", map[string]string{"X-API-Key": testKey}); status != 404 {
				t.Errorf("unknown agent info: %d", status)
			}
			status, _, info := get(t, c, "/api/supervaizer/agents/s/", map[string]string{"X-API-Key": testKey})
			if status != 200 {
				t.Fatalf("agent info: %d %s", status, info)
			}
			golden.JSON(t, "agent_info.json", info)
		})
	}
}

// TestDiscoveryDeveloperAndVersion: the agent list's developer is the reference's `developer or
// author or "Supervaize"` (a string there, the card's developer.name), and the version goes into
// the card's route verbatim, so an empty one gives /.well-known/agents/v/{slug}_agent.json (spec
// §1.1, §1.2).
func TestDiscoveryDeveloperAndVersion(t *testing.T) {
	for _, tc := range []struct {
		name, developer, author, version string
		wantDeveloper, wantCard          string
	}{
		{"developer wins", "Dev Co", "Author Co", "1.0", "Dev Co", "/.well-known/agents/v1.0/s_agent.json"},
		{"author next", "", "Author Co", "v2.3.4", "Author Co", "/.well-known/agents/vv2.3.4/s_agent.json"},
		{"default, empty version", "", "", "", "Supervaize", "/.well-known/agents/v/s_agent.json"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, err := core.NewAgent(core.AgentConfig{Name: agentName, Version: tc.version, Developer: tc.developer, Author: tc.author,
				Registration: testRegistration(t)})
			if err != nil {
				t.Fatal(err)
			}
			c, err := core.New(core.Config{APIKey: testKey, ServerID: "SRV-test", Authorizer: grant.LocalBypass{ServerID: "SRV-test"}}, a)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = c.Close() })
			_, _, list := get(t, c, "/.well-known/agents.json", nil)
			jsonEq(t, list, `{"schema_version":"a2a_2023_v1","agents":[{"name":"S","description":"","developer":"`+tc.wantDeveloper+
				`","version":"`+tc.version+`","agent_card_url":"`+tc.wantCard+`"}]}`)
			status, _, card := get(t, c, tc.wantCard, nil)
			if status != 200 {
				t.Fatalf("GET %s: %d %s", tc.wantCard, status, card)
			}
			var got struct {
				Description *string `json:"description"`
				Developer   struct{ Name string }
				Version     *string `json:"version"`
				VersionInfo struct {
					Current, Latest *string
				} `json:"version_info"`
			}
			if err := json.Unmarshal(card, &got); err != nil {
				t.Fatal(err)
			}
			if got.Description == nil || *got.Description != "" || got.Developer.Name != tc.wantDeveloper || got.Version == nil || *got.Version != tc.version ||
				got.VersionInfo.Current == nil || *got.VersionInfo.Current != tc.version || got.VersionInfo.Latest == nil || *got.VersionInfo.Latest != tc.version {
				t.Errorf("card %s", card)
			}
		})
	}
}

// TestHealthTimestampAndUnlinkedAgent: the timestamp is Python's isoformat() of an aware UTC
// datetime (microseconds only when non-zero, "+00:00"), and an agent without a Studio id keeps
// "agent_server_id": null (spec §1.3).
func TestHealthTimestampAndUnlinkedAgent(t *testing.T) {
	for _, tc := range []struct {
		now  time.Time
		want string
	}{
		{time.Date(2026, 7, 8, 10, 0, 0, 0, time.UTC), "2026-07-08T10:00:00+00:00"},
		{time.Date(2026, 7, 8, 10, 0, 0, 999, time.UTC), "2026-07-08T10:00:00+00:00"}, // below a microsecond
		{time.Date(2026, 7, 8, 10, 0, 0, 1000, time.UTC), "2026-07-08T10:00:00.000001+00:00"},
		{time.Date(2026, 7, 8, 12, 0, 0, 500000000, time.FixedZone("CEST", 2*3600)), "2026-07-08T10:00:00.500000+00:00"},
	} {
		t.Run(tc.want, func(t *testing.T) {
			c := newController(t, core.Config{Now: func() time.Time { return tc.now }}, handlers{})
			_, _, body := get(t, c, "/.well-known/health", nil)
			id := contract.DeterministicAgentID(agentName)
			jsonEq(t, body, `{"schema_version":"a2a_2023_v1","status":"operational","timestamp":"`+tc.want+`","agents":{"`+id+`":{"agent_id":"`+id+
				`","agent_server_id":null,"name":"S","status":"available","version":"1.0","statistics":{"total_jobs":0,"completed_jobs":0,"failed_jobs":0,"in_progress_jobs":0,"success_rate":100}}}}`)
		})
	}
}

// TestTrailingSlashRedirects: like Starlette's redirect_slashes, a path no route serves but one
// serves once its trailing slashes are removed (or one is added) answers 307 there, whatever the
// method and before the API key, query kept; every other unknown path is 404.
func TestTrailingSlashRedirects(t *testing.T) {
	c := newController(t, core.Config{}, handlers{})
	for _, tc := range []struct {
		method, path string
		status       int
		location     string
	}{
		{"POST", "/a2a/", 307, "/a2a"},
		{"POST", "/a2a//?x=1", 307, "/a2a?x=1"},
		{"GET", "/a2a/", 307, "/a2a"}, // a known path with another method still redirects
		{"GET", "/a2a/events/", 307, "/a2a/events"},
		{"GET", "/.well-known/agents.json/", 307, "/.well-known/agents.json"},
		{"GET", "/.well-known/health/", 307, "/.well-known/health"},
		{"GET", "/.well-known/agents/v1.0/s_agent.json/", 307, "/.well-known/agents/v1.0/s_agent.json"},
		{"GET", "/.well-known/agents/s_agent.json/", 307, "/.well-known/agents/s_agent.json"},
		{"GET", "/api/supervaizer/agents/s", 307, "/api/supervaizer/agents/s/"}, // the reference's route has the slash
		{"GET", "/api/supervaizer/agents/s//", 404, ""},                         // without its slashes, not a route either (as in Starlette)
		{"GET", "/openapi.json/", 307, "/openapi.json"},
		{"GET", "/docs/", 307, "/docs"},
		{"GET", "/static/agents/s_logo.png/", 307, "/static/agents/s_logo.png"},
		{"GET", "/api/supervaizer/agents/s/supervaize_instructions.html/", 307, "/api/supervaizer/agents/s/supervaize_instructions.html"},
		{"GET", "/", 404, ""},
		{"GET", "//", 404, ""},
		{"GET", "/a2a/x", 404, ""},
		{"GET", "/.well-known/health/x/", 404, ""},
		{"GET", "/api/supervaizer/agents/nope/", 404, ""},
		{"GET", "/api/supervaizer/agents/nope", 404, ""},
		{"GET", "/.well-known/agents/v2.0/s_agent.json/", 404, ""},
	} {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			req := httptest.NewRequest(tc.method, tc.path, nil) // no API key
			rec := httptest.NewRecorder()
			c.ServeHTTP(rec, req)
			if rec.Code != tc.status || rec.Header().Get("Location") != tc.location {
				t.Fatalf("%d Location %q, want %d %q: %s", rec.Code, rec.Header().Get("Location"), tc.status, tc.location, rec.Body)
			}
			if tc.status == 404 {
				jsonEq(t, rec.Body.Bytes(), `{"detail":"Not Found"}`)
			} else if rec.Body.Len() != 0 {
				t.Errorf("a redirect with a body: %s", rec.Body)
			}
		})
	}
}
