package checkpoint

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode"

	"github.com/supervaize/svz/core/contract"
)

// Registry holds an agent's guarded steps by stable name, so that whichever instance receives
// rule.checkpoint.resume finds the effect, the after context and the advance of a paused step.
// core.NewAgent makes one for every agent (core.Agent.GuardedSteps); Define adds to it.
type Registry struct {
	declared   bool
	secretRefs []string
	kinds      map[string]kind
	errs       []error
}

// NewRegistry returns the registry of an agent whose registration declares rc (nil: the agent
// declares no rule checkpoints, and defining a step is a mistake New reports).
func NewRegistry(rc *contract.RuleCheckpoints) *Registry {
	r := &Registry{kinds: map[string]kind{}}
	if rc != nil {
		r.declared = true
		r.secretRefs = slices.Clone(rc.SecretRefs)
	}
	return r
}

// Err reports the registry's definition mistakes (core.New reports them at start).
func (r *Registry) Err() error {
	if r == nil {
		return nil
	}
	return errors.Join(r.errs...)
}

// Len is how many steps are defined.
func (r *Registry) Len() int {
	if r == nil {
		return 0
	}
	return len(r.kinds)
}

// Owner has a registry: *core.Agent.
type Owner interface {
	GuardedSteps() *Registry
}

// Funcs are a guarded step's functions. In and Out travel through the store as JSON (a paused
// step continues on whichever instance receives the resume), so they must encode and decode
// losslessly; keep secrets out of them (refer to a secret by name instead).
type Funcs[In, Out any] struct {
	// Effect performs the external effect. It runs only after the before checkpoint allows it, and
	// at most once per occurrence: once it has started, nothing runs it again, whatever happens
	// (a crash, an error, a retry); an outcome that was not recorded needs RecoverGuardedStep.
	Effect func(ctx context.Context, in In) (Out, error)
	// AfterContext is the after checkpoint's context (a JSON object), from the effect's input and
	// result. It must be deterministic: recovery checks that it gives the same context again.
	AfterContext func(in In, result Out) (any, error)
	// Advance, optional, moves the case on once the after checkpoint allows it. It runs at most
	// once; one that started without completing is reported as ambiguous, never run again.
	Advance func(ctx context.Context, in In, result Out) error
}

// Step is a guarded step defined on an agent (Define): run it with RunGuardedStep.
type Step[In, Out any] struct {
	name string
	reg  *Registry
	f    Funcs[In, Out]
}

// Name is the step's stable name.
func (s *Step[In, Out]) Name() string { return s.name }

// maxNameLen bounds a step name (it is stored with every occurrence).
const maxNameLen = 200

// Define registers a guarded step under a stable name on owner (a *core.Agent) and returns it.
// Every instance of the controller must define the same steps under the same names: a paused
// step continues, on the instance that receives rule.checkpoint.resume, with the functions
// defined there under its name. Mistakes (an empty or duplicate name, a missing Effect or
// AfterContext, an agent that declares no rule_checkpoints) are reported by core.New.
func Define[In, Out any](owner Owner, name string, f Funcs[In, Out]) *Step[In, Out] {
	r := owner.GuardedSteps()
	s := &Step[In, Out]{name: name, reg: r, f: f}
	if r == nil {
		return s
	}
	fail := func(format string, args ...any) *Step[In, Out] {
		r.errs = append(r.errs, fmt.Errorf("guarded step %q: "+format, append([]any{name}, args...)...))
		return s
	}
	switch {
	case !r.declared:
		return fail("the agent's registration declares no rule_checkpoints (set RegistrationSpec.RuleCheckpoints)")
	case strings.TrimSpace(name) == "" || len(name) > maxNameLen || strings.IndexFunc(name, unicode.IsControl) >= 0:
		return fail("a step name is 1 to %d printable characters", maxNameLen)
	case r.kinds[name] != nil:
		return fail("defined twice: step names must be unique per agent")
	case f.Effect == nil:
		return fail("Funcs.Effect is required")
	case f.AfterContext == nil:
		return fail("Funcs.AfterContext is required")
	}
	r.kinds[name] = s
	return s
}

// kind is a step seen through the store: its input and result as JSON.
type kind interface {
	effect(ctx context.Context, in json.RawMessage) (json.RawMessage, error)
	after(in, out json.RawMessage) (any, error)
	advance(ctx context.Context, in, out json.RawMessage) error
	hasAdvance() bool
}

func (s *Step[In, Out]) effect(ctx context.Context, in json.RawMessage) (json.RawMessage, error) {
	var v In
	if err := json.Unmarshal(in, &v); err != nil {
		return nil, fmt.Errorf("decode the stored input of guarded step %q: %w", s.name, err)
	}
	out, err := s.f.Effect(ctx, v)
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(out)
	if err != nil {
		return nil, fmt.Errorf("encode the result of guarded step %q: %w", s.name, err)
	}
	return b, nil
}

func (s *Step[In, Out]) decode(in, out json.RawMessage) (In, Out, error) {
	var i In
	var o Out
	if err := json.Unmarshal(in, &i); err != nil {
		return i, o, fmt.Errorf("decode the stored input of guarded step %q: %w", s.name, err)
	}
	if err := json.Unmarshal(out, &o); err != nil {
		return i, o, fmt.Errorf("decode the stored result of guarded step %q: %w", s.name, err)
	}
	return i, o, nil
}

func (s *Step[In, Out]) after(in, out json.RawMessage) (any, error) {
	i, o, err := s.decode(in, out)
	if err != nil {
		return nil, err
	}
	return s.f.AfterContext(i, o)
}

func (s *Step[In, Out]) advance(ctx context.Context, in, out json.RawMessage) error {
	i, o, err := s.decode(in, out)
	if err != nil {
		return err
	}
	return s.f.Advance(ctx, i, o)
}

func (s *Step[In, Out]) hasAdvance() bool { return s.f.Advance != nil }

// Occurrence names one run of a guarded step: the job and case it belongs to, the step id shown
// to Studio, and the occurrence id, stable across retries of the same attempt (the reference's
// occurrence_id: a new attempt of the same step gets a new one).
type Occurrence struct {
	JobID        string
	CaseID       string
	StepID       string
	OccurrenceID string
}

func (o Occurrence) check(needStep bool) error {
	var missing []string
	for _, f := range []struct{ name, v string }{{"JobID", o.JobID}, {"CaseID", o.CaseID}, {"StepID", o.StepID}, {"OccurrenceID", o.OccurrenceID}} {
		if f.v == "" && (needStep || f.name != "StepID") {
			missing = append(missing, f.name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("checkpoint: the occurrence needs %s", strings.Join(missing, ", "))
	}
	return nil
}

// Status is where a guarded step stands.
type Status string

// Statuses of an Outcome.
const (
	// Running: an instance holds the occurrence, or one died holding it in a state a retry
	// continues (a checkpoint whose answer was lost is sent again).
	Running Status = "running"
	// Awaiting: a checkpoint answered pause; rule.checkpoint.resume continues the step.
	Awaiting Status = "awaiting"
	// Completed: both checkpoints allowed it, the effect ran and the step advanced.
	Completed Status = "completed"
	// Blocked: a checkpoint answered stop (before: the effect never ran; after: it ran, and the
	// step does not advance).
	Blocked Status = "blocked"
	// RecoveryRequired: the effect started and its outcome was not recorded, or the advance
	// started and did not complete. Nothing runs either again by itself: see RecoverGuardedStep.
	RecoveryRequired Status = "recovery_required"
)

// Outcome is where an occurrence of a guarded step stands.
type Outcome[Out any] struct {
	Status Status
	// Phase and CheckpointID are the checkpoint the step waits on (Awaiting) or that stopped it
	// (Blocked).
	Phase        string
	CheckpointID string
	// Result is the effect's result, when HasResult (the effect ran and its outcome is recorded).
	Result    Out
	HasResult bool
}

// StepStatus is the status to show for the step in job_state (seed 000, "Étape"): awaiting while
// a checkpoint is paused, completed, failed when a checkpoint stopped it or it needs recovery,
// active otherwise.
func (o Outcome[Out]) StepStatus() string {
	switch o.Status {
	case Awaiting:
		return contract.StateAwaiting
	case Completed:
		return contract.StateCompleted
	case Blocked, RecoveryRequired:
		return contract.StateFailed
	}
	return contract.StateActive
}

// Err is the reference's RuleCheckpointBlocked for a blocked step ("Rule checkpoint 'id'
// returned 'stop'"), nil otherwise.
func (o Outcome[Out]) Err() error {
	if o.Status != Blocked {
		return nil
	}
	return &BlockedError{CheckpointID: o.CheckpointID, Phase: o.Phase}
}
