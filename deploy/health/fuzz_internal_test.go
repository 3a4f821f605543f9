package health

import (
	"encoding/json"
	"net/url"
	"testing"
)

// FuzzCardURLs feeds agents.json bodies as a controller (or anything behind its URL) may send
// them: every URL accepted is absolute http(s), at most maxCards of them.
func FuzzCardURLs(f *testing.F) {
	f.Add([]byte(`{"schema_version":"a2a_2023_v1","agents":[{"agent_card_url":"/.well-known/agents/v1.0/a_agent.json"}]}`))
	f.Add([]byte(`{"agents":[{"agent_card_url":"https://x.example/.well-known/agents/v/a_agent.json"}]}`))
	f.Add([]byte(`{"agents":[{"agent_card_url":"//other.example/c"},{"agent_card_url":"javascript:alert(1)"}]}`))
	f.Add([]byte(`{"agents":[]}`))
	f.Add([]byte(`{"agents":null}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		cards, err := cardURLs("https://svc.example", body)
		if err != nil {
			if len(cards) != 0 {
				t.Fatalf("error %v with cards %v", err, cards)
			}
			return
		}
		if len(cards) == 0 || len(cards) > maxCards {
			t.Fatalf("accepted %d cards", len(cards))
		}
		for _, c := range cards {
			u, err := url.Parse(c)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				t.Fatalf("accepted card URL %q", c)
			}
		}
	})
}

// FuzzCheckCard: only a JSON object whose supervaizer.v2 is an object passes.
func FuzzCheckCard(f *testing.F) {
	f.Add([]byte(`{"supervaizer":{"v2":{"supervaizer_contract_version":2}}}`))
	f.Add([]byte(`{"supervaizer":{"v2":null}}`))
	f.Add([]byte(`{"supervaizer":null}`))
	f.Add([]byte(`[]`))
	f.Add([]byte(`{"Supervaizer":{"V2":{}}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		if err := checkCard(body); err != nil {
			return
		}
		var card map[string]any
		if err := json.Unmarshal(body, &card); err != nil {
			t.Fatalf("accepted %q: %v", body, err)
		}
		ext, _ := card["supervaizer"].(map[string]any)
		if _, ok := ext["v2"].(map[string]any); !ok {
			t.Fatalf("accepted %q without an object at supervaizer.v2", body)
		}
	})
}
