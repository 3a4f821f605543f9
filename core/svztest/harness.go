package svztest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/supervaize/svz/core"
	"github.com/supervaize/svz/core/checkpoint"
	"github.com/supervaize/svz/core/contract"
	"github.com/supervaize/svz/core/grant"
	"github.com/supervaize/svz/core/idempotency"
	"github.com/supervaize/svz/core/jobs"
	"github.com/supervaize/svz/core/state"
	"github.com/supervaize/svz/core/store"
	"github.com/supervaize/svz/core/store/memory"
)

// LocalAPIKey is the API key of the harness's controller, local mode's well-known key.
const LocalAPIKey = "local-dev"

// Harness is one agent served by a real controller in local mode (workspace grants bypassed,
// as `go run ./cmd/local` does), with the idempotency gate, on a store (memory unless WithStore),
// driven over POST /a2a exactly as Studio drives it. Build it with New; its methods take the
// (sub)test they report to.
type Harness struct {
	agent     *core.Agent
	ctl       *core.Controller
	store     store.Store
	workspace string
	mission   string
	seq       atomic.Int64
	since     string   // the effect stream's position when the harness started
	defaults  []Option // New's options: their request members and headers apply to every call
	pool      *jobs.Pool
	ahead     atomic.Int64 // how far Advance moved the controller's clock, in nanoseconds
}

// WithStore serves the agent on s (e.g. PostgreSQL or DynamoDB in CI) instead of a fresh memory
// store; the caller closes s. An option of New.
func WithStore(s store.Store) Option {
	return func(c *settings) { c.store = s; c.newOnly = append(c.newOnly, "WithStore") }
}

// WithWorkspace sets the workspace id of every call (default "workspace-1"); Workspace overrides
// it for one call. An option of New.
func WithWorkspace(id string) Option {
	return func(c *settings) { c.workspace = id; c.newOnly = append(c.newOnly, "WithWorkspace") }
}

// WithRuleCheckpoints posts the rule checkpoints of governed jobs to s (e.g. a Studio client
// pointed at a stand-in: studio.Client.RuleCheckpoints). Without it a governed job is refused
// as in local mode (checkpoint.ErrNoStudio). An option of New.
func WithRuleCheckpoints(s checkpoint.Studio) Option {
	return func(c *settings) { c.checkpoints = s; c.newOnly = append(c.newOnly, "WithRuleCheckpoints") }
}

// WithLogger sets the controller's logger (default: discard). An option of New.
func WithLogger(l *slog.Logger) Option {
	return func(c *settings) { c.logger = l; c.newOnly = append(c.newOnly, "WithLogger") }
}

// New returns a harness serving agent; it fails t on any registration or configuration mistake
// and closes the controller when the test ends.
func New(t testing.TB, agent *core.Agent, opts ...Option) *Harness {
	t.Helper()
	cfg := newSettings(append([]Option{WithWorkspace("workspace-1"), WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))}, opts...))
	cfg.onlyFor(t, "svztest.New", true, false)
	s := cfg.store
	if s == nil {
		mem := memory.New()
		t.Cleanup(func() { _ = mem.Close() })
		s = mem
	}
	h := &Harness{agent: agent, store: s, workspace: cfg.workspace, mission: "mission-1", defaults: opts}
	var queue jobs.Dispatcher
	if agent.Works().Len() > 0 {
		h.pool = jobs.NewPool() // as on a plain server: background work runs in process (WaitJob)
		queue = h.pool
	}
	ctl, err := core.New(core.Config{
		APIKey: LocalAPIKey, ServerID: "svztest-server", Authorizer: grant.LocalBypass{ServerID: "svztest-server"},
		Store: s, Gate: idempotency.New(s, idempotency.WithLogger(cfg.logger)), Logger: cfg.logger, EventBuffer: 4096,
		RuleCheckpoints: cfg.checkpoints, Jobs: queue, Now: h.now,
	}, agent)
	if err != nil {
		t.Fatalf("svztest.New: %v", err)
	}
	t.Cleanup(func() { _ = ctl.Close() })
	h.ctl = ctl
	h.since = h.eventsAfter(t, "")
	return h
}

// now is the controller's clock: the time, moved on by Advance.
func (h *Harness) now() time.Time { return time.Now().Add(time.Duration(h.ahead.Load())) }

// Advance moves the controller's clock on by d, and has the background work that is due by then
// run (a jobs.Sleep, a retry's backoff, a limit's turn): test a two-hour timer without waiting
// two hours. Follow it with WaitJob.
func (h *Harness) Advance(t testing.TB, d time.Duration) {
	t.Helper()
	if d < 0 {
		t.Fatalf("svztest: Advance(%s): the clock only moves on", d)
	}
	h.ahead.Add(int64(d))
	if h.pool == nil {
		return
	}
	if err := h.pool.Scan(context.Background()); err != nil {
		t.Fatalf("svztest: Advance: look for the work due: %v", err)
	}
}

// Handler is the controller, for AssertConfirmIdempotent or an httptest.Server.
func (h *Harness) Handler() http.Handler { return h.ctl }

// Store is the store the agent's state and idempotency records live in.
func (h *Harness) Store() store.Store { return h.store }

// Context returns the context a handler of the given workspace (the harness's by default) gets
// for its state: read and seed the agent's records with package state in tests.
func (h *Harness) Context(workspace ...string) context.Context {
	ws := h.workspace
	if len(workspace) > 0 {
		ws = workspace[0]
	}
	return state.NewContext(context.Background(), h.store, h.agent.Slug(), ws)
}

func member(name string, v any) Option {
	return func(s *settings) { s.members = append(s.members, func(p map[string]any) { p[name] = v }) }
}

// JobID, CaseID, StepID, IdempotencyKey, DraftSessionID, MissionID, RequestID, Surface and
// Workspace set the request member of the same name: of one call, or of every call when given
// to New.
func JobID(id string) Option          { return member("job_id", id) }
func CaseID(id string) Option         { return member("case_id", id) }
func StepID(id string) Option         { return member("step_id", id) }
func IdempotencyKey(k string) Option  { return member("idempotency_key", k) }
func DraftSessionID(id string) Option { return member("draft_session_id", id) }
func MissionID(id string) Option      { return member("mission_id", id) }
func RequestID(id string) Option      { return member("request_id", id) }
func Surface(id string) Option        { return member("surface", id) }
func Workspace(id string) Option {
	return member("workspace", map[string]any{"id": id, "slug": nil})
}

// call gathers the settings of one call: New's request members and headers, then the call's.
func (h *Harness) call(t testing.TB, where string, opts []Option, stateAllowed bool) *settings {
	t.Helper()
	s := newSettings(opts)
	s.onlyFor(t, where, false, stateAllowed)
	d := newSettings(h.defaults)
	s.members = append(d.members, s.members...)
	for k, vs := range s.header {
		d.header[k] = append(d.header[k], vs...)
	}
	s.header = d.header
	return s
}

// params builds the request of a call: Studio's members with the harness's defaults.
func (h *Harness) params(target string, action bool, input any, s *settings) map[string]any {
	if v := reflect.ValueOf(input); !v.IsValid() || (v.Kind() == reflect.Map || v.Kind() == reflect.Pointer) && v.IsNil() {
		input = map[string]any{} // nil, or a nil map: no input
	}
	p := map[string]any{
		"request_id": "svztest-" + strconv.FormatInt(h.seq.Add(1), 10),
		"actor":      map[string]any{"user_id": "svztest-user"},
		"workspace":  map[string]any{"id": h.workspace, "slug": nil},
		"mission_id": h.mission, "agent_slug": h.agent.Slug(), "surface": target, "input": input,
	}
	if action {
		p["action"] = target
		p["surface"] = contract.SurfaceJobStart
	}
	for _, set := range s.members {
		set(p)
	}
	return p
}

// Response is a raw JSON-RPC answer.
type Response struct {
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int             `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	} `json:"error"`
	Body []byte `json:"-"`
}

// Call posts one JSON-RPC request (method and params as given) and returns its answer: use it to
// test error answers.
func (h *Harness) Call(t testing.TB, method string, params any, opts ...Option) Response {
	t.Helper()
	return h.post(t, method, params, h.call(t, "Call", opts, false).header)
}

func (h *Harness) post(t testing.TB, method string, params any, header http.Header) Response {
	t.Helper()
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
	if err != nil {
		t.Fatalf("svztest: encode the request: %v", err)
	}
	rec := httptest.NewRecorder()
	r := httptest.NewRequest(http.MethodPost, "/a2a", strings.NewReader(string(body)))
	for k, vs := range header {
		r.Header[k] = vs
	}
	r.Header.Set("X-API-Key", LocalAPIKey)
	r.Header.Set("Content-Type", "application/json")
	h.ctl.ServeHTTP(rec, r)
	var resp Response
	if rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &resp) != nil {
		t.Fatalf("svztest: %s: HTTP %d %s", method, rec.Code, rec.Body.Bytes())
	}
	resp.Body = rec.Body.Bytes()
	return resp
}

// Result is an action's result as Studio receives it, decoded: numbers in free-form members
// (effect items, rows, data, case metadata...) are float64 as with encoding/json, and the setup
// plan is typed.
type Result struct {
	contract.ActionResult
	// SetupPlan is the result's setup_plan, typed (nil when absent).
	SetupPlan *contract.SetupPlan
	// JSON is the result exactly as answered.
	JSON json.RawMessage
}

// Invoke calls action with input (anything that encodes as a JSON object; nil is {}) and returns
// its result. A JSON-RPC error answer fails the test: use Call to test those.
func (h *Harness) Invoke(t testing.TB, action string, input any, opts ...Option) *Result {
	t.Helper()
	s := h.call(t, "Invoke", opts, false)
	resp := h.post(t, "supervaizer/action.invoke", h.params(action, true, input, s), s.header)
	if resp.Error != nil || resp.Result == nil {
		t.Fatalf("svztest: action %s answered %s; want a result", action, resp.Body)
	}
	return decodeResult(t, action, resp.Result)
}

// decodeResult decodes the result of action as Result.
func decodeResult(t testing.TB, action string, raw json.RawMessage) *Result {
	t.Helper()
	res := &Result{JSON: raw}
	if err := json.Unmarshal(raw, &res.ActionResult); err != nil {
		t.Fatalf("svztest: action %s: decode the result: %v", action, err)
	}
	if res.ActionResult.SetupPlan != nil {
		raw, _ := json.Marshal(res.ActionResult.SetupPlan)
		res.SetupPlan = &contract.SetupPlan{}
		if err := json.Unmarshal(raw, res.SetupPlan); err != nil {
			t.Fatalf("svztest: action %s: setup_plan is not a setup plan: %v", action, err)
		}
	}
	plainNumbers(reflect.ValueOf(&res.ActionResult).Elem())
	if res.SetupPlan != nil {
		plainNumbers(reflect.ValueOf(res.SetupPlan).Elem())
	}
	return res
}

// SurfaceResult is a surface's result, with its document decoded as a JSON object (numbers as
// float64).
type SurfaceResult struct {
	contract.SurfaceResult
	Doc  map[string]any
	JSON json.RawMessage
}

// Load loads surface with input (nil is {}) and returns its result. A JSON-RPC error answer
// fails the test.
func (h *Harness) Load(t testing.TB, surface string, input any, opts ...Option) *SurfaceResult {
	t.Helper()
	s := h.call(t, "Load", opts, false)
	resp := h.post(t, "supervaizer/surface.load", h.params(surface, false, input, s), s.header)
	if resp.Error != nil || resp.Result == nil {
		t.Fatalf("svztest: surface %s answered %s; want a result", surface, resp.Body)
	}
	res := &SurfaceResult{JSON: resp.Result}
	if err := json.Unmarshal(resp.Result, &res.SurfaceResult); err != nil {
		t.Fatalf("svztest: surface %s: decode the result: %v", surface, err)
	}
	if err := json.Unmarshal(res.Document, &res.Doc); err != nil {
		t.Fatalf("svztest: surface %s: decode the document: %v", surface, err)
	}
	return res
}

// Request returns the action request a call would send, e.g. for AssertConfirmIdempotent.
func (h *Harness) Request(t testing.TB, action string, input any, opts ...Option) contract.ActionRequest {
	t.Helper()
	b, err := json.Marshal(h.params(action, true, input, h.call(t, "Request", opts, false)))
	if err != nil {
		t.Fatalf("svztest: encode the request: %v", err)
	}
	req, err := contract.DecodeActionRequest(b)
	if err != nil {
		t.Fatalf("svztest: the request is invalid: %v", err)
	}
	return *req
}

// AssertConfirmIdempotent runs the seeds' conformance check (AssertConfirmIdempotent) on action
// with input; opts must include an IdempotencyKey, and may include WithState and WithHeader.
// Background work the call started is settled before each snapshot of WithState (it waits or
// ends). It returns the result as Invoke does.
func (h *Harness) AssertConfirmIdempotent(t testing.TB, action string, input any, opts ...Option) *Result {
	t.Helper()
	s := h.call(t, "AssertConfirmIdempotent", opts, true)
	b, err := json.Marshal(h.params(action, true, input, s))
	if err != nil {
		t.Fatalf("svztest: encode the request: %v", err)
	}
	req, err := contract.DecodeActionRequest(b)
	if err != nil {
		t.Fatalf("svztest: the request is invalid: %v", err)
	}
	var pass []Option
	for k, vs := range s.header {
		for _, v := range vs {
			pass = append(pass, WithHeader(k, v))
		}
	}
	if s.state != nil {
		pass = append(pass, WithState(s.state))
	}
	return AssertConfirmIdempotent(t, h.ctl, LocalAPIKey, *req, pass...)
}

// EffectEvent is one supervaizer.effect event of the effect stream.
type EffectEvent struct {
	AgentSlug string            `json:"agent_slug"`
	Action    string            `json:"action"`
	RequestID string            `json:"request_id"`
	Effects   []contract.Effect `json:"effects"`
}

// Effects returns the effect events the controller published since the harness started, oldest
// first, read from GET /a2a/events as Studio reads them.
func (h *Harness) Effects(t testing.TB) []EffectEvent {
	t.Helper()
	c := client{t: t, h: h.ctl, apiKey: LocalAPIKey, header: http.Header{}}
	var out []EffectEvent
	for _, ev := range c.eventsAfter(h.since) {
		var e EffectEvent
		if err := json.Unmarshal([]byte(ev.data), &e); err != nil {
			t.Fatalf("svztest: effect event %s: %v", ev.data, err)
		}
		for i := range e.Effects {
			plainNumbers(reflect.ValueOf(&e.Effects[i]).Elem())
		}
		out = append(out, e)
	}
	return out
}

// eventsAfter polls the stream and returns the id of its position (the connected event's id).
func (h *Harness) eventsAfter(t testing.TB, id string) string {
	r := httptest.NewRequest(http.MethodGet, "/a2a/events", nil)
	r.Header.Set("X-API-Key", LocalAPIKey)
	r.Header.Set("Last-Event-ID", id)
	w := &pollWriter{header: http.Header{}}
	h.ctl.ServeHTTP(w, r)
	pos := ""
	readEvents(&w.body, func(ev event) bool {
		if ev.name == "supervaizer.connected" {
			pos = ev.id
		}
		return true
	})
	if pos == "" {
		t.Fatalf("svztest: GET /a2a/events sent no connected event: HTTP %d %s", w.code, w.body.Bytes())
	}
	return pos
}

// Skip, as the input of an id given to CheckHandlers, leaves that action or surface out.
var Skip = &struct{ skip bool }{true}

// CheckHandlers fails the test unless every declared action and surface has a handler that
// answers: it calls each once (with inputs[id] as input, {} when absent, and opts), and a
// -32010/-32011 (no handler) or -32603 (the handler failed) answer is a failure. A status
// "error" result is an answer. Surfaces Studio renders itself (mission.agent.resource.*,
// mission.agent.dataset.*), rule.checkpoint.resume (svz serves it) and ids whose input is Skip
// are left out.
//
// job.start runs first (job id "svztest-check-job" unless opts set one): when it answers a
// job_state, the surfaces of a step are loaded on that job, case.step.awaiting on its first
// awaiting step and case.step.detail on its first step, so that a document the handler builds
// for a real step is checked (give inputs["job.start"] an input the agent accepts). Then the
// other surfaces, then the other actions.
func (h *Harness) CheckHandlers(t testing.TB, inputs map[string]any, opts ...Option) {
	t.Helper()
	reg := h.agent.Config().Registration
	s := h.call(t, "CheckHandlers", opts, false)
	// check calls id once; before are members the call's options may override, after members
	// that win over them.
	check := func(kind, method, id string, action bool, before, after []func(map[string]any)) json.RawMessage {
		if inputs[id] == Skip {
			return nil
		}
		c := *s
		c.members = slices.Concat(before, s.members, after)
		resp := h.post(t, method, h.params(id, action, inputs[id], &c), s.header)
		if resp.Error != nil {
			t.Errorf("svztest: %s %s answers JSON-RPC %d %q: every declared %s needs a handler that answers", kind, id, resp.Error.Code, resp.Error.Message, kind)
		}
		return resp.Result
	}
	var actions []string
	for _, a := range reg.Capabilities.Actions {
		if a.ID != contract.RuleCheckpointResumeAction {
			actions = append(actions, a.ID)
		}
	}
	var job *contract.JobState
	if slices.Contains(actions, contract.JobStartAction) {
		defaultJob := func(p map[string]any) { p["job_id"] = "svztest-check-job" }
		if raw := check("action", "supervaizer/action.invoke", contract.JobStartAction, true, []func(map[string]any){defaultJob}, nil); raw != nil {
			var res contract.ActionResult
			if json.Unmarshal(raw, &res) == nil {
				job = res.JobState
			}
		}
	}
	for _, id := range reg.Capabilities.Surfaces {
		if strings.HasPrefix(id, "mission.agent.resource.") || strings.HasPrefix(id, "mission.agent.dataset.") {
			continue
		}
		check("surface", "supervaizer/surface.load", id, false, nil, stepOf(job, id))
	}
	for _, id := range actions {
		if id != contract.JobStartAction {
			check("action", "supervaizer/action.invoke", id, true, nil, nil)
		}
	}
}

// stepOf returns the request members that load surface on a step of job: its first awaiting
// step for case.step.awaiting, its first step for case.step.detail; none otherwise.
func stepOf(job *contract.JobState, surface string) []func(map[string]any) {
	if job == nil || (surface != contract.SurfaceStepAwaiting && surface != contract.SurfaceStepDetail) {
		return nil
	}
	for _, c := range job.Cases {
		for _, st := range c.Steps {
			if surface == contract.SurfaceStepDetail || st.Awaiting != nil {
				ids := map[string]any{"job_id": job.Job.ID, "case_id": c.ID, "step_id": st.ID}
				return []func(map[string]any){func(p map[string]any) { maps.Copy(p, ids) }}
			}
		}
	}
	return nil
}

// As converts v (an effect's Item, Items or Rows, a draft value...) to T through JSON, failing
// the test when it does not fit.
func As[T any](t testing.TB, v any) T {
	t.Helper()
	var out T
	b, err := json.Marshal(v)
	if err == nil {
		err = json.Unmarshal(b, &out)
	}
	if err != nil {
		t.Fatalf("svztest.As[%T]: %v", out, err)
	}
	return out
}

// plainNumbers replaces every json.Number held in an interface, map or slice under v with its
// float64, as encoding/json decodes numbers by default.
func plainNumbers(v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			plainNumbers(v.Elem())
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				plainNumbers(v.Field(i))
			}
		}
	case reflect.Slice, reflect.Array:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return // bytes and json.RawMessage
		}
		for i := range v.Len() {
			plainNumbers(v.Index(i))
		}
	case reflect.Map:
		for _, k := range v.MapKeys() {
			e := v.MapIndex(k)
			if e.Kind() == reflect.Interface || e.Kind() == reflect.Map || e.Kind() == reflect.Slice {
				cp := reflect.New(e.Type()).Elem()
				cp.Set(e)
				plainNumbers(cp)
				v.SetMapIndex(k, cp)
			}
		}
	case reflect.Interface:
		if v.IsNil() {
			return
		}
		e := v.Elem()
		if n, ok := e.Interface().(json.Number); ok {
			if f, err := n.Float64(); err == nil && v.CanSet() {
				v.Set(reflect.ValueOf(f))
			}
			return
		}
		cp := reflect.New(e.Type()).Elem()
		cp.Set(e)
		plainNumbers(cp)
		if v.CanSet() {
			v.Set(cp)
		}
	}
}

// WaitJob polls job.sync for job (with opts, e.g. Workspace) until its status is status and
// returns that answer; it fails the test when the job reaches another terminal status first
// (completed, failed, cancelled) or after WaitJobTimeout. For agents with background work
// (jobs.Define), which the harness runs in an in-process pool.
func (h *Harness) WaitJob(t testing.TB, job, status string, opts ...Option) *Result {
	t.Helper()
	deadline := time.Now().Add(WaitJobTimeout)
	for {
		res := h.Invoke(t, contract.JobSyncAction, nil, append([]Option{JobID(job)}, opts...)...)
		got := ""
		if res.JobState != nil {
			got = res.JobState.Job.Status
		}
		switch {
		case got == status:
			return res
		case got == contract.StateCompleted || got == contract.StateFailed || got == contract.StateCancelled:
			t.Fatalf("svztest: job %s is %s, not %s: %s", job, got, status, res.JSON)
		case time.Now().After(deadline):
			t.Fatalf("svztest: job %s is still %q after %s, not %s: %s", job, got, WaitJobTimeout, status, res.JSON)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// WaitJobTimeout bounds WaitJob (room for a loaded machine).
const WaitJobTimeout = 30 * time.Second

// String names the harness in failures.
func (h *Harness) String() string { return fmt.Sprintf("svztest harness of %s", h.agent.Slug()) }
