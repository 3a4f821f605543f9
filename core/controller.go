// Package core is the Supervaizer v2 controller: one stateless http.Handler that serves A2A
// discovery (agent list, Agent Cards, health), the JSON-RPC endpoint POST /a2a
// (supervaizer/action.invoke, supervaizer/surface.load) and the effect stream GET /a2a/events,
// wire-compatible with the reference Python SDK.
//
// Every /a2a call goes through the same steps, in the reference's order: the X-API-Key, the
// JSON-RPC envelope, the v2 request, the workspace grant (package grant), the handler lookup, the
// idempotency gate for retried mutating actions, the handler, then the effect event. Anything
// that must outlive a request lives behind interfaces (grant.Authorizer, ActionGate); core imports
// no platform or cloud package. Adapters (package adapters/...) only carry requests to it.
package core

import (
	"cmp"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/supervaize/svz/core/a2ui"
	"github.com/supervaize/svz/core/checkpoint"
	"github.com/supervaize/svz/core/contract"
	"github.com/supervaize/svz/core/grant"
	"github.com/supervaize/svz/core/idempotency"
	"github.com/supervaize/svz/core/jobs"
	"github.com/supervaize/svz/core/store"
	"github.com/supervaize/svz/core/telemetry"
)

// ActionGate guards the run of a mutating action that carries an idempotency_key (package
// idempotency): it replays a completed result, refuses a conflicting or concurrent retry with a
// status "error" result, or calls run once and records its result.
type ActionGate interface {
	Do(ctx context.Context, req *contract.ActionRequest, run func(context.Context) (*contract.ActionResult, error)) (*contract.ActionResult, error)
}

// AppendingGate is an ActionGate that can append a run's effect event in the same store write as
// its record (idempotency.Gate on a store.UpdateAppender): one store call instead of two.
// appended reports that it did; otherwise the controller appends the event itself.
type AppendingGate interface {
	ActionGate
	DoAppending(ctx context.Context, req *contract.ActionRequest, run func(context.Context) (*contract.ActionResult, error),
		ev idempotency.Event) (res *contract.ActionResult, appended bool, err error)
}

// Defaults of Config.
const (
	DefaultMaxBodyBytes      = 1 << 20
	DefaultHeartbeatInterval = 15 * time.Second
	DefaultEventBuffer       = 256
)

// Config configures a Controller. APIKey and Authorizer are required.
type Config struct {
	// APIKey is the write-scoped key Studio sends as X-API-Key (SUPERVAIZER_API_KEY).
	APIKey string
	// ReadAPIKeys may only open the effect stream (GET /a2a/events).
	ReadAPIKeys []string
	// ServerID is this controller's identity (SUPERVAIZER_SERVER_ID).
	ServerID string
	// PublicURL, when set, makes discovery URLs absolute (SUPERVAIZER_PUBLIC_URL).
	PublicURL string
	// Authorizer decides the workspace grant of each call (grant.New).
	Authorizer grant.Authorizer
	// StudioAgentIDs maps agent slugs to their Studio agent ids (SUPERVAIZER_STUDIO_AGENT_IDS).
	StudioAgentIDs map[string]string
	// Gate, when set, makes retried mutating actions idempotent.
	Gate ActionGate
	// Parameters gives the values of the agents' declared parameters (package core/studio); nil
	// without a Studio connection.
	Parameters ParameterSource
	// Store is the controller's store (package config opens the one SUPERVAIZER_STORE names): the
	// one place where state that outlives a request lives. Nil serves without one.
	Store store.Store
	// RuleCheckpoints posts the rule checkpoints of governed jobs to Studio (package core/config
	// adapts core/studio's client); nil without a Studio connection, when governed steps are
	// refused (package checkpoint).
	RuleCheckpoints checkpoint.Studio
	// Jobs is the queue background work is delivered through (package jobs): jobs.NewPool on a
	// plain server, the platform's queue on serverless (package adapters/platform sets it up).
	// Required when an agent defines work (jobs.Define); New says so otherwise.
	Jobs jobs.Dispatcher
	// OnClose is called once by Close, after the effect streams have ended and the calls in flight
	// have returned (e.g. to close a store).
	OnClose func() error
	// Logger receives the controller's logs; slog.Default() when nil.
	Logger *slog.Logger
	// Telemetry is where the controller records its spans and measurements (package telemetry;
	// adapters/platform wires them from the OTEL_* settings). The zero value records nothing.
	Telemetry telemetry.Providers
	// MaxBodyBytes bounds a POST /a2a body (DefaultMaxBodyBytes when 0).
	MaxBodyBytes int64
	// HeartbeatInterval is the idle time after which the effect stream sends a heartbeat.
	HeartbeatInterval time.Duration
	// EventBuffer is how many recent effect events an instance keeps in memory for its streams
	// (DefaultEventBuffer when 0); a stream further behind reads the effect log.
	EventBuffer int
	// EventRetention and EventRetentionCount bound the effect log in the store (events.go):
	// older events, and events beyond the newest count, are deleted by later appends.
	EventRetention      time.Duration
	EventRetentionCount int
	// EventRetentionBytes bounds the bytes of the effect log's events
	// (DefaultEventRetentionBytes when 0); EventMaxBytes those of one event
	// (DefaultEventMaxBytes when 0): a larger one is recorded truncated (its effects keep their
	// type, ids, status and count, marked "truncated": true). EventMaxBytes may not exceed
	// EventRetentionBytes.
	EventRetentionBytes, EventMaxBytes int64
	// MaxEventStreams bounds the open GET /a2a/events requests of an instance; beyond it they
	// answer 503 with Retry-After.
	MaxEventStreams int
	// EventCatchUp bounds the events one GET /a2a/events replays from the effect log; a client
	// further behind gets them over several requests (Last-Event-ID).
	EventCatchUp int
	// EventReplayBytes bounds the bytes of catch-up pages all streams hold at once
	// (DefaultEventReplayBytes when 0); EventPageBytes what one stream reads at a time
	// (DefaultEventPageBytes); EventBufferBytes the follower's recent events
	// (DefaultEventBufferBytes). EventWriteTimeout is how long one write to a stream may block
	// before the stream is cut (DefaultEventWriteTimeout). See eventbudget.go.
	EventReplayBytes, EventPageBytes, EventBufferBytes int64
	EventWriteTimeout                                  time.Duration
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// Controller is the http.Handler of a Supervaizer v2 controller. It is safe for concurrent use.
// Close ends the effect streams, waits for the calls in flight and calls Config.OnClose.
type Controller struct {
	cfg       Config
	log       *slog.Logger
	now       func() time.Time
	base      string
	agents    []*boundAgent
	bySlug    map[string]*boundAgent
	keys      []apiKey
	events    *effectLog
	bufs      buffers
	closing   chan struct{}
	calls     *calls
	closeOnce sync.Once
	closeErr  error
	// checkpoints runs guarded steps; nil when no agent declares rule checkpoints.
	checkpoints *checkpoint.Service
	// jobs runs background work; nil when no agent defines any.
	jobs *jobs.Service
	tel  *callTelemetry
}

var (
	_ http.Handler = (*Controller)(nil)
	_ io.Closer    = (*Controller)(nil)
)

// New returns a controller serving agents, or every configuration and registration mistake at
// once (undeclared or duplicate handlers, duplicate agents, a missing key or authorizer).
func New(cfg Config, agents ...*Agent) (*Controller, error) {
	var errs []error
	if cfg.APIKey == "" {
		errs = append(errs, errors.New("an API key is required (SUPERVAIZER_API_KEY)"))
	}
	if cfg.Authorizer == nil {
		errs = append(errs, errors.New("a workspace authorizer is required (grant.New)"))
	}
	if len(agents) == 0 {
		errs = append(errs, errors.New("at least one agent is required"))
	}
	if cfg.MaxBodyBytes < 0 || cfg.HeartbeatInterval < 0 || cfg.EventBuffer < 0 || cfg.EventRetention < 0 ||
		cfg.EventRetentionCount < 0 || cfg.MaxEventStreams < 0 || cfg.EventCatchUp < 0 ||
		cfg.EventReplayBytes < 0 || cfg.EventPageBytes < 0 || cfg.EventBufferBytes < 0 || cfg.EventWriteTimeout < 0 ||
		cfg.EventRetentionBytes < 0 || cfg.EventMaxBytes < 0 {
		errs = append(errs, errors.New("body limit, heartbeat interval and event settings cannot be negative"))
	}
	c := &Controller{
		cfg:     cfg,
		log:     cfg.Logger,
		now:     cfg.Now,
		base:    strings.TrimRight(cfg.PublicURL, "/"),
		bySlug:  map[string]*boundAgent{},
		closing: make(chan struct{}),
		calls:   newCalls(),
		tel:     newCallTelemetry(cfg.Telemetry),
	}
	if c.log == nil {
		c.log = slog.Default()
	}
	if c.now == nil {
		c.now = time.Now
	}
	if c.cfg.MaxBodyBytes == 0 {
		c.cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if c.cfg.HeartbeatInterval == 0 {
		c.cfg.HeartbeatInterval = DefaultHeartbeatInterval
	}
	if c.cfg.EventBuffer == 0 {
		c.cfg.EventBuffer = DefaultEventBuffer
	}
	c.cfg.EventRetention = cmp.Or(c.cfg.EventRetention, DefaultEventRetention)
	c.cfg.EventRetentionCount = cmp.Or(c.cfg.EventRetentionCount, DefaultEventRetentionCount)
	c.cfg.EventRetentionBytes = cmp.Or(c.cfg.EventRetentionBytes, DefaultEventRetentionBytes)
	c.cfg.EventMaxBytes = cmp.Or(c.cfg.EventMaxBytes, DefaultEventMaxBytes)
	if c.cfg.EventMaxBytes > c.cfg.EventRetentionBytes {
		errs = append(errs, fmt.Errorf("an event may hold up to %d bytes (EventMaxBytes, SUPERVAIZER_EVENT_MAX_BYTES), more than the whole effect log keeps, %d (EventRetentionBytes, SUPERVAIZER_EVENT_RETENTION_BYTES): lower the first or raise the second",
			c.cfg.EventMaxBytes, c.cfg.EventRetentionBytes))
	}
	c.cfg.MaxEventStreams = cmp.Or(c.cfg.MaxEventStreams, DefaultMaxEventStreams)
	c.cfg.EventCatchUp = cmp.Or(c.cfg.EventCatchUp, DefaultEventCatchUp)
	c.cfg.EventReplayBytes = cmp.Or(c.cfg.EventReplayBytes, DefaultEventReplayBytes)
	c.cfg.EventPageBytes = cmp.Or(c.cfg.EventPageBytes, DefaultEventPageBytes)
	c.cfg.EventBufferBytes = cmp.Or(c.cfg.EventBufferBytes, DefaultEventBufferBytes)
	c.cfg.EventWriteTimeout = cmp.Or(c.cfg.EventWriteTimeout, DefaultEventWriteTimeout)
	for _, a := range agents {
		if a == nil {
			errs = append(errs, errors.New("nil agent"))
			continue
		}
		errs = append(errs, a.errs...)
		if c.bySlug[a.slug] != nil {
			errs = append(errs, fmt.Errorf("two agents have the slug %q", a.slug))
			continue
		}
		b := &boundAgent{
			Agent:    a,
			studioID: cfg.StudioAgentIDs[a.slug],
			actions:  make(map[string]ActionHandler, len(a.actions)),
			surfaces: make(map[string]SurfaceHandler, len(a.surfaces)),
			data:     slices.Clone(a.data),
			gated:    gatedActions(a.cfg.Registration),

			inputSchemas: inputSchemas(a.cfg.Registration, a.inputs),
			versions:     &a2ui.Versions{A2UI: a.cfg.Registration.Versions.A2UIVersion, Catalog: a.cfg.Registration.Versions.A2UICatalogVersion},
			grant:        grant.Agent{Slug: a.slug, ID: a.id, StudioID: cfg.StudioAgentIDs[a.slug]},
		}
		for id, h := range a.actions {
			b.actions[id] = h
		}
		for id, h := range a.surfaces {
			b.surfaces[id] = h
		}
		if err := c.bindCheckpoints(b); err != nil {
			errs = append(errs, err)
		}
		if err := c.bindJobs(b); err != nil {
			errs = append(errs, err)
		}
		c.agents = append(c.agents, b)
		c.bySlug[a.slug] = b
	}
	for slug := range cfg.StudioAgentIDs {
		if c.bySlug[slug] == nil && len(c.agents) > 0 {
			errs = append(errs, fmt.Errorf("SUPERVAIZER_STUDIO_AGENT_IDS names %q, which this controller does not serve", slug))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	c.keys = append(c.keys, newAPIKey(cfg.APIKey, scopeWrite))
	for _, k := range cfg.ReadAPIKeys {
		if k != "" {
			c.keys = append(c.keys, newAPIKey(k, scopeRead))
		}
	}
	c.events = newEffectLog(c.cfg, c.log, c.closing)
	for _, b := range c.agents {
		for _, def := range b.cfg.Registration.Capabilities.Actions {
			if b.actions[def.ID] == nil {
				c.log.Warn("declared action has no handler: calls will answer -32010", "agent_slug", b.slug, "action", def.ID)
			}
		}
		for _, id := range b.cfg.Registration.Capabilities.Surfaces {
			// Studio renders the generated resource and dataset surfaces itself.
			studioRendered := strings.HasPrefix(id, "mission.agent.resource.") || strings.HasPrefix(id, "mission.agent.dataset.")
			if b.surfaces[id] == nil && !studioRendered {
				c.log.Warn("declared surface has no handler: calls will answer -32011", "agent_slug", b.slug, "surface", id)
			}
		}
	}
	return c, nil
}

// ServeHTTP routes a request. Unknown paths answer 404 {"detail":"Not Found"}, known paths with
// another method 405, and a path that is known once its trailing slash is removed (or one is
// added) a 307 there, as the reference's FastAPI does.
func (c *Controller) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	setSecurityHeaders(w.Header())
	if !c.calls.enter() {
		shuttingDown(w)
		return
	}
	defer c.calls.leave()
	if encodedSlash(r.URL) {
		// A %2F is a slash to a router that matches the decoded path and a character to one that
		// does not: no route has one, so that no proxy in front can be led to a route it did not
		// mean (and no trailing-slash redirect can point at its own URL).
		writeDetail(w, http.StatusNotFound, "Not Found")
		return
	}
	e := c.resolve(r.URL.Path)
	switch e.kind {
	case endpointNone:
		if !c.redirectSlash(w, r) {
			writeDetail(w, http.StatusNotFound, "Not Found")
		}
	case endpointRPC:
		c.route(w, r, http.MethodPost, c.serveRPC)
	case endpointEvents:
		c.route(w, r, http.MethodGet, c.serveEvents)
	case endpointAgentList:
		c.route(w, r, http.MethodGet, c.serveAgentList)
	case endpointHealth:
		c.route(w, r, http.MethodGet, c.serveHealth)
	case endpointAgentInfo:
		c.route(w, r, http.MethodGet, func(w http.ResponseWriter, r *http.Request) { c.serveAgentInfo(w, r, e.agent) })
	case endpointCard:
		c.route(w, r, http.MethodGet, func(w http.ResponseWriter, r *http.Request) { c.serveCard(w, e.agent) })
	case endpointData:
		c.serveData(w, r, e.data)
	default:
		c.servePage(w, r, e)
	}
}

// endpointKind names what a path is routed to.
type endpointKind uint8

const (
	endpointNone endpointKind = iota
	endpointRPC
	endpointEvents
	endpointAgentList
	endpointHealth
	endpointAgentInfo
	endpointCard
	endpointData
	endpointOpenAPI
	endpointDocs
	endpointLogo
	endpointHumanPage
)

// endpoint is what a path resolves to: its kind and, for an agent's route, the agent.
type endpoint struct {
	kind  endpointKind
	agent *boundAgent
	data  dataRoute
}

// resolve is the routing table: the endpoint serving path (with any method), or endpointNone.
func (c *Controller) resolve(path string) endpoint {
	switch path {
	case "/a2a":
		return endpoint{kind: endpointRPC}
	case "/a2a/events":
		return endpoint{kind: endpointEvents}
	case "/.well-known/agents.json":
		return endpoint{kind: endpointAgentList}
	case "/.well-known/health":
		return endpoint{kind: endpointHealth}
	case openAPIPath:
		return endpoint{kind: endpointOpenAPI}
	case docsPath:
		return endpoint{kind: endpointDocs}
	}
	agentRoute := func(kind endpointKind, a *boundAgent) endpoint {
		if a == nil {
			return endpoint{}
		}
		return endpoint{kind: kind, agent: a}
	}
	switch {
	case strings.HasPrefix(path, agentInfoPrefix):
		rest := strings.TrimPrefix(path, agentInfoPrefix)
		if slug, ok := strings.CutSuffix(rest, humanPageFile); ok {
			return agentRoute(endpointHumanPage, c.bySlug[slug])
		}
		// The reference's route is "/" under the agent's prefix: the slash is part of it.
		if slug, ok := strings.CutSuffix(rest, "/"); ok {
			return agentRoute(endpointAgentInfo, c.bySlug[slug])
		}
	case strings.HasPrefix(path, dataPrefix):
		if rt, ok := c.matchData(path); ok {
			return endpoint{kind: endpointData, data: rt}
		}
	case strings.HasPrefix(path, "/.well-known/agents/"):
		return agentRoute(endpointCard, c.cardAgent(strings.TrimPrefix(path, "/.well-known/agents/")))
	case strings.HasPrefix(path, logoPrefix) && strings.HasSuffix(path, logoSuffix):
		return agentRoute(endpointLogo, c.bySlug[strings.TrimSuffix(strings.TrimPrefix(path, logoPrefix), logoSuffix)])
	}
	return endpoint{}
}

// redirectSlash answers Starlette's redirect_slashes: a path that no route serves but that one
// serves once its trailing slashes are removed (or one is added) is a 307 there, before any
// authentication, query kept. The Location is relative (Starlette's is absolute, built from the
// request's Host) and never the URL asked.
func (c *Controller) redirectSlash(w http.ResponseWriter, r *http.Request) bool {
	if r.URL.Path == "/" {
		return false
	}
	alt, altEscaped := r.URL.Path+"/", r.URL.EscapedPath()+"/"
	if strings.HasSuffix(r.URL.Path, "/") {
		alt, altEscaped = strings.TrimRight(r.URL.Path, "/"), strings.TrimRight(r.URL.EscapedPath(), "/")
	}
	if c.resolve(alt).kind == endpointNone || altEscaped == r.URL.EscapedPath() {
		return false
	}
	loc := altEscaped
	if r.URL.RawQuery != "" {
		loc += "?" + r.URL.RawQuery
	}
	w.Header().Set("Location", loc)
	w.WriteHeader(http.StatusTemporaryRedirect)
	return true
}

func (c *Controller) route(w http.ResponseWriter, r *http.Request, method string, h http.HandlerFunc) {
	if r.Method != method {
		w.Header().Set("Allow", method)
		writeDetail(w, http.StatusMethodNotAllowed, "Method Not Allowed")
		return
	}
	h(w, r)
}

// Authorizer returns the workspace authorizer the controller decides grants with (local mode's
// banner tells a bypass from verification with it).
func (c *Controller) Authorizer() grant.Authorizer { return c.cfg.Authorizer }

// Agents returns the agents the controller serves, in the order given to New.
func (c *Controller) Agents() []*Agent {
	out := make([]*Agent, len(c.agents))
	for i, b := range c.agents {
		out[i] = b.Agent
	}
	return out
}

// API-key scopes are hierarchical: write includes read.
type scope int

const (
	scopeRead scope = iota + 1
	scopeWrite
)

type apiKey struct {
	digest [sha256.Size]byte
	scope  scope
}

func newAPIKey(key string, s scope) apiKey {
	return apiKey{digest: keyDigest(key), scope: s}
}

// keyDigest is the SHA-256 of key, hashed from a stack buffer (no allocation per call).
func keyDigest(key string) [sha256.Size]byte {
	var buf [256]byte
	if len(key) <= len(buf) {
		return sha256.Sum256(append(buf[:0], key...))
	}
	return sha256.Sum256([]byte(key))
}

// authorize checks X-API-Key in constant time (comparing digests, so the key length does not
// leak either) and writes the 401/403 answer itself when the key falls short.
func (c *Controller) authorize(w http.ResponseWriter, r *http.Request, need scope) bool {
	got := keyDigest(r.Header.Get("X-API-Key"))
	var granted scope
	for _, k := range c.keys {
		if subtle.ConstantTimeCompare(got[:], k.digest[:]) == 1 && k.scope > granted {
			granted = k.scope
		}
	}
	switch {
	case granted == 0 || r.Header.Get("X-API-Key") == "":
		writeDetail(w, http.StatusUnauthorized, "Invalid or missing API key")
		return false
	case granted < need:
		writeDetail(w, http.StatusForbidden, "Insufficient scope")
		return false
	}
	return true
}

// setSecurityHeaders sets the reference's hardening headers unless already set.
func setSecurityHeaders(h http.Header) {
	names := [...]string{"X-Content-Type-Options", "X-Frame-Options", "Referrer-Policy", "Strict-Transport-Security"}
	values := make([]string, 0, len(names)) // one allocation for the four values
	values = append(values, "nosniff", "SAMEORIGIN", "no-referrer", "max-age=63072000; includeSubDomains")
	for i, name := range names {
		if _, ok := h[name]; !ok {
			h[name] = values[i : i+1 : i+1] // capped: an append by a later writer copies
		}
	}
}

// writeDetail writes a FastAPI-style {"detail": msg} error.
func writeDetail(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"detail": msg})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b = []byte(`{"detail":"Internal Server Error"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}
