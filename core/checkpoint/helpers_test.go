package checkpoint_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/supervaize/svz/core/checkpoint"
	"github.com/supervaize/svz/core/contract"
	"github.com/supervaize/svz/core/internal/packed"
	"github.com/supervaize/svz/core/store"
	"github.com/supervaize/svz/core/studio"
	"github.com/supervaize/svz/internal/syncbuf"
	"github.com/supervaize/svz/internal/testenv"
)

// Identities and secrets of the tests. studioKey and every snapshot token must appear nowhere
// but in the requests to Studio.
const (
	agentSlug    = "pay-agent"
	studioKey    = "studio-api-key-for-checkpoint-tests-5e1d"
	studioWS     = "ws-checkpoints"
	snapshotHash = "snapshot-hash-1"
	cardNumber   = "4242-4242-SECRET-CARD"
)

// fakeStudio is Studio's rule-checkpoint endpoint, over HTTP, in the test: it checks the headers
// as Studio does, answers the decision scripted for each phase, idempotently (the same
// occurrence and phase sent again gets the same checkpoint and answer), and records every call.
// GET /test/answered?occurrence=…&phase=… gives a child process the checkpoint to resume.
type fakeStudio struct {
	srv *httptest.Server

	mu       sync.Mutex
	decide   map[string]string // phase → allow, pause or stop
	failNext map[string]int    // phase → how many next calls answer 503, deciding nothing
	loseNext map[string]int    // phase → how many next answers are lost (decided, then 504)
	calls    []studioCall
	answered map[string]answer
	// hook runs when a checkpoint is decided, before the answer is sent (outside the lock).
	hook func(studioCall, answer)
}

type studioCall struct {
	Token string
	Raw   string
	Body  checkpointBody
}

type checkpointBody struct {
	OccurrenceID string         `json:"occurrence_id"`
	Phase        string         `json:"phase"`
	SnapshotHash string         `json:"snapshot_hash"`
	JobID        string         `json:"job_id"`
	CaseID       string         `json:"case_id"`
	StepID       string         `json:"step_id"`
	Context      map[string]any `json:"context"`
	SecretRefs   []string       `json:"secret_refs"`
}

type answer struct {
	CheckpointID string `json:"checkpoint_id"`
	Status       string `json:"status"`
	InputHash    string `json:"input_hash"`
}

func newFakeStudio(t testing.TB, decide map[string]string) *fakeStudio {
	t.Helper()
	f := &fakeStudio{decide: decide, failNext: map[string]int{}, loseNext: map[string]int{}, answered: map[string]answer{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/v1/rule-checkpoints/", f.serve)
	mux.HandleFunc("GET /test/answered", func(w http.ResponseWriter, r *http.Request) {
		a, ok := f.answer(r.URL.Query().Get("occurrence"), r.URL.Query().Get("phase"))
		if !ok {
			http.NotFound(w, r)
			return
		}
		_ = json.NewEncoder(w).Encode(a)
	})
	f.srv = httptest.NewServer(mux)
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeStudio) serve(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") != "Api-Key "+studioKey || r.Header.Get("workspace") != studioWS || r.Header.Get("accept") != "application/json" {
		http.Error(w, `{"detail":"bad credentials"}`, http.StatusUnauthorized)
		return
	}
	var raw json.RawMessage
	if err := json.NewDecoder(r.Body).Decode(&raw); err != nil {
		http.Error(w, `{"detail":"bad body"}`, http.StatusBadRequest)
		return
	}
	c := studioCall{Token: r.Header.Get("X-Rule-Checkpoint-Token"), Raw: string(raw)}
	if err := json.Unmarshal(raw, &c.Body); err != nil || c.Token == "" {
		http.Error(w, `{"detail":"bad body"}`, http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	if f.failNext[c.Body.Phase] > 0 {
		f.failNext[c.Body.Phase]--
		f.calls = append(f.calls, c)
		f.mu.Unlock()
		http.Error(w, `{"detail":"try again"}`, http.StatusServiceUnavailable)
		return
	}
	key := c.Body.OccurrenceID + "/" + c.Body.Phase
	a, ok := f.answered[key]
	if !ok {
		a = answer{CheckpointID: fmt.Sprintf("chk-%d", len(f.answered)+1), Status: f.decide[c.Body.Phase], InputHash: "input-" + c.Body.Phase + "-" + c.Body.OccurrenceID}
		if a.Status == "" {
			a.Status = checkpoint.DecisionAllow
		}
		f.answered[key] = a
	}
	f.calls = append(f.calls, c)
	hook, lose := f.hook, f.loseNext[c.Body.Phase] > 0
	if lose {
		f.loseNext[c.Body.Phase]--
	}
	f.mu.Unlock()
	if hook != nil {
		hook(c, a)
	}
	if lose {
		// Studio decided, and the answer is lost on the way back.
		http.Error(w, `{"detail":"gateway timeout"}`, http.StatusGatewayTimeout)
		return
	}
	_ = json.NewEncoder(w).Encode(map[string]string{"checkpoint_id": a.CheckpointID, "status": a.Status,
		"snapshot_hash": c.Body.SnapshotHash, "input_hash": a.InputHash})
}

func (f *fakeStudio) answer(occurrence, phase string) (answer, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	a, ok := f.answered[occurrence+"/"+phase]
	return a, ok
}

// callsOf returns the calls received for occurrence.
func (f *fakeStudio) callsOf(occurrence string) []studioCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []studioCall
	for _, c := range f.calls {
		if c.Body.OccurrenceID == occurrence {
			out = append(out, c)
		}
	}
	return out
}

func (f *fakeStudio) allCalls() []studioCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]studioCall(nil), f.calls...)
}

func (f *fakeStudio) failPhase(phase string, n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failNext[phase] = n
}

func (f *fakeStudio) loseAnswer(phase string, n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.loseNext[phase] = n
}

func (f *fakeStudio) setHook(h func(studioCall, answer)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.hook = h
}

// client is the real Studio client pointed at the fake, as package checkpoint's Studio.
func (f *fakeStudio) client(t testing.TB) checkpoint.Studio {
	t.Helper()
	c, err := studio.New(studio.Settings{APIURL: f.srv.URL, WorkspaceID: studioWS, APIKey: studioKey, Timeout: 30 * time.Second},
		studio.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	return c.RuleCheckpoints()
}

// Types of the test's guarded step: charge an order.
type order struct {
	ID     string `json:"id"`
	Amount int    `json:"amount"`
}

type receipt struct {
	Order string `json:"order"`
	Ref   string `json:"ref"`
}

// counts counts the runs of effects and advances per order id.
type counts struct {
	mu      sync.Mutex
	effects map[string]int
	advance map[string]int
}

func (c *counts) add(m *map[string]int, id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if *m == nil {
		*m = map[string]int{}
	}
	(*m)[id]++
}

func (c *counts) get(id string) (effects, advances int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.effects[id], c.advance[id]
}

// behaviour scripts an instance's effect, after context and advance.
type behaviour struct {
	effect    func(ctx context.Context, o order) (receipt, error) // nil: the default one
	after     func(o order, r receipt) (any, error)               // nil: the default one
	advance   func(ctx context.Context, o order, r receipt) error
	noAdvance bool // the step defines no Advance
}

// owner is a stand-in agent for Define.
type owner struct{ reg *checkpoint.Registry }

func (o owner) GuardedSteps() *checkpoint.Registry { return o.reg }

// instance is one controller instance: its own service and registry on the shared store.
type instance struct {
	svc  *checkpoint.Service
	reg  *checkpoint.Registry
	step *checkpoint.Step[order, receipt]
	ws   string
	logs *syncbuf.Buffer
}

// world is a test's store, Studio and counters; instances share them.
type world struct {
	t      testing.TB
	store  store.Store
	studio *fakeStudio
	counts *counts
	ws     string
	logs   syncbuf.Buffer
	tokens []string // every snapshot token used
}

func newWorld(t testing.TB, s store.Store, decide map[string]string) *world {
	return &world{t: t, store: s, studio: newFakeStudio(t, decide), counts: &counts{}, ws: testenv.UniqueName("ws-")}
}

const stepName = "charge"

func rules() *contract.RuleCheckpoints {
	return &contract.RuleCheckpoints{Phases: []string{"before", "after"}, SecretRefs: []string{"context.customer.card", "case.metadata.iban"}}
}

// instance starts an instance on the world's store.
func (w *world) instance(b behaviour, opts ...func(*checkpoint.Config)) *instance {
	cfg := checkpoint.Config{Store: w.store, Studio: w.studio.client(w.t),
		Logger: slog.New(slog.NewJSONHandler(&w.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	for _, o := range opts {
		o(&cfg)
	}
	reg := checkpoint.NewRegistry(rules())
	effect := b.effect
	if effect == nil {
		effect = func(_ context.Context, o order) (receipt, error) {
			return receipt{Order: o.ID, Ref: "rcpt-" + o.ID}, nil
		}
	}
	f := checkpoint.Funcs[order, receipt]{
		Effect: func(ctx context.Context, o order) (receipt, error) {
			w.counts.add(&w.counts.effects, o.ID)
			return effect(ctx, o)
		},
		AfterContext: func(o order, r receipt) (any, error) {
			if b.after != nil {
				return b.after(o, r)
			}
			return map[string]any{"operation": "charge", "order": o.ID, "receipt": r.Ref}, nil
		},
		Advance: func(ctx context.Context, o order, r receipt) error {
			w.counts.add(&w.counts.advance, o.ID)
			if b.advance != nil {
				return b.advance(ctx, o, r)
			}
			return nil
		},
	}
	if b.noAdvance {
		f.Advance = nil
	}
	step := checkpoint.Define(owner{reg}, stepName, f)
	if err := reg.Err(); err != nil {
		w.t.Fatal(err)
	}
	return &instance{svc: checkpoint.NewService(cfg), reg: reg, step: step, ws: w.ws, logs: &w.logs}
}

// ctx is a handler's context of the instance, for the world's workspace.
func (i *instance) ctx() context.Context {
	return checkpoint.NewContext(context.Background(), i.svc, i.reg, agentSlug, i.ws)
}

// job is one governed job: its job.start request and the ids of its step.
type job struct {
	w     *world
	token string
	req   *contract.ActionRequest
	occ   checkpoint.Occurrence
	order order
}

func (w *world) job() *job {
	token := testenv.UniqueName("checkpoint-token-")
	w.tokens = append(w.tokens, token)
	id := testenv.UniqueName("job-")
	input, _ := json.Marshal(map[string]any{"amount": 12, "rule_snapshot": map[string]any{
		"hash": snapshotHash, "checkpoint_url": "https://attacker.example/collect", "version": 1, "checkpoint_token": token}})
	return &job{w: w, token: token,
		req:   &contract.ActionRequest{RequestID: "r1", AgentSlug: agentSlug, Action: "job.start", Surface: "job.start", MissionID: "m1", JobID: &id, Input: input},
		occ:   checkpoint.Occurrence{JobID: id, CaseID: "case-1", StepID: "step-charge", OccurrenceID: testenv.UniqueName("occ-")},
		order: order{ID: testenv.UniqueName("order-"), Amount: 12}}
}

func (j *job) gate(t testing.TB, i *instance) *checkpoint.Gate {
	t.Helper()
	g, err := checkpoint.FromJobStart(i.ctx(), j.req)
	if err != nil {
		t.Fatalf("FromJobStart: %v", err)
	}
	return g
}

// before is the before checkpoint's context: a card number Studio must not see.
func (j *job) before() map[string]any {
	return map[string]any{"operation": "charge", "amount": j.order.Amount, "customer": map[string]any{"name": "Ada", "card": cardNumber}}
}

func (j *job) run(t testing.TB, i *instance) (checkpoint.Outcome[receipt], error) {
	t.Helper()
	return checkpoint.RunGuardedStep(i.ctx(), j.gate(t, i), i.step, j.occ, j.before(), j.order)
}

// resumeRequest is Studio's rule.checkpoint.resume for the checkpoint of phase.
func (j *job) resumeRequest(t testing.TB, phase, status string) *contract.ActionRequest {
	t.Helper()
	a, ok := j.w.studio.answer(j.occ.OccurrenceID, phase)
	if !ok {
		t.Fatalf("Studio never answered the %s checkpoint of %s", phase, j.occ.OccurrenceID)
	}
	return resumeRequestFor(j.occ, phase, status, a)
}

func resumeRequestFor(occ checkpoint.Occurrence, phase, status string, a answer) *contract.ActionRequest {
	input, _ := json.Marshal(map[string]any{"checkpoint_id": a.CheckpointID, "occurrence_id": occ.OccurrenceID, "phase": phase,
		"status": status, "snapshot_hash": snapshotHash, "input_hash": a.InputHash, "decision_id": "decision-" + phase})
	jobID, caseID := occ.JobID, occ.CaseID
	return &contract.ActionRequest{RequestID: "r2", AgentSlug: agentSlug, Action: contract.RuleCheckpointResumeAction,
		Surface: "mission.agent", MissionID: "m1", JobID: &jobID, CaseID: &caseID, Input: input}
}

// resume delivers a decision through the instance's rule.checkpoint.resume and returns the
// result's JSON.
func (j *job) resume(t testing.TB, i *instance, phase, status string) (string, error) {
	t.Helper()
	res, err := checkpoint.Resume(i.ctx(), j.resumeRequest(t, phase, status))
	if err != nil {
		return "", err
	}
	b, err := contract.AppendJSON(nil, res)
	if err != nil {
		t.Fatal(err)
	}
	return string(b), nil
}

func (j *job) counts() (effects, advances int) { return j.w.counts.get(j.order.ID) }

// wantCounts fails t unless the effect and the advance ran that many times.
func (j *job) wantCounts(t testing.TB, effects, advances int) {
	t.Helper()
	if e, a := j.counts(); e != effects || a != advances {
		t.Errorf("effect ran %d times, advance %d; want %d and %d", e, a, effects, advances)
	}
}

// noSecrets fails t if a snapshot token, the Studio key or the card number is in the logs, in
// errs or in any record of the store; Studio alone saw them, in the token header.
func (w *world) noSecrets(t testing.TB, errs ...error) {
	t.Helper()
	secrets := append([]string{studioKey, cardNumber}, w.tokens...)
	check := func(where, s string) {
		for _, sec := range secrets {
			if strings.Contains(s, sec) {
				t.Errorf("%s holds a secret (%.12s…):\n%.2000s", where, sec, s)
			}
		}
	}
	check("the logs", w.logs.String())
	for _, err := range errs {
		if err != nil {
			check("an error", err.Error())
		}
	}
	recs := records(t, w.store, "rulecheckpoint/")
	for _, it := range recs {
		check("store record "+it.Key, string(it.Value))
	}
	n := len(recs)
	if n == 0 {
		t.Error("no rule-checkpoint record in the store: nothing was checked")
	}
	for _, c := range w.studio.allCalls() {
		check("a checkpoint body sent to Studio", c.Raw)
	}
}

var errBoom = errors.New("boom")

// positiveWait bounds a wait for something that must happen: a failure bound only (a passing
// test never waits for it), generous because a loaded machine slows the stores' servers.
const positiveWait = 2 * time.Minute

// recv receives from ch, failing t if nothing comes within positiveWait.
func recv[T any](t testing.TB, ch <-chan T, what string) T {
	t.Helper()
	timer := time.NewTimer(positiveWait)
	defer timer.Stop()
	select {
	case v := <-ch:
		return v
	case <-timer.C:
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

// manualClock is the time and the lease-renewal timers of instances, moved by the test. Every
// renewal timer an instance arms is sent on armed (buffered: arming never blocks a runner) and
// fires when the test sends on it. A runner arms its next timer only after the renewal the last
// one fired has been written or refused, so receiving the next timer is the signal that the
// renewal is over: no polling of the store, no timeout to detect a renewal that went wrong.
type manualClock struct {
	mu    sync.Mutex
	now   time.Time
	armed chan chan time.Time
}

func newManualClock() *manualClock {
	return &manualClock{now: time.Now(), armed: make(chan chan time.Time, 256)}
}

func (c *manualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *manualClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// set moves the clock to when.
func (c *manualClock) set(when time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = when
}

// renewing configures an instance on the clock with a lease of lease, whose renewals the test
// fires (nextTimer).
func (c *manualClock) renewing(lease time.Duration) func(*checkpoint.Config) {
	return func(cfg *checkpoint.Config) {
		cfg.Now, cfg.Lease = c.Now, lease
		cfg.After = func(time.Duration) <-chan time.Time {
			ch := make(chan time.Time, 1)
			c.armed <- ch
			return ch
		}
	}
}

// frozen configures an instance on the clock whose renewal timers never fire.
func (c *manualClock) frozen(lease time.Duration) func(*checkpoint.Config) {
	return func(cfg *checkpoint.Config) {
		cfg.Now, cfg.Lease = c.Now, lease
		cfg.After = func(time.Duration) <-chan time.Time { return nil }
	}
}

// nextTimer returns the next renewal timer armed by a renewing instance.
func (c *manualClock) nextTimer(t testing.TB, what string) chan time.Time {
	t.Helper()
	return recv(t, c.armed, what)
}

// drain forgets the timers armed so far (by runs that have ended).
func (c *manualClock) drain() {
	for {
		select {
		case <-c.armed:
		default:
			return
		}
	}
}

// effectTimer returns the renewal timer of a run's effect, once the effect has started: every
// lease-guarded call arms one timer when it starts, so the run's first timer is its before
// checkpoint's (over, never to fire) and the second the effect's.
func (c *manualClock) effectTimer(t testing.TB) chan time.Time {
	t.Helper()
	c.nextTimer(t, "the before checkpoint's renewal timer")
	return c.nextTimer(t, "the effect's renewal timer")
}

// records returns every record of s under prefix, its value unpacked (occurrence records are
// stored deflated), so that tests read and search what a record holds, never its compressed bytes.
func records(t testing.TB, s store.Store, prefix string) []store.Item {
	t.Helper()
	l, ok := s.(store.Lister)
	if !ok {
		t.Fatalf("%T cannot list", s)
	}
	var out []store.Item
	for after := ""; ; {
		p, err := l.List(context.Background(), prefix, after, store.MaxListLimit)
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range p.Items {
			if it.Value, err = packed.Unpack(it.Value); err != nil {
				t.Fatalf("unpack the stored record %s: %v", it.Key, err)
			}
			out = append(out, it)
		}
		if p.Next == "" {
			return out
		}
		after = p.Next
	}
}
