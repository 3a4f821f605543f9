package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"strings"
	"time"
	"unicode"

	"github.com/supervaize/svz/core/contract"
)

// StepOption configures one step (Step, Await, Sleep, Map).
type StepOption func(*stepOpts)

type stepOpts struct {
	caseID, lane, caseTitle, title, activity string
	outputs                                  []contract.ArtifactRef
	concurrency                              int
	limits                                   []*Limit
}

// Title is the step's title in job_state (its name by default).
func Title(s string) StepOption { return func(o *stepOpts) { o.title = s } }

// InCase puts the step in the job's case "<job id>-<id>" (CaseID), in lane with title, instead
// of the default case ("<job id>-work", in the registration's default lane, titled with the
// work's name). The first step in a case sets its lane and title.
func InCase(id, lane, title string) StepOption {
	return func(o *stepOpts) { o.caseID, o.lane, o.caseTitle = id, lane, title }
}

// Outputs are the step's artifact references in job_state, shown once it completes.
func Outputs(refs ...contract.ArtifactRef) StepOption {
	return func(o *stepOpts) { o.outputs = append(o.outputs, refs...) }
}

// Activity is the step's activity in job_state: contract.ActivityOperation (the default) or
// contract.ActivityDelegation.
func Activity(a string) StepOption { return func(o *stepOpts) { o.activity = a } }

const defaultCase = "work"

func checkName(name string) error {
	if strings.TrimSpace(name) == "" || len(name) > maxNameLen || strings.IndexFunc(name, unicode.IsControl) >= 0 {
		return Permanent(fmt.Errorf("jobs: a step name is 1 to %d printable characters, got %q", maxNameLen, name))
	}
	return nil
}

// StepID is the id job_state gives the step name of job: "<job>-<name>".
func StepID(job, name string) string { return job + "-" + name }

// CaseID is the id job_state gives the case id of job (InCase; "work": the default case):
// "<job>-<id>".
func CaseID(job, id string) string { return job + "-" + id }

// Step runs fn as the step name of the running work, once: its result is recorded in the store
// when fn returns, and every later delivery of the task gets the recorded result without running
// fn. Out must encode and decode as JSON losslessly. Names are unique within a work and stable
// across deployments (a renamed step runs again).
//
// When fn fails, the job is retried later, from this step, with backoff (jobs.MaxAttempts, then
// the job fails with the error; Permanent fails it at once). When the delivery ends first (the
// job stopped, timed out, waits, or hands itself on to a fresh delivery), Step returns an error
// and so does every later Step: return it from the work as it is.
func Step[Out any](ctx context.Context, name string, fn func(ctx context.Context) (Out, error), opts ...StepOption) (Out, error) {
	var out Out
	t := taskOf(ctx)
	if t == nil {
		return out, ErrNotInWork
	}
	raw, err := t.step(ctx, name, opts, func(ctx context.Context) (json.RawMessage, error) {
		v, err := fn(ctx)
		if err != nil {
			return nil, err
		}
		b, err := json.Marshal(v)
		if err != nil {
			return nil, Permanent(fmt.Errorf("encode the result of step %q: %w", name, err))
		}
		return b, nil
	})
	if err != nil {
		return out, err
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		return out, t.decodeFailure(name, fmt.Sprintf("the recorded result of step %q", name), err)
	}
	return out, nil
}

// decodeFailure is the permanent error of a recorded result that does not decode into what this
// build expects, naming the build that recorded it and this one.
func (t *task) decodeFailure(name, what string, err error) error {
	t.mu.Lock()
	var b int
	if st := t.steps[name]; st != nil {
		b = st.Build
	}
	then, now := t.rec.buildOf(b), t.rec.buildOf(t.build)
	t.mu.Unlock()
	if then == now {
		return Permanent(fmt.Errorf("jobs: %s does not decode into the step's type: %w", what, err))
	}
	return Permanent(fmt.Errorf("jobs: %s, recorded by %s, does not decode into the step's type in %s (a change of type needs a new step name, or jobs.Patched): %w",
		what, then, now, err))
}

func applyOpts(opts []StepOption) stepOpts {
	var o stepOpts
	for _, f := range opts {
		f(&o)
	}
	return o
}

// place writes the step's case, lane and title into s (the default case's are not stored: the
// projection gives them).
func (o stepOpts) place(work string, s *stepRecord, defaultLane string) {
	id, lane, title := o.caseID, o.lane, o.caseTitle
	if id == "" {
		id, lane, title = defaultCase, defaultLane, work
	}
	s.Case, s.Lane, s.CaseTitle = id, lane, title
	if id == defaultCase {
		s.Case, s.Lane, s.CaseTitle = "", "", ""
	}
	if o.title != "" {
		s.Title = o.title
	}
	if o.activity != "" && o.activity != contract.ActivityOperation {
		s.Activity = o.activity
	}
}

// boundary is checked before a step starts: a stop, the job's timeout, a lapsed lease, or a
// delivery with too little time left ends the delivery.
func (t *task) boundary(ctx context.Context) bool {
	if t.lapsed() && t.confirmLease(ctx) != nil {
		t.setHalt(lostHalt)
		return true
	}
	s := t.svc
	now := s.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case t.halt != running:
	case t.rec.Stop && t.rec.Failure == nil: // a failure handler runs for a stopped job too
		t.halt = stopHalt
	case t.rec.Failure == nil && !now.Before(t.rec.Deadline):
		t.halt = timedOut
	case t.done > 0 && !t.deadline.IsZero() && t.deadline.Sub(now) < s.cfg.Margin:
		// Only after progress: a delivery shorter than the margin still runs one step.
		t.halt, t.delay, t.wait = handOn, 0, nil
	}
	return t.halt != running
}

// open checks what every step checks before it looks at its record: a valid name, not inside a
// fan-out item, and a task that still runs.
func (t *task) open(name string) error {
	if err := checkName(name); err != nil {
		return err
	}
	if t.halted() {
		return errHalted
	}
	return nil
}

// recorded returns the step record of name, marking it reached.
func (t *task) recorded(name string) (*stepRecord, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	st, ok := t.steps[name]
	if ok {
		delete(t.replay, name)
	}
	return st, ok
}

// pendingReplay reports whether step records written by earlier deliveries have not been reached
// yet by this one.
func (t *task) pendingReplay() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.replay) > 0
}

// diverged is the error of a work that starts a step it never ran while steps that earlier
// deliveries recorded are still ahead: the code took another path (a deploy changed it, or it
// branches on something other than recorded results). The job fails, naming the step and both
// builds, rather than run new steps beside old ones.
func (t *task) diverged(ctx context.Context, name string) error {
	if inGroup(ctx) {
		return nil // steps of a group start in any order: checked when the group ends
	}
	return t.checkReplayed()
}

// checkReplayed fails the job when a step record written by an earlier delivery was not reached.
func (t *task) checkReplayed() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.replay) == 0 {
		return nil
	}
	var first *stepRecord
	for name := range t.replay {
		if st := t.steps[name]; first == nil || st.seq < first.seq {
			first = st
		}
	}
	then, now := t.rec.buildOf(first.Build), t.rec.buildOf(t.build)
	if then == now {
		return Permanent(fmt.Errorf("jobs: step %q, recorded by an earlier delivery, was not reached by this one: the work took another path "+
			"(it must call the same steps in the same order at every delivery: branch only on recorded results)", first.Name))
	}
	return Permanent(fmt.Errorf("jobs: step %q, recorded by %s, is no longer reached by %s: the new code cannot continue this job "+
		"(keep the step, or branch with jobs.Patched or jobs.StartedBuild)", first.Name, then, now))
}

// step runs fn as step name, or returns its recorded result.
func (t *task) step(ctx context.Context, name string, opts []StepOption, fn func(context.Context) (json.RawMessage, error)) (json.RawMessage, error) {
	if err := t.open(name); err != nil {
		return nil, err
	}
	if inItem(ctx) {
		return nil, Permanent(fmt.Errorf("jobs: step %q runs inside a fan-out item: an item is one unit (run its work directly)", name))
	}
	o := applyOpts(opts)
	if prev, ok := t.recorded(name); ok {
		if prev.Status != stepCompleted || prev.Awaiting != nil || !prev.Until.IsZero() || prev.Items > 0 {
			return nil, Permanent(fmt.Errorf("jobs: %q is not a Step: step names are unique within a work", name))
		}
		return prev.Result, nil
	}
	if err := t.diverged(ctx, name); err != nil {
		return nil, err
	}
	t.mu.Lock()
	var tries int
	if prev := t.rec.open(name); prev != nil {
		if prev.Status == stepAwaiting || prev.Status == stepSleeping {
			t.mu.Unlock()
			return nil, Permanent(fmt.Errorf("jobs: %q is not a Step: step names are unique within a work", name))
		}
		tries = prev.Tries
	}
	t.mu.Unlock()
	if t.boundary(ctx) {
		return nil, errHalted
	}
	if err := t.acquire(ctx, name, o.limits); err != nil {
		return nil, err
	}
	defer t.releaseLimits(ctx, name, o.limits)
	t.mu.Lock()
	if t.current == nil {
		t.current = map[string]*current{}
	}
	t.current[name] = &current{opts: o}
	t.mu.Unlock()
	done := func() { // recorded, or failed: no longer shown running (one the delivery's end interrupted is)
		t.mu.Lock()
		delete(t.current, name)
		t.mu.Unlock()
	}

	sctx, stepDone := t.svc.tel.stepStarted(context.WithValue(ctx, unitKey{}, name), t.msg.Work, name, tries)
	res, err := runStep(sctx, fn)
	stepDone(err)
	if err == nil {
		defer done()
		st := &stepRecord{Name: name, Status: stepCompleted, Result: res, Tries: tries + 1, Outputs: artifactRecords(o.outputs)}
		o.place(t.msg.Work, st, t.svc.laneOf(t.msg.Agent))
		rec, err := t.record(ctx, st)
		if err != nil {
			return nil, err
		}
		return rec.Result, nil
	}
	if t.ended(ctx, err) {
		return nil, errHalted
	}
	done()
	t.failed(ctx, name, o, tries+1, err)
	return nil, errHalted
}

// ended handles a unit whose function failed because the delivery ended (its context): it reports
// whether that was the case, having set the delivery's halt.
func (t *task) ended(ctx context.Context, err error) bool {
	cause := context.Cause(ctx)
	if cause == nil {
		return false
	}
	switch {
	case errors.Is(cause, errTimedOut):
		t.setHalt(timedOut)
	case errors.Is(cause, errStopped):
		t.setHalt(stopHalt)
	case errors.Is(cause, errLeaseNow), errors.Is(cause, ErrLeaseLost):
		t.setHalt(lostHalt)
	default:
		// The delivery's own context ended (the platform's deadline, a shutdown): the unit runs
		// again in the next delivery.
		t.mu.Lock()
		if t.halt == running {
			t.halt, t.failErr = storeHalt, cause
		}
		t.mu.Unlock()
	}
	return true
}

// failed records a failed attempt of step name: a retry in a later delivery, or the job's
// failure once the attempts are spent (or the error is permanent).
func (t *task) failed(ctx context.Context, name string, o stepOpts, tries int, err error) {
	msg := fmt.Sprintf("step %q failed: %v", name, err)
	var perm *permanentError
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.failures == nil {
		t.failures = map[string]*failure{}
	}
	t.failures[name] = &failure{name: name, opts: o, tries: tries, msg: err.Error()}
	if t.halt != running {
		return
	}
	if errors.As(err, &perm) || tries >= t.settings.maxAttempts {
		if !errors.As(err, &perm) {
			msg = fmt.Sprintf("step %q failed %d times; last error: %v", name, tries, err)
		}
		t.halt, t.fail = failHalt, failureRecord{Cause: CauseStep, Reason: msg, Step: name}
		return
	}
	t.halt, t.delay = handOn, backoff(t.settings.backoff, tries)
	t.wait = &waitRecord{Reason: waitRetry, Step: name, Until: t.svc.now().Add(t.delay)}
	t.log.WarnContext(ctx, "step failed: retried in a later delivery", "step", name, "tries", tries, "retry_in", t.delay, "error", err)
}

func runStep(ctx context.Context, fn func(context.Context) (json.RawMessage, error)) (res json.RawMessage, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("the step panicked: %v\n%s", p, debug.Stack())
		}
	}()
	return fn(ctx)
}

func backoff(base time.Duration, tries int) time.Duration {
	d := base
	for i := 1; i < tries && d < MaxBackoff; i++ {
		d *= 2
	}
	return min(d, MaxBackoff)
}

// current is a step a delivery runs, shown as active when the lease is renewed meanwhile.
type current struct {
	opts stepOpts
}

// failure is a step's failed attempt, recorded when the delivery ends.
type failure struct {
	name  string
	opts  stepOpts
	tries int
	msg   string
}

func artifactRecords(refs []contract.ArtifactRef) []artifactRecord {
	if len(refs) == 0 {
		return nil
	}
	out := make([]artifactRecord, len(refs))
	for i, a := range refs {
		out[i] = artifactRecord{ID: a.ID, Type: a.Type, Title: a.Title, MediaType: a.MediaType}
	}
	return out
}

// Answered is what an Await step got: the value, who gave it (the actor of the
// step.awaiting.submit call, "" for an answer jobs.Wake brought) and when.
type Answered[T any] struct {
	Value T
	By    string
	At    time.Time
}

// Await makes the step name of the running work wait for the operator's answer: the first time,
// the step is recorded as awaiting (with aw: the fields, surface and action Studio shows; the
// reason, surface and action default to human input, case.step.awaiting and
// step.awaiting.submit), the job waits, and the delivery ends. Once step.awaiting.submit answers
// it (the controller serves it, or call Answer), the work runs again and Await returns the
// answer, decoded into T. AwaitAnswer also returns who answered and when.
func Await[T any](ctx context.Context, name string, aw contract.Awaiting, opts ...StepOption) (T, error) {
	a, err := AwaitAnswer[T](ctx, name, aw, opts...)
	return a.Value, err
}

// AwaitAnswer is Await returning the answer with who gave it and when.
func AwaitAnswer[T any](ctx context.Context, name string, aw contract.Awaiting, opts ...StepOption) (Answered[T], error) {
	var out Answered[T]
	t := taskOf(ctx)
	if t == nil {
		return out, ErrNotInWork
	}
	st, err := t.await(ctx, name, aw, opts)
	if err != nil {
		return out, err
	}
	if err := json.Unmarshal(st.Result, &out.Value); err != nil {
		return out, t.decodeFailure(name, fmt.Sprintf("the answer of step %q", name), err)
	}
	out.By, out.At = st.By, st.At
	return out, nil
}

func (t *task) await(ctx context.Context, name string, aw contract.Awaiting, opts []StepOption) (*stepRecord, error) {
	if err := t.open(name); err != nil {
		return nil, err
	}
	if inItem(ctx) {
		return nil, Permanent(fmt.Errorf("jobs: Await %q runs inside a fan-out item", name))
	}
	o := applyOpts(opts)
	if prev, ok := t.recorded(name); ok {
		if prev.Awaiting == nil {
			return nil, Permanent(fmt.Errorf("jobs: %q is not an Await step: step names are unique within a work", name))
		}
		return prev, nil
	}
	t.mu.Lock()
	prev := t.rec.open(name)
	var answered *stepRecord
	if prev != nil && prev.Status == stepCompleted {
		answered = prev.clone()
	}
	t.mu.Unlock()
	if answered != nil {
		// Answered (step.awaiting.submit, or Wake) since the last delivery: recorded as a step
		// record, so that the task record keeps only open steps.
		return t.record(ctx, answered)
	}
	if prev == nil {
		if err := t.diverged(ctx, name); err != nil {
			return nil, err
		}
	}
	if t.boundary(ctx) {
		return nil, errHalted
	}
	aw.Reason = cmpOr(aw.Reason, contract.AwaitingHumanInput)
	aw.Surface = cmpOr(aw.Surface, contract.SurfaceStepAwaiting)
	aw.Action = cmpOr(aw.Action, contract.StepAwaitingSubmitAction)
	if aw.Fields == nil {
		aw.Fields = []contract.FieldDefinition{}
	}
	var woken *stepRecord
	err := t.durableWrite(ctx, func(r *record) bool {
		t.apply(r)
		s := t.openStep(r, name, o)
		s.Outputs = artifactRecords(o.outputs)
		s.Awaiting = &aw
		woken = nil
		if ans, ok := r.Wakes[aw.Action]; ok {
			// The answer came while this delivery was on its way here (jobs.Wake).
			delete(r.Wakes, aw.Action)
			s.Status, s.Result, s.At = stepCompleted, ans, t.svc.now()
			woken = s.clone()
			return true
		}
		s.Status = stepAwaiting
		return true
	})
	switch {
	case err == nil && woken != nil:
		return t.record(ctx, woken)
	case errors.Is(err, errLeaseNow):
		t.setHalt(lostHalt)
	case err != nil:
		t.mu.Lock()
		if t.halt == running {
			t.halt, t.failErr = storeHalt, err
		}
		t.mu.Unlock()
	default:
		t.setHalt(awaitHalt)
	}
	return nil, errHalted
}

// Progress records how far the case "<job id>-<caseID>" ("work": the default case) is, shown in
// its metadata as {"progress": {"done": done, "total": total}}. It is written with the next
// write of the task or of a step (no write of its own).
func Progress(ctx context.Context, caseID string, done, total int) error {
	t := taskOf(ctx)
	if t == nil {
		return ErrNotInWork
	}
	if caseID == "" {
		caseID = defaultCase
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.progress == nil {
		t.progress = map[string]caseRecord{}
	}
	t.progVer++
	t.progress[caseID] = caseRecord{ID: caseID, Done: done, Total: total, Progress: true, Ver: t.progVer}
	return nil
}

// Cancel ends the running job as cancelled, with label (shown as the job's message): return it
// from the work, e.g. when the operator rejected a review. No failure handler runs.
func Cancel(label string) error { return &cancelError{label: label} }

type cancelError struct{ label string }

func (e *cancelError) Error() string { return "jobs: the work cancelled the job: " + e.label }

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
