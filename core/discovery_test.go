package core_test

import (
	"testing"

	"github.com/supervaize/svz/core"
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
			if status, _, body := get(t, c, "/api/supervaizer/agents/s", nil); status != 401 {
				t.Errorf("agent info without a key: %d %s", status, body)
			}
			if status, _, _ := get(t, c, "/api/supervaizer/agents/nope", map[string]string{"X-API-Key": testKey}); status != 404 {
				t.Errorf("unknown agent info: %d", status)
			}
			status, _, info := get(t, c, "/api/supervaizer/agents/s", map[string]string{"X-API-Key": testKey})
			if status != 200 {
				t.Fatalf("agent info: %d %s", status, info)
			}
			golden.JSON(t, "agent_info.json", info)
		})
	}
}
