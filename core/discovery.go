package core

import (
	"net/http"
	"strings"
	"time"

	"github.com/supervaize/svz/core/contract"
)

// A2ASchemaVersion is the schema_version of the discovery documents.
const A2ASchemaVersion = "a2a_2023_v1"

// agentInfoPrefix starts the agent API route of the Agent Card ("Get agent info"),
// /api/supervaizer/agents/{slug}/ (with its slash, as the reference's).
const agentInfoPrefix = "/api/supervaizer/agents/"

type agentListEntry struct {
	Name         string `json:"name"`
	Description  string `json:"description"`
	Developer    string `json:"developer"`
	Version      string `json:"version"`
	AgentCardURL string `json:"agent_card_url"`
}

// agentCard is the Supervaizer Agent Card (its own format, schema a2a_2023_v1, not A2A's
// upstream AgentCard). Member order follows the reference.
type agentCard struct {
	Name               string             `json:"name"`
	Description        string             `json:"description"`
	Developer          cardDeveloper      `json:"developer"`
	Version            string             `json:"version"`
	VersionInfo        cardVersionInfo    `json:"version_info"`
	LogoURL            string             `json:"logo_url"`
	HumanURL           string             `json:"human_url"`
	ContactInformation map[string]any     `json:"contact_information"`
	APIEndpoints       []cardAPIEndpoint  `json:"api_endpoints"`
	Tools              []any              `json:"tools"`
	Authentication     cardAuthentication `json:"authentication"`
	Supervaizer        *cardExtension     `json:"supervaizer,omitempty"`
}

type cardDeveloper struct {
	Name  string `json:"name"`
	URL   string `json:"url"`
	Email string `json:"email"`
}

type cardVersionInfo struct {
	Current      string `json:"current"`
	Latest       string `json:"latest"`
	ChangelogURL string `json:"changelog_url,omitempty"`
}

type cardAPIEndpoint struct {
	Type        string        `json:"type"`
	URL         string        `json:"url"`
	Name        string        `json:"name"`
	Description string        `json:"description"`
	OpenAPIURL  string        `json:"openapi_url"`
	DocsURL     string        `json:"docs_url"`
	Examples    []cardExample `json:"examples"`
}

type cardExample struct {
	Name        string            `json:"name"`
	Description string            `json:"description"`
	Request     map[string]string `json:"request"`
}

type cardAuthentication struct {
	Type        string `json:"type"`
	In          string `json:"in"`
	Name        string `json:"name"`
	Description string `json:"description"`
}

type cardExtension struct {
	V2 *contract.Registration `json:"v2"`
}

// developerName is the reference's `developer or author or "Supervaize"`.
func (a *Agent) developerName() string {
	switch {
	case a.cfg.Developer != "":
		return a.cfg.Developer
	case a.cfg.Author != "":
		return a.cfg.Author
	}
	return "Supervaize"
}

// cardPath is the versioned Agent Card route of an agent (its version verbatim, so the default
// empty version gives /.well-known/agents/v/{slug}_agent.json).
func cardPath(a *Agent) string {
	return "/.well-known/agents/v" + a.cfg.Version + "/" + a.slug + "_agent.json"
}

// cardAgent resolves "{slug}_agent.json" (the unversioned route) or "v{version}/{slug}_agent.json".
func (c *Controller) cardAgent(rest string) *boundAgent {
	version, file, versioned := strings.Cut(rest, "/")
	if !versioned {
		file = rest
	}
	slug, ok := strings.CutSuffix(file, "_agent.json")
	if !ok || strings.Contains(file, "/") {
		return nil
	}
	a := c.bySlug[slug]
	if a == nil || (versioned && version != "v"+a.cfg.Version) {
		return nil
	}
	return a
}

func (c *Controller) serveAgentList(w http.ResponseWriter, _ *http.Request) {
	entries := make([]agentListEntry, 0, len(c.agents))
	for _, a := range c.agents {
		entries = append(entries, agentListEntry{
			Name:         a.cfg.Name,
			Description:  a.cfg.Description,
			Developer:    a.developerName(),
			Version:      a.cfg.Version,
			AgentCardURL: c.base + cardPath(a.Agent),
		})
	}
	writeJSON(w, http.StatusOK, struct {
		SchemaVersion string           `json:"schema_version"`
		Agents        []agentListEntry `json:"agents"`
	}{A2ASchemaVersion, entries})
}

// serveAgentInfo answers the card's "Get agent info" (read-scoped API key): the agent's entry of
// the Studio registration payload, with its introduction, full description and billing catalog.
func (c *Controller) serveAgentInfo(w http.ResponseWriter, r *http.Request, a *boundAgent) {
	if !c.authorize(w, r, scopeRead) {
		return
	}
	writeJSON(w, http.StatusOK, a.registrationContract(a.studioID))
}

func (c *Controller) serveCard(w http.ResponseWriter, a *boundAgent) {
	writeJSON(w, http.StatusOK, c.card(a.Agent))
}

// card builds an agent's card. Its agent API URL (/api/supervaizer/agents/{slug}/, "Get agent
// info") is served; like the reference's, the logo, human, OpenAPI and docs URLs are informative.
func (c *Controller) card(a *Agent) agentCard {
	base := c.base
	agentURL := base + agentInfoPrefix + a.slug + "/"
	card := agentCard{
		Name:        a.cfg.Name,
		Description: a.cfg.Description,
		Developer:   cardDeveloper{Name: a.developerName(), URL: "https://supervaize.com/", Email: "info@supervaize.com"},
		Version:     a.cfg.Version,
		VersionInfo: cardVersionInfo{Current: a.cfg.Version, Latest: a.cfg.Version, ChangelogURL: a.cfg.ReleaseNotesURL},
		LogoURL:     base + "/static/agents/" + a.slug + "_logo.png",
		HumanURL:    base + agentInfoPrefix + a.slug + humanPageFile,
		ContactInformation: map[string]any{
			"general": map[string]string{"email": "support@supervaize.com"},
		},
		APIEndpoints: []cardAPIEndpoint{{
			Type:        "json",
			URL:         agentURL,
			Name:        "Supervaize API - A2A protocol support",
			Description: "RESTful API for " + a.cfg.Name + " agent",
			OpenAPIURL:  base + "/openapi.json",
			DocsURL:     base + "/docs",
			Examples: []cardExample{{
				Name:        "Get agent info",
				Description: "Retrieve information about the agent",
				Request:     map[string]string{"method": "GET", "url": agentURL},
			}},
		}},
		Tools: []any{},
		Authentication: cardAuthentication{
			Type:        "api_key",
			In:          "header",
			Name:        "X-API-Key",
			Description: "Studio calls POST /a2a with the controller's X-API-Key and a workspace grant token in X-Supervaize-Workspace-Authorization",
		},
	}
	if a.cfg.Registration != nil {
		card.Supervaizer = &cardExtension{V2: a.cfg.Registration}
	}
	return card
}

type healthStats struct {
	TotalJobs      int `json:"total_jobs"`
	CompletedJobs  int `json:"completed_jobs"`
	FailedJobs     int `json:"failed_jobs"`
	InProgressJobs int `json:"in_progress_jobs"`
	SuccessRate    int `json:"success_rate"`
}

type agentHealth struct {
	AgentID       string      `json:"agent_id"`
	AgentServerID *string     `json:"agent_server_id"`
	Name          string      `json:"name"`
	Status        string      `json:"status"`
	Version       string      `json:"version"`
	Statistics    healthStats `json:"statistics"`
}

// serveHealth reports the controller as operational. A stateless controller tracks no v1 jobs,
// so every agent is "available" with zero jobs and the reference's integer success rate of 100.
func (c *Controller) serveHealth(w http.ResponseWriter, _ *http.Request) {
	agents := make(map[string]agentHealth, len(c.agents))
	for _, a := range c.agents {
		h := agentHealth{
			AgentID:    a.id,
			Name:       a.cfg.Name,
			Status:     "available",
			Version:    a.cfg.Version,
			Statistics: healthStats{SuccessRate: 100},
		}
		if a.studioID != "" {
			h.AgentServerID = &a.studioID
		}
		agents[a.id] = h
	}
	writeJSON(w, http.StatusOK, struct {
		SchemaVersion string                 `json:"schema_version"`
		Status        string                 `json:"status"`
		Timestamp     string                 `json:"timestamp"`
		Agents        map[string]agentHealth `json:"agents"`
	}{A2ASchemaVersion, "operational", isoformat(c.now()), agents})
}

// isoformat formats t like Python's datetime.isoformat() of an aware UTC datetime:
// microseconds only when non-zero, "+00:00" offset.
func isoformat(t time.Time) string {
	t = t.UTC()
	if t.Nanosecond()/1000 == 0 {
		return t.Format("2006-01-02T15:04:05") + "+00:00"
	}
	return t.Format("2006-01-02T15:04:05.000000") + "+00:00"
}
