package jobs

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/supervaize/svz/core/contract"
	"github.com/supervaize/svz/core/internal/packed"
	"github.com/supervaize/svz/core/store"
	"github.com/supervaize/svz/core/telemetry"
)

// Dispatcher hands a task's reference to the platform's queue, for a delivery after delay (0: at
// once). Each platform has its own (SQS on Lambda, Cloud Tasks on Cloud Run, Pool on a plain
// server); they live with the adapters, so core imports no cloud SDK. A queue may deliver a
// message more than once: a delivery of a task that another instance runs, or that has finished,
// does nothing.
type Dispatcher interface {
	Dispatch(ctx context.Context, m Message, delay time.Duration) error
}

// Delivery is what the platform says of one delivery of a message.
type Delivery struct {
	// Deadline is when the platform stops the delivery (the Lambda invocation's deadline, the
	// Cloud Run request timeout); zero takes ctx's deadline, and none means no limit.
	Deadline time.Time
	// Receive is how many times the queue delivered this message (1 the first time) and
	// MaxReceives how many before it dead-letters it; 0 when the queue does not say. A delivery
	// that fails at the last receive fails the job first, so that its state says why.
	Receive, MaxReceives int

	// takeOver: the task's holder is known to have ended (the pool's first scan of an exclusive
	// store), so its lease is not waited out; takeOverOwn: a holder under this process's instance
	// name is (the pool's first scan, Identity).
	takeOver, takeOverOwn bool
}

// Defaults of a Service.
const (
	// DefaultLease is how long an instance holds a running task unless it renews its lease (every
	// third of it while the work runs). A task whose instance died is taken over DefaultLease +
	// SkewMargin after the last renewal.
	DefaultLease = 30 * time.Second
	// SkewMargin keeps a lease alive past its end for instances whose clocks disagree.
	SkewMargin = 2 * time.Second
	// DefaultMargin: before a step, a delivery with less time than this left hands the task on to
	// a fresh delivery instead of starting the step.
	DefaultMargin = 10 * time.Second
	// DefaultRetention is how long a finished task's record (job.sync's answer) is kept.
	DefaultRetention = 30 * 24 * time.Hour
	// writeTimeout bounds the writes that end a delivery after its context is done.
	writeTimeout = 10 * time.Second
	// maxWriteRounds bounds the compare-and-swap rounds of one write.
	maxWriteRounds = 50
)

// Errors.
var (
	// ErrNoScope: the context is not a handler's context of an agent that defines work.
	ErrNoScope = errors.New("jobs: no background-work scope in this context: use the context the controller passes to a handler of an agent that defines work (jobs.Define)")
	// ErrNoDispatcher: the controller has no queue to run background work with.
	ErrNoDispatcher = errors.New("jobs: background work needs a queue and this controller has none: on Lambda set SUPERVAIZER_JOBS_QUEUE_URL (svz deploy and template.yaml create the queue), on Cloud Run set SUPERVAIZER_JOBS_QUEUE (svz deploy creates it); a plain server and local mode run work in process; App Runner cannot run background work (use lambda or cloud-run)")
	// ErrNotInWork: Step or Await was called outside a work function's context.
	ErrNotInWork = errors.New("jobs: Step and Await run only inside a work function (jobs.Define), with the context it receives")
	// ErrBusy: another instance holds the task's lease; the queue delivers the message again later.
	ErrBusy = errors.New("jobs: the task is running on another instance")
	// ErrNoJob: no task was started for the job.
	ErrNoJob = errors.New("jobs: no background job with this id in this workspace")
	// ErrOtherWork: the job already runs another work.
	ErrOtherWork = errors.New("jobs: the job already runs other background work")
	// ErrNotAwaiting: an answer for a step that does not wait for one.
	ErrNotAwaiting = errors.New("jobs: the step is not awaiting an answer")

	errBadMessage = errors.New("jobs: a task message has agent, workspace, job, work (non-empty strings) and attempt (a whole number >= 0), and no other member")
)

// Config configures a Service.
type Config struct {
	Store      store.Store
	Dispatcher Dispatcher
	// Works returns an agent's registry and its default job timeout (the registration's
	// job_policy.default_timeout_seconds, 0 when unset); false for an agent the controller does
	// not serve.
	Works func(agent string) (reg *Registry, timeout time.Duration, ok bool)
	// Bind returns the context a delivery runs the work in: what a handler of agent would get for
	// the verified workspace v (state, rule checkpoints, parameters, this package's scope).
	Bind func(ctx context.Context, agent string, v *contract.VerifiedWorkspaceContext) context.Context
	// Publish appends effects to the effect stream (job.synced when a job finishes or waits).
	Publish func(ctx context.Context, agent, workspace string, effects []contract.Effect)
	Logger  *slog.Logger
	// Now is the clock (time.Now); After the lease renewal timer (time.After).
	Now   func() time.Time
	After func(time.Duration) <-chan time.Time
	// Lease, Margin and Retention default to DefaultLease, DefaultMargin and DefaultRetention.
	Lease, Margin, Retention time.Duration
	// Info returns what a task records and shows of an agent beyond its works: the build that
	// runs it, the lane of its default case. Optional.
	Info func(agent string) AgentInfo
	// Telemetry records the deliveries' and steps' spans and the jobs' measurements (trace.go).
	Telemetry telemetry.Providers
}

// AgentInfo is what the service knows of an agent beyond its works.
type AgentInfo struct {
	// Build is the code that runs the agent here (recorded with the tasks it starts and runs).
	Build Build
	// Lane is the lane of the default case ("work" when empty): the registration's default lane.
	Lane string
}

// DelayLimit is implemented by a Dispatcher whose queue holds a message back for at most
// MaxDelay (SQS: 15 minutes; Cloud Tasks: 30 days): a longer delay is handed on, the message
// delivered early passing itself on again until it is due, without touching the store.
type DelayLimit interface {
	MaxDelay() time.Duration
}

// Service runs the background work of one controller's agents. It keeps in memory only the
// cancel functions of the deliveries it runs (so that job.stop on this instance stops at once);
// everything else is in the store, so any instance continues any task.
type Service struct {
	cfg Config
	log *slog.Logger
	// instance names this process in the holders of the leases it takes (Identity): a process
	// restarted under the same name takes its own tasks back at once.
	instance string
	running  sync.Map // task key → the *task of the delivery running it here
	// packer stores task records deflated (core/internal/packed): a record is rewritten once per
	// step, and DynamoDB bills each write by the started KB of the record.
	packer packed.Packer
	tel    *jobsTelemetry
}

// NewService returns a Service for cfg.
func NewService(cfg Config) *Service {
	s := &Service{cfg: cfg, log: cfg.Logger, tel: newJobsTelemetry(cfg.Telemetry)}
	if s.log == nil {
		s.log = slog.Default()
	}
	if s.cfg.Now == nil {
		s.cfg.Now = time.Now
	}
	if s.cfg.After == nil {
		s.cfg.After = time.After
	}
	if s.cfg.Lease <= 0 {
		s.cfg.Lease = DefaultLease
	}
	if s.cfg.Margin <= 0 {
		s.cfg.Margin = DefaultMargin
	}
	if s.cfg.Retention <= 0 {
		s.cfg.Retention = DefaultRetention
	}
	if p, ok := cfg.Dispatcher.(*Pool); ok {
		p.attach(s)
	}
	return s
}

// Close stops the in-process pool, when the service has one: deliveries in flight are cancelled
// and their tasks taken over after their lease by the next process on the store.
func (s *Service) Close() {
	if p, ok := s.cfg.Dispatcher.(*Pool); ok {
		p.close()
	}
}

func (s *Service) now() time.Time { return s.cfg.Now().UTC() }

func (s *Service) info(agent string) AgentInfo {
	if s.cfg.Info == nil {
		return AgentInfo{}
	}
	return s.cfg.Info(agent)
}

// laneOf is the lane of agent's default case.
func (s *Service) laneOf(agent string) string { return cmpOr(s.info(agent).Lane, contract.DefaultLane) }

// handlerOf is the failure handler of work on agent, nil when none.
func (s *Service) handlerOf(agent, work string) *handler {
	reg, _, ok := s.cfg.Works(agent)
	if !ok {
		return nil
	}
	w := reg.lookup(work)
	if w == nil {
		return nil
	}
	return w.options().handler
}

// scope is what a handler's context carries.
type scope struct {
	svc   *Service
	reg   *Registry
	agent string
	grant *contract.VerifiedWorkspaceContext
}

type scopeKey struct{}

// NewContext returns ctx carrying the background-work scope of one call: the controller calls it
// for the handlers of an agent that defines work, with the VERIFIED workspace context.
func NewContext(ctx context.Context, svc *Service, reg *Registry, agentSlug string, v *contract.VerifiedWorkspaceContext) context.Context {
	return context.WithValue(ctx, scopeKey{}, &scope{svc: svc, reg: reg, agent: agentSlug, grant: v})
}

func scopeOf(ctx context.Context) (*scope, error) {
	sc, _ := ctx.Value(scopeKey{}).(*scope)
	switch {
	case sc == nil || sc.svc == nil:
		return nil, ErrNoScope
	case sc.grant == nil || sc.grant.WorkspaceID == "":
		return nil, fmt.Errorf("%w (this call has no verified workspace)", ErrNoScope)
	case sc.svc.cfg.Store == nil:
		return nil, errors.New("jobs: background work needs the controller's store (core.Config.Store; package config opens the one SUPERVAIZER_STORE names)")
	}
	return sc, nil
}

func (s *Service) load(ctx context.Context, key string) (*record, uint64, error) {
	rec, err := s.cfg.Store.Get(ctx, key)
	if err != nil {
		return nil, 0, err
	}
	r, err := decode(key, rec.Value)
	if err != nil {
		return nil, 0, err
	}
	return r, rec.Version, nil
}

// decode reads the task record stored under key, packed or not.
func decode(key string, value []byte) (*record, error) {
	var r record
	if err := decodeJSON(value, &r); err != nil {
		return nil, fmt.Errorf("jobs: task record %s is unreadable: %w", key, err)
	}
	if r.Format > recordFormat {
		return nil, fmt.Errorf("jobs: task record %s has format %d, newer than this build reads (%d): deploy the newer build everywhere", key, r.Format, recordFormat)
	}
	return &r, nil
}

// recordFormat is the layout of the records this build writes: 2, a step record per step.
const recordFormat = 2

// decodeJSON decodes a stored value, packed or not, into v.
func decodeJSON(value []byte, v any) error {
	b, err := packed.Unpack(value)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

func (s *Service) expiry(r *record) time.Time {
	if terminal(r.Status) {
		return s.now().Add(s.cfg.Retention)
	}
	return store.Never
}

func (s *Service) encode(r *record) ([]byte, error) {
	b, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("jobs: encode the task record: %w", err)
	}
	return s.packer.Pack(b), nil
}

// update rewrites the record under key with mutate, compare-and-swap, re-reading on conflict.
// mutate returns false to leave the record as it is.
func (s *Service) update(ctx context.Context, key string, mutate func(r *record) (bool, error)) (*record, error) {
	for range maxWriteRounds {
		r, v, err := s.load(ctx, key)
		if err != nil {
			return nil, err
		}
		ok, err := mutate(r)
		if err != nil || !ok {
			return r, err
		}
		b, err := s.encode(r)
		if err != nil {
			return nil, err
		}
		if _, err = s.cfg.Store.Update(ctx, key, v, b, s.expiry(r)); errors.Is(err, store.ErrConflict) {
			continue
		} else if err != nil {
			return nil, err
		}
		return r, nil
	}
	return nil, errors.New("jobs: the task record keeps changing under concurrent writes")
}

// start writes the task of a job (or finds the one written before) and dispatches it.
func (s *Service) start(ctx context.Context, sc *scope, work string, req *contract.ActionRequest, input []byte, timeout time.Duration) (*record, error) {
	if s.cfg.Dispatcher == nil {
		return nil, ErrNoDispatcher
	}
	if req.JobID == nil || *req.JobID == "" {
		return nil, ErrNoJobID
	}
	job := *req.JobID
	if timeout <= 0 {
		if _, t, ok := s.cfg.Works(sc.agent); ok && t > 0 {
			timeout = t
		} else {
			timeout = DefaultTimeout
		}
	}
	now := s.now()
	g := sc.grant
	r := &record{Format: recordFormat, Agent: sc.agent, Workspace: g.WorkspaceID, Job: job, Mission: req.MissionID, Work: work, Input: input,
		Builds: []Build{s.info(sc.agent).Build}, Status: taskPending, Created: now, Deadline: now.Add(timeout),
		Grant: &grantRef{GrantID: g.GrantID, WorkspaceSlug: g.WorkspaceSlug, AgentID: g.AgentID, ServerID: g.ServerID, Scopes: g.Scopes, AgentRef: g.AgentWorkspaceRef}}
	b, err := s.encode(r)
	if err != nil {
		return nil, err
	}
	if limit := s.cfg.Store.MaxValueSize(); len(b) > limit {
		return nil, &InputTooLargeError{Job: job, Size: len(b), Limit: limit}
	}
	key := taskKey(sc.agent, g.WorkspaceID, job)
	existing, err := s.cfg.Store.Create(ctx, key, b, store.Never)
	switch {
	case errors.Is(err, store.ErrExists):
		old, err := decode(key, existing.Value)
		if err != nil {
			return nil, err
		}
		if old.Work != work {
			return nil, fmt.Errorf("%w: job %q runs %q, not %q", ErrOtherWork, job, old.Work, work)
		}
		if !bytes.Equal(old.Input, input) {
			return nil, fmt.Errorf("%w: job %q", ErrOtherInput, job)
		}
		if old.Status != taskPending || old.Holder != "" || old.Deliveries > 0 {
			return old, nil // running or done: never a second run
		}
		r = old // written, maybe never dispatched (the first call failed after the write): dispatch again
	case errors.Is(err, store.ErrTooLarge):
		return nil, &InputTooLargeError{Job: job, Size: len(b), Limit: s.cfg.Store.MaxValueSize()}
	case err != nil:
		return nil, fmt.Errorf("jobs: record the task of job %q: %w", job, err)
	}
	m := Message{Agent: sc.agent, Workspace: g.WorkspaceID, Job: job, Work: work}
	if err := s.dispatch(ctx, m, 0); err != nil {
		return nil, fmt.Errorf("jobs: dispatch the task of job %q: %w", job, err)
	}
	s.tel.jobStarted(ctx, sc.agent, work)
	return r, nil
}

// dispatch hands m to the queue for a delivery after delay. A delayed message carries when it is
// due (At): a queue that cannot hold it back that long delivers it early, and the delivery hands
// it on again (deliver).
func (s *Service) dispatch(ctx context.Context, m Message, delay time.Duration) error {
	if delay <= 0 {
		m.At = 0
		return s.cfg.Dispatcher.Dispatch(ctx, m, 0)
	}
	if m.At == 0 {
		m.At = s.now().Add(delay).UnixMilli()
	}
	if dl, ok := s.cfg.Dispatcher.(DelayLimit); ok {
		if max := dl.MaxDelay(); max > 0 && delay > max {
			delay = max
		}
	}
	return s.cfg.Dispatcher.Dispatch(ctx, m, delay)
}

// deadlineTimer has a job that waits for an answer delivered at its timeout when its work has a
// failure handler: nothing else would deliver it, and the handler must run.
func (s *Service) deadlineTimer(ctx context.Context, r *record, h *handler) {
	if h == nil {
		return
	}
	m := Message{Agent: r.Agent, Workspace: r.Workspace, Job: r.Job, Work: r.Work}
	if err := s.dispatch(context.WithoutCancel(ctx), m, r.Deadline.Sub(s.now())); err != nil {
		s.log.WarnContext(ctx, "the timeout of a waiting job was not scheduled: its failure handler runs at its next delivery", "job_id", r.Job, "error", err)
	}
}

// Deliver runs one delivery of the task m refers to: the work from the top, completed steps
// replayed from the store, until it finishes, waits for an answer, is stopped, fails, or hands
// itself on. A nil error means the message is done with (acknowledge it); an error means the
// queue should deliver it again later (the store was down, another instance holds the task).
func (s *Service) Deliver(ctx context.Context, m Message, d Delivery) (err error) {
	ctx, done := s.tel.deliveryStarted(ctx, m, d)
	defer func() { done(err) }()
	err = s.deliver(ctx, m, d)
	if err != nil && !errors.Is(err, ErrBusy) && d.MaxReceives > 0 && d.Receive >= d.MaxReceives {
		// The queue dead-letters the message now: the job's state must say it failed, and why. (A
		// busy task may be running: its dead letter decides, DeadLettered.)
		msg := fmt.Sprintf("the task was delivered %d times without finishing (last error: %v)", d.Receive, err)
		if ferr := s.failJob(context.WithoutCancel(ctx), m, CauseDelivery, msg); ferr != nil {
			s.log.ErrorContext(ctx, "job not marked failed before its message is dead-lettered", "job_id", m.Job, "error", ferr)
		}
	}
	return err
}

// fail marks the task under key failed with msg (CauseDelivery), unless it finished.
func (s *Service) fail(ctx context.Context, key, msg string) error {
	r, _, err := s.load(ctx, key)
	if err != nil {
		return err
	}
	return s.failJob(ctx, Message{Agent: r.Agent, Workspace: r.Workspace, Job: r.Job, Work: r.Work}, CauseDelivery, msg)
}

// failJob marks m's task failed for good with msg, unless it finished: failing first, and handed
// to a delivery of its failure handler, when its work has one.
func (s *Service) failJob(ctx context.Context, m Message, cause, msg string) error {
	ctx, cancel := context.WithTimeout(ctx, writeTimeout)
	defer cancel()
	h := s.handlerOf(m.Agent, m.Work)
	var made bool
	r, err := s.update(ctx, m.Key(), func(r *record) (bool, error) {
		made = false
		if terminal(r.Status) || r.Status == taskFailing {
			return false, nil
		}
		r.Status, r.Error, r.Holder, r.LeaseUntil, r.Wait, r.NotBefore = taskFailed, msg, "", time.Time{}, nil, time.Time{}
		if h != nil {
			r.Status, r.Failure = taskFailing, s.newFailure(h, taskFailed, failureRecord{Cause: cause, Reason: msg})
		}
		endOpen(r)
		made = true
		return true, nil
	})
	switch {
	case err != nil || !made:
		return err
	case r.Status == taskFailing:
		return s.dispatch(ctx, m, 0) // the failure handler runs in a delivery of its own
	}
	s.published(ctx, r)
	return nil
}

func (s *Service) deliver(ctx context.Context, m Message, d Delivery) error {
	log := s.log.With("agent_slug", m.Agent, "job_id", m.Job, "work", m.Work, "attempt", m.Attempt)
	if due := time.UnixMilli(m.At); m.At > 0 && s.now().Before(due) {
		// Delivered before it is due (the queue holds messages back for less time): on again.
		return s.dispatch(ctx, m, due.Sub(s.now()))
	}
	reg, _, ok := s.cfg.Works(m.Agent)
	if !ok {
		log.WarnContext(ctx, "task message for an agent this controller does not serve: acknowledged")
		return nil
	}
	w := reg.lookup(m.Work)
	if w == nil {
		log.WarnContext(ctx, "task message for work this agent does not define: acknowledged")
		return nil
	}
	key := m.Key()
	holder := s.newHolder()
	build := s.info(m.Agent).Build
	var r *record
	var version uint64
	for range maxWriteRounds {
		var err error
		r, version, err = s.load(ctx, key)
		if errors.Is(err, store.ErrNotFound) {
			log.WarnContext(ctx, "task message for a job that no longer exists: acknowledged")
			return nil
		}
		if err != nil {
			return fmt.Errorf("jobs: load task of job %q: %w", m.Job, err)
		}
		now := s.now()
		switch {
		case r.Work != m.Work:
			log.WarnContext(ctx, "task message names another work than the job's: acknowledged", "job_work", r.Work)
			return nil
		case terminal(r.Status) || r.Status == taskAwaiting && now.Before(r.Deadline):
			return nil // a duplicate, or a message for a job that waits for its operator
		case r.Holder != "" && now.Before(r.LeaseUntil.Add(SkewMargin)) && !d.takeOver && !s.own(r.Holder, d):
			return ErrBusy
		case r.NotBefore.After(now) && (m.At == 0 || m.At != r.NotBefore.UnixMilli()) && (r.Wait == nil || r.Wait.Reason != waitLimit):
			return nil // a duplicate of a message dispatched for later: that message runs it
		}
		if r.Failure == nil && (r.Stop || !now.Before(r.Deadline)) {
			if r.Stop {
				r.Status = taskStopped
			} else {
				r.Status, r.Error = taskFailed, timeoutMessage(r)
			}
			r.Holder, r.LeaseUntil = "", time.Time{}
			if h := w.options().handler; h != nil && (r.Status == taskFailed || h.onStop) {
				r.Failure = s.newFailure(h, r.Status, failureRecord{Cause: CauseTimeout, Reason: r.Error})
				r.Status = taskFailing
			}
			endOpen(r)
		} else {
			r.Holder, r.LeaseUntil = holder, now.Add(s.cfg.Lease)
			r.Deliveries++
		}
		b, err := s.encode(r)
		if err != nil {
			return err
		}
		nv, err := s.cfg.Store.Update(ctx, key, version, b, s.expiry(r))
		if errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return fmt.Errorf("jobs: claim task of job %q: %w", m.Job, err)
		}
		version = nv.Version
		switch r.Status {
		case taskFailing:
			if r.Holder == "" {
				return s.dispatch(ctx, m, 0) // the failure handler runs in a delivery of its own
			}
		case taskStopped, taskFailed:
			s.published(ctx, r)
			return nil
		}
		break
	}
	if r.Holder != holder {
		return errors.New("jobs: the task record keeps changing under concurrent claims")
	}
	s.tel.claimed(ctx, r, s.now())
	t := &task{svc: s, key: key, rec: r, version: version, holder: holder, msg: m, log: log, settings: w.options(),
		leaseUntil: r.LeaseUntil, steps: map[string]*stepRecord{}, replay: map[string]bool{}}
	t.deadline = d.Deadline
	if t.deadline.IsZero() {
		if dl, ok := ctx.Deadline(); ok {
			t.deadline = dl
		}
	}
	if err := t.loadRecorded(ctx); err != nil {
		_ = t.durableWrite(ctx, func(r *record) bool { r.Holder, r.LeaseUntil = "", time.Time{}; return true })
		return err
	}
	if i := slices.Index(r.Builds, build); i >= 0 {
		t.build = i
	} else if err := t.write(ctx, func(r *record) bool { t.build = r.buildIndex(build); return true }); err != nil {
		return fmt.Errorf("jobs: record the build of a delivery of job %q: %w", m.Job, err)
	}
	if r.Failure == nil {
		if ok, err := t.acquireJob(ctx); err != nil || !ok {
			return err
		}
	}
	return t.run(ctx, w)
}

func timeoutMessage(r *record) string {
	d := r.Deadline.Sub(r.began())
	if d >= time.Second {
		d = d.Round(time.Second)
	}
	return fmt.Sprintf("the job did not finish within %s (its timeout)", d)
}

// published tells the effect stream that a job finished or waits.
func (s *Service) published(ctx context.Context, r *record) {
	s.tel.jobEnded(ctx, r)
	if s.cfg.Publish == nil {
		return
	}
	status := jobStatus(r)
	msg := ""
	switch r.Status {
	case taskFailed:
		msg = r.Error
	case taskStopped:
		msg = r.Cancel
	}
	s.cfg.Publish(ctx, r.Agent, r.Workspace, []contract.Effect{{Type: contract.EffectJobSynced, JobID: r.Job, Status: status, Message: msg}})
}

// newHolder names one delivery in the task's lease: this process's instance name (Identity),
// when it has one, and a random part.
func (s *Service) newHolder() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	if s.instance == "" {
		return hex.EncodeToString(b[:])
	}
	return s.instance + "#" + hex.EncodeToString(b[:])
}

// own reports whether holder is a delivery of an earlier process under this instance's name that
// the pool's first scan found (Identity): that process ended, so its lease need not be waited out.
func (s *Service) own(holder string, d Delivery) bool {
	return d.takeOverOwn && s.instance != "" && strings.HasPrefix(holder, s.instance+"#")
}

// strictDecode decodes one JSON object into v, refusing unknown members and trailing data.
func strictDecode(body []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%w: %v", errBadMessage, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return fmt.Errorf("%w: data after the object", errBadMessage)
	}
	return nil
}

// QueueFunc makes the platform's Dispatcher. The platform entrypoint (adapters/platform) puts one
// in the context it builds the controller with; package config calls it at cold start, and only
// when an agent defines work, so that a missing queue setting stops the start with its name.
type QueueFunc func() (Dispatcher, error)

type queueKey struct{}

// WithQueue returns ctx carrying the platform's queue maker.
func WithQueue(ctx context.Context, f QueueFunc) context.Context {
	return context.WithValue(ctx, queueKey{}, f)
}

// QueueFrom returns the queue maker ctx carries, nil when none (a plain server: NewPool).
func QueueFrom(ctx context.Context) QueueFunc {
	f, _ := ctx.Value(queueKey{}).(QueueFunc)
	return f
}
