// Package idempotency makes retried mutating actions safe for every agent, with no handler code:
// the controller passes each mutating action that carries an idempotency_key (job.start first of
// all) through Gate.Do, which claims the key in a store.Store before the handler runs.
//
// For one key, scoped by verified workspace, agent slug and action:
//
//   - the same request again (same input and identities) gets the original result, byte for
//     byte, without running the handler; results carry replay_safety.strictly_idempotent_response
//     = true;
//   - a different request gets status "error" with errors[0].code = "idempotency_conflict";
//     different means another input, mission_id, job_id, case_id, step_id or surface. Nothing
//     else counts: request_id, actor and the grant change with every call; Studio sends the
//     mission's current name and metadata with every request; the workspace slug can be
//     renamed; draft_session_id is transient UI context; unknown members are not part of the
//     contract. A retry that differs only there is replayed;
//   - a request arriving while the first still runs gets "idempotency_in_progress" with the
//     time left on the running claim (retry_after_seconds, lease_expires_at); two runs never
//     overlap. The running claim is a short lease (DefaultLease) that the gate renews while the
//     handler runs, so a key whose process died frees DefaultLease + SkewMargin after its last
//     renewal; the action may then run again (at-most-once for external effects is the
//     rule-checkpoint gate's job). The handler's context ends with the request's deadline
//     (DefaultMaxRun without one), and when the gate finds its lease taken over;
//   - a handler that fails with an error releases the key so the retry runs; so does a refusal
//     that changed nothing (contract.ActionResult.Refusal: status "error", only input_* errors,
//     no effect), e.g. an input that does not match the declared fields, so that the corrected
//     request can run with the same key. Every other result, "ok" or "error", is replayed for
//     DefaultRetention (WithRetention).
//
// Conflict and in-progress answers are:
//
//	{"status":"error","effects":[],"errors":[{"code":"idempotency_conflict","message":"..."}]}
//	{"status":"error","effects":[],"errors":[{"code":"idempotency_in_progress","message":"...",
//	  "lease_expires_at":"2026-07-08T10:00:32Z","retry_after_seconds":17}]}
//
// The action is part of the scope because Studio sends the same key to job.start.preview and
// job.start. The preview is normally not mutating, so never gated and free to run again with
// edited input; and where an agent declares it mutating, its record still cannot collide with
// the confirm's.
//
// A result larger than the store accepts is never left unprotected: the key is marked as
// completed-but-unrecordable, the caller gets the real result (its work happened; answering an
// error would invite a duplicate setup) with strictly_idempotent_response = false and an error is
// logged, and every retry gets "idempotency_result_unrecordable" instead of running again.
package idempotency

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"time"

	"github.com/supervaize/svz/core/contract"
	"github.com/supervaize/svz/core/internal/packed"
	"github.com/supervaize/svz/core/store"
	keyfp "github.com/supervaize/svz/internal/fingerprint"
)

// Codes of the error results the gate answers with (errors[0].code).
const (
	CodeConflict     = "idempotency_conflict"
	CodeInProgress   = "idempotency_in_progress"
	CodeUnrecordable = "idempotency_result_unrecordable"
)

// Defaults of a Gate.
const (
	// DefaultRetention is how long a completed result is replayed.
	DefaultRetention = 24 * time.Hour
	// DefaultLease is how long a running claim lives unless renewed; the gate renews it every
	// quarter lease while the handler runs. A key held by a dead process frees at most
	// DefaultLease + SkewMargin after the process died.
	DefaultLease = 20 * time.Second
	// DefaultMaxRun bounds a run whose request has no deadline.
	DefaultMaxRun = 5 * time.Minute
	// SkewMargin keeps a claim alive past the end of its lease, so an instance whose clock runs
	// ahead cannot take the key over while the first run may still be finishing.
	SkewMargin = 2 * time.Second
	// writeTimeout bounds recording or releasing a claim after the run, when the caller's context
	// may already be done.
	writeTimeout = 10 * time.Second
)

// Record states.
const (
	stateRunning      = "running"
	stateDone         = "done"
	stateUnrecordable = "unrecordable"
)

// record is the stored value of a key.
type record struct {
	State       string          `json:"state"`
	Fingerprint string          `json:"fingerprint"`
	Result      json.RawMessage `json:"result,omitempty"`       // done: the result as answered
	ResultBytes int             `json:"result_bytes,omitempty"` // unrecordable: its encoded size
}

// Gate runs each keyed request at most once and replays its result. It is safe for concurrent
// use; all its state is in the store, so any number of instances can share one.
type Gate struct {
	store     store.Store
	now       func() time.Time
	retention time.Duration
	lease     time.Duration
	maxRun    time.Duration
	log       *slog.Logger
	// after is the renewal timer (time.After); tests replace it to renew on demand.
	after func(time.Duration) <-chan time.Time
	// packer stores completed records deflated (core/internal/packed): Hello World's job.start
	// record stays under the 1 KB of one DynamoDB write unit, and so does a replay's failed
	// conditional write, billed at the stored item's size.
	packer packed.Packer
}

// Option configures a Gate.
type Option func(*Gate)

// WithClock makes the gate read the time from now (use the store's clock).
func WithClock(now func() time.Time) Option { return func(g *Gate) { g.now = now } }

// WithRetention sets how long completed results are replayed (DefaultRetention).
func WithRetention(d time.Duration) Option { return func(g *Gate) { g.retention = d } }

// WithLease sets how long a running claim lives unless renewed (DefaultLease); it is renewed
// every quarter of it.
func WithLease(d time.Duration) Option { return func(g *Gate) { g.lease = d } }

// WithMaxRun sets how long a run whose request has no deadline may take (DefaultMaxRun).
func WithMaxRun(d time.Duration) Option { return func(g *Gate) { g.maxRun = d } }

// WithLogger sets the logger (slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(g *Gate) { g.log = l } }

// New returns a Gate keeping its records in s.
func New(s store.Store, opts ...Option) *Gate {
	g := &Gate{store: s, now: time.Now, retention: DefaultRetention, lease: DefaultLease, maxRun: DefaultMaxRun,
		log: slog.Default(), after: time.After}
	for _, o := range opts {
		o(g)
	}
	return g
}

// Do answers req from its record, or claims its key, calls run once and records the result.
// Errors are store failures (nothing ran) or run's own error (the key was released); the caller
// maps them to an internal error without showing them.
func (g *Gate) Do(ctx context.Context, req *contract.ActionRequest, run func(context.Context) (*contract.ActionResult, error)) (*contract.ActionResult, error) {
	res, _, err := g.do(ctx, req, run, nil)
	return res, err
}

// Event is an effect event a caller appends to a log once an action ran (core's effect stream).
type Event struct {
	Log  store.Log
	Name string
	Keep store.Retention
	// Data encodes the event of the recorded result (the one answered and replayed).
	Data func(*contract.ActionResult) ([]byte, error)
}

// DoAppending is Do, and saves a store call: when the handler ran, its result is recorded and ev
// appended in one atomic write (store.UpdateAppender), if the gate's store is ev.Log and
// implements it; appended reports that it was. When appended is false and the handler ran, the
// caller appends ev itself: the result could not be recorded with it (a store failure, a lost
// lease, a result too large), or the store cannot do both at once. A write whose outcome is
// unknown (a timeout) is resolved by reading the record: the append happened exactly when the
// record holds the result.
func (g *Gate) DoAppending(ctx context.Context, req *contract.ActionRequest, run func(context.Context) (*contract.ActionResult, error), ev Event) (res *contract.ActionResult, appended bool, err error) {
	return g.do(ctx, req, run, &ev)
}

func (g *Gate) do(ctx context.Context, req *contract.ActionRequest, run func(context.Context) (*contract.ActionResult, error), ev *Event) (*contract.ActionResult, bool, error) {
	if req.IdempotencyKey == nil {
		res, err := run(ctx)
		return res, false, err
	}
	key := scopeKey(req)
	fp, err := fingerprint(req)
	if err != nil {
		return nil, false, fmt.Errorf("idempotency: %s: %w", req.Action, err)
	}
	now := g.now()
	runEnd := now.Add(g.maxRun)
	if d, ok := ctx.Deadline(); ok {
		runEnd = d
	}
	if !runEnd.After(now) {
		return nil, false, fmt.Errorf("idempotency: %s: the request deadline has passed: %w", req.Action, context.DeadlineExceeded)
	}
	claim, err := json.Marshal(record{State: stateRunning, Fingerprint: fp})
	if err != nil {
		return nil, false, fmt.Errorf("idempotency: %s: %w", req.Action, err)
	}
	rec, err := g.store.Create(ctx, key, claim, g.leaseEnd(now, runEnd))
	switch {
	case err == nil:
		return g.runClaimed(ctx, req, key, fp, claim, rec.Version, runEnd, run, ev)
	case errors.Is(err, store.ErrExists):
		res, err := g.answer(req, fp, rec)
		return res, false, err
	}
	return nil, false, fmt.Errorf("idempotency: claim %s: %w", req.Action, err)
}

// leaseEnd is the expiry of a claim written at now: one lease later, never past the run's end,
// plus the skew margin.
func (g *Gate) leaseEnd(now, runEnd time.Time) time.Time {
	end := now.Add(g.lease)
	if end.After(runEnd) {
		end = runEnd
	}
	return end.Add(SkewMargin)
}

// runClaimed runs the handler under the lease, renewing it while the handler runs, and records
// its outcome.
func (g *Gate) runClaimed(ctx context.Context, req *contract.ActionRequest, key, fp string, claim []byte, version uint64,
	runEnd time.Time, run func(context.Context) (*contract.ActionResult, error), ev *Event) (*contract.ActionResult, bool, error) {
	log := g.log.With("action", req.Action, "agent_slug", req.AgentSlug, "request_id", req.RequestID, "key", keyID(key))
	runCtx, cancel := context.WithDeadline(ctx, runEnd)
	stop, renewed := make(chan struct{}), make(chan uint64)
	go func() { renewed <- g.renew(runCtx, cancel, log, key, claim, version, runEnd, stop) }()
	res, err := run(runCtx)
	close(stop)
	version = <-renewed // the renewals are over: this is the claim's version now
	cancel()
	var body, value []byte
	refused := err == nil && res != nil && res.Refusal()
	if err == nil && !refused {
		body, res, err = normalize(res)
	}
	if err == nil && !refused {
		value, err = json.Marshal(record{State: stateDone, Fingerprint: fp, Result: body})
	}
	if err == nil && !refused {
		value = g.packer.Pack(value)
	}
	// The run is over and must be recorded or released even if the caller has gone away.
	wctx, wcancel := context.WithTimeout(context.WithoutCancel(ctx), writeTimeout)
	defer wcancel()
	if err != nil || refused {
		// A failed run, or a refusal that changed nothing: release the key so the retry runs.
		if derr := g.store.Delete(wctx, key, version); derr != nil {
			log.ErrorContext(ctx, "idempotency: cannot release the key; retries wait for the lease to end",
				"lease_end", g.leaseEnd(g.now(), runEnd), "error", derr)
		}
		if err != nil {
			return nil, false, err
		}
		return res, false, nil
	}
	if len(value) > g.store.MaxValueSize() {
		return g.unrecordable(wctx, log, key, fp, version, res, len(body)), false, nil
	}
	if done, appended := g.recordAppending(wctx, log, key, version, value, res, ev); done {
		return res, appended, nil
	}
	_, err = g.store.Update(wctx, key, version, value, g.now().Add(g.retention))
	switch {
	case err == nil:
		return res, false, nil
	case errors.Is(err, store.ErrTooLarge): // a backend that counts more than the value
		return g.unrecordable(wctx, log, key, fp, version, res, len(body)), false, nil
	case errors.Is(err, store.ErrConflict):
		// Only this run writes this value: holding it, the record was written by the record-and-
		// append above whose answer was lost and which landed late, event included.
		if cur, gerr := g.store.Get(wctx, key); gerr == nil && bytes.Equal(cur.Value, value) {
			return res, true, nil
		}
	}
	// The store failed, or the run outlived its lease and lost the key. The work is done: answer
	// it, flagged as not replayable.
	log.ErrorContext(ctx, "idempotency: cannot record the result; a retry after the lease may run again", "error", err)
	return markStrict(res, false), false, nil
}

// recordAppending records a completed run and appends its event in one store call, when ev
// asks for it and the store can. done reports that the record is written (appended with it:
// both or neither); false leaves recording, and appending, to the caller's usual path: nothing
// was written, or what happened could not be told.
func (g *Gate) recordAppending(ctx context.Context, log *slog.Logger, key string, version uint64, value []byte,
	res *contract.ActionResult, ev *Event) (done, appended bool) {
	if ev == nil || ev.Data == nil || any(ev.Log) != any(g.store) {
		return false, false
	}
	ua, ok := g.store.(store.UpdateAppender)
	if !ok {
		return false, false
	}
	data, err := ev.Data(res)
	if err != nil || len(data) > g.store.MaxValueSize() {
		return false, false // the caller's own append reports it
	}
	_, err = ua.UpdateAppend(ctx, key, version, value, g.now().Add(g.retention), ev.Name, data, ev.Keep)
	switch {
	case err == nil:
		return true, true
	case errors.Is(err, store.ErrTooLarge), errors.Is(err, store.ErrInvalid), errors.Is(err, store.ErrConflict), errors.Is(err, store.ErrNotFound):
		// Nothing was written: the usual Update says what to do (an unrecordable result, a lost
		// lease), and the caller appends the event.
		return false, false
	}
	// Unknown outcome (a timeout, a broken connection): the record tells. Holding this run's
	// value, it was written, and the event with it.
	cur, gerr := g.store.Get(ctx, key)
	if gerr == nil && bytes.Equal(cur.Value, value) {
		return true, true
	}
	log.WarnContext(ctx, "idempotency: recording the result with its effect event failed; recording them apart", "error", err)
	return false, false
}

// renew extends the claim every quarter lease until stop is closed, and returns the claim's
// last version. It stops renewing when the run's time is up (the claim then lapses by itself),
// and cancels the run when the key was taken over (the lease ran out before a renewal landed:
// another run may have started, so this one must not go on).
func (g *Gate) renew(runCtx context.Context, cancel context.CancelFunc, log *slog.Logger, key string, claim []byte,
	version uint64, runEnd time.Time, stop <-chan struct{}) uint64 {
	for {
		select {
		case <-stop:
			return version
		case <-runCtx.Done():
			<-stop
			return version
		case <-g.after(g.lease / 4):
		}
		now := g.now()
		if !runEnd.After(now) {
			<-stop
			return version
		}
		wctx, wcancel := context.WithTimeout(context.WithoutCancel(runCtx), min(writeTimeout, g.lease/4))
		rec, err := g.store.Update(wctx, key, version, claim, g.leaseEnd(now, runEnd))
		wcancel()
		switch {
		case err == nil:
			version = rec.Version
		case errors.Is(err, store.ErrConflict), errors.Is(err, store.ErrNotFound):
			log.ErrorContext(runCtx, "idempotency: the running claim was lost (its lease ran out before it was renewed); stopping the run", "error", err)
			cancel()
			<-stop
			return version
		default:
			log.WarnContext(runCtx, "idempotency: cannot renew the running claim; trying again", "error", err)
		}
	}
}

// normalize marks a fresh result as replayable and returns its recorded form, both as JSON and
// decoded again: the first answer and every replay then encode to the same bytes (free-form
// members come back as JSON maps, whatever Go value the handler used).
func normalize(res *contract.ActionResult) ([]byte, *contract.ActionResult, error) {
	if res == nil {
		return nil, nil, errors.New("handler returned no result")
	}
	body, err := json.Marshal(markStrict(res, true))
	if err != nil {
		return nil, nil, fmt.Errorf("encode the result: %w", err)
	}
	var out contract.ActionResult
	if err := json.Unmarshal(body, &out); err != nil {
		return nil, nil, fmt.Errorf("decode the encoded result: %w", err)
	}
	return body, &out, nil
}

// unrecordable marks the key as completed with a result too large to keep, so retries get an
// explicit error instead of a second run, and returns res flagged as not replayable.
func (g *Gate) unrecordable(ctx context.Context, log *slog.Logger, key, fp string, version uint64, res *contract.ActionResult, size int) *contract.ActionResult {
	tomb, _ := json.Marshal(record{State: stateUnrecordable, Fingerprint: fp, ResultBytes: size})
	if _, err := g.store.Update(ctx, key, version, tomb, g.now().Add(g.retention)); err != nil {
		log.ErrorContext(ctx, "idempotency: cannot mark an unrecordable result; a retry after the lease may run again", "error", err)
	}
	log.ErrorContext(ctx, "idempotency: result too large to record; retries with this key will get "+CodeUnrecordable,
		"result_bytes", size, "store_limit", g.store.MaxValueSize())
	return markStrict(res, false)
}

// answer replies to a request whose key holds a live record.
func (g *Gate) answer(req *contract.ActionRequest, fp string, rec store.Record) (*contract.ActionResult, error) {
	var r record
	value, err := packed.Unpack(rec.Value)
	if err == nil {
		err = json.Unmarshal(value, &r)
	}
	if err != nil {
		return nil, fmt.Errorf("idempotency: %s: unreadable record: %w", req.Action, err)
	}
	if r.Fingerprint != fp {
		return errorResult(contract.ResultError{Code: CodeConflict, Message: fmt.Sprintf(
			"This idempotency_key was already used for %s with a different input or identities (mission_id, job_id). "+
				"A retry must resend the original request unchanged.", req.Action)}), nil
	}
	switch r.State {
	case stateDone:
		var res contract.ActionResult
		if err := json.Unmarshal(r.Result, &res); err != nil {
			return nil, fmt.Errorf("idempotency: %s: unreadable recorded result: %w", req.Action, err)
		}
		if err := res.Validate(); err != nil {
			return nil, fmt.Errorf("idempotency: %s: invalid recorded result: %w", req.Action, err)
		}
		return &res, nil
	case stateRunning:
		// The claim is renewed while its run is alive: by the time it would end, the run has
		// either completed (the retry is replayed) or died (the retry runs).
		retry := max(1, int(math.Ceil(rec.ExpiresAt.Sub(g.now()).Seconds())))
		return errorResult(contract.ResultError{
			Code: CodeInProgress,
			Message: fmt.Sprintf("%s with this idempotency_key is still running; retry with the same key in %d s.",
				req.Action, retry),
			LeaseExpiresAt:    rec.ExpiresAt.UTC().Format(time.RFC3339Nano),
			RetryAfterSeconds: &retry,
		}), nil
	case stateUnrecordable:
		return errorResult(contract.ResultError{Code: CodeUnrecordable, Message: fmt.Sprintf(
			"%s with this idempotency_key already ran, but its result (%d bytes) was larger than the store accepts "+
				"(%d bytes) and could not be recorded. It will not run again: read the job's state with job.sync.",
			req.Action, r.ResultBytes, g.store.MaxValueSize())}), nil
	}
	return nil, fmt.Errorf("idempotency: %s: record in unknown state %q", req.Action, r.State)
}

func errorResult(e contract.ResultError) *contract.ActionResult {
	return &contract.ActionResult{Status: contract.StatusError, Effects: []contract.Effect{}, Errors: []contract.ResultError{e}}
}

// Declined reports whether res is the gate's own answer to a retry that it neither ran nor
// replayed: one error, idempotency_conflict, idempotency_in_progress or
// idempotency_result_unrecordable, and no effect. A caller whose run was not called tells a
// replay (the recorded result) from these by it.
func Declined(res *contract.ActionResult) bool {
	if res == nil || len(res.Errors) != 1 || len(res.Effects) != 0 {
		return false
	}
	switch res.Errors[0].Code {
	case CodeConflict, CodeInProgress, CodeUnrecordable:
		return true
	}
	return false
}

// markStrict returns a copy of res whose replay_safety.strictly_idempotent_response is strict,
// leaving the handler's value untouched (it may be shared).
func markStrict(res *contract.ActionResult, strict bool) *contract.ActionResult {
	out := *res
	var rs contract.ReplaySafety
	if res.ReplaySafety != nil {
		rs = *res.ReplaySafety
	}
	rs.StrictlyIdempotentResponse = &strict
	out.ReplaySafety = &rs
	return &out
}

// KeyPrefix starts the store key of every record of the gate. The gate never lists them: a store
// may keep them out of its listing index (the DynamoDB store does, through storeenv).
const KeyPrefix = "idempotency/"

// scopeKey is the store key of a request: a hash of the verified workspace, agent slug, action
// and idempotency key, length-prefixed so no two tuples collide and of fixed size whatever the
// caller sends. Bootstrap actions have no verified workspace; they are scoped by the request's
// workspace id in a namespace of their own.
func scopeKey(req *contract.ActionRequest) string {
	workspace := "unverified:" + req.Workspace.ID
	if v := req.WorkspaceAuthorization; v != nil {
		workspace = "verified:" + v.WorkspaceID
	}
	h := sha256.New()
	for _, part := range []string{workspace, req.AgentSlug, req.Action, *req.IdempotencyKey} {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(part)))
		h.Write(n[:])
		h.Write([]byte(part))
	}
	return KeyPrefix + "v1/" + hex.EncodeToString(h.Sum(nil))
}

// keyID names a key in logs: the first 12 hex digits of its hash.
func keyID(key string) string { return keyfp.Of(key) }

// fingerprinted is what a retry must repeat unchanged: the input and the identities the seeds
// name (mission_id, job_id, and the case and step a request targets), and the surface it comes
// from. The scope key already holds the verified workspace, agent slug and action. Everything
// else Studio may send differently on a legitimate retry and is left out: the transport fields
// (request_id, actor, the grant), the mission block (Studio sends the mission's current name and
// metadata with every request), the workspace slug, draft_session_id (transient UI context) and
// members the contract does not know.
type fingerprinted struct {
	Input     any     `json:"input"`
	MissionID string  `json:"mission_id"`
	JobID     *string `json:"job_id"`
	CaseID    *string `json:"case_id"`
	StepID    *string `json:"step_id"`
	Surface   string  `json:"surface"`
}

// fingerprint is the SHA-256 of the canonical JSON of the fingerprinted fields: members sorted
// at every depth, no whitespace, numbers exactly as sent.
func fingerprint(req *contract.ActionRequest) (string, error) {
	input := []byte(req.Input)
	if len(input) == 0 {
		input = []byte("{}") // the decoder's value for an absent input
	}
	dec := json.NewDecoder(bytes.NewReader(input))
	dec.UseNumber() // 2^53+1 and 2^53 must not look alike
	f := fingerprinted{MissionID: req.MissionID, JobID: req.JobID, CaseID: req.CaseID, StepID: req.StepID, Surface: req.Surface}
	if err := dec.Decode(&f.Input); err != nil {
		return "", fmt.Errorf("decode the input: %w", err)
	}
	canon, err := json.Marshal(f)
	if err != nil {
		return "", fmt.Errorf("encode the fingerprinted fields: %w", err)
	}
	sum := sha256.Sum256(canon)
	return hex.EncodeToString(sum[:]), nil
}
