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

// StepOption configures one step (Step, Await).
type StepOption func(*stepOpts)

type stepOpts struct {
	caseID, lane, caseTitle, title string
	outputs                        []contract.ArtifactRef
}

// Title is the step's title in job_state (its name by default).
func Title(s string) StepOption { return func(o *stepOpts) { o.title = s } }

// InCase puts the step in the job's case "<job id>-<id>", in lane with title, instead of the
// default case ("<job id>-work", lane work, titled with the work's name). The first step in a
// case sets its lane and title.
func InCase(id, lane, title string) StepOption {
	return func(o *stepOpts) { o.caseID, o.lane, o.caseTitle = id, lane, title }
}

// Outputs are the step's artifact references in job_state, shown once it completes.
func Outputs(refs ...contract.ArtifactRef) StepOption {
	return func(o *stepOpts) { o.outputs = append(o.outputs, refs...) }
}

const defaultCase = "work"

func checkName(name string) error {
	if strings.TrimSpace(name) == "" || len(name) > maxNameLen || strings.IndexFunc(name, unicode.IsControl) >= 0 {
		return Permanent(fmt.Errorf("jobs: a step name is 1 to %d printable characters, got %q", maxNameLen, name))
	}
	return nil
}

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
		return out, Permanent(fmt.Errorf("jobs: the recorded result of step %q does not decode (did its type change?): %w", name, err))
	}
	return out, nil
}

func applyOpts(opts []StepOption) stepOpts {
	var o stepOpts
	for _, f := range opts {
		f(&o)
	}
	return o
}

// place writes the step's case and title into s, and makes sure its case exists in r.
func (o stepOpts) place(r *record, s *stepRecord) {
	id, lane, title := o.caseID, o.lane, o.caseTitle
	if id == "" {
		id, lane, title = defaultCase, contract.DefaultLane, r.Work
	}
	s.Case = id
	if o.title != "" {
		s.Title = o.title
	}
	if c := r.caseOf(id); c == nil {
		r.Cases = append(r.Cases, caseRecord{ID: id, Lane: lane, Title: title})
	} else if c.Lane == "" && c.Title == "" { // made by Progress before any step
		c.Lane, c.Title = lane, title
	}
}

// ensure returns the record's step name, added (in o's case) when missing.
func ensure(r *record, name string, o stepOpts) *stepRecord {
	s := r.step(name)
	if s == nil {
		s = &stepRecord{Name: name, Status: stepActive}
		r.Steps = append(r.Steps, s)
	}
	o.place(r, s)
	return s
}

func (t *task) halted() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.halt != running
}

// boundary is checked before a step starts: a stop, the job's timeout, or a delivery with too
// little time left ends the delivery.
func (t *task) boundary() bool {
	s := t.svc
	now := s.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case t.halt != running:
	case t.rec.Stop:
		t.halt = stopHalt
	case !now.Before(t.rec.Deadline):
		t.halt = timedOut
	case t.steps > 0 && !t.deadline.IsZero() && t.deadline.Sub(now) < s.cfg.Margin:
		// Only after progress: a delivery shorter than the margin still runs one step.
		t.halt, t.delay = handOn, 0
	}
	return t.halt != running
}

// open checks what every step checks before it looks at its record: a valid name, and a task
// that still runs.
func (t *task) open(name string) error {
	if err := checkName(name); err != nil {
		return err
	}
	if t.halted() {
		return errHalted
	}
	return nil
}

func (t *task) step(ctx context.Context, name string, opts []StepOption, fn func(context.Context) (json.RawMessage, error)) (json.RawMessage, error) {
	if err := t.open(name); err != nil {
		return nil, err
	}
	o := applyOpts(opts)
	t.mu.Lock()
	prev := t.rec.step(name)
	var tries int
	if prev != nil {
		tries = prev.Tries
		switch prev.Status {
		case stepCompleted:
			res := prev.Result
			t.mu.Unlock()
			return res, nil
		case stepAwaiting:
			t.mu.Unlock()
			return nil, Permanent(fmt.Errorf("jobs: %q is an Await step, not a Step: step names are unique within a work", name))
		}
	}
	t.mu.Unlock()
	if t.boundary() {
		return nil, errHalted
	}
	t.mu.Lock()
	t.current = &current{name: name, opts: o}
	t.mu.Unlock()

	sctx, stepDone := t.svc.tel.stepStarted(ctx, t.msg.Work, name, tries)
	res, err := runStep(sctx, fn)
	stepDone(err)
	if err == nil {
		werr := t.durableWrite(ctx, func(r *record) bool {
			t.apply(r)
			s := ensure(r, name, o)
			s.Status, s.Result, s.Error, s.Tries = stepCompleted, res, "", tries+1
			s.Outputs = artifactRecords(o.outputs)
			return true
		})
		t.mu.Lock()
		t.current = nil // recorded (or, on a failed write, shown active by the end of the delivery)
		t.mu.Unlock()
		switch {
		case errors.Is(werr, errLeaseNow):
			t.setHalt(lostHalt)
			return nil, errHalted
		case werr != nil:
			t.mu.Lock()
			if t.halt == running {
				t.halt, t.failErr = storeHalt, werr
			}
			t.mu.Unlock()
			return nil, errHalted
		}
		t.mu.Lock()
		t.steps++
		t.mu.Unlock()
		return res, nil
	}
	if cause := context.Cause(ctx); cause != nil {
		switch {
		case errors.Is(cause, errTimedOut):
			t.setHalt(timedOut)
		case errors.Is(cause, errStopped):
			t.setHalt(stopHalt)
		case errors.Is(cause, errLeaseNow):
			t.setHalt(lostHalt)
		default:
			// The delivery's own context ended (the platform's deadline, a shutdown): the step
			// runs again in the next delivery.
			t.mu.Lock()
			if t.halt == running {
				t.halt, t.failErr = storeHalt, cause
			}
			t.mu.Unlock()
		}
		return nil, errHalted
	}
	tries++
	maxTries := t.settings.maxAttempts
	msg := fmt.Sprintf("step %q failed: %v", name, err)
	var perm *permanentError
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.halt != running {
		return nil, errHalted
	}
	t.current = nil
	t.failure = &failure{name: name, opts: o, tries: tries, msg: err.Error()}
	if errors.As(err, &perm) || tries >= maxTries {
		if !errors.As(err, &perm) {
			msg = fmt.Sprintf("step %q failed %d times; last error: %v", name, tries, err)
		}
		t.halt, t.failMsg = failHalt, msg
		return nil, errHalted
	}
	t.halt, t.delay = handOn, backoff(t.settings.backoff, tries)
	t.log.WarnContext(ctx, "step failed: retried in a later delivery", "step", name, "tries", tries, "retry_in", t.delay, "error", err)
	return nil, errHalted
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

// current is the step a delivery runs, shown as active when the lease is renewed meanwhile.
type current struct {
	name string
	opts stepOpts
}

// failure is a step's failed attempt, recorded when the delivery ends.
type failure struct {
	name  string
	opts  stepOpts
	tries int
	msg   string
}

// apply adds what the delivery knows and has not written (the running step, progress) to r.
// The caller holds t.mu.
func (t *task) apply(r *record) {
	if c := t.current; c != nil {
		if s := ensure(r, c.name, c.opts); s.Status != stepCompleted {
			s.Status = stepActive
		}
	}
	for id, p := range t.progress {
		cs := r.caseOf(id)
		if cs == nil {
			r.Cases = append(r.Cases, caseRecord{ID: id})
			cs = &r.Cases[len(r.Cases)-1]
		}
		cs.Done, cs.Total, cs.Progress = p[0], p[1], true
	}
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

// Await makes the step name of the running work wait for the operator's answer: the first time,
// the step is recorded as awaiting (with aw: the fields, surface and action Studio shows; the
// reason, surface and action default to human input, case.step.awaiting and
// step.awaiting.submit), the job waits, and the delivery ends. Once step.awaiting.submit answers
// it (the controller serves it, or call Answer), the work runs again and Await returns the
// answer, decoded into T.
func Await[T any](ctx context.Context, name string, aw contract.Awaiting, opts ...StepOption) (T, error) {
	var out T
	t := taskOf(ctx)
	if t == nil {
		return out, ErrNotInWork
	}
	if err := t.open(name); err != nil {
		return out, err
	}
	o := applyOpts(opts)
	t.mu.Lock()
	prev := t.rec.step(name)
	t.mu.Unlock()
	if prev != nil && prev.Status == stepCompleted {
		if err := json.Unmarshal(prev.Result, &out); err != nil {
			return out, Permanent(fmt.Errorf("jobs: the answer of step %q does not decode: %w", name, err))
		}
		return out, nil
	}
	if t.boundary() {
		return out, errHalted
	}
	aw.Reason = cmpOr(aw.Reason, contract.AwaitingHumanInput)
	aw.Surface = cmpOr(aw.Surface, contract.SurfaceStepAwaiting)
	aw.Action = cmpOr(aw.Action, contract.StepAwaitingSubmitAction)
	if aw.Fields == nil {
		aw.Fields = []contract.FieldDefinition{}
	}
	var woken json.RawMessage
	err := t.durableWrite(ctx, func(r *record) bool {
		t.apply(r)
		s := ensure(r, name, o)
		s.Outputs = artifactRecords(o.outputs)
		if ans, ok := r.Wakes[aw.Action]; ok {
			// The answer came while this delivery was on its way here (jobs.Wake).
			delete(r.Wakes, aw.Action)
			s.Status, s.Result, s.Awaiting, woken = stepCompleted, ans, nil, ans
			return true
		}
		woken = nil
		s.Status, s.Awaiting = stepAwaiting, &aw
		return true
	})
	switch {
	case err == nil && woken != nil:
		if err := json.Unmarshal(woken, &out); err != nil {
			return out, Permanent(fmt.Errorf("jobs: the answer of step %q does not decode: %w", name, err))
		}
		return out, nil
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
	return out, errHalted
}

// Progress records how far the case "<job id>-<caseID>" ("work": the default case) is, shown in
// its metadata as {"progress": {"done": done, "total": total}}. It is written with the next step's
// record (no write of its own).
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
		t.progress = map[string][2]int{}
	}
	t.progress[caseID] = [2]int{done, total}
	return nil
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
