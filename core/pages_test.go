package core_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/supervaize/svz/core"
	"github.com/supervaize/svz/core/contract"
	"github.com/supervaize/svz/core/grant"
	"github.com/supervaize/svz/internal/golden"
)

// TestCardURLsAnswer follows every URL the Agent Card publishes: none answers 404 (the agent API
// URL and its example need the read key, as the card's authentication says).
func TestCardURLsAnswer(t *testing.T) {
	for _, public := range []string{"", "https://agents.example.com"} {
		c := newController(t, core.Config{PublicURL: public}, handlers{})
		_, _, raw := get(t, c, "/.well-known/agents/v1.0/s_agent.json", nil)
		var card struct {
			LogoURL      string `json:"logo_url"`
			HumanURL     string `json:"human_url"`
			APIEndpoints []struct {
				URL        string `json:"url"`
				OpenAPIURL string `json:"openapi_url"`
				DocsURL    string `json:"docs_url"`
				Examples   []struct {
					Request map[string]string `json:"request"`
				} `json:"examples"`
			} `json:"api_endpoints"`
		}
		if err := json.Unmarshal(raw, &card); err != nil || len(card.APIEndpoints) != 1 {
			t.Fatalf("card %s: %v", raw, err)
		}
		ep := card.APIEndpoints[0]
		key := map[string]string{"X-API-Key": testKey}
		for _, u := range []struct {
			url, contentType string
			hdr              map[string]string
		}{
			{card.LogoURL, "image/png", nil},
			{card.HumanURL, "text/html; charset=utf-8", nil},
			{ep.OpenAPIURL, "application/json", nil},
			{ep.DocsURL, "text/html; charset=utf-8", nil},
			{ep.URL, "application/json", key},
			{ep.Examples[0].Request["url"], "application/json", key},
		} {
			path := strings.TrimPrefix(u.url, public)
			if !strings.HasPrefix(path, "/") {
				t.Fatalf("%q is not under the public URL %q", u.url, public)
			}
			status, hdr, body := get(t, c, path, u.hdr)
			if status != http.StatusOK || hdr.Get("Content-Type") != u.contentType || len(body) == 0 {
				t.Errorf("GET %s: %d %q (%d bytes)", u.url, status, hdr.Get("Content-Type"), len(body))
			}
			if strings.HasPrefix(u.contentType, "text/html") && hdr.Get("Content-Security-Policy") == "" {
				t.Errorf("GET %s: an HTML page without a Content-Security-Policy", u.url)
			}
		}
		if status, _, _ := get(t, c, "/static/agents/nope_logo.png", nil); status != http.StatusNotFound {
			t.Errorf("logo of an unknown agent: %d", status)
		}
		if status, _, _ := get(t, c, "/api/supervaizer/agents/nope/supervaize_instructions.html", nil); status != http.StatusNotFound {
			t.Errorf("page of an unknown agent: %d", status)
		}
		if status, body := post(t, c, []byte(`{}`), nil); status != http.StatusOK || !bytes.Contains(body, []byte(`"jsonrpc"`)) {
			t.Errorf("/a2a still answers: %d %s", status, body)
		}
		if public != "" {
			_, _, doc := get(t, c, "/openapi.json", nil)
			golden.JSON(t, "openapi.json", doc)
		}
	}
}

// TestPagesEscape: what an agent declares is text on its pages, never markup.
func TestPagesEscape(t *testing.T) {
	reg, err := contract.BuildRegistration(contract.RegistrationSpec{AgentSlug: "s", DisplayName: "S", A2UICatalogVersion: "s.1",
		Surfaces: []contract.SurfaceSpec{contract.SurfaceID("job.start")}, Actions: []contract.ActionSpec{contract.ActionID("job.start")}})
	if err != nil {
		t.Fatal(err)
	}
	a, err := core.NewAgent(core.AgentConfig{Name: "S", Version: "1.0", Description: `<script>alert("x")</script>`, Author: `"><img src=x>`, Registration: reg})
	if err != nil {
		t.Fatal(err)
	}
	a.HandleAction("job.start", core.ActionFunc(func(context.Context, *contract.ActionRequest) (*contract.ActionResult, error) { return nil, nil }))
	c, err := core.New(core.Config{APIKey: testKey, Authorizer: grant.LocalBypass{}}, a)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, _, body := get(t, c, "/api/supervaizer/agents/s/supervaize_instructions.html", nil)
	if bytes.Contains(body, []byte("<script>")) || bytes.Contains(body, []byte(`"><img`)) ||
		!bytes.Contains(body, []byte("&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;")) {
		t.Fatalf("page:\n%s", body)
	}
}
