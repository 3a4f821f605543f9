package jobs

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/supervaize/svz/core/contract"
	"github.com/supervaize/svz/core/store"
)

// Operator controls: what `svz jobs` and the workbench's jobs page do over a controller's store
// (docs/jobs.md, "Operator controls"). They read and write the records a delivery does, under the
// same compare-and-swap, so they are safe while instances run the jobs; they work without the
// agent's code (the CLI has none), which only the projection's View and a stop's failure handler
// need (see Cancel).

// Errors of the operator controls.
var (
	// ErrNotRetryable: Retry of a job that has not failed and was not stopped.
	ErrNotRetryable = errors.New("jobs: only a failed or stopped job can be retried")
	// ErrEnded: Cancel of a job that has ended, or whose failure handler is to run.
	ErrEnded = errors.New("jobs: the job has ended: there is nothing to cancel")
	// ErrRecordsGone: Retry of a job whose recorded steps expired: it cannot continue where it was.
	ErrRecordsGone = errors.New("jobs: records of the job's completed steps have expired, so it cannot continue where it stopped: start a new job")
	// ErrCannotList: the store lists no task records (see KeyScanner).
	ErrCannotList = errors.New("jobs: the store cannot list the jobs' records")
)

// KeyScanner is a store that finds the keys under a prefix by reading through all of its records
// (the DynamoDB store's Scan, which reads the whole table): List uses it where the store's listing
// leaves the task records out (the DynamoDB store keeps them out of its index, which would cost a
// write unit per job). fn gets each live key under prefix, in no order; an error from fn ends the
// scan with that error.
type KeyScanner interface {
	ScanKeys(ctx context.Context, prefix string, fn func(key string) error) error
}

// Ref names a job: its agent, workspace and id. In List, an empty field matches any.
type Ref struct {
	Agent     string `json:"agent"`
	Workspace string `json:"workspace"`
	Job       string `json:"job"`
}

func (r Ref) key() string { return taskKey(r.Agent, r.Workspace, r.Job) }

// Operator statuses: the task's statuses (pending, awaiting, failing, completed, failed, stopped),
// and running for a pending job that a delivery holds under a live lease.
const StatusRunning = "running"

// Summary is a job as a listing shows it.
type Summary struct {
	Ref
	Work string `json:"work"`
	// Status: pending, running, awaiting, failing (failed, its failure handler to run), completed,
	// failed, stopped. A job past its timeout that nobody runs is failed, as job.sync says.
	Status  string    `json:"status"`
	Created time.Time `json:"created"`
	Error   string    `json:"error,omitempty"`
	// Waiting: why a pending job waits (a retry's backoff, a timer, a limit), and until when.
	Waiting *Waiting `json:"waiting,omitempty"`
}

// Waiting is why a pending job waits before its next delivery.
type Waiting struct {
	Reason string    `json:"reason"` // retry, timer, limit
	Step   string    `json:"step,omitempty"`
	Limit  string    `json:"limit,omitempty"`
	Until  time.Time `json:"until,omitzero"`
}

// Detail is a job as an operator sees it: its job_state (as job.sync answers it) and what job.sync
// does not show: each step's tries and last error, the fan-outs' items, the failure handler, the
// builds that ran it, the lease.
type Detail struct {
	Summary
	Mission    string    `json:"mission,omitempty"`
	Deadline   time.Time `json:"deadline"`
	Deliveries int       `json:"deliveries"`
	// Holder runs the job under a lease until LeaseUntil (empty: nobody).
	Holder     string    `json:"holder,omitempty"`
	LeaseUntil time.Time `json:"lease_until,omitzero"`
	// StopRequested: a stop is asked for and the job's next delivery (or renewal) applies it.
	StopRequested bool `json:"stop_requested,omitempty"`
	// Cancelled is the label of a job its work cancelled (jobs.Cancel).
	Cancelled string `json:"cancelled,omitempty"`
	// Retries counts the operator's retries; Retried is when the last one was.
	Retries int       `json:"retries,omitempty"`
	Retried time.Time `json:"retried,omitzero"`
	// Builds are the builds that ran the job, the first its start (see Build).
	Builds []string `json:"builds"`
	// Steps: the step records in the order they were recorded, then the open steps.
	Steps   []StepDetail       `json:"steps"`
	Failure *FailureDetail     `json:"failure_handler,omitempty"`
	State   *contract.JobState `json:"job_state"`
}

// Kinds of step in a Detail.
const (
	KindStep    = "step"
	KindAwait   = "await"
	KindSleep   = "sleep"
	KindFanOut  = "fan-out"
	KindPatch   = "patch"           // jobs.Patched's record of the path taken
	KindHandler = "failure-handler" // the failure handler ran (recorded once per failure)
)

// StepDetail is one step of a Detail.
type StepDetail struct {
	Name string `json:"name"`
	Kind string `json:"kind"`
	// Record is the number of its step record (1, 2, ...); 0 for an open step, not recorded yet.
	Record int `json:"record,omitempty"`
	// Status: completed (recorded), active (running, or waiting for its retry), awaiting,
	// sleeping, failed, cancelled.
	Status string `json:"status"`
	// Tries: the runs of a recorded step; the failed attempts of an open one. Error is the last.
	Tries int    `json:"tries,omitempty"`
	Error string `json:"error,omitempty"`
	// Build is the build that recorded the step (job's first build when empty and recorded).
	Build string     `json:"build,omitempty"`
	Items *ItemCount `json:"items,omitempty"`
	// Until is a timer's wake time.
	Until time.Time `json:"until,omitzero"`
	// AnsweredBy and AnsweredAt: who answered an Await step, and when.
	AnsweredBy string    `json:"answered_by,omitempty"`
	AnsweredAt time.Time `json:"answered_at,omitzero"`
}

// ItemCount is how far a fan-out is: Done of Total items have a result; Failed counts the failed
// attempts of the items without one, by item index (retried while the job runs). An open
// fan-out's counts are as of the task's last write (its delivery writes them at each lease
// renewal).
type ItemCount struct {
	Done   int         `json:"done"`
	Total  int         `json:"total"`
	Failed map[int]int `json:"failed,omitempty"`
}

// States of a failure handler.
const (
	HandlerPending = "pending" // to run (the job is failing)
	HandlerRan     = "ran"
	HandlerFailed  = "failed" // it failed for good; the job's error says why
)

// FailureDetail is a failed job's failure handler (OnFailure).
type FailureDetail struct {
	State  string `json:"state"`
	Cause  string `json:"cause"`
	Reason string `json:"reason"`
	Step   string `json:"step,omitempty"`
	// Tries and Error: its failed attempts so far, and the last one's error.
	Tries    int       `json:"tries,omitempty"`
	Error    string    `json:"error,omitempty"`
	Deadline time.Time `json:"deadline"`
}

// works returns the agent's registry when this service runs the agent's work.
func (s *Service) works(agent string) (*Registry, bool) {
	if s.cfg.Works == nil {
		return nil, false
	}
	reg, _, ok := s.cfg.Works(agent)
	return reg, ok
}

// List lists the jobs that match f (an empty field matches any), newest first. On a store that
// lists by prefix (bolt, PostgreSQL, Redis, memory) it reads the task records under the prefix f
// gives (agent, then workspace) and skips their step and item records; on DynamoDB, whose listing
// index leaves the task records out, it scans the table (KeyScanner: the whole table is read).
func (s *Service) List(ctx context.Context, f Ref) ([]Summary, error) {
	var out []Summary
	err := s.eachTask(ctx, f, func(r *record) {
		out = append(out, s.summary(r))
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b Summary) int {
		return cmp.Or(b.Created.Compare(a.Created), cmp.Compare(a.Agent, b.Agent), cmp.Compare(a.Workspace, b.Workspace), cmp.Compare(a.Job, b.Job))
	})
	return out, nil
}

// eachTask calls fn with each task record that matches f.
func (s *Service) eachTask(ctx context.Context, f Ref, fn func(r *record)) error {
	prefix := TaskKeyPrefix
	if f.Agent != "" {
		prefix += url.PathEscape(f.Agent) + "/"
		if f.Workspace != "" {
			prefix += url.PathEscape(f.Workspace) + "/"
		}
	}
	match := func(key string) bool {
		parts := strings.Split(strings.TrimPrefix(key, TaskKeyPrefix), "/")
		return strings.HasPrefix(key, prefix) && len(parts) == 3 &&
			(f.Workspace == "" || parts[1] == url.PathEscape(f.Workspace)) && (f.Job == "" || parts[2] == url.PathEscape(f.Job))
	}
	take := func(key string, value []byte) error {
		r, err := decode(key, value)
		if err != nil {
			return err
		}
		fn(r)
		return nil
	}
	l, listed := s.cfg.Store.(store.Lister)
	if listed {
		err := listTasks(ctx, l, prefix, store.MaxListLimit, match, take)
		if !errors.Is(err, store.ErrInvalid) {
			return err
		}
	}
	sc, ok := s.cfg.Store.(KeyScanner)
	if !ok {
		return fmt.Errorf("%w: it has no listing of them (store.Lister) and cannot scan its keys (jobs.KeyScanner)", ErrCannotList)
	}
	var keys []string
	if err := sc.ScanKeys(ctx, prefix, func(key string) error {
		if match(key) {
			keys = append(keys, key)
		}
		return nil
	}); err != nil {
		return fmt.Errorf("jobs: scan the store for task records: %w", err)
	}
	vals, found, err := getAll(ctx, s.cfg.Store, keys)
	if err != nil {
		return fmt.Errorf("jobs: read the task records: %w", err)
	}
	for i, k := range keys {
		if found[i] { // else deleted or expired since the scan
			if err := take(k, vals[i]); err != nil {
				return err
			}
		}
	}
	return nil
}

// listTasks lists the task records under prefix. Their step and item records share the prefix
// (<task key>/s/<n>, <task key>/i/...): a page that ends inside a job's records resumes after all
// of them, so a job of many records costs at most one page more than a small one. ErrInvalid, as
// is, when the store refuses the prefix (DynamoDB's, which keeps task records out of its index).
func listTasks(ctx context.Context, l store.Lister, prefix string, limit int, match func(string) bool, take func(key string, value []byte) error) error {
	after := ""
	for {
		page, err := l.List(ctx, prefix, after, limit)
		if err != nil {
			if errors.Is(err, store.ErrInvalid) {
				return err
			}
			return fmt.Errorf("jobs: list the task records: %w", err)
		}
		for _, it := range page.Items {
			if match(it.Key) {
				if err := take(it.Key, it.Value); err != nil {
					return err
				}
			}
		}
		if page.Next == "" {
			return nil
		}
		after = page.Next
		if task, _, child := cutTask(after); child {
			// The rest of this job's records sort before task + "/" + U+10FFFF (they continue with
			// an ASCII letter), and every later job after it.
			after = task + "/\U0010FFFF"
		}
	}
}

// cutTask splits a key under TaskKeyPrefix into its task's key and the rest; child reports a step
// or item record (a key with a rest).
func cutTask(key string) (task, rest string, child bool) {
	parts := strings.SplitN(strings.TrimPrefix(key, TaskKeyPrefix), "/", 4)
	if !strings.HasPrefix(key, TaskKeyPrefix) || len(parts) < 4 {
		return key, "", false
	}
	return TaskKeyPrefix + strings.Join(parts[:3], "/"), parts[3], true
}

// summary is r as a listing shows it.
func (s *Service) summary(r *record) Summary {
	sum := Summary{Ref: Ref{Agent: r.Agent, Workspace: r.Workspace, Job: r.Job}, Work: r.Work, Status: r.Status, Created: r.Created, Error: r.Error}
	now := s.now()
	switch {
	case r.Status == taskPending && r.Holder != "" && now.Before(r.LeaseUntil.Add(SkewMargin)):
		sum.Status = StatusRunning
	case !terminal(r.Status) && r.Status != taskFailing && !now.Before(r.Deadline):
		sum.Status, sum.Error = taskFailed, timeoutMessage(r) // as job.sync says: its next delivery records it
	}
	if w := r.Wait; w != nil && sum.Status == taskPending {
		sum.Waiting = &Waiting{Reason: w.Reason, Step: w.Step, Limit: w.Limit, Until: w.Until}
	}
	return sum
}

// Show is the operator's view of a job: its job_state and the details job.sync does not show.
// ErrNoJob when it has no task.
func (s *Service) Show(ctx context.Context, ref Ref) (*Detail, error) {
	r, err := s.loadRef(ctx, ref)
	if err != nil {
		return nil, err
	}
	steps, err := stepsOf(ctx, s.cfg.Store, ref.key(), r)
	if err != nil {
		return nil, err
	}
	return s.detail(r, steps), nil
}

// loadRef reads the task of ref; ErrNoJob, naming it, when it has none.
func (s *Service) loadRef(ctx context.Context, ref Ref) (*record, error) {
	r, _, err := s.load(ctx, ref.key())
	if errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("%w: job %q of agent %q in workspace %q", ErrNoJob, ref.Job, ref.Agent, ref.Workspace)
	}
	return r, err
}

func (s *Service) detail(r *record, steps []*stepRecord) *Detail {
	reg, _ := s.works(r.Agent)
	d := &Detail{Summary: s.summary(r), Mission: r.Mission, Deadline: r.Deadline, Deliveries: r.Deliveries,
		StopRequested: r.Stop && !terminal(r.Status), Cancelled: r.Cancel, Builds: []string{}, Steps: []StepDetail{}, State: s.snapshot(reg, r, steps)}
	d.Holder, d.LeaseUntil = r.Holder, r.LeaseUntil // a lapsed lease too: its holder may have died
	if rt := r.Retry; rt != nil {
		d.Retries, d.Retried = rt.Count, rt.At
	}
	for _, b := range r.Builds {
		d.Builds = append(d.Builds, b.String())
	}
	handled := false
	for _, st := range steps {
		if st.Hidden && st.Name == onFailureStep {
			handled = true
		}
		d.Steps = append(d.Steps, s.stepDetail(r, st))
	}
	for _, st := range r.Open {
		d.Steps = append(d.Steps, s.stepDetail(r, st))
	}
	if f := r.Failure; f != nil {
		d.Failure = &FailureDetail{State: HandlerPending, Cause: f.Cause, Reason: f.Reason, Step: f.Step, Tries: f.Tries, Error: f.Error, Deadline: f.Deadline}
		switch {
		case handled:
			d.Failure.State = HandlerRan
		case r.Status != taskFailing:
			d.Failure.State = HandlerFailed
		}
	}
	return d
}

func (s *Service) stepDetail(r *record, st *stepRecord) StepDetail {
	d := StepDetail{Name: st.Name, Kind: KindStep, Record: st.seq, Status: st.Status, Tries: st.Tries, Error: st.Error,
		Until: st.Until, AnsweredBy: st.By, AnsweredAt: st.At}
	switch {
	case st.Hidden && strings.HasPrefix(st.Name, onFailureStep):
		d.Kind = KindHandler
		if n, ok := strings.CutPrefix(st.Name, retiredHandler(0)); ok {
			d.Name = onFailureStep + " (before retry " + n + ")"
		}
	case st.Hidden:
		d.Kind = KindPatch
	case st.Awaiting != nil:
		d.Kind = KindAwait
	case !st.Until.IsZero():
		d.Kind = KindSleep
	case st.Items > 0:
		d.Kind = KindFanOut
		done := st.Done
		if st.Status == stepCompleted {
			done = st.Items
		}
		d.Items = &ItemCount{Done: done, Total: st.Items}
		if len(st.ItemTries) > 0 {
			d.Items.Failed = st.ItemTries
		}
	}
	if st.seq > 0 && len(r.Builds) > 1 {
		d.Build = r.buildOf(st.Build).String()
	}
	return d
}

// retiredHandler is the name a retry gives the record of a failure handler that ran for an
// earlier failure, so that a new failure runs it again: the record stays (step records are
// numbered without holes), under a name no step can have (a control character). Its retry's
// number follows the prefix retiredHandler(0) gives.
func retiredHandler(retry int) string {
	if retry == 0 {
		return onFailureStep + "\x1f"
	}
	return onFailureStep + "\x1f" + strconv.Itoa(retry)
}

// retryRecord is an operator's retry of a job.
type retryRecord struct {
	At    time.Time `json:"at"`
	Count int       `json:"count"`
	// Deliveries is the task's count when it was retried: none since means the retry's dispatch
	// may have been lost, and a second Retry dispatches it again.
	Deliveries int `json:"deliveries"`
}

// began is when the job's current run began: its start, or its last retry.
func (r *record) began() time.Time {
	if r.Retry != nil {
		return r.Retry.At
	}
	return r.Created
}

// Retry runs a failed or stopped job again from its first unfinished step: its completed steps
// keep their records (and are not run again), its failed or cancelled steps start over (their
// tries from zero, a fan-out's completed items kept), and it gets its timeout again from now. The
// job is pending, dispatched through the service's queue. The records of its completed steps and
// items are kept alive for the new run (their expiry rewritten to the new deadline plus the
// retention, one write per record that would expire earlier). ErrNotRetryable for a job in
// another state (running, waiting, completed...), ErrRecordsGone when completed steps' records
// expired. A retry whose dispatch failed may be asked again: it dispatches the job again.
func (s *Service) Retry(ctx context.Context, ref Ref) (*Detail, error) {
	if s.cfg.Dispatcher == nil {
		return nil, ErrNoDispatcher
	}
	key := ref.key()
	r, err := s.loadRef(ctx, ref)
	if err != nil {
		return nil, err
	}
	if s.redispatch(r) {
		return s.retried(ctx, ref, r)
	}
	if err := s.retryable(r); err != nil {
		return nil, err
	}
	steps, err := loadSteps(ctx, s.cfg.Store, key, r.Seq, false)
	if err != nil {
		return nil, err
	}
	if len(steps) < r.Seq {
		return nil, fmt.Errorf("%w (job %q has %d step records of %d)", ErrRecordsGone, ref.Job, len(steps), r.Seq)
	}
	now := s.now()
	deadline := now.Add(max(r.Deadline.Sub(r.began()), time.Second))
	count := 1
	if r.Retry != nil {
		count = r.Retry.Count + 1
	}
	if err := s.keepRecords(ctx, key, r, steps, deadline.Add(s.cfg.Retention), count); err != nil {
		return nil, err
	}
	r, err = s.update(ctx, key, func(r *record) (bool, error) {
		if err := s.retryable(r); err != nil {
			return false, err
		}
		r.Status, r.Error, r.Failure, r.Cancel, r.Stop = taskPending, "", nil, "", false
		r.Holder, r.LeaseUntil, r.NotBefore, r.Wait = "", time.Time{}, time.Time{}, nil
		r.Deadline, r.Retry = deadline, &retryRecord{At: now, Count: count, Deliveries: r.Deliveries}
		r.Open = reopen(r.Open)
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	return s.retried(ctx, ref, r)
}

// retried shows a retried job as the retry left it (pending), then dispatches it: a delivery that
// starts at once (the in-process pool) does not change what the retry answers.
func (s *Service) retried(ctx context.Context, ref Ref, r *record) (*Detail, error) {
	d, err := s.Show(ctx, ref)
	if err != nil {
		return nil, err
	}
	if err := s.dispatch(ctx, Message{Agent: r.Agent, Workspace: r.Workspace, Job: r.Job, Work: r.Work}, 0); err != nil {
		return nil, fmt.Errorf("jobs: job %q is pending again, but its message was not sent (retry it again to send it): %w", ref.Job, err)
	}
	return d, nil
}

// redispatch reports whether r was retried and never delivered since: its dispatch may have been
// lost, and Retry sends it again.
func (s *Service) redispatch(r *record) bool {
	return r.Status == taskPending && r.Retry != nil && r.Deliveries == r.Retry.Deliveries && r.Holder == "" && s.now().Before(r.Deadline)
}

// retryable says why r cannot be retried, nil when it can: it failed (or timed out while nobody
// ran it) or was stopped, and no delivery holds it.
func (s *Service) retryable(r *record) error {
	sum := s.summary(r)
	switch sum.Status {
	case taskFailed, taskStopped: // a held task is running (summary)
		return nil
	case taskFailing:
		return fmt.Errorf("%w: job %q has failed and its failure handler is still to run: retry it once the job has failed", ErrNotRetryable, r.Job)
	case taskCompleted:
		return fmt.Errorf("%w: job %q has completed", ErrNotRetryable, r.Job)
	}
	return fmt.Errorf("%w: job %q is %s, it has not ended (cancel it first to run it again from its first unfinished step)", ErrNotRetryable, r.Job, sum.Status)
}

// reopen is the open steps of a retried task: a failed or cancelled step starts over (dropped:
// its tries from zero; a fan-out keeps its items' records), except a timer, which sleeps on to
// its wake time; an answer not yet recorded, a timer and a wait are kept.
func reopen(open []*stepRecord) []*stepRecord {
	var out []*stepRecord
	for _, st := range open {
		switch {
		case st.Status == stepFailed || st.Status == contract.StateCancelled:
			if st.Until.IsZero() {
				continue
			}
			st.Status, st.Tries, st.Error = stepSleeping, 0, ""
		case st.Status == stepActive:
			st.Tries, st.Error, st.ItemTries = 0, "", nil
		}
		out = append(out, st)
	}
	return out
}

// keepRecords makes the step and fan-out item records of the task under key live until at least
// until (one write for each that expires earlier), and renames the record of a failure handler
// that ran (retiredHandler) so that a new failure runs it again. ErrRecordsGone when a record a
// completed fan-out needs has expired.
func (s *Service) keepRecords(ctx context.Context, key string, r *record, steps []*stepRecord, until time.Time, retry int) error {
	keys := make([]string, 0, len(steps))
	for _, st := range steps {
		keys = append(keys, stepKey(key, st.seq))
	}
	rename := func(k string, value []byte) ([]byte, error) {
		st, err := decodeStep(k, value)
		if err != nil || !st.Hidden || st.Name != onFailureStep {
			return nil, err
		}
		st.Name = retiredHandler(retry)
		b, err := json.Marshal(st)
		if err != nil {
			return nil, fmt.Errorf("jobs: encode step record %s: %w", k, err)
		}
		return s.packer.Pack(b), nil
	}
	if _, err := s.extend(ctx, keys, until, rename); err != nil {
		return err
	}
	for _, st := range append(slices.Clone(steps), r.Open...) {
		if st.Hidden {
			continue
		}
		items := make([]string, st.Items)
		for i := range items {
			items[i] = itemKey(key, st.Name, i)
		}
		found, err := s.extend(ctx, items, until, nil)
		if err != nil {
			return err
		}
		if st.seq > 0 && slices.Contains(found, false) {
			return fmt.Errorf("%w (fan-out %q has lost the results of some of its %d items)", ErrRecordsGone, st.Name, st.Items)
		}
	}
	return nil
}

// extend rewrites the records under keys that expire before until with that expiry, and those
// rewrite changes (nil: unchanged), readConcurrency at a time; found[i] reports a live record
// under keys[i].
func (s *Service) extend(ctx context.Context, keys []string, until time.Time, rewrite func(key string, value []byte) ([]byte, error)) (found []bool, err error) {
	found = make([]bool, len(keys))
	err = concurrently(ctx, len(keys), func(ctx context.Context, i int) error {
		ok, err := s.extendOne(ctx, keys[i], until, rewrite)
		if err != nil {
			return fmt.Errorf("jobs: keep record %s for the retry: %w", keys[i], err)
		}
		found[i] = ok
		return nil
	})
	if err != nil {
		return nil, err
	}
	return found, nil
}

func (s *Service) extendOne(ctx context.Context, key string, until time.Time, rewrite func(key string, value []byte) ([]byte, error)) (bool, error) {
	for range maxWriteRounds {
		rec, err := s.cfg.Store.Get(ctx, key)
		if errors.Is(err, store.ErrNotFound) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		value, expires, changed := rec.Value, rec.ExpiresAt, false
		if rewrite != nil {
			v, err := rewrite(key, rec.Value)
			if err != nil {
				return false, err
			}
			if v != nil {
				value, changed = v, true
			}
		}
		if !expires.IsZero() && expires.Before(until) {
			expires, changed = until, true
		}
		if !changed {
			return true, nil // lives long enough, as it is
		}
		_, err = s.cfg.Store.Update(ctx, key, rec.Version, value, expires)
		switch {
		case err == nil:
			return true, nil
		case errors.Is(err, store.ErrConflict), errors.Is(err, store.ErrNotFound):
			continue // changed meanwhile: read it again
		}
		return false, err
	}
	return false, errors.New("the record keeps changing under concurrent writes")
}

// Cancel stops a job as job.stop does: a job that waits or sits between deliveries stops at once,
// a running one at its next lease renewal (at once on this instance), its running step's context
// cancelled; a failure handler that runs for stopped jobs (AlsoWhenStopped) runs. When this service
// does not run the agent's work (svz jobs: the CLI has not the agent's code, and so cannot know
// its failure handler), the stop is asked for and the job dispatched: its next delivery, on an
// instance of the agent, stops it (until then Detail.StopRequested). ErrEnded for a job that has
// ended or is failing.
func (s *Service) Cancel(ctx context.Context, ref Ref) (*Detail, error) {
	key := ref.key()
	r, err := s.loadRef(ctx, ref)
	if err != nil {
		return nil, err
	}
	if err := cancellable(r); err != nil {
		return nil, err
	}
	if reg, ok := s.works(ref.Agent); ok {
		sc := NewContext(ctx, s, reg, ref.Agent, &contract.VerifiedWorkspaceContext{WorkspaceID: ref.Workspace, AgentSlug: ref.Agent})
		if _, err := Stop(sc, ref.Job); err != nil {
			return nil, err
		}
		return s.Show(ctx, ref)
	}
	if s.cfg.Dispatcher == nil {
		return nil, ErrNoDispatcher
	}
	dispatch := false
	r, err = s.update(ctx, key, func(r *record) (bool, error) {
		dispatch = false
		if err := cancellable(r); err != nil {
			return false, err
		}
		r.Stop = true
		if r.Holder != "" && s.now().Before(r.LeaseUntil.Add(SkewMargin)) {
			return true, nil // its delivery sees the stop at its next renewal
		}
		// Nobody runs it: the next delivery stops it at once, whatever it waited for.
		r.Status, r.Holder, r.LeaseUntil, r.NotBefore, r.Wait, dispatch = taskPending, "", time.Time{}, time.Time{}, nil, true
		for _, st := range r.Open {
			if st.Status == stepActive || st.Status == stepAwaiting || st.Status == stepSleeping {
				st.Status = contract.StateCancelled
			}
		}
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	if dispatch {
		if err := s.dispatch(ctx, Message{Agent: r.Agent, Workspace: r.Workspace, Job: r.Job, Work: r.Work}, 0); err != nil {
			return nil, fmt.Errorf("jobs: the stop of job %q is recorded, but its message was not sent (cancel it again to send it): %w", ref.Job, err)
		}
	}
	return s.Show(ctx, ref)
}

// cancellable says why r cannot be cancelled, nil when it can.
func cancellable(r *record) error {
	switch {
	case r.Status == taskFailing:
		return fmt.Errorf("%w: job %q has failed and its failure handler is to run", ErrEnded, r.Job)
	case terminal(r.Status):
		return fmt.Errorf("%w: job %q is %s", ErrEnded, r.Job, r.Status)
	}
	return nil
}

// PoolIndex is the Dispatcher of an operator tool on the store of plain servers and local mode
// (the in-process pool, NewPool): it writes the task's entry in the pool's index, and the next
// scan of a pool on the store delivers it (every DefaultScan, and when a server starts).
type PoolIndex struct{ Store store.Store }

var _ Dispatcher = PoolIndex{}

// Dispatch writes m's index entry, due after delay.
func (q PoolIndex) Dispatch(ctx context.Context, m Message, delay time.Duration) error {
	if delay > 0 && m.At == 0 {
		m.At = time.Now().Add(delay).UnixMilli()
	}
	entry := Message{Agent: m.Agent, Workspace: m.Workspace, Job: m.Job, Work: m.Work, At: m.At}
	if err := indexTask(ctx, q.Store, m, entry.Encode()); err != nil {
		return fmt.Errorf("jobs: write the pool's index entry of job %q: %w", m.Job, err)
	}
	return nil
}
