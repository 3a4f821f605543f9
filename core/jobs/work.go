package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"

	"github.com/supervaize/svz/core/contract"
)

// Registry holds an agent's background work by stable name, so that whichever instance receives
// a task's delivery finds the function to run. core.NewAgent makes one for every agent
// (core.Agent.Works); Define adds to it.
type Registry struct {
	works map[string]runner
	errs  []error
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{works: map[string]runner{}} }

// Err reports the registry's definition mistakes (core.New reports them at start).
func (r *Registry) Err() error {
	if r == nil {
		return nil
	}
	return errors.Join(r.errs...)
}

// Len is how many works are defined.
func (r *Registry) Len() int {
	if r == nil {
		return 0
	}
	return len(r.works)
}

// Names are the defined works' names, in no order.
func (r *Registry) Names() []string {
	if r == nil {
		return nil
	}
	out := make([]string, 0, len(r.works))
	for n := range r.works {
		out = append(out, n)
	}
	return out
}

func (r *Registry) lookup(name string) runner {
	if r == nil {
		return nil
	}
	return r.works[name]
}

// Owner has a registry: *core.Agent.
type Owner interface {
	Works() *Registry
}

// Defaults of a work.
const (
	// DefaultMaxAttempts is how many times a failing step runs before the job fails.
	DefaultMaxAttempts = 3
	// DefaultTimeout bounds a job whose work and registration set no timeout
	// (job_policy.default_timeout_seconds).
	DefaultTimeout = 24 * time.Hour
	// DefaultBackoff is the delay before a failed step's first retry; it doubles per attempt up to
	// MaxBackoff.
	DefaultBackoff = 5 * time.Second
	// MaxBackoff caps the delay between retries of a step.
	MaxBackoff = 5 * time.Minute
	maxNameLen = 200
)

// Option configures a work.
type Option func(*settings)

type settings struct {
	timeout     time.Duration
	maxAttempts int
	backoff     time.Duration
	view        func(*contract.JobState, Results)
	handler     *handler // OnFailure
	limits      []*Limit // Limited
}

// Timeout bounds the whole job (every delivery, wait and retry included): past it the job fails
// with "the job did not finish within …". It overrides the registration's
// job_policy.default_timeout_seconds; DefaultTimeout applies when neither is set.
func Timeout(d time.Duration) Option { return func(s *settings) { s.timeout = d } }

// MaxAttempts is how many times a failing step runs before the job fails (DefaultMaxAttempts).
func MaxAttempts(n int) Option { return func(s *settings) { s.maxAttempts = n } }

// Backoff is the delay before a failed step's first retry (DefaultBackoff); it doubles at every
// attempt, up to MaxBackoff.
func Backoff(d time.Duration) Option { return func(s *settings) { s.backoff = d } }

// Work is background work defined on an agent (Define). Start it from a handler with Start or
// Started.
type Work[In any] struct {
	name string
	reg  *Registry
	run  func(ctx context.Context, in In) error
	set  settings
}

// Name is the work's stable name.
func (w *Work[In]) Name() string { return w.name }

// runner is a work seen through the store: its input as JSON.
type runner interface {
	exec(ctx context.Context, input json.RawMessage) error
	options() settings
}

func (w *Work[In]) options() settings { return w.set }

func (w *Work[In]) exec(ctx context.Context, input json.RawMessage) error {
	var in In
	if err := json.Unmarshal(input, &in); err != nil {
		return &permanentError{fmt.Errorf("decode the input of work %q: %w", w.name, err)}
	}
	return w.run(ctx, in)
}

// Define registers background work under a stable name on owner (a *core.Agent) and returns it.
// Every instance of the controller must define the same works under the same names: a task runs
// on whichever instance its delivery reaches, with the function defined there under its name.
// In travels through the store as JSON, so it must encode and decode losslessly; keep secrets
// out of it. Mistakes (an empty or duplicate name, a nil function, a bad option) are reported
// by core.New.
func Define[In any](owner Owner, name string, run func(ctx context.Context, in In) error, opts ...Option) *Work[In] {
	w := &Work[In]{name: name, run: run, set: settings{maxAttempts: DefaultMaxAttempts, backoff: DefaultBackoff}}
	for _, o := range opts {
		o(&w.set)
	}
	r := owner.Works()
	w.reg = r
	if r == nil {
		return w
	}
	fail := func(format string, args ...any) *Work[In] {
		r.errs = append(r.errs, fmt.Errorf("background work %q: "+format, append([]any{name}, args...)...))
		return w
	}
	switch {
	case strings.TrimSpace(name) == "" || len(name) > maxNameLen || strings.IndexFunc(name, unicode.IsControl) >= 0:
		return fail("a work name is 1 to %d printable characters", maxNameLen)
	case r.works[name] != nil:
		return fail("defined twice: work names must be unique per agent")
	case run == nil:
		return fail("the work function is required")
	case w.set.timeout < 0:
		return fail("jobs.Timeout cannot be negative")
	case w.set.maxAttempts < 1:
		return fail("jobs.MaxAttempts must be at least 1")
	case w.set.backoff < 0:
		return fail("jobs.Backoff cannot be negative")
	case w.set.handler != nil && w.set.handler.err != nil:
		return fail("%v", w.set.handler.err)
	}
	for _, l := range w.set.limits {
		if err := l.check(); err != nil {
			return fail("%v", err)
		}
	}
	r.works[name] = w
	return w
}

// permanentError fails the job at once, without retries (an input that does not decode).
type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// Permanent marks err as not worth retrying: returned by a step's function, it fails the job at
// once instead of after MaxAttempts.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanentError{err}
}
