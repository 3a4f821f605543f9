package checkpoint_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/supervaize/svz/core/checkpoint"
	"github.com/supervaize/svz/core/contract"
	"github.com/supervaize/svz/core/internal/packed"
	"github.com/supervaize/svz/core/store"
	"github.com/supervaize/svz/core/store/memory"
)

// Tests that each kill a mutant a gremlins run of the package left alive, on the memory store.

// hookStore is a memory store whose calls a test intercepts: hook, when set, runs before each
// Get, Create, Update and Delete ("get", "create", "update", "delete") with the call's context,
// key and value (a write's, unpacked), and an error it returns is the call's, the store left
// untouched.
type hookStore struct {
	*memory.Store
	mu   sync.Mutex
	hook func(ctx context.Context, op, key string, value []byte) error
}

func newHookStore(t testing.TB) *hookStore {
	s := &hookStore{Store: memory.New()}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func (s *hookStore) setHook(h func(ctx context.Context, op, key string, value []byte) error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hook = h
}

func (s *hookStore) call(ctx context.Context, op, key string, value []byte) error {
	s.mu.Lock()
	h := s.hook
	s.mu.Unlock()
	if h == nil {
		return nil
	}
	value, err := packed.Unpack(value)
	if err != nil {
		return err
	}
	return h(ctx, op, key, value)
}

func (s *hookStore) Get(ctx context.Context, key string) (store.Record, error) {
	if err := s.call(ctx, "get", key, nil); err != nil {
		return store.Record{}, err
	}
	return s.Store.Get(ctx, key)
}

func (s *hookStore) Create(ctx context.Context, key string, v []byte, exp time.Time) (store.Record, error) {
	if err := s.call(ctx, "create", key, v); err != nil {
		return store.Record{}, err
	}
	return s.Store.Create(ctx, key, v, exp)
}

func (s *hookStore) Update(ctx context.Context, key string, version uint64, v []byte, exp time.Time) (store.Record, error) {
	if err := s.call(ctx, "update", key, v); err != nil {
		return store.Record{}, err
	}
	return s.Store.Update(ctx, key, version, v, exp)
}

func (s *hookStore) Delete(ctx context.Context, key string, version uint64) error {
	if err := s.call(ctx, "delete", key, nil); err != nil {
		return err
	}
	return s.Store.Delete(ctx, key, version)
}

const (
	stepKeys     = "rulecheckpoint/v1/step/"
	decisionKeys = "rulecheckpoint/v1/decision/"
)

// A job.start delivered again with the same snapshot and token writes nothing: the gate record
// keeps its version and bytes. One with a newer token replaces the stored token, which the
// job's later checkpoints then carry.
func TestFromJobStartAgainWritesOnlyANewerToken(t *testing.T) {
	w := memoryWorld(t, map[string]string{"before": "pause"})
	i := w.instance(behaviour{})
	j := w.job()
	j.gate(t, i)
	first := gateRecordOf(t, w.store, j.occ.JobID)
	j.gate(t, i)
	if again := gateRecordOf(t, w.store, j.occ.JobID); again.Version != first.Version || !bytes.Equal(again.Value, first.Value) {
		t.Fatalf("the same job.start again rewrote the gate record (version %d → %d)", first.Version, again.Version)
	}

	newer := j.token + "-newer"
	w.tokens = append(w.tokens, newer)
	j.startWithToken(t, i, newer)
	if got := j.tokenSent(t, i); got != newer {
		t.Error("the checkpoint carried the first token, not the newer one")
	}
	w.noSecrets(t)
}

// startWithToken delivers the job's job.start (again) with token as its checkpoint token and
// returns its gate.
func (j *job) startWithToken(t *testing.T, i *instance, token string) *checkpoint.Gate {
	t.Helper()
	var in map[string]any
	if err := json.Unmarshal(j.req.Input, &in); err != nil {
		t.Fatal(err)
	}
	in["rule_snapshot"].(map[string]any)["checkpoint_token"] = token
	j.req.Input, _ = json.Marshal(in)
	return j.gate(t, i)
}

// tokenSent runs the job's step, paused at its before checkpoint, under the gate JobGate gives
// for the job, and returns the token its checkpoint carried to Studio.
func (j *job) tokenSent(t *testing.T, i *instance) string {
	t.Helper()
	g, err := checkpoint.JobGate(i.ctx(), j.occ.JobID)
	if err != nil {
		t.Fatal(err)
	}
	out, err := checkpoint.RunGuardedStep(i.ctx(), g, i.step, j.occ, j.before(), j.order)
	wantStatus(t, out, err, checkpoint.Awaiting, "before")
	calls := j.w.studio.callsOf(j.occ.OccurrenceID)
	if len(calls) != 1 {
		t.Fatalf("%d checkpoint calls, want 1", len(calls))
	}
	return calls[0].Token
}

// A rule.checkpoint.resume with no input at all (or only blanks) is refused as input, every
// required member named: it is not "an input that is no JSON object".
func TestResumeRefusesAnEmptyInput(t *testing.T) {
	w := memoryWorld(t, nil)
	i := w.instance(behaviour{})
	want := `[` +
		`{"code":"input_required","message":"rule.checkpoint.resume: input.checkpoint_id is required","field":"checkpoint_id"},` +
		`{"code":"input_required","message":"rule.checkpoint.resume: input.occurrence_id is required","field":"occurrence_id"},` +
		`{"code":"input_required","message":"rule.checkpoint.resume: input.phase is required","field":"phase"},` +
		`{"code":"input_required","message":"rule.checkpoint.resume: input.status is required","field":"status"},` +
		`{"code":"input_required","message":"rule.checkpoint.resume: input.snapshot_hash is required","field":"snapshot_hash"},` +
		`{"code":"input_required","message":"rule.checkpoint.resume: input.input_hash is required","field":"input_hash"}]`
	for _, input := range []string{"", " \n\t"} {
		job, cs := "job-1", "case-1"
		req := &contract.ActionRequest{RequestID: "r", AgentSlug: agentSlug, Action: contract.RuleCheckpointResumeAction,
			Surface: "mission.agent", MissionID: "m1", JobID: &job, CaseID: &cs, Input: json.RawMessage(input)}
		res, err := checkpoint.Resume(i.ctx(), req)
		if err != nil {
			t.Fatalf("input %q: an error (-32603), not an input refusal: %v", input, err)
		}
		got, _ := json.Marshal(res.Errors)
		if !res.Refusal() || string(got) != want {
			t.Errorf("input %q: refusal %v, errors:\n got %s\nwant %s", input, res.Refusal(), got, want)
		}
	}
}

// A resume whose claim loses to another write of the occurrence (an instance that took and gave
// up the paused occurrence meanwhile) reads the occurrence again and claims it then: the
// decision is delivered and the step finishes, rather than being answered pending for a
// checkpoint nobody holds.
func TestResumeReadsTheOccurrenceAgainAfterALostClaim(t *testing.T) {
	s := newHookStore(t)
	w := newWorld(t, s, map[string]string{"before": "pause"})
	a, b := w.instance(behaviour{}), w.instance(behaviour{})
	j := w.job()
	out, err := j.run(t, a)
	wantStatus(t, out, err, checkpoint.Awaiting, "before")
	var rewritten atomic.Bool
	s.setHook(func(ctx context.Context, op, key string, _ []byte) error {
		if op == "update" && strings.HasPrefix(key, stepKeys) && rewritten.CompareAndSwap(false, true) {
			// Another instance writes the occurrence, unchanged, just before this claim.
			cur, err := s.Store.Get(ctx, key)
			if err != nil {
				return err
			}
			if _, err := s.Store.Update(ctx, key, cur.Version, cur.Value, store.Never); err != nil {
				return err
			}
		}
		return nil
	})
	res, err := j.resume(t, b, "before", "allow")
	if !rewritten.Load() {
		t.Fatal("the resume never claimed the occurrence")
	}
	if err != nil || res != resumed(j.occ.JobID, "allow", out.CheckpointID) {
		t.Fatalf("resume after a lost claim: %s, %v", res, err)
	}
	st, err := checkpoint.StepState(b.ctx(), b.step, j.occ)
	wantStatus(t, st, err, checkpoint.Completed, "")
	j.wantCounts(t, 1, 1)
}

// Deleting an applied decision: done, or found replaced (a conflict: another write's business),
// it logs nothing; a failure is logged as a warning naming the error (the decision expires by
// itself), and the resume's answer is the same.
func TestResumeDropsTheAppliedDecision(t *testing.T) {
	const warning = "cannot delete a kept decision"
	for _, c := range []struct {
		name     string
		err      error
		warns    bool
		leftKept int
	}{
		{"deleted", nil, false, 0},
		{"replaced meanwhile", store.ErrConflict, false, 1},
		{"the store fails", errBoom, true, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newHookStore(t)
			w := newWorld(t, s, map[string]string{"before": "pause"})
			a := w.instance(behaviour{})
			j := w.job()
			out, err := j.run(t, a)
			wantStatus(t, out, err, checkpoint.Awaiting, "before")
			var deletes atomic.Int32
			s.setHook(func(_ context.Context, op, key string, _ []byte) error {
				if op == "delete" && strings.HasPrefix(key, decisionKeys) {
					deletes.Add(1)
					return c.err
				}
				return nil
			})
			res, err := j.resume(t, a, "before", "allow")
			if err != nil || res != resumed(j.occ.JobID, "allow", out.CheckpointID) {
				t.Fatalf("resume: %s, %v", res, err)
			}
			j.wantCounts(t, 1, 1)
			if n := deletes.Load(); n != 1 {
				t.Fatalf("%d deletes of the kept decision, want 1", n)
			}
			w.wantWarning(t, warning, c.warns, errBoom)
			if n := len(records(t, s, decisionKeys)); n != c.leftKept {
				t.Errorf("%d kept decisions left, want %d", n, c.leftKept)
			}
		})
	}
}

// wantWarning fails t unless the logs hold warning exactly when want is set, naming cause then.
func (w *world) wantWarning(t *testing.T, warning string, want bool, cause error) {
	t.Helper()
	logs := w.logs.String()
	if got := strings.Contains(logs, warning); got != want {
		t.Errorf("%q logged: %v, want %v; logs:\n%s", warning, got, want, logs)
	}
	if want && !strings.Contains(logs, cause.Error()) {
		t.Errorf("the warning does not name the error %q:\n%s", cause, logs)
	}
}

// A lease renewal's write is bounded by a quarter lease (when shorter than the write timeout of
// 10 s), so that a slow store cannot make a renewal outlast the lease it renews.
func TestRecordRenewalWriteBoundedByAQuarterLease(t *testing.T) {
	const lease = 8 * time.Second // a quarter is 2 s; four leases would be past the write timeout
	s := newHookStore(t)
	w := newWorld(t, s, nil)
	clock := newManualClock()
	release, started := make(chan struct{}), make(chan struct{}, 1)
	a := w.instance(behaviour{effect: func(_ context.Context, o order) (receipt, error) {
		started <- struct{}{}
		<-release
		return receipt{Order: o.ID, Ref: "rcpt-" + o.ID}, nil
	}}, clock.renewing(lease))
	j := w.job()
	done := make(chan error, 1)
	go func() { _, err := j.run(t, a); done <- err }()
	recv(t, started, "the effect to start")
	timer := clock.effectTimer(t)

	var mu sync.Mutex
	var left []time.Duration // the time each renewal write had left; none: unbounded
	s.setHook(func(ctx context.Context, op, key string, _ []byte) error {
		if op == "update" && strings.HasPrefix(key, stepKeys) {
			d := time.Duration(math.MaxInt64)
			if dl, ok := ctx.Deadline(); ok {
				d = time.Until(dl)
			}
			mu.Lock()
			left = append(left, d)
			mu.Unlock()
		}
		return nil
	})
	timer <- time.Now()
	clock.nextTimer(t, "the renewal to end")
	s.setHook(nil)
	close(release)
	if err := recv(t, done, "the run"); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(left) != 1 || left[0] > lease/4 {
		t.Fatalf("renewal writes with %v left; want one, bounded by %s", left, lease/4)
	}
}

// Only the gate's context.* secret_refs are removed from a checkpoint's context: a member of the
// context at the path of another ref (case.metadata.iban names the case's metadata, which Studio
// keeps itself) is the agent's own and sent as it is.
func TestGateSecretRefsRemoveOnlyContextPaths(t *testing.T) {
	w := memoryWorld(t, nil)
	i := w.instance(behaviour{})
	j := w.job()
	g := j.gate(t, i)
	before := j.before()
	before["case"] = map[string]any{"metadata": map[string]any{"iban": "FR76-agent-own"}}
	out, err := checkpoint.RunGuardedStep(i.ctx(), g, i.step, j.occ, before, j.order)
	wantStatus(t, out, err, checkpoint.Completed, "")
	calls := w.studio.callsOf(j.occ.OccurrenceID)
	if len(calls) == 0 {
		t.Fatal("no checkpoint sent")
	}
	got, _ := json.Marshal(calls[0].Body.Context)
	want := `{"amount":12,"case":{"metadata":{"iban":"FR76-agent-own"}},"customer":{"name":"Ada"},"operation":"charge"}`
	if string(got) != want {
		t.Errorf("before context sent:\n got %s\nwant %s", got, want)
	}
	w.noSecrets(t)
}

// A decision delivered while the instance that got the pause still holds the occurrence is kept
// and answered pending_delivery, not as delivered; the holder applies it and the step finishes
// on its run. The holder looks for a decision first, then lets go and looks once more: a
// decision delivered before the first look is applied by it; one delivered after it, before
// the holder lets go, by the second look, after the holder takes the occurrence back.
func TestResumePendingWhileThePausedHolderHasNotLetGo(t *testing.T) {
	for _, c := range []struct {
		name string
		// deliver tells the call before which the decision is delivered; looked says whether
		// the holder has looked for a decision already.
		deliver func(op, key string, looked bool) bool
	}{
		{"before the holder looks", func(op, key string, _ bool) bool {
			return op == "get" && strings.HasPrefix(key, decisionKeys)
		}},
		{"as the holder lets go", func(op, key string, looked bool) bool {
			return op == "update" && strings.HasPrefix(key, stepKeys) && looked
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newHookStore(t)
			w := newWorld(t, s, map[string]string{"before": "pause"})
			// A manual clock that never moves: A's lease cannot lapse on a slow machine.
			clock := newManualClock()
			a, b := w.instance(behaviour{}, clock.frozen(0)), w.instance(behaviour{}, clock.frozen(0))
			j := w.job()
			var early string
			var earlyErr error
			var looked, delivered atomic.Bool
			s.setHook(func(_ context.Context, op, key string, _ []byte) error {
				if c.deliver(op, key, looked.Load()) && delivered.CompareAndSwap(false, true) {
					early, earlyErr = j.resume(t, b, "before", "allow")
				}
				if op == "get" && strings.HasPrefix(key, decisionKeys) {
					looked.Store(true)
				}
				return nil
			})
			out, err := j.run(t, a)
			if !delivered.Load() {
				t.Fatal("the decision was never delivered")
			}
			ans, _ := w.studio.answer(j.occ.OccurrenceID, "before")
			if earlyErr != nil || early != resumed(j.occ.JobID, checkpoint.StatusPendingDelivery, ans.CheckpointID) {
				t.Errorf("resume while the holder holds the occurrence: %s, %v", early, earlyErr)
			}
			wantStatus(t, out, err, checkpoint.Completed, "")
			j.wantCounts(t, 1, 1)
			if left := records(t, s, decisionKeys); len(left) != 0 {
				t.Errorf("%d kept decisions left after it was applied", len(left))
			}
		})
	}
}

// A run that cannot let its occurrence go (the write of the release fails) still answers its
// outcome, and the failure is logged as a warning naming the error: the occurrence frees when
// its lease ends. A release that finds the lease lost (another instance took the occurrence), a
// run that failed already (its error says it) and a release that succeeds log nothing.
func TestRecordReleaseFailureLogged(t *testing.T) {
	const warning = "cannot release the occurrence"
	for _, c := range []struct {
		name   string
		effect error // the effect's error, nil for none
		err    error // the release's error, nil for none
		warns  bool
	}{
		{"released", nil, nil, false},
		{"the store fails", nil, errBoom, true},
		{"the lease was lost", nil, store.ErrConflict, false},
		{"the run failed too", errors.New("card declined"), errBoom, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newHookStore(t)
			w := newWorld(t, s, nil)
			i := w.instance(behaviour{effect: func(_ context.Context, o order) (receipt, error) {
				return receipt{Order: o.ID, Ref: "rcpt-" + o.ID}, c.effect
			}})
			j := w.job()
			var releases atomic.Int32
			s.setHook(func(_ context.Context, op, key string, value []byte) error {
				var rec struct {
					Lease *json.RawMessage `json:"lease"`
				}
				if op == "update" && strings.HasPrefix(key, stepKeys) && json.Unmarshal(value, &rec) == nil && rec.Lease == nil {
					releases.Add(1)
					return c.err
				}
				return nil
			})
			out, err := j.run(t, i)
			if n := releases.Load(); n != 1 {
				t.Fatalf("%d releases, want 1", n)
			}
			if c.effect == nil {
				wantStatus(t, out, err, checkpoint.Completed, "")
			} else if !errors.Is(err, c.effect) || !errors.Is(err, checkpoint.ErrEffectStarted) {
				t.Fatalf("run: %v; want the effect's error, ErrEffectStarted", err)
			}
			w.wantWarning(t, warning, c.warns, errBoom)
		})
	}
}

// Any non-empty checkpoint token is sealed in the job's gate record and opens again, the
// shortest too (sealing sizes its buffer from the token: nonce, token and tag).
func TestGateSealsAOneByteToken(t *testing.T) {
	w := memoryWorld(t, map[string]string{"before": "pause"})
	i := w.instance(behaviour{})
	j := w.job()
	const token = "~" // in no context, input or result of the test's step
	j.startWithToken(t, i, token)
	if got := j.tokenSent(t, i); got != token {
		t.Errorf("the checkpoint carried a token of %d bytes, want the one-byte token", len(got))
	}
}

// An occurrence names its job, case and occurrence id, every missing one named at once; the step
// id is needed to run a step only: StepState and RecoverGuardedStep find the occurrence without.
func TestRefusalsOfAnOccurrenceWithoutIDs(t *testing.T) {
	w := memoryWorld(t, nil)
	i := w.instance(behaviour{})
	j := w.job()
	g := j.gate(t, i)
	for _, c := range []struct {
		name      string
		occ       checkpoint.Occurrence
		run, read string // RunGuardedStep's error, StepState's and RecoverGuardedStep's
	}{
		{"none", checkpoint.Occurrence{},
			"checkpoint: the occurrence needs JobID, CaseID, StepID, OccurrenceID", "checkpoint: the occurrence needs JobID, CaseID, OccurrenceID"},
		{"no job", checkpoint.Occurrence{CaseID: "c", OccurrenceID: "o"},
			"checkpoint: the occurrence needs JobID, StepID", "checkpoint: the occurrence needs JobID"},
		{"no step", checkpoint.Occurrence{JobID: j.occ.JobID, CaseID: "c", OccurrenceID: "o"},
			"checkpoint: the occurrence needs StepID", ""},
	} {
		if _, err := checkpoint.RunGuardedStep(i.ctx(), g, i.step, c.occ, j.before(), j.order); err == nil || err.Error() != c.run {
			t.Errorf("%s: RunGuardedStep: %v, want %q", c.name, err, c.run)
		}
		_, err := checkpoint.StepState(i.ctx(), i.step, c.occ)
		if c.read == "" {
			if !errors.Is(err, store.ErrNotFound) {
				t.Errorf("%s: StepState: %v, want ErrNotFound", c.name, err)
			}
		} else if err == nil || err.Error() != c.read {
			t.Errorf("%s: StepState: %v, want %q", c.name, err, c.read)
		}
		_, err = checkpoint.RecoverGuardedStep(i.ctx(), g, i.step, c.occ, receipt{})
		if c.read == "" {
			if !errors.Is(err, checkpoint.ErrNotReady) {
				t.Errorf("%s: RecoverGuardedStep: %v, want ErrNotReady", c.name, err)
			}
		} else if err == nil || err.Error() != c.read {
			t.Errorf("%s: RecoverGuardedStep: %v, want %q", c.name, err, c.read)
		}
	}
	if n := len(w.studio.allCalls()); n != 0 {
		t.Errorf("%d checkpoint calls", n)
	}
}

// A resume is refused before anything is read or run when the call has no scope, when the
// controller has no Studio, or when the request names another agent than the handler's, even
// one whose gate the job has (that agent started it in the same workspace).
func TestResumeRefusedBeforeTheStore(t *testing.T) {
	w := memoryWorld(t, map[string]string{"before": "pause"})
	i := w.instance(behaviour{})
	j := w.job()
	out, err := j.run(t, i)
	wantStatus(t, out, err, checkpoint.Awaiting, "before")
	// Another job, started by another agent of the workspace.
	other := w.job()
	otherStart := *other.req
	otherStart.AgentSlug = "other-agent"
	if _, err := checkpoint.FromJobStart(checkpoint.NewContext(context.Background(), i.svc, i.reg, "other-agent", w.ws), &otherStart); err != nil {
		t.Fatal(err)
	}
	otherResume := resumeRequestFor(other.occ, "before", "allow", answer{CheckpointID: "chk-1", InputHash: "input-1"})
	otherResume.AgentSlug = "other-agent"
	noStudio := checkpoint.NewContext(context.Background(), checkpoint.NewService(checkpoint.Config{Store: w.store}), i.reg, agentSlug, w.ws)
	for _, c := range []struct {
		name string
		ctx  context.Context
		req  *contract.ActionRequest
		want error
	}{
		{"outside a handler", context.Background(), j.resumeRequest(t, "before", "allow"), checkpoint.ErrNoScope},
		{"without Studio", noStudio, j.resumeRequest(t, "before", "allow"), checkpoint.ErrNoStudio},
		{"another agent than the handler's", i.ctx(), otherResume, checkpoint.ErrResumeOtherAgent},
	} {
		res, err := checkpoint.Resume(c.ctx, c.req)
		if res != nil || err != c.want {
			t.Errorf("%s: %v, %v; want %v", c.name, res, err, c.want)
		}
	}
	st, err := checkpoint.StepState(i.ctx(), i.step, j.occ)
	wantStatus(t, st, err, checkpoint.Awaiting, "before")
	j.wantCounts(t, 0, 0)
}

// failNth returns a hookStore hook that fails the n-th Get (from 1) of a key under prefix with
// errBoom and counts them all in gets.
func failNth(prefix string, n int32, gets *atomic.Int32) func(context.Context, string, string, []byte) error {
	return func(_ context.Context, op, key string, _ []byte) error {
		if op == "get" && strings.HasPrefix(key, prefix) && gets.Add(1) == n {
			return errBoom
		}
		return nil
	}
}

// A resume whose read of the job's gate or of the occurrence fails answers that error: neither
// a mismatch (the occurrence was not found) nor a status. The occurrence is read twice: to
// check the decision against it, and once the step has gone on, for the answer; the second
// read failing answers the error too, though the step went on.
func TestResumeAnswersAFailedRead(t *testing.T) {
	for _, c := range []struct {
		name     string
		prefix   string
		n        int32
		want     string // the error's text, after the job id for the gate's
		effects  int
		advances int
	}{
		{"the gate", gateKeys, 1, "checkpoint: read the gate of job %q: boom", 0, 0},
		{"the occurrence", stepKeys, 1, "checkpoint: read the occurrence: boom", 0, 0},
		{"the occurrence, after the step", stepKeys, 2, "checkpoint: read the occurrence: boom", 1, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newHookStore(t)
			w := newWorld(t, s, map[string]string{"before": "pause"})
			i := w.instance(behaviour{})
			j := w.job()
			out, err := j.run(t, i)
			wantStatus(t, out, err, checkpoint.Awaiting, "before")
			var gets atomic.Int32
			s.setHook(failNth(c.prefix, c.n, &gets))
			res, err := j.resume(t, i, "before", "allow")
			want := c.want
			if c.prefix == gateKeys {
				want = fmt.Sprintf(c.want, j.occ.JobID)
			}
			if !errors.Is(err, errBoom) || err.Error() != want {
				t.Fatalf("resume: %s, %v; want %q", res, err, want)
			}
			j.wantCounts(t, c.effects, c.advances)
		})
	}
}

// The resume of a decision kept for a paused occurrence that another instance took meanwhile
// (it applied the decision and runs the effect, under its lease) answers the decision at once:
// it neither waits for nor refuses on that lease, which is for a step run, not for a delivery.
// A delivered resume logs no error, whether it ran the step or found it running elsewhere.
func TestResumeOfAKeptDecisionAnotherInstanceApplied(t *testing.T) {
	for _, c := range []struct {
		name  string
		taken bool
	}{
		{"delivered here", false},
		{"applied by another instance", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newHookStore(t)
			w := newWorld(t, s, map[string]string{"before": "pause"})
			i := w.instance(behaviour{})
			j := w.job()
			out, err := j.run(t, i)
			wantStatus(t, out, err, checkpoint.Awaiting, "before")
			var took atomic.Bool
			s.setHook(func(ctx context.Context, op, key string, _ []byte) error {
				if !c.taken || op != "update" || !strings.HasPrefix(key, stepKeys) || !took.CompareAndSwap(false, true) {
					return nil
				}
				// Just before this resume claims it, another instance writes the occurrence: the
				// decision applied, the effect started, held for an hour.
				cur, err := s.Store.Get(ctx, key)
				if err != nil {
					return err
				}
				b, err := packed.Unpack(cur.Value)
				if err != nil {
					return err
				}
				var rec map[string]any
				if err := json.Unmarshal(b, &rec); err != nil {
					return err
				}
				rec["state"] = "effect_started"
				rec["before"].(map[string]any)["status"] = "allow"
				rec["lease"] = map[string]any{"owner": "another-instance", "until": time.Now().Add(time.Hour)}
				b, _ = json.Marshal(rec)
				_, err = s.Store.Update(ctx, key, cur.Version, b, store.Never)
				return err
			})
			res, err := j.resume(t, i, "before", "allow")
			if c.taken != took.Load() {
				t.Fatal("the resume never claimed the occurrence")
			}
			if err != nil || res != resumed(j.occ.JobID, "allow", out.CheckpointID) {
				t.Fatalf("resume: %s, %v", res, err)
			}
			if logs := w.logs.String(); strings.Contains(logs, `"level":"ERROR"`) {
				t.Errorf("the resume logged an error:\n%s", logs)
			}
		})
	}
}

// A resume whose every claim of the occurrence loses (it keeps changing) tries maxAttempts (20)
// times, then answers what the store says: the decision is kept, pending_delivery.
func TestResumeClaimsAtMostTwentyTimes(t *testing.T) {
	s := newHookStore(t)
	w := newWorld(t, s, map[string]string{"before": "pause"})
	i := w.instance(behaviour{})
	j := w.job()
	out, err := j.run(t, i)
	wantStatus(t, out, err, checkpoint.Awaiting, "before")
	var claims atomic.Int32
	s.setHook(func(_ context.Context, op, key string, _ []byte) error {
		if op != "update" || !strings.HasPrefix(key, stepKeys) {
			return nil
		}
		if claims.Add(1) > 20 {
			return errBoom // ends a resume that would claim forever
		}
		return store.ErrConflict
	})
	res, err := j.resume(t, i, "before", "allow")
	if err != nil || res != resumed(j.occ.JobID, checkpoint.StatusPendingDelivery, out.CheckpointID) {
		t.Fatalf("resume: %s, %v", res, err)
	}
	if n := claims.Load(); n != 20 {
		t.Errorf("%d claims, want 20", n)
	}
	j.wantCounts(t, 0, 0)
}

// A step that fails after the decision (Studio does not answer the after checkpoint) is logged
// and the decision answered as delivered: the resume does not run the step again (the after
// checkpoint is sent once), the step is left for its job to retry.
func TestResumeDoesNotRetryAStepThatFailedAfterTheDecision(t *testing.T) {
	w := memoryWorld(t, map[string]string{"before": "pause"})
	i := w.instance(behaviour{})
	j := w.job()
	out, err := j.run(t, i)
	wantStatus(t, out, err, checkpoint.Awaiting, "before")
	w.studio.failPhase("after", 1)
	res, err := j.resume(t, i, "before", "allow")
	if err != nil || res != resumed(j.occ.JobID, "allow", out.CheckpointID) {
		t.Fatalf("resume: %s, %v", res, err)
	}
	after := 0
	for _, c := range w.studio.callsOf(j.occ.OccurrenceID) {
		if c.Body.Phase == "after" {
			after++
		}
	}
	if after != 1 {
		t.Errorf("%d after checkpoints sent, want 1", after)
	}
	j.wantCounts(t, 1, 0)
	st, err := checkpoint.StepState(i.ctx(), i.step, j.occ)
	wantStatus(t, st, err, checkpoint.Running, "")
	if !strings.Contains(w.logs.String(), "the step did not complete after the decision") {
		t.Errorf("the failure is not logged:\n%s", w.logs.String())
	}
}

// A decision for another checkpoint, delivered while the occurrence's before checkpoint has no
// recorded answer (it was lost), is kept, and the resume sends the checkpoint again; Studio's
// own answer (allow) runs the step. The decision was not the one applied: pending_delivery,
// never allow, though the before phase says allow.
func TestResumeForAnotherCheckpointAnsweredPending(t *testing.T) {
	w := memoryWorld(t, nil)
	i := w.instance(behaviour{})
	j := w.job()
	w.studio.loseAnswer("before", 1)
	if _, err := j.run(t, i); !errors.Is(err, checkpoint.ErrRequestFailed) {
		t.Fatalf("run with a lost answer: %v", err)
	}
	ans, _ := w.studio.answer(j.occ.OccurrenceID, "before")
	forged := ans
	forged.CheckpointID += "-other"
	res, err := checkpoint.Resume(i.ctx(), resumeRequestFor(j.occ, "before", "allow", forged))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := contract.AppendJSON(nil, res)
	if got := string(b); got != resumed(j.occ.JobID, checkpoint.StatusPendingDelivery, forged.CheckpointID) {
		t.Errorf("resume: %s", got)
	}
	j.wantCounts(t, 1, 1)
}

// A failed read of the kept decision, when a run pauses, fails the run with the store's error:
// it is not taken as "no decision" (the run would answer Awaiting). The run looks twice: before
// it lets the occurrence go, and after (a decision stored meanwhile was left for it).
func TestRecordKeptDecisionReadFails(t *testing.T) {
	for _, n := range []int32{1, 2} {
		t.Run(fmt.Sprint("read ", n), func(t *testing.T) {
			s := newHookStore(t)
			w := newWorld(t, s, map[string]string{"before": "pause"})
			i := w.instance(behaviour{})
			j := w.job()
			var gets atomic.Int32
			s.setHook(failNth(decisionKeys, n, &gets))
			out, err := j.run(t, i)
			if !errors.Is(err, errBoom) || err.Error() != "checkpoint: read the kept decision: boom" {
				t.Fatalf("run: %+v, %v; want the read's error", out, err)
			}
			if got := gets.Load(); got != n {
				t.Errorf("%d reads of the kept decision, want %d", got, n)
			}
			j.wantCounts(t, 0, 0)
		})
	}
}

// failingStudio fails every checkpoint call with err.
type failingStudio struct {
	checkpoint.Studio
	err error
}

func (s failingStudio) RuleCheckpoint(context.Context, string, checkpoint.Request) (checkpoint.Response, error) {
	return checkpoint.Response{}, s.err
}

// A checkpoint call that fails fails the run with the call's own error (not as an answer with
// no status): the checkpoint stays to be sent again, the effect not run.
func TestRecordCheckpointCallFails(t *testing.T) {
	w := memoryWorld(t, nil)
	i := w.instance(behaviour{}, func(c *checkpoint.Config) { c.Studio = failingStudio{c.Studio, errBoom} })
	j := w.job()
	if _, err := j.run(t, i); err != errBoom {
		t.Fatalf("run: %v, want %v", err, errBoom)
	}
	st, err := checkpoint.StepState(i.ctx(), i.step, j.occ)
	wantStatus(t, st, err, checkpoint.Running, "")
	j.wantCounts(t, 0, 0)
}

// A before context that does not encode as JSON is refused with encoding/json's error, before
// anything is stored or sent.
func TestRecordRefusesAContextThatDoesNotEncode(t *testing.T) {
	w := memoryWorld(t, nil)
	i := w.instance(behaviour{})
	j := w.job()
	before := map[string]any{"operation": "charge", "callback": func() {}}
	_, err := checkpoint.RunGuardedStep(i.ctx(), j.gate(t, i), i.step, j.occ, before, j.order)
	if want := "checkpoint: encode the checkpoint context: json: unsupported type: func()"; err == nil || err.Error() != want {
		t.Fatalf("run: %v, want %q", err, want)
	}
	if n := len(w.studio.allCalls()); n != 0 {
		t.Errorf("%d checkpoint calls", n)
	}
}

// The secret_ref "context." names no member: a member of the context named "" is sent.
func TestGateSecretRefOfNoContextMember(t *testing.T) {
	w := memoryWorld(t, map[string]string{"before": "pause"})
	i := w.instance(behaviour{})
	j := w.job()
	g, err := checkpoint.FromJobStart(i.ctx(), j.req, checkpoint.WithSecretRefs("context."))
	if err != nil {
		t.Fatal(err)
	}
	before := map[string]any{"": "kept", "operation": "charge"}
	out, err := checkpoint.RunGuardedStep(i.ctx(), g, i.step, j.occ, before, j.order)
	wantStatus(t, out, err, checkpoint.Awaiting, "before")
	calls := w.studio.callsOf(j.occ.OccurrenceID)
	if len(calls) != 1 {
		t.Fatalf("%d checkpoint calls, want 1", len(calls))
	}
	if got, _ := json.Marshal(calls[0].Body.Context); string(got) != `{"":"kept","operation":"charge"}` {
		t.Errorf("before context sent: %s", got)
	}
}

// heldBy returns the occurrence record value (JSON) as another instance holding it for an hour
// writes it: the same record under that instance's lease.
func heldBy(value []byte, owner string) ([]byte, error) {
	var rec map[string]any
	if err := json.Unmarshal(value, &rec); err != nil {
		return nil, err
	}
	rec["lease"] = map[string]any{"owner": owner, "until": time.Now().Add(time.Hour)}
	return json.Marshal(rec)
}

// A run that cannot create its occurrence record fails: with ErrActive when another instance
// created it first (and holds it), with the store's error when the write fails; nothing is sent.
func TestRecordCreateFails(t *testing.T) {
	for _, c := range []struct {
		name string
		hook func(ctx context.Context, s *hookStore, key string, value []byte) error
		want error
		msg  string
	}{
		{"another instance created it", func(ctx context.Context, s *hookStore, key string, value []byte) error {
			b, err := heldBy(value, "another-instance")
			if err == nil {
				_, err = s.Store.Create(ctx, key, b, store.Never)
			}
			return err
		}, checkpoint.ErrActive, checkpoint.ErrActive.Error()},
		{"the store fails", func(context.Context, *hookStore, string, []byte) error { return errBoom }, errBoom,
			"checkpoint: write the occurrence: boom"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newHookStore(t)
			w := newWorld(t, s, nil)
			i := w.instance(behaviour{})
			j := w.job()
			var creates atomic.Int32
			s.setHook(func(ctx context.Context, op, key string, value []byte) error {
				if op == "create" && strings.HasPrefix(key, stepKeys) && creates.Add(1) == 1 {
					return c.hook(ctx, s, key, value)
				}
				return nil
			})
			_, err := j.run(t, i)
			if !errors.Is(err, c.want) || err.Error() != c.msg {
				t.Fatalf("run: %v; want %q", err, c.msg)
			}
			if n := len(w.studio.allCalls()); n != 0 {
				t.Errorf("%d checkpoint calls", n)
			}
			j.wantCounts(t, 0, 0)
		})
	}
}

// An occurrence record that does not decode is an error, for a read and for a run: never an
// occurrence with no state, nor one that never ran.
func TestRecordUnreadable(t *testing.T) {
	w := memoryWorld(t, map[string]string{"before": "pause"})
	i := w.instance(behaviour{})
	j := w.job()
	out, err := j.run(t, i)
	wantStatus(t, out, err, checkpoint.Awaiting, "before")
	recs := records(t, w.store, stepKeys)
	if len(recs) != 1 {
		t.Fatalf("%d occurrence records, want 1", len(recs))
	}
	if _, err := w.store.Update(context.Background(), recs[0].Key, recs[0].Version, []byte("not json"), store.Never); err != nil {
		t.Fatal(err)
	}
	const want = "checkpoint: unreadable occurrence record: invalid character 'o' in literal null (expecting 'u')"
	if _, err := checkpoint.StepState(i.ctx(), i.step, j.occ); err == nil || err.Error() != want {
		t.Errorf("StepState: %v, want %q", err, want)
	}
	if _, err := j.run(t, i); err == nil || err.Error() != want {
		t.Errorf("run: %v, want %q", err, want)
	}
}

// An occurrence record is stored deflated (packed), smaller than its JSON.
func TestRecordStoredPacked(t *testing.T) {
	w := memoryWorld(t, map[string]string{"before": "pause"})
	i := w.instance(behaviour{})
	j := w.job()
	out, err := j.run(t, i)
	wantStatus(t, out, err, checkpoint.Awaiting, "before")
	p, err := w.store.(store.Lister).List(context.Background(), stepKeys, "", store.MaxListLimit)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Items) != 1 {
		t.Fatalf("%d occurrence records, want 1", len(p.Items))
	}
	v := p.Items[0].Value
	plain, err := packed.Unpack(v)
	if err != nil {
		t.Fatal(err)
	}
	if len(v) == 0 || v[0] != packed.Mark || len(v) >= len(plain) {
		t.Errorf("stored %d bytes starting %q for a record of %d bytes: not packed", len(v), v[:min(len(v), 1)], len(plain))
	}
}

// An instance that loses the occurrence (another instance took it while the effect ran) fails
// the run with ErrLeaseLost and writes nothing more: its write of the effect's result is the
// last, and it does not release what it no longer holds.
func TestRecordNoWriteAfterTheLeaseIsLost(t *testing.T) {
	s := newHookStore(t)
	w := newWorld(t, s, nil)
	var updates atomic.Int32
	s.setHook(func(_ context.Context, op, key string, _ []byte) error {
		if op == "update" && strings.HasPrefix(key, stepKeys) {
			updates.Add(1)
		}
		return nil
	})
	// A clock that never moves and renewals that never fire: the effect's write is the only one.
	clock := newManualClock()
	var atEffect int32 // the writes before the effect (it runs on the run's goroutine)
	i := w.instance(behaviour{effect: func(ctx context.Context, o order) (receipt, error) {
		atEffect = updates.Load()
		recs := records(t, s, stepKeys)
		if len(recs) != 1 {
			return receipt{}, fmt.Errorf("%d occurrence records", len(recs))
		}
		// Another instance takes the occurrence (a write the hook does not count).
		if _, err := s.Store.Update(ctx, recs[0].Key, recs[0].Version, recs[0].Value, store.Never); err != nil {
			return receipt{}, err
		}
		return receipt{Order: o.ID, Ref: "rcpt-" + o.ID}, nil
	}}, clock.frozen(0))
	j := w.job()
	if _, err := j.run(t, i); !errors.Is(err, checkpoint.ErrLeaseLost) {
		t.Fatalf("run: %v, want ErrLeaseLost", err)
	}
	if n := updates.Load() - atEffect; n != 1 {
		t.Errorf("%d writes of the occurrence after the effect, want 1 (its result, refused)", n)
	}
}

// Every entry point needs a handler's scope and a controller with Studio: outside one it is
// refused with ErrNoScope, without Studio with ErrNoStudio, before anything is read.
func TestRefusalsOfEveryEntryPointWithoutScopeOrStudio(t *testing.T) {
	w := memoryWorld(t, nil)
	i := w.instance(behaviour{})
	j := w.job()
	g := j.gate(t, i)
	noStudio := checkpoint.NewContext(context.Background(), checkpoint.NewService(checkpoint.Config{Store: w.store}), i.reg, agentSlug, w.ws)
	for _, c := range []struct {
		name string
		ctx  context.Context
		want error
	}{
		{"outside a handler", context.Background(), checkpoint.ErrNoScope},
		{"without Studio", noStudio, checkpoint.ErrNoStudio},
	} {
		if _, err := checkpoint.RunGuardedStep(c.ctx, g, i.step, j.occ, j.before(), j.order); err != c.want {
			t.Errorf("%s: RunGuardedStep: %v, want %v", c.name, err, c.want)
		}
		if _, err := checkpoint.RecoverGuardedStep(c.ctx, g, i.step, j.occ, receipt{}); err != c.want {
			t.Errorf("%s: RecoverGuardedStep: %v, want %v", c.name, err, c.want)
		}
		if _, err := checkpoint.StepState(c.ctx, i.step, j.occ); err != c.want {
			t.Errorf("%s: StepState: %v, want %v", c.name, err, c.want)
		}
	}
	if n := len(w.studio.allCalls()); n != 0 {
		t.Errorf("%d checkpoint calls", n)
	}
}

// A step must be one Define registered on the handler's agent, and a gate is needed: no step, a
// step whose definition was refused (a second one under the same name) and no gate are refused
// before anything runs.
func TestRefusalsOfNoStepOrGate(t *testing.T) {
	w := memoryWorld(t, nil)
	i := w.instance(behaviour{})
	j := w.job()
	g := j.gate(t, i)
	var ran atomic.Bool
	again := checkpoint.Define(owner{i.reg}, stepName, checkpoint.Funcs[order, receipt]{
		Effect:       func(context.Context, order) (receipt, error) { ran.Store(true); return receipt{}, nil },
		AfterContext: func(order, receipt) (any, error) { return map[string]any{}, nil },
	})
	const notDefined = `checkpoint: guarded step %q is not defined on agent "pay-agent" (define it with checkpoint.Define on the agent, before core.New)`
	for _, c := range []struct {
		name string
		g    *checkpoint.Gate
		s    *checkpoint.Step[order, receipt]
		want string
	}{
		{"no step", g, nil, fmt.Sprintf(notDefined, "")},
		{"a refused definition", g, again, fmt.Sprintf(notDefined, stepName)},
		{"no gate", nil, i.step, "checkpoint: a guarded step needs its job's gate (FromJobStart or JobGate)"},
	} {
		if _, err := checkpoint.RunGuardedStep(i.ctx(), c.g, c.s, j.occ, j.before(), j.order); err == nil || err.Error() != c.want {
			t.Errorf("%s: RunGuardedStep: %v, want %q", c.name, err, c.want)
		}
		if _, err := checkpoint.RecoverGuardedStep(i.ctx(), c.g, c.s, j.occ, receipt{}); err == nil || err.Error() != c.want {
			t.Errorf("%s: RecoverGuardedStep: %v, want %q", c.name, err, c.want)
		}
	}
	if ran.Load() || len(w.studio.allCalls()) != 0 {
		t.Errorf("the refused step ran (%v) or a checkpoint was sent (%d)", ran.Load(), len(w.studio.allCalls()))
	}
}

// An input or a result that does not encode as JSON is refused with encoding/json's error.
func TestRefusalsOfValuesThatDoNotEncode(t *testing.T) {
	w := memoryWorld(t, nil)
	i := w.instance(behaviour{})
	j := w.job()
	g := j.gate(t, i)
	s := checkpoint.Define(owner{i.reg}, "callback", checkpoint.Funcs[func(), func()]{
		Effect:       func(context.Context, func()) (func(), error) { return nil, nil },
		AfterContext: func(func(), func()) (any, error) { return map[string]any{}, nil },
	})
	const want = `checkpoint: encode the %s of step "callback": json: unsupported type: func()`
	if _, err := checkpoint.RunGuardedStep(i.ctx(), g, s, j.occ, j.before(), func() {}); err == nil || err.Error() != fmt.Sprintf(want, "input") {
		t.Errorf("RunGuardedStep: %v", err)
	}
	if _, err := checkpoint.RecoverGuardedStep(i.ctx(), g, s, j.occ, func() {}); err == nil || err.Error() != fmt.Sprintf(want, "result") {
		t.Errorf("RecoverGuardedStep: %v", err)
	}
	if n := len(w.studio.allCalls()); n != 0 {
		t.Errorf("%d checkpoint calls", n)
	}
}

// A read of the occurrence that fails fails the entry point with the store's error.
func TestEntryPointsAnswerAFailedRead(t *testing.T) {
	s := newHookStore(t)
	w := newWorld(t, s, nil)
	i := w.instance(behaviour{})
	j := w.job()
	g := j.gate(t, i)
	s.setHook(func(_ context.Context, op, key string, _ []byte) error {
		if op == "get" && strings.HasPrefix(key, stepKeys) {
			return errBoom
		}
		return nil
	})
	const want = "checkpoint: read the occurrence: boom"
	if _, err := checkpoint.RunGuardedStep(i.ctx(), g, i.step, j.occ, j.before(), j.order); !errors.Is(err, errBoom) || err.Error() != want {
		t.Errorf("RunGuardedStep: %v", err)
	}
	if _, err := checkpoint.RecoverGuardedStep(i.ctx(), g, i.step, j.occ, receipt{}); !errors.Is(err, errBoom) || err.Error() != want {
		t.Errorf("RecoverGuardedStep: %v", err)
	}
	if _, err := checkpoint.StepState(i.ctx(), i.step, j.occ); !errors.Is(err, errBoom) || err.Error() != want {
		t.Errorf("StepState: %v", err)
	}
	if n := len(w.studio.allCalls()); n != 0 {
		t.Errorf("%d checkpoint calls", n)
	}
}

// A gate of a job.start without job_id is bound to the job by its first step: when the job has
// a gate of another snapshot already, the step is refused (ErrRetrySnapshot), nothing sent.
func TestRetryUnboundGateOfAnotherSnapshotRefused(t *testing.T) {
	w := memoryWorld(t, nil)
	i := w.instance(behaviour{})
	j := w.job()
	j.gate(t, i)
	req := *j.req
	req.JobID = nil
	var in map[string]any
	if err := json.Unmarshal(req.Input, &in); err != nil {
		t.Fatal(err)
	}
	in["rule_snapshot"].(map[string]any)["hash"] = "snapshot-hash-2"
	req.Input, _ = json.Marshal(in)
	g, err := checkpoint.FromJobStart(i.ctx(), &req)
	if err != nil || g.JobID() != "" {
		t.Fatalf("FromJobStart: %v, %v", g, err)
	}
	if _, err := checkpoint.RunGuardedStep(i.ctx(), g, i.step, j.occ, j.before(), j.order); err != checkpoint.ErrRetrySnapshot {
		t.Fatalf("run: %v, want ErrRetrySnapshot", err)
	}
	if n := len(w.studio.allCalls()); n != 0 {
		t.Errorf("%d checkpoint calls", n)
	}
}

// A retry of an occurrence by another step, with the same input, is refused (ErrRetryInput).
func TestRetryByAnotherStepRefused(t *testing.T) {
	w := memoryWorld(t, map[string]string{"before": "pause"})
	i := w.instance(behaviour{})
	refund := checkpoint.Define(owner{i.reg}, "refund", checkpoint.Funcs[order, receipt]{
		Effect:       func(context.Context, order) (receipt, error) { return receipt{}, nil },
		AfterContext: func(order, receipt) (any, error) { return map[string]any{}, nil },
	})
	j := w.job()
	out, err := j.run(t, i)
	wantStatus(t, out, err, checkpoint.Awaiting, "before")
	if _, err := checkpoint.RunGuardedStep(i.ctx(), j.gate(t, i), refund, j.occ, j.before(), j.order); err != checkpoint.ErrRetryInput {
		t.Fatalf("run by another step: %v, want ErrRetryInput", err)
	}
	if n := len(w.studio.callsOf(j.occ.OccurrenceID)); n != 1 {
		t.Errorf("%d checkpoint calls, want the first only", n)
	}
}

// A run of an occurrence whose advance another instance is running is refused with ErrActive,
// not as an ambiguous advance: that instance holds it. As the reference raises it
// (RuleCheckpointRecoveryRequired), it is a *RecoveryError.
func TestRetryWhileAnotherInstanceAdvances(t *testing.T) {
	w := memoryWorld(t, nil)
	j := w.job()
	// A manual clock that never moves: A's lease cannot lapse on a slow machine.
	clock := newManualClock()
	b := w.instance(behaviour{}, clock.frozen(0))
	var during error
	a := w.instance(behaviour{advance: func(context.Context, order, receipt) error {
		_, during = j.run(t, b)
		return nil
	}}, clock.frozen(0))
	out, err := j.run(t, a)
	wantStatus(t, out, err, checkpoint.Completed, "")
	if _, recovery := errors.AsType[*checkpoint.RecoveryError](during); !recovery || !errors.Is(during, checkpoint.ErrActive) || during.Error() != checkpoint.ErrActive.Error() {
		t.Errorf("a run while the advance runs elsewhere: %v (a RecoveryError: %v), want ErrActive as a RecoveryError", during, recovery)
	}
	j.wantCounts(t, 1, 1)
}

// A resume delivered again once its step needs recovery (the effect failed) answers the
// decision and logs no error: the step's state says what happened, not the resume.
func TestResumeAfterTheEffectFailedLogsNoError(t *testing.T) {
	w := memoryWorld(t, map[string]string{"before": "pause"})
	i := w.instance(behaviour{effect: func(context.Context, order) (receipt, error) { return receipt{}, errBoom }})
	j := w.job()
	out, err := j.run(t, i)
	wantStatus(t, out, err, checkpoint.Awaiting, "before")
	if _, err := j.resume(t, i, "before", "allow"); err != nil {
		t.Fatal(err)
	}
	logged := w.logs.Len()
	res, err := j.resume(t, i, "before", "allow")
	if err != nil || res != resumed(j.occ.JobID, "allow", out.CheckpointID) {
		t.Fatalf("resume again: %s, %v", res, err)
	}
	if logs := w.logs.String()[logged:]; strings.Contains(logs, `"level":"ERROR"`) {
		t.Errorf("the resume delivered again logged an error:\n%s", logs)
	}
	st, err := checkpoint.StepState(i.ctx(), i.step, j.occ)
	wantStatus(t, st, err, checkpoint.RecoveryRequired, "")
	j.wantCounts(t, 1, 0)
}

// A retry whose claim loses to another instance (which now holds the occurrence) sends
// nothing: it reads the occurrence again and is refused with ErrActive.
func TestRetryLosingItsClaimSendsNothing(t *testing.T) {
	s := newHookStore(t)
	w := newWorld(t, s, nil)
	i := w.instance(behaviour{})
	j := w.job()
	w.studio.failPhase("before", 1)
	if _, err := j.run(t, i); !errors.Is(err, checkpoint.ErrRequestFailed) {
		t.Fatalf("first run: %v, want ErrRequestFailed", err)
	}
	var took atomic.Bool
	s.setHook(func(ctx context.Context, op, key string, _ []byte) error {
		if op != "update" || !strings.HasPrefix(key, stepKeys) || !took.CompareAndSwap(false, true) {
			return nil
		}
		cur, err := s.Store.Get(ctx, key)
		if err != nil {
			return err
		}
		plain, err := packed.Unpack(cur.Value)
		if err != nil {
			return err
		}
		b, err := heldBy(plain, "another-instance")
		if err != nil {
			return err
		}
		_, err = s.Store.Update(ctx, key, cur.Version, b, store.Never)
		return err
	})
	if _, err := j.run(t, i); !errors.Is(err, checkpoint.ErrActive) {
		t.Fatalf("retry: %v, want ErrActive", err)
	}
	if n := len(w.studio.callsOf(j.occ.OccurrenceID)); n != 1 {
		t.Errorf("%d checkpoint calls, want the first only", n)
	}
}

// A recovery whose claim loses to another write of the occurrence (unchanged) reads it again and
// recovers then: the result is recorded and the step completes.
func TestRecoveryReadsTheOccurrenceAgainAfterALostClaim(t *testing.T) {
	s := newHookStore(t)
	w := newWorld(t, s, nil)
	i := w.instance(behaviour{effect: func(context.Context, order) (receipt, error) { return receipt{}, errBoom }})
	j := w.job()
	if _, err := j.run(t, i); !errors.Is(err, checkpoint.ErrEffectStarted) {
		t.Fatalf("run: %v, want ErrEffectStarted", err)
	}
	var rewritten atomic.Bool
	s.setHook(func(ctx context.Context, op, key string, _ []byte) error {
		if op == "update" && strings.HasPrefix(key, stepKeys) && rewritten.CompareAndSwap(false, true) {
			cur, err := s.Store.Get(ctx, key)
			if err != nil {
				return err
			}
			_, err = s.Store.Update(ctx, key, cur.Version, cur.Value, store.Never)
			return err
		}
		return nil
	})
	result := receipt{Order: j.order.ID, Ref: "rcpt-by-hand"}
	out, err := checkpoint.RecoverGuardedStep(i.ctx(), j.gate(t, i), i.step, j.occ, result)
	if !rewritten.Load() {
		t.Fatal("the recovery never claimed the occurrence")
	}
	wantStatus(t, out, err, checkpoint.Completed, "")
	if out.Result != result {
		t.Errorf("result %+v, want %+v", out.Result, result)
	}
	j.wantCounts(t, 1, 1)
}

// A context holding a number past float64's range (the reference writes it Infinity, which is no
// JSON) is refused before anything is stored or sent, whether context.* secret_refs are removed
// from it or not.
func TestRecordRefusesAContextPastFloatRange(t *testing.T) {
	for _, c := range []struct {
		name string
		refs []string
		want string
	}{
		{"no secret_refs", nil, "checkpoint: encode the occurrence: json: error calling MarshalJSON for type json.RawMessage: invalid character 'I' looking for beginning of value"},
		{"a context.* secret_ref", []string{"context.customer.card"}, "checkpoint: invalid character 'I' looking for beginning of value"},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := memoryWorld(t, nil)
			i := w.instance(behaviour{})
			j := w.job()
			g, err := checkpoint.FromJobStart(i.ctx(), j.req, checkpoint.WithSecretRefs(c.refs...))
			if err != nil {
				t.Fatal(err)
			}
			before := map[string]any{"operation": "charge", "amount": json.RawMessage("1e400")}
			if _, err := checkpoint.RunGuardedStep(i.ctx(), g, i.step, j.occ, before, j.order); err == nil || err.Error() != c.want {
				t.Fatalf("run: %v, want %q", err, c.want)
			}
			if n, calls := len(records(t, w.store, stepKeys)), len(w.studio.allCalls()); n != 0 || calls != 0 {
				t.Errorf("%d occurrence records stored, %d checkpoints sent; want none", n, calls)
			}
		})
	}
}

// An after context that fails, or is no JSON object, fails the run after the effect: the
// result is recorded, no after checkpoint is sent, and the step waits to be retried.
func TestRecordAfterContextRefused(t *testing.T) {
	for _, c := range []struct {
		name  string
		after func(order, receipt) (any, error)
		want  string
	}{
		{"an error", func(order, receipt) (any, error) { return nil, errBoom }, `checkpoint: after context of step "charge": boom`},
		{"no object", func(order, receipt) (any, error) { return []int{1}, nil }, "checkpoint: a checkpoint context must be a JSON object"},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := memoryWorld(t, nil)
			i := w.instance(behaviour{after: c.after})
			j := w.job()
			if _, err := j.run(t, i); err == nil || err.Error() != c.want {
				t.Fatalf("run: %v, want %q", err, c.want)
			}
			if n := len(w.studio.callsOf(j.occ.OccurrenceID)); n != 1 {
				t.Errorf("%d checkpoint calls, want the before checkpoint only", n)
			}
			j.wantCounts(t, 1, 0)
			st, err := checkpoint.StepState(i.ctx(), i.step, j.occ)
			wantStatus(t, st, err, checkpoint.Running, "")
			if !st.HasResult {
				t.Error("the effect's result is not recorded")
			}
		})
	}
}

// A recovery of an occurrence whose after checkpoint was never answered computes the after
// context again: when AfterContext fails, or gives no JSON object, the recovery fails with that
// error and sends nothing.
func TestRecoveryAfterContextRefused(t *testing.T) {
	for _, c := range []struct {
		name  string
		after func(order, receipt) (any, error)
		want  string
	}{
		{"an error", func(order, receipt) (any, error) { return nil, errBoom }, `checkpoint: after context of step "charge": boom`},
		{"no object", func(order, receipt) (any, error) { return []int{1}, nil }, "checkpoint: a checkpoint context must be a JSON object"},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := memoryWorld(t, nil)
			a := w.instance(behaviour{})
			j := w.job()
			w.studio.failPhase("after", 1)
			if _, err := j.run(t, a); !errors.Is(err, checkpoint.ErrRequestFailed) {
				t.Fatalf("run: %v, want ErrRequestFailed", err)
			}
			b := w.instance(behaviour{after: c.after})
			result := receipt{Order: j.order.ID, Ref: "rcpt-" + j.order.ID}
			if _, err := checkpoint.RecoverGuardedStep(b.ctx(), j.gate(t, b), b.step, j.occ, result); err == nil || err.Error() != c.want {
				t.Fatalf("recovery: %v, want %q", err, c.want)
			}
			if n := len(w.studio.callsOf(j.occ.OccurrenceID)); n != 2 {
				t.Errorf("%d checkpoint calls, want the first two only", n)
			}
			j.wantCounts(t, 1, 0)
		})
	}
}

// A step that defines no Advance completes once the after checkpoint allows it.
func TestRecordStepWithoutAdvanceCompletes(t *testing.T) {
	w := memoryWorld(t, nil)
	i := w.instance(behaviour{noAdvance: true})
	j := w.job()
	out, err := j.run(t, i)
	wantStatus(t, out, err, checkpoint.Completed, "")
	j.wantCounts(t, 1, 0)
	if st, err := checkpoint.StepState(i.ctx(), i.step, j.occ); err != nil || st.Status != checkpoint.Completed {
		t.Errorf("state: %+v, %v", st, err)
	}
}

const gateKeys = "rulecheckpoint/v1/gate/"

// A job.start delivered again gives a gate bound to its job, whether the stored gate was kept
// (the same token) or replaced (a newer one).
func TestFromJobStartAgainBindsItsGate(t *testing.T) {
	w := memoryWorld(t, nil)
	i := w.instance(behaviour{})
	j := w.job()
	j.gate(t, i)
	if g := j.gate(t, i); g.JobID() != j.occ.JobID {
		t.Errorf("the same job.start again: gate of job %q, want %q", g.JobID(), j.occ.JobID)
	}
	newer := j.token + "-newer"
	w.tokens = append(w.tokens, newer)
	if g := j.startWithToken(t, i, newer); g.JobID() != j.occ.JobID {
		t.Errorf("a newer token: gate of job %q, want %q", g.JobID(), j.occ.JobID)
	}
}

// A job.start whose job_id is empty stores no gate: its first step binds it.
func TestFromJobStartWithAnEmptyJobIDStoresNoGate(t *testing.T) {
	w := memoryWorld(t, nil)
	i := w.instance(behaviour{})
	j := w.job()
	empty := ""
	j.req.JobID = &empty
	if g := j.gate(t, i); g.JobID() != "" {
		t.Errorf("gate of job %q, want none", g.JobID())
	}
	if n := len(records(t, w.store, gateKeys)); n != 0 {
		t.Errorf("%d gate records stored", n)
	}
}

// A gate without secret_refs has an empty list of them, not none: as the gate gives it, as it is
// stored for the job and as it is sent to Studio.
func TestGateWithoutSecretRefsHasAnEmptyList(t *testing.T) {
	w := memoryWorld(t, map[string]string{"before": "pause"})
	i := w.instance(behaviour{})
	j := w.job()
	g, err := checkpoint.FromJobStart(i.ctx(), j.req, checkpoint.WithSecretRefs())
	if err != nil {
		t.Fatal(err)
	}
	if refs := g.SecretRefs(); refs == nil || len(refs) != 0 {
		t.Errorf("SecretRefs() = %#v, want an empty list", refs)
	}
	if it := gateRecordOf(t, w.store, j.occ.JobID); !strings.Contains(string(it.Value), `"secret_refs":[]`) {
		t.Errorf("gate record %s, want secret_refs []", it.Value)
	}
	out, err := checkpoint.RunGuardedStep(i.ctx(), g, i.step, j.occ, j.before(), j.order)
	wantStatus(t, out, err, checkpoint.Awaiting, "before")
	calls := w.studio.callsOf(j.occ.OccurrenceID)
	if len(calls) != 1 || !strings.Contains(calls[0].Raw, `"secret_refs":[]`) {
		t.Errorf("checkpoint bodies %+v, want one with secret_refs []", calls)
	}
}

// noSecret is a Studio connection without a key to seal tokens with.
type noSecret struct{ checkpoint.Studio }

func (noSecret) TokenSecret() []byte { return nil }

// A gate that cannot be stored fails FromJobStart: without a key to seal its token, or when the
// store fails.
func TestFromJobStartCannotStoreTheGate(t *testing.T) {
	for _, c := range []struct {
		name  string
		fails bool // the store fails
		want  string
	}{
		{"no key", false, "checkpoint: no secret to seal checkpoint tokens with (SUPERVAIZE_API_KEY)"},
		{"the store fails", true, "checkpoint: store the gate of job %q: boom"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newHookStore(t)
			w := newWorld(t, s, nil)
			i := w.instance(behaviour{}, func(cfg *checkpoint.Config) {
				if !c.fails {
					cfg.Studio = noSecret{cfg.Studio}
				}
			})
			j := w.job()
			s.setHook(func(_ context.Context, op, key string, _ []byte) error {
				if c.fails && op == "create" && strings.HasPrefix(key, gateKeys) {
					return errBoom
				}
				return nil
			})
			want := c.want
			if c.fails {
				want = fmt.Sprintf(c.want, j.occ.JobID)
			}
			if g, err := checkpoint.FromJobStart(i.ctx(), j.req); err == nil || err.Error() != want {
				t.Fatalf("FromJobStart: %v, %v; want %q", g, err, want)
			}
		})
	}
}

// JobGate needs a handler's scope and a job id, and answers a failed read of the gate with the
// store's error.
func TestJobGateRefusals(t *testing.T) {
	s := newHookStore(t)
	w := newWorld(t, s, nil)
	i := w.instance(behaviour{})
	j := w.job()
	j.gate(t, i)
	s.setHook(func(_ context.Context, op, key string, _ []byte) error {
		if op == "get" && strings.HasPrefix(key, gateKeys) {
			return errBoom
		}
		return nil
	})
	for _, c := range []struct {
		name string
		ctx  context.Context
		job  string
		want string
	}{
		{"outside a handler", context.Background(), j.occ.JobID, checkpoint.ErrNoScope.Error()},
		{"no job id", i.ctx(), "", "checkpoint: JobGate needs a job id"},
		{"the read fails", i.ctx(), j.occ.JobID, fmt.Sprintf("checkpoint: read the gate of job %q: boom", j.occ.JobID)},
	} {
		if g, err := checkpoint.JobGate(c.ctx, c.job); err == nil || err.Error() != c.want || g != nil {
			t.Errorf("%s: %v, %v; want %q", c.name, g, err, c.want)
		}
	}
}

// A handler's scope needs a service, a registry and a verified workspace; the service needs a
// store.
func TestScopeRefusals(t *testing.T) {
	w := memoryWorld(t, nil)
	i := w.instance(behaviour{})
	noStore := checkpoint.NewService(checkpoint.Config{Studio: w.studio.client(t)})
	for _, c := range []struct {
		name string
		ctx  context.Context
		want string
	}{
		{"no service", checkpoint.NewContext(context.Background(), nil, i.reg, agentSlug, w.ws), checkpoint.ErrNoScope.Error()},
		{"no registry", checkpoint.NewContext(context.Background(), i.svc, nil, agentSlug, w.ws), checkpoint.ErrNoScope.Error()},
		{"no workspace", checkpoint.NewContext(context.Background(), i.svc, i.reg, agentSlug, ""), checkpoint.ErrNoScope.Error() + " (this call has no verified workspace)"},
		{"no store", checkpoint.NewContext(context.Background(), noStore, i.reg, agentSlug, w.ws),
			"rule checkpoints need the controller's store (core.Config.Store; package config opens the one SUPERVAIZER_STORE names)"},
	} {
		if g, err := checkpoint.JobGate(c.ctx, "job-1"); err == nil || err.Error() != c.want || g != nil {
			t.Errorf("%s: %v, %v; want %q", c.name, g, err, c.want)
		}
	}
}

// A service configured without a logger logs to slog's default: a resume, which logs, runs.
func TestServiceWithoutALogger(t *testing.T) {
	w := memoryWorld(t, map[string]string{"before": "pause"})
	i := w.instance(behaviour{}, func(c *checkpoint.Config) { c.Logger = nil })
	j := w.job()
	out, err := j.run(t, i)
	wantStatus(t, out, err, checkpoint.Awaiting, "before")
	if res, err := j.resume(t, i, "before", "allow"); err != nil || res != resumed(j.occ.JobID, "allow", out.CheckpointID) {
		t.Fatalf("resume: %s, %v", res, err)
	}
}

// Define without a registry (an owner that has none) returns the step, registering nothing; a
// nil registry has no steps and no mistakes. A step name is at most 200 printable characters.
func TestDefineNamesAndNoRegistry(t *testing.T) {
	funcs := checkpoint.Funcs[order, receipt]{
		Effect:       func(context.Context, order) (receipt, error) { return receipt{}, nil },
		AfterContext: func(order, receipt) (any, error) { return map[string]any{}, nil },
	}
	var none *checkpoint.Registry
	if s := checkpoint.Define(owner{none}, "x", funcs); s.Name() != "x" || none.Err() != nil || none.Len() != 0 {
		t.Errorf("no registry: step %q, %v, %d steps", s.Name(), none.Err(), none.Len())
	}
	for _, c := range []struct {
		name string
		ok   bool
	}{
		{strings.Repeat("n", 200), true},
		{strings.Repeat("n", 201), false},
		{"tab\there", false},
	} {
		reg := checkpoint.NewRegistry(rules())
		checkpoint.Define(owner{reg}, c.name, funcs)
		if err := reg.Err(); (err == nil) != c.ok || !c.ok && !strings.Contains(err.Error(), "a step name is 1 to 200 printable characters") {
			t.Errorf("name of %d bytes %.12q: %v", len(c.name), c.name, err)
		}
	}
}

// An effect whose result does not encode as JSON fails the run: the effect ran, its result is
// not recorded, the step needs recovery.
func TestRecordResultThatDoesNotEncode(t *testing.T) {
	w := memoryWorld(t, nil)
	i := w.instance(behaviour{})
	j := w.job()
	s := checkpoint.Define(owner{i.reg}, "callback", checkpoint.Funcs[order, func()]{
		Effect:       func(context.Context, order) (func(), error) { return func() {}, nil },
		AfterContext: func(order, func()) (any, error) { return map[string]any{}, nil },
	})
	_, err := checkpoint.RunGuardedStep(i.ctx(), j.gate(t, i), s, j.occ, j.before(), j.order)
	const want = `rule-gated effect of step "callback" failed; it is never run again for this occurrence (Started rule-gated effect requires an explicit recovery handler): encode the result of guarded step "callback": json: unsupported type: func()`
	if !errors.Is(err, checkpoint.ErrEffectStarted) || err.Error() != want {
		t.Fatalf("run: %v, want %q", err, want)
	}
	st, err := checkpoint.StepState(i.ctx(), s, j.occ)
	wantStatus(t, st, err, checkpoint.RecoveryRequired, "")
}

// otherOrder and otherReceipt are the test step's input and result as another build of the
// agent declares them: the stored JSON does not decode into them.
type (
	otherOrder struct {
		ID int `json:"id"`
	}
	otherReceipt struct {
		Order int `json:"order"`
	}
)

// A resume continues the occurrence on the instance that receives it, with the step defined
// there and the job's gate read from the store. When it cannot go on (the step is not defined
// on that instance, the gate cannot be read, or names another snapshot than the occurrence),
// the resume still answers the decision and logs why the step did not complete; nothing runs
// past that point. So too when the instance defines the step with other types, in which the
// stored input or result does not decode. When it can, it reads the job's gate once for the whole step.
func TestResumeOnAnInstanceThatCannotGoOn(t *testing.T) {
	type stage int
	const (
		pausedBefore stage = iota // the before checkpoint answered pause
		pausedAfter               // the after checkpoint answered pause
		checking                  // the before checkpoint's answer (pause) was lost
		effectDone                // the effect's result is recorded, the after checkpoint not sent
	)
	failRead := func(context.Context, *hookStore, string) error { return errBoom }
	otherSnapshot := func(ctx context.Context, s *hookStore, key string) error {
		cur, err := s.Store.Get(ctx, key)
		if err != nil {
			return err
		}
		var rec map[string]any
		if err := json.Unmarshal(cur.Value, &rec); err != nil {
			return err
		}
		rec["snapshot_hash"] = "snapshot-hash-2"
		b, _ := json.Marshal(rec)
		_, err = s.Store.Update(ctx, key, cur.Version, b, store.Never)
		return err
	}
	// The step as another build of the agent defines it: other input or result types.
	otherInput := func(reg *checkpoint.Registry) {
		checkpoint.Define(owner{reg}, stepName, checkpoint.Funcs[otherOrder, receipt]{
			Effect:       func(context.Context, otherOrder) (receipt, error) { return receipt{}, nil },
			AfterContext: func(otherOrder, receipt) (any, error) { return map[string]any{}, nil },
		})
	}
	otherResult := func(reg *checkpoint.Registry) {
		checkpoint.Define(owner{reg}, stepName, checkpoint.Funcs[order, otherReceipt]{
			Effect:       func(context.Context, order) (otherReceipt, error) { return otherReceipt{}, nil },
			AfterContext: func(order, otherReceipt) (any, error) { return map[string]any{}, nil },
			Advance:      func(context.Context, order, otherReceipt) error { return nil },
		})
	}
	for _, c := range []struct {
		name     string
		at       stage
		noStep   bool                                                      // the resuming instance does not define the step
		define   func(*checkpoint.Registry)                                // how it defines it, if otherwise than the test's
		gateRead func(ctx context.Context, s *hookStore, key string) error // before the step's read of the gate
		status   string                                                    // the resume's answer
		log      string                                                    // in the error logged; "" for none
		effects  int
		advances int
		state    checkpoint.Status // where the step stands after
	}{
		{"goes on", pausedBefore, false, nil, nil, "allow", "", 1, 1, checkpoint.Completed},
		{"no step, before the effect", pausedBefore, true, nil, nil, "allow", `guarded step \"charge\" is not defined on agent \"pay-agent\" in this instance`, 0, 0, checkpoint.Running},
		{"no step, before the after context", effectDone, true, nil, nil, "allow", `guarded step \"charge\" is not defined`, 1, 0, checkpoint.Running},
		{"no step, before the advance", pausedAfter, true, nil, nil, "allow", `guarded step \"charge\" is not defined`, 1, 0, checkpoint.Running},
		{"no gate, before the effect", pausedBefore, false, nil, failRead, "allow", "boom", 0, 0, checkpoint.Running},
		{"no gate, before the checkpoint", checking, false, nil, failRead, checkpoint.StatusPendingDelivery, "boom", 0, 0, checkpoint.Running},
		{"no gate, before the after context", effectDone, false, nil, failRead, "allow", "boom", 1, 0, checkpoint.Running},
		{"a gate of another snapshot", pausedBefore, false, nil, otherSnapshot, "allow", checkpoint.ErrRetrySnapshot.Error(), 0, 0, checkpoint.Running},
		{"another input type, before the effect", pausedBefore, false, otherInput, nil, "allow", `decode the stored input of guarded step \"charge\"`, 0, 0, checkpoint.RecoveryRequired},
		{"another result type, before the after context", effectDone, false, otherResult, nil, "allow", `decode the stored result of guarded step \"charge\"`, 1, 0, checkpoint.Running},
		{"another result type, before the advance", pausedAfter, false, otherResult, nil, "allow", `decode the stored result of guarded step \"charge\"`, 1, 0, checkpoint.RecoveryRequired},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newHookStore(t)
			decide := map[string]string{"before": "pause"}
			phase := "before"
			switch c.at {
			case pausedAfter:
				decide, phase = map[string]string{"after": "pause"}, "after"
			case effectDone:
				decide = nil
			}
			w := newWorld(t, s, decide)
			a := w.instance(behaviour{})
			j := w.job()
			switch c.at {
			case checking:
				w.studio.loseAnswer("before", 1)
				if _, err := j.run(t, a); !errors.Is(err, checkpoint.ErrRequestFailed) {
					t.Fatalf("run: %v, want ErrRequestFailed", err)
				}
			case effectDone:
				// The write that follows the recorded result fails: the run stops there.
				s.setHook(func(_ context.Context, op, key string, value []byte) error {
					if op == "update" && strings.HasPrefix(key, stepKeys) && strings.Contains(string(value), `"state":"after_checking"`) {
						return errBoom
					}
					return nil
				})
				if _, err := j.run(t, a); !errors.Is(err, errBoom) {
					t.Fatalf("run: %v, want the failed write", err)
				}
			default:
				out, err := j.run(t, a)
				wantStatus(t, out, err, checkpoint.Awaiting, phase)
			}
			ctx := w.instance(behaviour{}).ctx()
			if c.noStep || c.define != nil {
				reg := checkpoint.NewRegistry(rules())
				if c.define != nil {
					c.define(reg)
				}
				ctx = checkpoint.NewContext(context.Background(), a.svc, reg, agentSlug, w.ws)
			}
			var gateGets atomic.Int32
			s.setHook(func(ctx context.Context, op, key string, _ []byte) error {
				// The resume reads the gate first to check the decision, then for the step.
				if op == "get" && strings.HasPrefix(key, gateKeys) && gateGets.Add(1) == 2 && c.gateRead != nil {
					return c.gateRead(ctx, s, key)
				}
				return nil
			})
			logged := w.logs.Len()
			ans, _ := w.studio.answer(j.occ.OccurrenceID, phase)
			res, err := checkpoint.Resume(ctx, resumeRequestFor(j.occ, phase, "allow", ans))
			if err != nil {
				t.Fatal(err)
			}
			if b, _ := contract.AppendJSON(nil, res); string(b) != resumed(j.occ.JobID, c.status, ans.CheckpointID) {
				t.Errorf("resume: %s, want status %s", b, c.status)
			}
			logs := w.logs.String()[logged:]
			failed := strings.Contains(logs, "the step did not complete after the decision")
			if failed != (c.log != "") || c.log != "" && !strings.Contains(logs, c.log) {
				t.Errorf("logs, want the step's failure %q:\n%s", c.log, logs)
			}
			j.wantCounts(t, c.effects, c.advances)
			if st, err := checkpoint.StepState(a.ctx(), a.step, j.occ); err != nil || st.Status != c.state {
				t.Errorf("the step after the resume: %+v, %v; want %s", st, err, c.state)
			}
			if c.gateRead == nil && !c.noStep && c.define == nil && gateGets.Load() != 2 {
				t.Errorf("%d reads of the gate, want 2", gateGets.Load())
			}
		})
	}
}

// A resume that cannot keep its decision (the store fails) answers the store's error, whether
// the checkpoint waits on a pause or on its answer: the step does not go on.
func TestResumeCannotKeepTheDecision(t *testing.T) {
	for _, lost := range []bool{false, true} {
		t.Run(fmt.Sprint("answer lost: ", lost), func(t *testing.T) {
			s := newHookStore(t)
			w := newWorld(t, s, map[string]string{"before": "pause"})
			i := w.instance(behaviour{})
			j := w.job()
			if lost {
				w.studio.loseAnswer("before", 1)
				if _, err := j.run(t, i); !errors.Is(err, checkpoint.ErrRequestFailed) {
					t.Fatalf("run: %v, want ErrRequestFailed", err)
				}
			} else {
				out, err := j.run(t, i)
				wantStatus(t, out, err, checkpoint.Awaiting, "before")
			}
			s.setHook(func(_ context.Context, op, key string, _ []byte) error {
				if op == "create" && strings.HasPrefix(key, decisionKeys) {
					return errBoom
				}
				return nil
			})
			res, err := j.resume(t, i, "before", "allow")
			if !errors.Is(err, errBoom) || err.Error() != "checkpoint: keep the decision: boom" {
				t.Fatalf("resume: %s, %v; want the store's error", res, err)
			}
			j.wantCounts(t, 0, 0)
			if n := len(w.studio.callsOf(j.occ.OccurrenceID)); n != 1 {
				t.Errorf("%d checkpoint calls, want the first only", n)
			}
		})
	}
}

// A holder that finds, once it let the paused occurrence go, a decision kept for it, takes the
// occurrence back to apply it; when another instance took the occurrence in between (its claim
// loses), the run answers Awaiting without error: the decision is that instance's business now.
func TestRecordHolderLosesTheOccurrenceAfterLettingGo(t *testing.T) {
	s := newHookStore(t)
	w := newWorld(t, s, map[string]string{"before": "pause"})
	// A manual clock that never moves: A's lease cannot lapse on a slow machine.
	clock := newManualClock()
	a, b := w.instance(behaviour{}, clock.frozen(0)), w.instance(behaviour{}, clock.frozen(0))
	j := w.job()
	var looks atomic.Int32
	var delivered atomic.Bool
	var early string
	var earlyErr error
	s.setHook(func(ctx context.Context, op, key string, _ []byte) error {
		switch {
		case op == "update" && strings.HasPrefix(key, stepKeys) && looks.Load() == 1 && delivered.CompareAndSwap(false, true):
			// As A lets go, the decision arrives: kept for A, which still holds the occurrence.
			early, earlyErr = j.resume(t, b, "before", "allow")
		case op == "get" && strings.HasPrefix(key, decisionKeys) && looks.Add(1) == 2:
			// A looks again; meanwhile another instance writes the occurrence (unchanged).
			key := stepKeyOf(t, s)
			cur, err := s.Store.Get(ctx, key)
			if err != nil {
				return err
			}
			_, err = s.Store.Update(ctx, key, cur.Version, cur.Value, store.Never)
			return err
		}
		return nil
	})
	out, err := j.run(t, a)
	if !delivered.Load() || looks.Load() != 2 {
		t.Fatalf("the decision was delivered: %v; A looked %d times, want 2", delivered.Load(), looks.Load())
	}
	ans, _ := w.studio.answer(j.occ.OccurrenceID, "before")
	if earlyErr != nil || early != resumed(j.occ.JobID, checkpoint.StatusPendingDelivery, ans.CheckpointID) {
		t.Errorf("resume while A holds the occurrence: %s, %v", early, earlyErr)
	}
	wantStatus(t, out, err, checkpoint.Awaiting, "before")
	j.wantCounts(t, 0, 0)
}

// stepKeyOf returns the store key of the only occurrence record in s.
func stepKeyOf(t *testing.T, s *hookStore) string {
	t.Helper()
	recs := records(t, s.Store, stepKeys)
	if len(recs) != 1 {
		t.Fatalf("%d occurrence records, want 1", len(recs))
	}
	return recs[0].Key
}

// A gate record that does not decode is an error for JobGate and for a job.start delivered
// again: never a job that is not governed, nor a gate replaced blindly.
func TestGateRecordUnreadable(t *testing.T) {
	w := memoryWorld(t, nil)
	i := w.instance(behaviour{})
	j := w.job()
	j.gate(t, i)
	it := gateRecordOf(t, w.store, j.occ.JobID)
	if _, err := w.store.Update(context.Background(), it.Key, it.Version, []byte("not json"), store.Never); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("checkpoint: unreadable gate record of job %q: invalid character 'o' in literal null (expecting 'u')", j.occ.JobID)
	if g, err := checkpoint.JobGate(i.ctx(), j.occ.JobID); err == nil || err.Error() != want {
		t.Errorf("JobGate: %v, %v; want %q", g, err, want)
	}
	if g, err := checkpoint.FromJobStart(i.ctx(), j.req); err == nil || err.Error() != want {
		t.Errorf("FromJobStart again: %v, %v; want %q", g, err, want)
	}
}

// An occurrence whose recorded result does not decode into the step's result type is an error
// for StepState, naming the step.
func TestStepStateOfAResultOfAnotherType(t *testing.T) {
	w := memoryWorld(t, nil)
	i := w.instance(behaviour{})
	j := w.job()
	out, err := j.run(t, i)
	wantStatus(t, out, err, checkpoint.Completed, "")
	reg := checkpoint.NewRegistry(rules())
	other := checkpoint.Define(owner{reg}, stepName, checkpoint.Funcs[order, otherReceipt]{
		Effect:       func(context.Context, order) (otherReceipt, error) { return otherReceipt{}, nil },
		AfterContext: func(order, otherReceipt) (any, error) { return map[string]any{}, nil },
	})
	ctx := checkpoint.NewContext(context.Background(), i.svc, reg, agentSlug, w.ws)
	const want = `checkpoint: decode the recorded result of step "charge": json: cannot unmarshal string into Go struct field otherReceipt.order of type int`
	if st, err := checkpoint.StepState(ctx, other, j.occ); err == nil || err.Error() != want {
		t.Errorf("StepState: %+v, %v; want %q", st, err, want)
	}
}

// A recovery whose result holds the job's checkpoint token is refused before anything is read
// or recorded (ErrTokenInContext): the step still needs recovery.
func TestRecoveryRefusesAResultHoldingTheToken(t *testing.T) {
	w := memoryWorld(t, nil)
	i := w.instance(behaviour{effect: func(context.Context, order) (receipt, error) { return receipt{}, errBoom }})
	j := w.job()
	if _, err := j.run(t, i); !errors.Is(err, checkpoint.ErrEffectStarted) {
		t.Fatalf("run: %v, want ErrEffectStarted", err)
	}
	leaky := receipt{Order: j.order.ID, Ref: "rcpt-" + j.token}
	if _, err := checkpoint.RecoverGuardedStep(i.ctx(), j.gate(t, i), i.step, j.occ, leaky); err != checkpoint.ErrTokenInContext {
		t.Fatalf("recovery: %v, want ErrTokenInContext", err)
	}
	st, err := checkpoint.StepState(i.ctx(), i.step, j.occ)
	wantStatus(t, st, err, checkpoint.RecoveryRequired, "")
	w.noSecrets(t)
}
