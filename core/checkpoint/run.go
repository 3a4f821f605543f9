package checkpoint

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/supervaize/svz/core/internal/packed"

	"github.com/supervaize/svz/core/store"
)

// Rule-checkpoint phases and decisions.
const (
	PhaseBefore = "before"
	PhaseAfter  = "after"

	DecisionAllow = "allow"
	DecisionPause = "pause"
	DecisionStop  = "stop"

	// checking is a phase whose checkpoint was written before Studio was called and whose answer
	// is not recorded yet: it is sent again, unchanged.
	checking = "checking"
)

// States of a guarded step, each written (compare-and-swap) before the side effect that follows.
const (
	stBeforeChecking = "before_checking"  // the before checkpoint is being sent
	stBeforePaused   = "before_paused"    // it answered pause: awaiting rule.checkpoint.resume
	stBeforeAllowed  = "before_allowed"   // allow: the effect may start
	stEffectStarted  = "effect_started"   // the effect was called; its outcome is not recorded
	stEffectDone     = "effect_completed" // its result is recorded
	stAfterChecking  = "after_checking"   // the after checkpoint is being sent
	stAfterPaused    = "after_paused"
	stAfterAllowed   = "after_allowed"
	stAdvancing      = "advancing" // the advance was called; its completion is not recorded
	stCompleted      = "completed"
	stBlocked        = "blocked" // a checkpoint answered stop
)

// phaseState is one checkpoint of a step. Context is the context as sent to Studio (values at
// context.* secret_refs removed); ContextHash is the reference's hash of the context the agent
// gave.
type phaseState struct {
	ContextHash  string          `json:"context_hash,omitempty"`
	Context      json.RawMessage `json:"context,omitempty"`
	CheckpointID string          `json:"checkpoint_id,omitempty"`
	InputHash    string          `json:"input_hash,omitempty"` // Studio's
	Status       string          `json:"status,omitempty"`     // checking, pause, allow or stop
	DecisionID   string          `json:"decision_id,omitempty"`
	Resumed      bool            `json:"resumed,omitempty"` // the status came from rule.checkpoint.resume
}

// lease is the claim of the instance running an occurrence.
type lease struct {
	Owner string    `json:"owner"`
	Until time.Time `json:"until"`
}

// stepRecord is an occurrence of a guarded step in the store. It never holds the checkpoint
// token: the token is sealed in the job's gate record.
type stepRecord struct {
	Format       int             `json:"format"`
	Agent        string          `json:"agent_slug"`
	JobID        string          `json:"job_id"`
	CaseID       string          `json:"case_id"`
	StepID       string          `json:"step_id"`
	OccurrenceID string          `json:"occurrence_id"`
	Step         string          `json:"step"` // the step's registered name
	SnapshotHash string          `json:"snapshot_hash"`
	InputHash    string          `json:"input_hash"`
	Input        json.RawMessage `json:"input"`
	State        string          `json:"state"`
	Before       phaseState      `json:"before"`
	After        phaseState      `json:"after"`
	Result       json.RawMessage `json:"result,omitempty"`
	Lease        *lease          `json:"lease,omitempty"`
}

func (s *stepRecord) phase(p string) *phaseState {
	if p == PhaseBefore {
		return &s.Before
	}
	return &s.After
}

// storeKey is a fixed-size key: a hash of the length-prefixed parts, so that no two tuples
// collide and no id can reach into another workspace's records.
func storeKey(kind string, parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(p)))
		h.Write(n[:])
		h.Write([]byte(p))
	}
	return "rulecheckpoint/v1/" + kind + "/" + hex.EncodeToString(h.Sum(nil))
}

func (sc *scope) gateKey(job string) string { return storeKey("gate", sc.workspace, job) }

func (sc *scope) stepKey(job, cs, occ string) string {
	return storeKey("step", sc.workspace, job, cs, occ)
}

func (sc *scope) decisionKey(job, cs, occ, phase string) string {
	return storeKey("decision", sc.workspace, job, cs, occ, phase)
}

// errRetry: the record changed under a claim; read it again.
var errRetry = errors.New("checkpoint: the record changed; read it again")

// runner drives one occurrence on behalf of one instance.
type runner struct {
	sc    *scope
	key   string
	k     kind  // the step's functions; looked up by name when nil
	gate  *Gate // the job's gate; opened from its record when nil
	owner string

	mu   sync.Mutex // guards rec, ver and held against the lease renewals
	rec  stepRecord
	ver  uint64
	held bool
}

func newRunner(sc *scope, key string, k kind, g *Gate) *runner {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return &runner{sc: sc, key: key, k: k, gate: g, owner: hex.EncodeToString(b)}
}

// load reads the record; found is false when there is none.
func (r *runner) load(ctx context.Context) (bool, error) {
	got, err := r.sc.svc.store.Get(ctx, r.key)
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("checkpoint: read the occurrence: %w", err)
	}
	var rec stepRecord
	b, err := packed.Unpack(got.Value)
	if err == nil {
		err = json.Unmarshal(b, &rec)
	}
	if err != nil {
		return false, fmt.Errorf("checkpoint: unreadable occurrence record: %w", err)
	}
	r.mu.Lock()
	r.rec, r.ver, r.held = rec, got.Version, false
	r.mu.Unlock()
	return true, nil
}

// leaseLive reports whether another instance holds the occurrence.
func (r *runner) leaseLive() bool {
	l := r.rec.Lease
	return l != nil && l.Owner != r.owner && r.sc.svc.now().Before(l.Until)
}

func (r *runner) encode(rec *stepRecord) ([]byte, error) {
	b, err := json.Marshal(rec)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: encode the occurrence: %w", err)
	}
	b = r.sc.svc.packer.Pack(b)
	if n := r.sc.svc.store.MaxValueSize(); len(b) > n {
		return nil, fmt.Errorf("checkpoint: the occurrence record is %d bytes packed, more than the store accepts (%d): keep the step's input, contexts and result small (refer to large content by id): %w", len(b), n, store.ErrTooLarge)
	}
	return b, nil
}

func (r *runner) newLease() *lease {
	return &lease{Owner: r.owner, Until: r.sc.svc.now().Add(r.sc.svc.lease + SkewMargin).UTC()}
}

// create writes a new occurrence, held by this instance; errRetry when one already exists.
func (r *runner) create(ctx context.Context, rec stepRecord) error {
	rec.Lease = r.newLease()
	b, err := r.encode(&rec)
	if err != nil {
		return err
	}
	got, err := r.sc.svc.store.Create(ctx, r.key, b, store.Never)
	if errors.Is(err, store.ErrExists) {
		return errRetry
	}
	if err != nil {
		return fmt.Errorf("checkpoint: write the occurrence: %w", err)
	}
	r.mu.Lock()
	r.rec, r.ver, r.held = rec, got.Version, true
	r.mu.Unlock()
	return nil
}

// put applies mutate to the record and writes it with compare-and-swap, holding the lease when
// hold is set and releasing it otherwise. A lost compare-and-swap is ErrLeaseLost when this
// instance held the occurrence, errRetry when it was about to claim it.
func (r *runner) put(ctx context.Context, mutate func(*stepRecord), hold bool) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	next := r.rec
	if mutate != nil {
		mutate(&next)
	}
	next.Lease = nil
	if hold {
		next.Lease = r.newLease()
	}
	b, err := r.encode(&next)
	if err != nil {
		return err
	}
	got, err := r.sc.svc.store.Update(ctx, r.key, r.ver, b, store.Never)
	switch {
	case err == nil:
		r.rec, r.ver, r.held = next, got.Version, hold
		return nil
	case errors.Is(err, store.ErrConflict), errors.Is(err, store.ErrNotFound):
		if r.held {
			r.held = false
			return ErrLeaseLost
		}
		return errRetry
	}
	return fmt.Errorf("checkpoint: write the occurrence: %w", err)
}

// claim takes the occurrence's lease.
func (r *runner) claim(ctx context.Context) error { return r.put(ctx, nil, true) }

// release gives the lease up, even when ctx is done.
func (r *runner) release(ctx context.Context) error {
	if !r.held {
		return nil
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), writeTimeout)
	defer cancel()
	return r.put(wctx, nil, false)
}

// guarded runs call while renewing the lease every quarter lease. If the lease is lost, call's
// context is cancelled and ErrLeaseLost is returned. The renewals end with call, whatever happens
// to it.
func (r *runner) guarded(ctx context.Context, call func(context.Context) error) error {
	cctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop, done := make(chan struct{}), make(chan error, 1)
	go func() {
		var lost error
		defer func() { done <- lost }()
		for {
			select {
			case <-stop:
				return
			case <-cctx.Done():
				return
			case <-r.sc.svc.after(r.sc.svc.lease / 4):
			}
			wctx, wcancel := context.WithTimeout(context.WithoutCancel(ctx), min(writeTimeout, r.sc.svc.lease/4))
			err := r.put(wctx, nil, true)
			wcancel()
			switch {
			case errors.Is(err, ErrLeaseLost):
				lost = ErrLeaseLost
				cancel(ErrLeaseLost)
				return
			case err != nil:
				r.sc.svc.log.WarnContext(ctx, "checkpoint: cannot renew the occurrence's lease; trying again", "error", err)
			}
		}
	}()
	err := call(cctx)
	close(stop)
	if lost := <-done; lost != nil {
		return lost
	}
	return err
}

// kind returns the step's functions, found by name on this instance.
func (r *runner) kind() (kind, error) {
	if r.k != nil {
		return r.k, nil
	}
	k := r.sc.reg.kinds[r.rec.Step]
	if k == nil {
		return nil, fmt.Errorf("checkpoint: guarded step %q is not defined on agent %q in this instance: every instance must define the same steps (checkpoint.Define) under the same names", r.rec.Step, r.sc.agent)
	}
	r.k = k
	return k, nil
}

// gateFor returns the job's gate, opening its stored token when the runner has none.
func (r *runner) gateFor(ctx context.Context) (*Gate, error) {
	if r.gate != nil {
		return r.gate, nil
	}
	g, err := JobGate(ctx, r.rec.JobID)
	if err != nil {
		return nil, err
	}
	if g.snapshotHash != r.rec.SnapshotHash {
		return nil, ErrRetrySnapshot
	}
	r.gate = g
	return g, nil
}

// noToken refuses JSON that holds the gate's token.
func noToken(g *Gate, docs ...[]byte) error {
	if g == nil || g.token == "" {
		return nil
	}
	for _, d := range docs {
		if bytes.Contains(d, []byte(g.token)) {
			return ErrTokenInContext
		}
	}
	return nil
}

// prepareContext returns the context's reference hash and the context to send: its canonical
// JSON without the values at the gate's context.* secret_refs.
func prepareContext(g *Gate, v any) (hash string, sent json.RawMessage, err error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return "", nil, fmt.Errorf("checkpoint: encode the checkpoint context: %w", err)
	}
	full, err := canonicalize(raw)
	if err != nil {
		return "", nil, fmt.Errorf("checkpoint: encode the checkpoint context: %w", err)
	}
	if len(full) == 0 || full[0] != '{' {
		return "", nil, errors.New("checkpoint: a checkpoint context must be a JSON object")
	}
	if err := noToken(g, raw, full); err != nil {
		return "", nil, err
	}
	sent, err = withoutSecrets(full, g.secretRefs)
	if err != nil {
		return "", nil, err
	}
	return contextHash(full), sent, nil
}

// withoutSecrets removes the values at the context.* paths of refs from the canonical object doc.
func withoutSecrets(doc []byte, refs []string) ([]byte, error) {
	var paths [][]string
	for _, ref := range refs {
		if rest, ok := strings.CutPrefix(ref, "context."); ok && rest != "" {
			paths = append(paths, strings.Split(rest, "."))
		}
	}
	if len(paths) == 0 {
		return doc, nil
	}
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	for _, p := range paths {
		cur := m
		for i, name := range p {
			if i == len(p)-1 {
				delete(cur, name)
				break
			}
			next, ok := cur[name].(map[string]any)
			if !ok {
				break
			}
			cur = next
		}
	}
	var b []byte
	return appendCanonical(b, m)
}

// checkpoint posts the checkpoint of phase as recorded (the same one again after a lost answer).
func (r *runner) checkpoint(ctx context.Context, phase string) (Response, error) {
	g, err := r.gateFor(ctx)
	if err != nil {
		return Response{}, err
	}
	p := r.rec.phase(phase)
	req := Request{OccurrenceID: r.rec.OccurrenceID, Phase: phase, SnapshotHash: r.rec.SnapshotHash, JobID: r.rec.JobID,
		CaseID: r.rec.CaseID, StepID: r.rec.StepID, Context: p.Context, SecretRefs: g.SecretRefs()}
	var resp Response
	err = r.guarded(ctx, func(ctx context.Context) error {
		var err error
		resp, err = r.sc.svc.studio.RuleCheckpoint(ctx, g.token, req)
		return err
	})
	if err != nil {
		return Response{}, err
	}
	switch {
	case resp.Status != DecisionAllow && resp.Status != DecisionPause && resp.Status != DecisionStop:
		return Response{}, fmt.Errorf("%w: Studio answered status %q (want allow, pause or stop)", ErrRequestFailed, resp.Status)
	case resp.SnapshotHash != r.rec.SnapshotHash:
		return Response{}, ErrResponseHash
	case resp.CheckpointID == "":
		return Response{}, fmt.Errorf("%w: Studio's answer has no checkpoint_id", ErrRequestFailed)
	}
	return resp, nil
}

// decided is the state after a phase's decision.
func decided(phase, status string) string {
	switch {
	case status == DecisionStop:
		return stBlocked
	case phase == PhaseBefore && status == DecisionPause:
		return stBeforePaused
	case phase == PhaseBefore:
		return stBeforeAllowed
	case status == DecisionPause:
		return stAfterPaused
	}
	return stAfterAllowed
}

// answered records Studio's answer to the checkpoint of phase.
func (r *runner) answered(ctx context.Context, phase string, resp Response) error {
	return r.put(ctx, func(s *stepRecord) {
		p := s.phase(phase)
		p.CheckpointID, p.InputHash, p.Status = resp.CheckpointID, resp.InputHash, resp.Status
		s.State = decided(phase, resp.Status)
	}, true)
}

// drive moves the held occurrence on until it completes, is blocked, pauses or fails. Every
// state is written before the call it announces; the caller releases the lease.
func (r *runner) drive(ctx context.Context) error {
	for {
		switch r.rec.State {
		case stBeforeChecking, stAfterChecking:
			phase := PhaseBefore
			if r.rec.State == stAfterChecking {
				phase = PhaseAfter
			}
			resp, err := r.checkpoint(ctx, phase)
			if err != nil {
				return err
			}
			if err := r.answered(ctx, phase, resp); err != nil {
				return err
			}
		case stBeforePaused, stAfterPaused:
			applied, err := r.applyDecision(ctx)
			if err != nil || applied {
				if err != nil {
					return err
				}
				continue
			}
			// Give the occurrence up, then look once more: a decision stored while this instance
			// held the lease was left for it (see Resume).
			if err := r.release(ctx); err != nil {
				return err
			}
			if d, _, ok, err := r.loadDecision(ctx, r.pausedPhase()); err != nil || !ok || !d.matches(&r.rec) {
				return err
			}
			if err := r.claim(ctx); err != nil {
				if errors.Is(err, errRetry) {
					return nil // another instance took it, decision and all
				}
				return err
			}
		case stBeforeAllowed:
			if err := r.runEffect(ctx); err != nil {
				return err
			}
		case stEffectDone:
			if err := r.afterContext(ctx); err != nil {
				return err
			}
		case stAfterAllowed:
			if err := r.advance(ctx); err != nil {
				return err
			}
		case stCompleted, stBlocked:
			return nil
		case stEffectStarted:
			return recovery(ErrEffectStarted)
		case stAdvancing:
			return recovery(ErrAmbiguousAdvance)
		default:
			return fmt.Errorf("checkpoint: occurrence in unknown state %q", r.rec.State)
		}
	}
}

func (r *runner) pausedPhase() string {
	if r.rec.State == stBeforePaused {
		return PhaseBefore
	}
	return PhaseAfter
}

// runEffect records that the effect starts, calls it once and records its result.
func (r *runner) runEffect(ctx context.Context) error {
	k, err := r.kind()
	if err != nil {
		return err
	}
	g, err := r.gateFor(ctx)
	if err != nil {
		return err
	}
	if err := r.put(ctx, func(s *stepRecord) { s.State = stEffectStarted }, true); err != nil {
		return err
	}
	var out json.RawMessage
	err = r.guarded(ctx, func(ctx context.Context) error {
		var err error
		out, err = k.effect(ctx, r.rec.Input)
		return err
	})
	if err != nil {
		return recovery(fmt.Errorf("rule-gated effect of step %q failed; it is never run again for this occurrence (%w): %w", r.rec.Step, ErrEffectStarted, err))
	}
	if err := noToken(g, out); err != nil {
		return recovery(fmt.Errorf("%w (the effect's result; it is not recorded: %w)", err, ErrEffectStarted))
	}
	return r.put(ctx, func(s *stepRecord) { s.State, s.Result = stEffectDone, out }, true)
}

// afterContext computes the after checkpoint's context from the recorded result and records it.
func (r *runner) afterContext(ctx context.Context) error {
	k, err := r.kind()
	if err != nil {
		return err
	}
	g, err := r.gateFor(ctx)
	if err != nil {
		return err
	}
	v, err := k.after(r.rec.Input, r.rec.Result)
	if err != nil {
		return fmt.Errorf("checkpoint: after context of step %q: %w", r.rec.Step, err)
	}
	hash, sent, err := prepareContext(g, v)
	if err != nil {
		return err
	}
	return r.put(ctx, func(s *stepRecord) {
		s.State = stAfterChecking
		s.After = phaseState{ContextHash: hash, Context: sent, Status: checking}
	}, true)
}

// advance records that the advance starts, calls it once and records its completion.
func (r *runner) advance(ctx context.Context) error {
	k, err := r.kind()
	if err != nil {
		return err
	}
	if !k.hasAdvance() {
		return r.put(ctx, func(s *stepRecord) { s.State = stCompleted }, true)
	}
	if err := r.put(ctx, func(s *stepRecord) { s.State = stAdvancing }, true); err != nil {
		return err
	}
	if err := r.guarded(ctx, func(ctx context.Context) error { return k.advance(ctx, r.rec.Input, r.rec.Result) }); err != nil {
		return recovery(fmt.Errorf("advance of step %q failed; it is never run again for this occurrence (%w): %w", r.rec.Step, ErrAmbiguousAdvance, err))
	}
	return r.put(ctx, func(s *stepRecord) { s.State = stCompleted }, true)
}

// held runs drive with the lease and releases it after, whatever happened.
func (r *runner) driveHeld(ctx context.Context) error {
	err := r.drive(ctx)
	if rerr := r.release(ctx); rerr != nil && err == nil && !errors.Is(rerr, ErrLeaseLost) {
		r.sc.svc.log.WarnContext(ctx, "checkpoint: cannot release the occurrence; it frees when its lease ends", "error", rerr)
	}
	return err
}

// outcomeOf reads where the occurrence stands.
func outcomeOf[Out any](r *runner) (Outcome[Out], error) {
	rec := &r.rec
	var o Outcome[Out]
	if len(rec.Result) > 0 {
		if err := json.Unmarshal(rec.Result, &o.Result); err != nil {
			return o, fmt.Errorf("checkpoint: decode the recorded result of step %q: %w", rec.Step, err)
		}
		o.HasResult = true
	}
	switch rec.State {
	case stCompleted:
		o.Status = Completed
	case stBlocked:
		o.Status, o.Phase, o.CheckpointID = Blocked, PhaseBefore, rec.Before.CheckpointID
		if rec.After.Status == DecisionStop {
			o.Phase, o.CheckpointID = PhaseAfter, rec.After.CheckpointID
		}
	case stBeforePaused:
		o.Status, o.Phase, o.CheckpointID = Awaiting, PhaseBefore, rec.Before.CheckpointID
	case stAfterPaused:
		o.Status, o.Phase, o.CheckpointID = Awaiting, PhaseAfter, rec.After.CheckpointID
	case stEffectStarted, stAdvancing:
		o.Status = RecoveryRequired
		if r.leaseLive() {
			o.Status = Running
		}
	default:
		o.Status = Running
	}
	return o, nil
}
