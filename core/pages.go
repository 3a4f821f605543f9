package core

import (
	_ "embed"
	"net/http"
	"strings"
)

// The Agent Card names a logo, a human page, an OpenAPI document and API docs (spec §1.2: the
// members are always present). The controller serves all four, publicly like the card itself, so
// that no URL it publishes answers 404. They show what the card and the registration already
// publish, nothing more.
const (
	openAPIPath    = "/openapi.json"
	docsPath       = "/docs"
	logoPrefix     = "/static/agents/"
	logoSuffix     = "_logo.png"
	humanPageFile  = "/supervaize_instructions.html"
	htmlPagePolicy = "default-src 'none'; style-src 'unsafe-inline'; img-src 'self'"
)

// agentLogo is the logo of every agent (64×64 PNG).
//
//go:embed static/agent_logo.png
var agentLogo []byte

// servePage answers the card's other URLs (resolved by resolve).
func (c *Controller) servePage(w http.ResponseWriter, r *http.Request, e endpoint) {
	switch e.kind {
	case endpointOpenAPI:
		c.route(w, r, http.MethodGet, func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, http.StatusOK, c.openAPI()) })
	case endpointDocs:
		c.route(w, r, http.MethodGet, func(w http.ResponseWriter, _ *http.Request) { writeHTML(w, c.docsPage()) })
	case endpointLogo:
		c.route(w, r, http.MethodGet, func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "image/png")
			w.Header().Set("Cache-Control", "public, max-age=86400")
			_, _ = w.Write(agentLogo)
		})
	case endpointHumanPage:
		c.route(w, r, http.MethodGet, func(w http.ResponseWriter, _ *http.Request) { writeHTML(w, c.humanPage(e.agent)) })
	}
}

// escapeHTML is html.EscapeString, without package html's entity table (100 KB in every binary,
// the Lambda bootstrap included, for a decoder the pages never use).
func escapeHTML(s string) string { return htmlEscaper.Replace(s) }

var htmlEscaper = strings.NewReplacer(`&`, "&amp;", `'`, "&#39;", `<`, "&lt;", `>`, "&gt;", `"`, "&#34;")

func writeHTML(w http.ResponseWriter, page string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", htmlPagePolicy)
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write([]byte(page))
}

// page wraps body in the HTML of every page; title and body are already escaped.
func page(title, body string) string {
	return `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>` + title +
		`</title><style>body{font-family:system-ui,sans-serif;max-width:48rem;margin:2rem auto;padding:0 1rem;line-height:1.5}` +
		`code{background:#f3f4f6;padding:0 .25rem}td{padding:.2rem .6rem;vertical-align:top}</style></head><body>` + body + `</body></html>`
}

// humanPage is the card's human_url: what an operator reads about the agent.
func (c *Controller) humanPage(a *boundAgent) string {
	e := escapeHTML
	var b strings.Builder
	b.WriteString(`<h1><img src="` + e(c.base+logoPrefix+a.slug+logoSuffix) + `" alt="" width="32" height="32"> ` + e(a.cfg.Name) + `</h1>`)
	if a.cfg.Description != "" {
		b.WriteString(`<p>` + e(a.cfg.Description) + `</p>`)
	}
	b.WriteString(`<table><tr><td>slug</td><td><code>` + e(a.slug) + `</code></td></tr><tr><td>version</td><td>` + e(a.cfg.Version) +
		`</td></tr><tr><td>developer</td><td>` + e(a.developerName()) + `</td></tr></table>`)
	if reg := a.cfg.Registration; reg != nil {
		b.WriteString(`<h2>Surfaces</h2><ul>`)
		for _, id := range reg.Capabilities.Surfaces {
			b.WriteString(`<li><code>` + e(id) + `</code></li>`)
		}
		b.WriteString(`</ul><h2>Actions</h2><ul>`)
		for _, def := range reg.Capabilities.Actions {
			b.WriteString(`<li><code>` + e(def.ID) + `</code></li>`)
		}
		b.WriteString(`</ul>`)
	}
	b.WriteString(`<p>Studio drives this agent through <code>POST ` + e(c.base) + `/a2a</code> (JSON-RPC, <code>X-API-Key</code> and a workspace grant). ` +
		`Machine-readable: <a href="` + e(c.base+cardPath(a.Agent)) + `">Agent Card</a>, <a href="` + e(c.base+openAPIPath) + `">OpenAPI</a>, ` +
		`<a href="` + e(c.base+docsPath) + `">API docs</a>.</p>`)
	return page(e(a.cfg.Name), b.String())
}

// docsPage is the card's docs_url: the controller's routes, in words.
func (c *Controller) docsPage() string {
	e := escapeHTML
	var b strings.Builder
	b.WriteString(`<h1>Supervaizer controller API</h1><p>The routes of this controller. The same in OpenAPI 3.1: <a href="` +
		e(c.base+openAPIPath) + `">openapi.json</a>.</p><table>`)
	for _, r := range c.routes() {
		b.WriteString(`<tr><td><code>` + e(r.method+" "+r.path) + `</code></td><td>` + e(r.summary) + ` <em>(` + e(r.auth) + `)</em></td></tr>`)
	}
	b.WriteString(`</table><h2>Agents</h2><ul>`)
	for _, a := range c.agents {
		b.WriteString(`<li><a href="` + e(c.base+agentInfoPrefix+a.slug+humanPageFile) + `">` + e(a.cfg.Name) + `</a>: <a href="` +
			e(c.base+cardPath(a.Agent)) + `">Agent Card</a></li>`)
	}
	b.WriteString(`</ul>`)
	return page("Supervaizer controller API", b.String())
}

// apiRoute is one route of the controller, for the docs and the OpenAPI document.
type apiRoute struct {
	method, path, summary, auth string
	op                          map[string]any // the OpenAPI operation's other members
}

func (c *Controller) routes() []apiRoute {
	ok := func(desc, typ string) map[string]any {
		return map[string]any{"responses": map[string]any{"200": map[string]any{"description": desc, "content": map[string]any{typ: map[string]any{}}}}}
	}
	keyed := func(op map[string]any, scheme ...string) map[string]any {
		req := map[string]any{}
		for _, s := range scheme {
			req[s] = []string{}
		}
		op["security"] = []any{req}
		op["responses"].(map[string]any)["401"] = map[string]any{"description": "Invalid or missing API key"}
		return op
	}
	slug := []any{map[string]any{"name": "slug", "in": "path", "required": true, "schema": map[string]any{"type": "string"}}}
	rpc := keyed(ok("A JSON-RPC 2.0 response (errors too are HTTP 200)", "application/json"), "APIKey", "WorkspaceGrant")
	rpc["requestBody"] = map[string]any{"required": true, "content": map[string]any{"application/json": map[string]any{}}}
	rpc["responses"].(map[string]any)["413"] = map[string]any{"description": "Request body too large"}
	info := keyed(ok("The agent's entry of the Studio registration payload", "application/json"), "APIKey")
	info["parameters"] = slug
	card := ok("The Agent Card", "application/json")
	card["parameters"] = append([]any{map[string]any{"name": "version", "in": "path", "required": true, "schema": map[string]any{"type": "string"}}}, slug...)
	human := ok("The agent's page", "text/html")
	human["parameters"] = slug
	logo := ok("The agent's logo", "image/png")
	logo["parameters"] = slug
	routes := []apiRoute{
		{"GET", "/.well-known/agents.json", "The agents this controller serves", "public", ok("Agent list", "application/json")},
		{"GET", "/.well-known/agents/v{version}/{slug}_agent.json", "An agent's Agent Card (also without v{version}/)", "public", card},
		{"GET", "/.well-known/health", "Health of the controller and its agents", "public", ok("Health", "application/json")},
		{"POST", "/a2a", "JSON-RPC 2.0: supervaizer/action.invoke and supervaizer/surface.load", "X-API-Key and X-Supervaize-Workspace-Authorization", rpc},
		{"GET", "/a2a/events", "The effect stream (server-sent events; Last-Event-ID replays; with a workspace token, that workspace's events only)",
			"X-API-Key, read scope; optionally X-Supervaize-Workspace-Authorization (scope supervaizer/events) with X-Supervaize-Agent-Slug and X-Supervaize-Workspace-Id",
			keyed(ok("Effect events", "text/event-stream"), "APIKey")},
		{"GET", agentInfoPrefix + "{slug}/", "Get agent info", "X-API-Key, read scope", info},
		{"GET", agentInfoPrefix + "{slug}" + humanPageFile, "The agent's page for people", "public", human},
		{"GET", logoPrefix + "{slug}" + logoSuffix, "The agent's logo", "public", logo},
	}
	// The DataResource routes (spec §8), for agents that declare DataResources.
	data := func(method, suffix, summary, auth, desc string, status string, item bool) apiRoute {
		op := keyed(ok(desc, "application/json"), "APIKey", "WorkspaceGrant")
		if status != "200" {
			rs := op["responses"].(map[string]any)
			rs[status] = rs["200"]
			delete(rs, "200")
		}
		params := append([]any{}, slug...)
		params = append(params, map[string]any{"name": "name", "in": "path", "required": true, "schema": map[string]any{"type": "string"}})
		if item {
			params = append(params, map[string]any{"name": "item_id", "in": "path", "required": true, "schema": map[string]any{"type": "string"}})
		}
		op["parameters"] = params
		if method == "POST" || method == "PUT" {
			op["requestBody"] = map[string]any{"required": true, "content": map[string]any{"application/json": map[string]any{}}}
		}
		return apiRoute{method, dataPrefix + "{slug}/data/{name}/" + suffix, summary, auth, op}
	}
	grantRead, grantWrite := "X-API-Key (read) and the workspace grant", "X-API-Key (write) and the workspace grant"
	routes = append(routes,
		data("GET", "", "List a DataResource's items (skip, limit)", grantRead, "Items", "200", false),
		data("POST", "", "Create an item", grantWrite, "The created item", "201", false),
		data("GET", "{item_id}", "Get an item", grantRead, "The item", "200", true),
		data("PUT", "{item_id}", "Update an item", grantWrite, "The updated item", "200", true),
		data("DELETE", "{item_id}", "Delete an item", grantWrite, `{"deleted": true}`, "200", true),
		data("POST", "import/", "Import items", grantWrite, "The import outcome", "200", false),
	)
	return append(routes,
		apiRoute{"GET", openAPIPath, "This document in OpenAPI 3.1", "public", ok("OpenAPI document", "application/json")},
		apiRoute{"GET", docsPath, "These routes in HTML", "public", ok("API docs", "text/html")},
	)
}

// openAPI is the card's openapi_url: the controller's routes as an OpenAPI 3.1 document.
func (c *Controller) openAPI() map[string]any {
	paths := map[string]any{}
	for _, r := range c.routes() {
		op := map[string]any{"summary": r.summary}
		for k, v := range r.op {
			op[k] = v
		}
		item, _ := paths[r.path].(map[string]any)
		if item == nil {
			item = map[string]any{}
			paths[r.path] = item
		}
		item[strings.ToLower(r.method)] = op
	}
	doc := map[string]any{
		"openapi": "3.1.0",
		"info":    map[string]any{"title": "Supervaizer controller", "version": "1.0", "description": "A Supervaizer v2 controller (svz)."},
		"paths":   paths,
		"components": map[string]any{"securitySchemes": map[string]any{
			"APIKey":         map[string]any{"type": "apiKey", "in": "header", "name": "X-API-Key"},
			"WorkspaceGrant": map[string]any{"type": "apiKey", "in": "header", "name": GrantHeader, "description": "Bearer <Studio-signed workspace-grant token>"},
		}},
	}
	if c.base != "" {
		doc["servers"] = []any{map[string]any{"url": c.base}}
	}
	return doc
}
