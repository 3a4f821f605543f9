// Package devstudio is a local stand-in for Supervaize Studio, for development and tests only
// (`svz dev studio` serves it; tests start it in-process). It plays the parts of Studio a
// controller meets: it accepts server.register and answers the handshake (or, on request, each of
// its failures), signs workspace-grant tokens for one or more workspaces and publishes their JWKS,
// serves the agent lookup with parameters encrypted to the key the controller registered, serves
// context open and search, answers rule checkpoints with scripted decisions, and records every
// controller event and checkpoint it receives (GET /events).
//
// It is not Studio: it keeps everything in memory, trusts its loopback callers (POST /token mints
// without authentication) and must never face a network. Nothing in a deployed controller
// depends on it. Its crypto (parameter encryption, token signing through package granttest) is
// written independently of the controller's, so a test through it checks one implementation
// against another.
package devstudio

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/supervaize/svz/core/grant/granttest"
)

// Defaults of the stand-in. The key and issuer are well known: they are not secrets.
const (
	DefaultWorkspace = "dev-workspace"
	DefaultAPIKey    = "svz-dev-studio-key"
	DefaultIssuer    = "https://studio.svz-dev.invalid"
	DefaultTokenTTL  = 10 * time.Minute
	maxTokenTTL      = 24 * time.Hour
	maxBody          = 4 << 20
)

// Handshake answers to server.register. Valid is the default; every other value makes the
// stand-in answer one failure of spec §7.3 (or of the transport) instead.
const (
	HandshakeValid                    = "valid"
	HandshakeNoObject                 = "no-object"
	HandshakeNoHandshake              = "no-handshake"
	HandshakeKeyMismatch              = "key-mismatch"
	HandshakeNoWorkspaceAuthorization = "no-workspace-authorization"
	HandshakeNoAudience               = "no-audience"
	HandshakeWrongAudience            = "wrong-audience"
	HandshakeNoAgents                 = "no-agents"
	HandshakeBindingNotObject         = "binding-not-object"
	HandshakeBindingNoID              = "binding-no-id"
	HandshakeBindingNoSlug            = "binding-no-slug"
	HandshakeMissingAgent             = "missing-agent"
	HandshakeWrongAgentID             = "wrong-agent-id"
	HandshakeHTTP401                  = "http-401"
	HandshakeHTTP403                  = "http-403"
	HandshakeHTTP500                  = "http-500"
	HandshakeNonJSON                  = "non-json"
	HandshakeHang                     = "hang"
)

// HandshakeAnswers lists every accepted handshake answer.
var HandshakeAnswers = []string{
	HandshakeValid, HandshakeNoObject, HandshakeNoHandshake, HandshakeKeyMismatch, HandshakeNoWorkspaceAuthorization,
	HandshakeNoAudience, HandshakeWrongAudience, HandshakeNoAgents, HandshakeBindingNotObject, HandshakeBindingNoID,
	HandshakeBindingNoSlug, HandshakeMissingAgent, HandshakeWrongAgentID, HandshakeHTTP401, HandshakeHTTP403,
	HandshakeHTTP500, HandshakeNonJSON, HandshakeHang,
}

// ContextItem is one context item the stand-in serves (Studio's ContextOpenResponse members).
type ContextItem struct {
	Ref          string           `json:"ref"`
	Title        string           `json:"title"`
	Scope        string           `json:"scope"`
	SourceType   string           `json:"source_type"`
	Version      int              `json:"version"`
	Instructions string           `json:"instructions"`
	Tags         []string         `json:"tags"`
	Content      string           `json:"content"`
	Citations    []map[string]any `json:"citations"`
}

// Config configures a stand-in.
type Config struct {
	// Workspaces are the workspace slugs served ([DefaultWorkspace] when empty). Each has its own
	// signing key and JWKS; its id in tokens is "ws-" + slug.
	Workspaces []string
	// APIKey is the SUPERVAIZE_API_KEY accepted (DefaultAPIKey when empty).
	APIKey string
	// Issuer is the iss of the tokens (DefaultIssuer when empty).
	Issuer string
	// Handshake is the answer to server.register (HandshakeValid when empty).
	Handshake string
	// Parameters are, per agent slug, the parameter values served by the agent lookup.
	Parameters map[string]map[string]string
	// Context are the items context open and search serve.
	Context []ContextItem
	// Checkpoints are the decisions per phase (before, after): allow, pause or stop; allow when
	// unset.
	Checkpoints map[string]string
	Logger      *slog.Logger
	Now         func() time.Time
}

// Server is a running stand-in. It is safe for concurrent use.
type Server struct {
	cfg        Config
	workspaces map[string]*workspace // by slug
	log        *slog.Logger
	now        func() time.Time
	url        string
	srv        *http.Server
	done       chan struct{}

	mu        sync.Mutex
	lookups   int
	handshake string
	servers   map[string]*registered // by workspace slug + "/" + server id
	events    []Recorded
	context   []ContextItem
	// checkpoints are the scripted decisions per phase; answered are the checkpoints answered,
	// by workspace, occurrence, phase and snapshot: Studio's checkpoints are idempotent, so the
	// same checkpoint sent again gets the same answer.
	checkpoints map[string]string
	answered    map[string]Recorded
}

type workspace struct {
	slug, id string
	issuer   *granttest.Issuer
}

// registered is a controller that registered.
type registered struct {
	ws             string
	serverID       string
	url            string
	publicKey      *rsa.PublicKey
	apiKeyFP       string
	studioServerID string
	agentIDs       map[string]string // slug → Studio agent id
	names          map[string]string // slug → name
	at             time.Time
}

// Recorded is one call the stand-in received: a controller event or a rule checkpoint. Secrets
// (the controller's API key in server.register, checkpoint tokens) appear as fingerprints only.
type Recorded struct {
	Seq        int             `json:"seq"`
	Kind       string          `json:"kind"` // ctrl-event or rule-checkpoint
	Workspace  string          `json:"workspace"`
	EventType  string          `json:"event_type,omitempty"`
	ObjectType string          `json:"object_type,omitempty"`
	Source     json.RawMessage `json:"source,omitempty"`
	Details    json.RawMessage `json:"details,omitempty"`
	// Checkpoint calls: the request body, the token's fingerprint, the decision answered and the
	// checkpoint's id and input hash (what rule.checkpoint.resume names).
	Request          json.RawMessage `json:"request,omitempty"`
	TokenFingerprint string          `json:"token_fingerprint,omitempty"`
	Decision         string          `json:"decision,omitempty"`
	CheckpointID     string          `json:"checkpoint_id,omitempty"`
	InputHash        string          `json:"input_hash,omitempty"`
	Answer           string          `json:"answer,omitempty"` // the handshake answer given
	ReceivedAt       time.Time       `json:"received_at"`
}

// New returns a stand-in for cfg, not yet listening (see Start, or use Handler).
func New(cfg Config) (*Server, error) {
	if len(cfg.Workspaces) == 0 {
		cfg.Workspaces = []string{DefaultWorkspace}
	}
	if cfg.APIKey == "" {
		cfg.APIKey = DefaultAPIKey
	}
	if cfg.Issuer == "" {
		cfg.Issuer = DefaultIssuer
	}
	if cfg.Handshake == "" {
		cfg.Handshake = HandshakeValid
	}
	if !slices.Contains(HandshakeAnswers, cfg.Handshake) {
		return nil, fmt.Errorf("devstudio: handshake answer %q: want one of %s", cfg.Handshake, strings.Join(HandshakeAnswers, ", "))
	}
	if err := checkDecisions(cfg.Checkpoints); err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	s := &Server{cfg: cfg, workspaces: map[string]*workspace{}, log: cfg.Logger, now: cfg.Now, handshake: cfg.Handshake,
		servers: map[string]*registered{}, context: slices.Clone(cfg.Context), checkpoints: cloneMap(cfg.Checkpoints),
		answered: map[string]Recorded{}}
	for _, slug := range cfg.Workspaces {
		if slug == "" || strings.ContainsAny(slug, "/?#% ") {
			return nil, fmt.Errorf("devstudio: workspace slug %q: use letters, digits and hyphens", slug)
		}
		if s.workspaces[slug] != nil {
			return nil, fmt.Errorf("devstudio: workspace %q given twice", slug)
		}
		s.workspaces[slug] = &workspace{slug: slug, id: "ws-" + slug, issuer: granttest.NewIssuer("dev-" + slug)}
	}
	return s, nil
}

// Start serves the stand-in on addr, which must be a loopback address ("127.0.0.1:0" when
// empty), until ctx ends or Close is called.
func Start(ctx context.Context, cfg Config, addr string) (*Server, error) {
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("devstudio: listen address %q: %w", addr, err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return nil, fmt.Errorf("devstudio: listen address %q: the stand-in listens on a loopback IP only (e.g. 127.0.0.1:8800)", addr)
	}
	s, err := New(cfg)
	if err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("devstudio: %w", err)
	}
	s.url = "http://" + l.Addr().String()
	s.srv = &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second}
	s.done = make(chan struct{})
	go func() {
		defer close(s.done)
		_ = s.srv.Serve(l)
	}()
	go func() {
		select {
		case <-ctx.Done():
			_ = s.Close()
		case <-s.done:
		}
	}()
	return s, nil
}

// Close stops a started stand-in.
func (s *Server) Close() error {
	if s.srv == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := s.srv.Shutdown(ctx)
	if errors.Is(err, context.DeadlineExceeded) {
		err = s.srv.Close() // hanging handshakes end with their connections
	}
	<-s.done
	return err
}

// URL is the stand-in's base URL (SUPERVAIZE_API_URL), once started.
func (s *Server) URL() string { return s.url }

// APIKey is the SUPERVAIZE_API_KEY the stand-in accepts.
func (s *Server) APIKey() string { return s.cfg.APIKey }

// Issuer is the iss of the tokens it signs.
func (s *Server) Issuer() string { return s.cfg.Issuer }

// JWKSURL is the JWKS of a workspace, as SUPERVAIZER_WORKSPACE_AUTH_JWKS_URL holds it.
func (s *Server) JWKSURL(ws string) string {
	return s.url + "/w/" + ws + "/api/v1/workspace-agent-grants/jwks/"
}

// WorkspaceID is the id tokens carry for the workspace slug (the request's workspace.id).
func (s *Server) WorkspaceID(ws string) string {
	if w := s.workspaces[ws]; w != nil {
		return w.id
	}
	return ""
}

// SetHandshake changes the answer to the next server.register calls.
func (s *Server) SetHandshake(answer string) error {
	if !slices.Contains(HandshakeAnswers, answer) {
		return fmt.Errorf("devstudio: handshake answer %q: want one of %s", answer, strings.Join(HandshakeAnswers, ", "))
	}
	s.mu.Lock()
	s.handshake = answer
	s.mu.Unlock()
	return nil
}

// SetContext replaces the context items served (e.g. a new version of an item).
func (s *Server) SetContext(items []ContextItem) {
	s.mu.Lock()
	s.context = slices.Clone(items)
	s.mu.Unlock()
}

// Events returns what the stand-in recorded, oldest first.
func (s *Server) Events() []Recorded {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.events)
}

// Registration is what the stand-in knows of a registered controller.
type Registration struct {
	Workspace      string            `json:"workspace"`
	ServerID       string            `json:"server_id"`
	URL            string            `json:"url"`
	Audience       string            `json:"audience"`
	StudioServerID string            `json:"studio_server_id"`
	AgentIDs       map[string]string `json:"agent_ids"`
}

// Registrations lists the registered controllers.
func (s *Server) Registrations() []Registration {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Registration
	for _, r := range s.servers {
		out = append(out, r.registration())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Workspace+out[i].ServerID < out[j].Workspace+out[j].ServerID })
	return out
}

func (r *registered) registration() Registration {
	return Registration{Workspace: r.ws, ServerID: r.serverID, URL: r.url, Audience: audience(r.studioServerID),
		StudioServerID: r.studioServerID, AgentIDs: cloneMap(r.agentIDs)}
}

func cloneMap(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func audience(studioServerID string) string { return "supervaizer-server:" + studioServerID }

// shortID derives a stable id from parts.
func shortID(prefix string, parts ...string) string {
	sum := sha256.Sum256([]byte(strings.Join(parts, "\x00")))
	return prefix + hex.EncodeToString(sum[:6])
}

func fingerprint(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:6])
}

// Handler serves the stand-in's routes.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /w/{ws}/api/v1/ctrl-events/", s.serveEvent)
	mux.HandleFunc("GET /w/{ws}/api/v1/agents/by-slug/{slug}", s.serveAgentBySlug)
	mux.HandleFunc("GET /w/{ws}/api/v1/agents/{id}", s.serveAgentByID)
	mux.HandleFunc("POST /w/{ws}/api/v1/context/open/", s.serveContextOpen)
	mux.HandleFunc("POST /w/{ws}/api/v1/context/search/", s.serveContextSearch)
	mux.HandleFunc("GET /w/{ws}/api/v1/workspace-agent-grants/jwks/", s.serveJWKS)
	mux.HandleFunc("POST /api/v1/rule-checkpoints/", s.serveCheckpoint)
	mux.HandleFunc("POST /token", s.serveToken)
	mux.HandleFunc("GET /events", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"events": s.Events()})
	})
	mux.HandleFunc("GET /registrations", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"registrations": s.Registrations()})
	})
	return mux
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

func detail(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"detail": msg})
}

// account checks the Studio API key and the workspace of a workspace-scoped call, writing the
// refusal itself.
func (s *Server) account(w http.ResponseWriter, r *http.Request, ws string) (*workspace, bool) {
	if r.Header.Get("Authorization") != "Api-Key "+s.cfg.APIKey {
		detail(w, http.StatusUnauthorized, "Invalid API key.")
		return nil, false
	}
	wk := s.workspaces[ws]
	if wk == nil || r.Header.Get("workspace") != ws {
		detail(w, http.StatusForbidden, "You do not have Developer access to this workspace.")
		return nil, false
	}
	return wk, true
}

func decodeBody(w http.ResponseWriter, r *http.Request, v any) bool {
	r.Body = http.MaxBytesReader(w, r.Body, maxBody)
	if err := json.NewDecoder(r.Body).Decode(v); err != nil {
		detail(w, http.StatusBadRequest, "invalid JSON body: "+err.Error())
		return false
	}
	return true
}

func (s *Server) record(rec Recorded) Recorded {
	s.mu.Lock()
	defer s.mu.Unlock()
	rec.Seq = len(s.events) + 1
	rec.ReceivedAt = s.now().UTC()
	s.events = append(s.events, rec)
	return rec
}

// serveEvent receives a controller event; server.register gets the handshake.
func (s *Server) serveEvent(w http.ResponseWriter, r *http.Request) {
	ws := r.PathValue("ws")
	if _, ok := s.account(w, r, ws); !ok {
		return
	}
	var ev struct {
		Source     json.RawMessage `json:"source"`
		Workspace  string          `json:"workspace"`
		EventType  string          `json:"event_type"`
		ObjectType string          `json:"object_type"`
		Details    json.RawMessage `json:"details"`
	}
	if !decodeBody(w, r, &ev) {
		return
	}
	if ev.EventType == "" || ev.Workspace != ws {
		detail(w, http.StatusBadRequest, "event_type is required and workspace must be the URL's workspace")
		return
	}
	if ev.EventType != "server.register" {
		rec := s.record(Recorded{Kind: "ctrl-event", Workspace: ws, EventType: ev.EventType, ObjectType: ev.ObjectType, Source: ev.Source, Details: ev.Details})
		writeJSON(w, http.StatusOK, map[string]any{"id": rec.Seq})
		return
	}
	s.serveRegister(w, r, ws, ev.Source, ev.ObjectType, ev.Details)
}

// registerDetails are the members of server.register the stand-in reads.
type registerDetails struct {
	ServerID  string `json:"server_id"`
	URL       string `json:"url"`
	PublicKey string `json:"public_key"`
	APIKey    string `json:"api_key"`
	Agents    []struct {
		Slug string `json:"slug"`
		Name string `json:"name"`
	} `json:"agents"`
}

func (s *Server) serveRegister(w http.ResponseWriter, r *http.Request, ws string, source json.RawMessage, objectType string, raw json.RawMessage) {
	var d registerDetails
	var problems []string
	if err := json.Unmarshal(raw, &d); err != nil {
		problems = append(problems, "details must be an object: "+err.Error())
	}
	if len(d.ServerID) <= 5 {
		problems = append(problems, "details.server_id must be longer than 5 characters")
	}
	if !strings.HasPrefix(d.URL, "http://") && !strings.HasPrefix(d.URL, "https://") {
		problems = append(problems, "details.url must be an absolute URL")
	}
	if d.APIKey == "" {
		problems = append(problems, "details.api_key is required")
	}
	pub, err := parsePublicKey(d.PublicKey)
	if err != nil {
		problems = append(problems, "details.public_key: "+err.Error())
	}
	if len(d.Agents) == 0 {
		problems = append(problems, "details.agents must list the controller's agents")
	}
	for i, a := range d.Agents {
		if a.Slug == "" {
			problems = append(problems, fmt.Sprintf("details.agents[%d].slug is required", i))
		}
	}
	// Record the event with the controller's key replaced by its fingerprint.
	masked := raw
	var m map[string]any
	if json.Unmarshal(raw, &m) == nil {
		if k, ok := m["api_key"].(string); ok {
			m["api_key"] = "fingerprint:" + fingerprint(k)
		}
		masked, _ = json.Marshal(m)
	}
	s.mu.Lock()
	answer := s.handshake
	s.mu.Unlock()
	s.record(Recorded{Kind: "ctrl-event", Workspace: ws, EventType: "server.register", ObjectType: objectType, Source: source, Details: masked, Answer: answer})
	if len(problems) > 0 {
		detail(w, http.StatusBadRequest, strings.Join(problems, "; "))
		return
	}
	switch answer {
	case HandshakeHTTP401:
		detail(w, http.StatusUnauthorized, "Invalid API key.")
		return
	case HandshakeHTTP403:
		detail(w, http.StatusForbidden, "You do not have Developer access to this workspace.")
		return
	case HandshakeHTTP500:
		detail(w, http.StatusInternalServerError, "Internal server error")
		return
	case HandshakeNonJSON:
		w.Header().Set("Content-Type", "text/html")
		_, _ = w.Write([]byte("<html><body>Sign in to Supervaize Studio</body></html>"))
		return
	case HandshakeHang:
		<-r.Context().Done()
		return
	}
	reg := &registered{ws: ws, serverID: d.ServerID, url: d.URL, publicKey: pub, apiKeyFP: fingerprint(d.APIKey),
		studioServerID: shortID("studio-srv-", ws, d.ServerID), agentIDs: map[string]string{}, names: map[string]string{}, at: s.now()}
	var bindings []any
	for _, a := range d.Agents {
		reg.agentIDs[a.Slug] = shortID("studio-agent-", ws, d.ServerID, a.Slug)
		reg.names[a.Slug] = a.Name
		bindings = append(bindings, map[string]any{"id": reg.agentIDs[a.Slug], "slug": a.Slug})
	}
	wa := map[string]any{"audience": audience(reg.studioServerID), "studio_server_id": reg.studioServerID, "agents": bindings}
	hs := map[string]any{"server_id": d.ServerID, "controller_api_key_match": true,
		"stored_controller_api_key_fingerprint": reg.apiKeyFP, "reason": "stored", "workspace_authorization": wa}
	resp := map[string]any{"id": reg.studioServerID, "supervaizer_handshake": hs}
	switch answer {
	case HandshakeNoObject:
		writeJSON(w, http.StatusOK, "registered")
		return
	case HandshakeNoHandshake:
		delete(resp, "supervaizer_handshake")
		resp["name"] = "server"
	case HandshakeKeyMismatch:
		hs["controller_api_key_match"] = false
		hs["stored_controller_api_key_fingerprint"] = fingerprint("another key")
		hs["reason"] = "stored key differs"
	case HandshakeNoWorkspaceAuthorization:
		delete(hs, "workspace_authorization")
	case HandshakeNoAudience:
		wa["audience"] = " "
	case HandshakeWrongAudience:
		wa["audience"] = audience("another-studio-server")
	case HandshakeNoAgents:
		delete(wa, "agents")
	case HandshakeBindingNotObject:
		wa["agents"] = []any{"not an object"}
	case HandshakeBindingNoID:
		wa["agents"] = []any{map[string]any{"slug": d.Agents[0].Slug}}
	case HandshakeBindingNoSlug:
		wa["agents"] = []any{map[string]any{"id": "studio-agent-x"}}
	case HandshakeMissingAgent:
		wa["agents"] = []any{}
	case HandshakeWrongAgentID:
		for _, b := range bindings {
			b.(map[string]any)["id"] = b.(map[string]any)["id"].(string) + "-other"
		}
	}
	if answer == HandshakeValid {
		s.mu.Lock()
		s.servers[ws+"/"+d.ServerID] = reg
		s.mu.Unlock()
		s.log.Info("controller registered", "workspace", ws, "server_id", d.ServerID, "url", d.URL, "agents", len(d.Agents))
	}
	writeJSON(w, http.StatusOK, resp)
}

func parsePublicKey(p string) (*rsa.PublicKey, error) {
	block, _ := pem.Decode([]byte(p))
	if block == nil || block.Type != "PUBLIC KEY" {
		return nil, errors.New("not a PEM public key")
	}
	k, err := x509.ParsePKIXPublicKey(block.Bytes)
	if err != nil {
		return nil, err
	}
	rk, ok := k.(*rsa.PublicKey)
	if !ok {
		return nil, fmt.Errorf("a %T key, not RSA", k)
	}
	return rk, nil
}

// latest returns the most recent registration in ws that serves slug.
func (s *Server) latest(ws, slug string) *registered {
	s.mu.Lock()
	defer s.mu.Unlock()
	var best *registered
	for _, r := range s.servers {
		if r.ws == ws && r.agentIDs[slug] != "" && (best == nil || r.at.After(best.at)) {
			best = r
		}
	}
	return best
}

func (s *Server) serveAgentBySlug(w http.ResponseWriter, r *http.Request) {
	ws := r.PathValue("ws")
	if _, ok := s.account(w, r, ws); !ok {
		return
	}
	slug := r.PathValue("slug")
	reg := s.latest(ws, slug)
	if reg == nil {
		detail(w, http.StatusNotFound, "No agent with this slug in the workspace.")
		return
	}
	s.writeAgent(w, reg, slug)
}

func (s *Server) serveAgentByID(w http.ResponseWriter, r *http.Request) {
	ws := r.PathValue("ws")
	if _, ok := s.account(w, r, ws); !ok {
		return
	}
	id := r.PathValue("id")
	s.mu.Lock()
	var reg *registered
	var slug string
	for _, rg := range s.servers {
		for sl, aid := range rg.agentIDs {
			if rg.ws == ws && aid == id && (reg == nil || rg.at.After(reg.at)) {
				reg, slug = rg, sl
			}
		}
	}
	s.mu.Unlock()
	if reg == nil {
		detail(w, http.StatusNotFound, "No agent with this id in the workspace.")
		return
	}
	s.writeAgent(w, reg, slug)
}

// AgentLookups counts the agent lookups answered.
func (s *Server) AgentLookups() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lookups
}

// writeAgent answers the agent lookup; configured agents carry their parameters encrypted to
// the key their controller registered.
func (s *Server) writeAgent(w http.ResponseWriter, reg *registered, slug string) {
	s.mu.Lock()
	s.lookups++
	s.mu.Unlock()
	out := map[string]any{"id": reg.agentIDs[slug], "slug": slug, "name": reg.names[slug], "status": "active",
		"onboarding_status": "pending", "parameters_encrypted": nil}
	if params := s.cfg.Parameters[slug]; len(params) > 0 {
		names := make([]string, 0, len(params))
		for n := range params {
			names = append(names, n)
		}
		sort.Strings(names)
		list := make([]map[string]string, 0, len(names))
		for _, n := range names {
			list = append(list, map[string]string{"name": n, "value": params[n]})
		}
		plain, _ := json.Marshal(list)
		enc, err := Encrypt(reg.publicKey, plain)
		if err != nil {
			detail(w, http.StatusInternalServerError, "encrypting the parameters: "+err.Error())
			return
		}
		out["onboarding_status"] = "configured"
		out["parameters_encrypted"] = enc
	}
	writeJSON(w, http.StatusOK, out)
}

// Encrypt encrypts plain to pub the way Studio does (spec §7.5): base64 of
// RSA-OAEP-SHA256(AES key) ‖ IV ‖ AES-256-CBC(PKCS#7-padded plain).
func Encrypt(pub *rsa.PublicKey, plain []byte) (string, error) {
	key := make([]byte, 32)
	iv := make([]byte, aes.BlockSize)
	if _, err := rand.Read(key); err != nil {
		return "", err
	}
	if _, err := rand.Read(iv); err != nil {
		return "", err
	}
	wrapped, err := rsa.EncryptOAEP(sha256.New(), rand.Reader, pub, key, nil)
	if err != nil {
		return "", err
	}
	pad := aes.BlockSize - len(plain)%aes.BlockSize
	padded := append(slices.Clone(plain), make([]byte, pad)...)
	for i := len(plain); i < len(padded); i++ {
		padded[i] = byte(pad)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return "", err
	}
	ct := make([]byte, len(padded))
	cipher.NewCBCEncrypter(block, iv).CryptBlocks(ct, padded)
	return base64.StdEncoding.EncodeToString(slices.Concat(wrapped, iv, ct)), nil
}

func (s *Server) serveJWKS(w http.ResponseWriter, r *http.Request) {
	wk := s.workspaces[r.PathValue("ws")]
	if wk == nil {
		detail(w, http.StatusNotFound, "Not found.")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "public, max-age=300")
	_, _ = w.Write(granttest.JWKS(wk.issuer.JWK()))
}

// TokenRequest asks the stand-in for a workspace-grant token.
type TokenRequest struct {
	// Workspace is the workspace slug (or its id).
	Workspace string `json:"workspace"`
	// Agent is the agent slug; a controller serving it must have registered in the workspace.
	Agent string `json:"agent"`
	// Scopes are the granted scopes, e.g. supervaizer/action.invoke and job.start.
	Scopes []string `json:"scopes"`
	// TTLSeconds is the token's lifetime (600 when 0, at most a day).
	TTLSeconds int `json:"ttl_seconds,omitempty"`
	// GrantID is the grant's id (dev-grant-<workspace> when empty).
	GrantID string `json:"grant_id,omitempty"`
	// AgentWorkspaceRef is the optional agent-side workspace binding.
	AgentWorkspaceRef string `json:"agent_workspace_ref,omitempty"`
}

// Token is a minted token and its claims.
type Token struct {
	Token  string         `json:"token"`
	Claims map[string]any `json:"claims"`
}

// MintToken signs a token for req as Studio would for the registered controller serving the
// agent.
func (s *Server) MintToken(req TokenRequest) (*Token, error) {
	var wk *workspace
	for _, w := range s.workspaces {
		if w.slug == req.Workspace || w.id == req.Workspace {
			wk = w
		}
	}
	if wk == nil {
		return nil, fmt.Errorf("unknown workspace %q (this stand-in serves %s)", req.Workspace, strings.Join(s.cfg.Workspaces, ", "))
	}
	if len(req.Scopes) == 0 {
		return nil, errors.New("scopes are required, e.g. [\"supervaizer/action.invoke\", \"job.start\"]")
	}
	for _, sc := range req.Scopes {
		if strings.TrimSpace(sc) == "" {
			return nil, errors.New("scopes must not be blank")
		}
	}
	ttl := time.Duration(req.TTLSeconds) * time.Second
	if ttl == 0 {
		ttl = DefaultTokenTTL
	}
	if ttl < 0 || ttl > maxTokenTTL {
		return nil, fmt.Errorf("ttl_seconds must be from 1 to %d", int(maxTokenTTL/time.Second))
	}
	reg := s.latest(wk.slug, req.Agent)
	if reg == nil {
		return nil, fmt.Errorf("no controller serving agent %q has registered in workspace %q: start it with the Studio settings, or run svz studio register", req.Agent, wk.slug)
	}
	grantID := req.GrantID
	if grantID == "" {
		grantID = "dev-grant-" + wk.slug
	}
	now := s.now()
	jti := make([]byte, 9)
	_, _ = rand.Read(jti)
	claims := map[string]any{
		"iss": s.cfg.Issuer, "aud": audience(reg.studioServerID), "sub": "workspace-agent-grant:" + grantID,
		"grant_id": grantID, "workspace_id": wk.id, "workspace_slug": wk.slug,
		"agent_id": reg.agentIDs[req.Agent], "agent_slug": req.Agent, "server_id": reg.studioServerID,
		"scopes": req.Scopes, "iat": now.Unix(), "exp": now.Add(ttl).Unix(), "jti": base64.RawURLEncoding.EncodeToString(jti),
	}
	if req.AgentWorkspaceRef != "" {
		claims["agent_workspace_ref"] = req.AgentWorkspaceRef
	}
	return &Token{Token: wk.issuer.Token(claims), Claims: claims}, nil
}

func (s *Server) serveToken(w http.ResponseWriter, r *http.Request) {
	var req TokenRequest
	if !decodeBody(w, r, &req) {
		return
	}
	tok, err := s.MintToken(req)
	if err != nil {
		detail(w, http.StatusBadRequest, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, tok)
}

// serveCheckpoint answers a rule checkpoint with the decision scripted for its phase.
func (s *Server) serveCheckpoint(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") != "Api-Key "+s.cfg.APIKey {
		detail(w, http.StatusUnauthorized, "Invalid API key.")
		return
	}
	ws := r.Header.Get("workspace")
	if s.workspaces[ws] == nil {
		detail(w, http.StatusForbidden, "You do not have Developer access to this workspace.")
		return
	}
	token := r.Header.Get("X-Rule-Checkpoint-Token")
	if token == "" {
		detail(w, http.StatusBadRequest, "X-Rule-Checkpoint-Token is required.")
		return
	}
	var raw json.RawMessage
	if !decodeBody(w, r, &raw) {
		return
	}
	var req struct {
		OccurrenceID string          `json:"occurrence_id"`
		Phase        string          `json:"phase"`
		SnapshotHash string          `json:"snapshot_hash"`
		Context      json.RawMessage `json:"context"`
	}
	if err := json.Unmarshal(raw, &req); err != nil || (req.Phase != "before" && req.Phase != "after") {
		detail(w, http.StatusBadRequest, "phase must be before or after")
		return
	}
	sum := sha256.Sum256(req.Context)
	rec := Recorded{Kind: "rule-checkpoint", Workspace: ws, Request: raw, TokenFingerprint: fingerprint(token),
		InputHash: hex.EncodeToString(sum[:])}
	key := strings.Join([]string{ws, req.OccurrenceID, req.Phase, req.SnapshotHash}, "\x00")
	s.mu.Lock()
	if first, ok := s.answered[key]; ok {
		rec.Decision, rec.CheckpointID, rec.InputHash = first.Decision, first.CheckpointID, first.InputHash
	} else {
		rec.Decision = s.checkpoints[req.Phase]
		if rec.Decision == "" {
			rec.Decision = "allow"
		}
		rec.CheckpointID = fmt.Sprintf("chk-%d", len(s.answered)+1)
		s.answered[key] = rec
	}
	s.mu.Unlock()
	rec = s.record(rec)
	writeJSON(w, http.StatusOK, map[string]any{"checkpoint_id": rec.CheckpointID, "status": rec.Decision,
		"snapshot_hash": req.SnapshotHash, "input_hash": rec.InputHash})
}

// SetCheckpoints replaces the scripted decisions per phase (before, after: allow, pause or
// stop; allow when unset). Checkpoints answered already keep their answer.
func (s *Server) SetCheckpoints(decisions map[string]string) error {
	if err := checkDecisions(decisions); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.checkpoints = cloneMap(decisions)
	return nil
}

func checkDecisions(decisions map[string]string) error {
	for phase, d := range decisions {
		if phase != "before" && phase != "after" {
			return fmt.Errorf("devstudio: checkpoint phase %q: want before or after", phase)
		}
		if d != "allow" && d != "pause" && d != "stop" {
			return fmt.Errorf("devstudio: checkpoint decision %q for %s: want allow, pause or stop", d, phase)
		}
	}
	return nil
}

func (s *Server) items() []ContextItem {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.context)
}

func (s *Server) serveContextOpen(w http.ResponseWriter, r *http.Request) {
	if _, ok := s.account(w, r, r.PathValue("ws")); !ok {
		return
	}
	var req struct {
		Ref      string `json:"ref"`
		MaxChars int    `json:"max_chars"`
	}
	if !decodeBody(w, r, &req) {
		return
	}
	for _, it := range s.items() {
		if it.Ref != req.Ref {
			continue
		}
		if req.MaxChars > 0 {
			if rs := []rune(it.Content); len(rs) > req.MaxChars {
				it.Content = string(rs[:req.MaxChars])
			}
		}
		writeJSON(w, http.StatusOK, withDefaults(it))
		return
	}
	detail(w, http.StatusNotFound, "Unknown context ref.")
}

func withDefaults(it ContextItem) ContextItem {
	if it.Tags == nil {
		it.Tags = []string{}
	}
	if it.Citations == nil {
		it.Citations = []map[string]any{}
	}
	if it.Scope == "" {
		it.Scope = "workspace"
	}
	if it.SourceType == "" {
		it.SourceType = "document"
	}
	return it
}

func (s *Server) serveContextSearch(w http.ResponseWriter, r *http.Request) {
	if _, ok := s.account(w, r, r.PathValue("ws")); !ok {
		return
	}
	var req struct {
		Query string   `json:"query"`
		Limit int      `json:"limit"`
		Scope string   `json:"scope"`
		Tags  []string `json:"tags"`
	}
	if !decodeBody(w, r, &req) {
		return
	}
	if req.Limit <= 0 {
		req.Limit = 5
	}
	terms := strings.Fields(strings.ToLower(req.Query))
	type hit struct {
		it    ContextItem
		score int
	}
	var hits []hit
	for _, it := range s.items() {
		it = withDefaults(it)
		if req.Scope != "" && it.Scope != req.Scope {
			continue
		}
		if len(req.Tags) > 0 && !slices.ContainsFunc(req.Tags, func(t string) bool { return slices.Contains(it.Tags, t) }) {
			continue
		}
		text := strings.ToLower(it.Title + " " + it.Content + " " + strings.Join(it.Tags, " "))
		score := 0
		for _, t := range terms {
			score += strings.Count(text, t)
		}
		if score > 0 || len(terms) == 0 {
			hits = append(hits, hit{it, score})
		}
	}
	sort.SliceStable(hits, func(i, j int) bool { return hits[i].score > hits[j].score })
	results := []map[string]any{}
	for i, h := range hits {
		if i == req.Limit {
			break
		}
		excerpt := []rune(h.it.Content)
		if len(excerpt) > 200 {
			excerpt = excerpt[:200]
		}
		results = append(results, map[string]any{"ref": h.it.Ref, "title": h.it.Title, "scope": h.it.Scope,
			"source_type": h.it.SourceType, "version": h.it.Version, "tags": h.it.Tags, "excerpt": string(excerpt), "score": h.score,
			"citation": map[string]any{"ref": h.it.Ref, "title": h.it.Title, "source_type": h.it.SourceType, "version": h.it.Version}})
	}
	writeJSON(w, http.StatusOK, map[string]any{"query": req.Query, "results": results})
}

// LoadParameters reads a parameters file: {"agent-slug": {"NAME": "value", ...}, ...}.
func LoadParameters(path string) (map[string]map[string]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out map[string]map[string]string
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, fmt.Errorf("%s: want {\"agent-slug\": {\"NAME\": \"value\"}}: %w", path, err)
	}
	return out, nil
}

// LoadContext reads a context file: a list of items, or {"items": [...]}.
func LoadContext(path string) ([]ContextItem, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var items []ContextItem
	if err := json.Unmarshal(b, &items); err != nil {
		var wrapped struct {
			Items []ContextItem `json:"items"`
		}
		if err2 := json.Unmarshal(b, &wrapped); err2 != nil || wrapped.Items == nil {
			return nil, fmt.Errorf("%s: want a list of context items or {\"items\": [...]}: %w", path, err)
		}
		items = wrapped.Items
	}
	for i, it := range items {
		if it.Ref == "" || it.Version < 1 {
			return nil, fmt.Errorf("%s: item %d needs a ref and a version from 1", path, i)
		}
	}
	return items, nil
}

// Env is the environment that makes a controller Studio-connected to this stand-in for the
// workspace ws (the first workspace when empty), as KEY → value. controllerURL is the URL the
// controller will serve on.
func (s *Server) Env(ws, controllerURL string) map[string]string {
	if ws == "" {
		ws = s.cfg.Workspaces[0]
	}
	return map[string]string{
		"SUPERVAIZE_API_URL":                  s.url,
		"SUPERVAIZE_WORKSPACE_ID":             ws,
		"SUPERVAIZE_API_KEY":                  s.cfg.APIKey,
		"SUPERVAIZER_WORKSPACE_AUTH_REQUIRED": "true",
		"SUPERVAIZER_WORKSPACE_AUTH_ISSUER":   s.cfg.Issuer,
		"SUPERVAIZER_WORKSPACE_AUTH_JWKS_URL": s.JWKSURL(ws),
		"SUPERVAIZER_PUBLIC_URL":              controllerURL,
	}
}

// DevControllerKey is the controller API key the printed environment suggests: well known, for
// this machine only.
const DevControllerKey = "svz-dev-controller-key"

// EnvBlock is the shell environment that makes a controller serving at controllerURL
// Studio-connected to this stand-in for workspace ws (the first one when empty).
func (s *Server) EnvBlock(ws, controllerURL, privateKeyFile string) string {
	env := s.Env(ws, controllerURL)
	var b strings.Builder
	line := func(k string) { fmt.Fprintf(&b, "export %s=%s\n", k, shellQuote(env[k])) }
	fmt.Fprintf(&b, "# svz dev studio: a local stand-in for Supervaize Studio at %s — development and tests only.\n", s.url)
	b.WriteString("# Controller → Studio (the stand-in's well-known key; never a real Studio key):\n")
	for _, k := range []string{"SUPERVAIZE_API_URL", "SUPERVAIZE_WORKSPACE_ID", "SUPERVAIZE_API_KEY"} {
		line(k)
	}
	b.WriteString("# Workspace-grant tokens, signed by the stand-in (mint one: svz dev studio token --agent SLUG --scopes ...):\n")
	for _, k := range []string{"SUPERVAIZER_WORKSPACE_AUTH_REQUIRED", "SUPERVAIZER_WORKSPACE_AUTH_ISSUER", "SUPERVAIZER_WORKSPACE_AUTH_JWKS_URL"} {
		line(k)
	}
	b.WriteString("# The controller itself: it registers with the stand-in at start (server.register).\n")
	line("SUPERVAIZER_PUBLIC_URL")
	fmt.Fprintf(&b, "export SUPERVAIZER_HOST=127.0.0.1\nexport SUPERVAIZER_SERVER_ID=dev-server-1\nexport SUPERVAIZER_API_KEY=%s\n", DevControllerKey)
	fmt.Fprintf(&b, "# Studio encrypts parameters to the controller's RSA key (create it once: svz dev rsakey --out %s):\n", privateKeyFile)
	fmt.Fprintf(&b, "export SUPERVAIZER_PRIVATE_KEY=\"$(cat %s)\"\n", shellQuote(privateKeyFile))
	return b.String()
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r == '-' || r == '_' || r == '.' || r == '/' || r == ':' || r == '=' || r == ',' ||
			('a' <= r && r <= 'z') || ('A' <= r && r <= 'Z') || ('0' <= r && r <= '9'))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
