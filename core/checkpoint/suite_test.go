package checkpoint_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/supervaize/svz/core/checkpoint"
	"github.com/supervaize/svz/core/contract"
	"github.com/supervaize/svz/core/store"
	"github.com/supervaize/svz/internal/testenv"
)

// suite runs every guarded-step scenario on the store s (shared by the subtests: each works in a
// workspace of its own). Two instances on one store stand for two controllers.
func suite(t *testing.T, s store.Store) {
	for _, c := range []struct {
		name string
		fn   func(t *testing.T, s store.Store)
	}{
		{"AllowAllow", testAllowAllow},
		{"AllowStop", testAllowStop},
		{"StopBefore", testStopBefore},
		{"PauseThenResumeAllowOnAnotherInstance", testPauseResumeAllow},
		{"PauseThenResumeStop", testPauseResumeStop},
		{"AfterPauseThenResumeAllow", testAfterPauseResumeAllow},
		{"ResumeRefusals", testResumeRefusals},
		{"EarlyDecision", testEarlyDecision},
		{"EarlyDecisionAfterLostAnswer", testEarlyDecisionLostAnswer},
		{"EarlyDecisionForAnotherCheckpoint", testEarlyDecisionMismatch},
		{"RetryRules", testRetryRules},
		{"CheckingResendsTheSameCheckpoint", testCheckingResends},
		{"EffectFailureNeedsRecovery", testEffectFailure},
		{"RecoveryChecksTheContext", testRecoveryContext},
		{"AmbiguousAdvance", testAmbiguousAdvance},
		{"ConcurrentOccurrence", testConcurrent},
		{"LeaseRenewalAndTakeOver", testLease},
		{"LeaseEndsExactlyAfterLeaseAndSkewMargin", testLeaseBoundaries},
		{"TokenSealedWithTheStudioKey", testSealed},
	} {
		t.Run(c.name, func(t *testing.T) { c.fn(t, s) })
	}
}

func wantStatus[Out any](t *testing.T, o checkpoint.Outcome[Out], err error, status checkpoint.Status, phase string) {
	t.Helper()
	if err != nil {
		t.Fatalf("error %v, want %s", err, status)
	}
	if o.Status != status || o.Phase != phase {
		t.Fatalf("outcome %+v, want %s at %q", o, status, phase)
	}
}

func testAllowAllow(t *testing.T, s store.Store) {
	w := newWorld(t, s, nil)
	i := w.instance(behaviour{})
	j := w.job()
	out, err := j.run(t, i)
	wantStatus(t, out, err, checkpoint.Completed, "")
	if !out.HasResult || out.Result != (receipt{Order: j.order.ID, Ref: "rcpt-" + j.order.ID}) || out.StepStatus() != "completed" || out.Err() != nil {
		t.Errorf("outcome %+v", out)
	}
	j.wantCounts(t, 1, 1)
	calls := w.studio.callsOf(j.occ.OccurrenceID)
	if len(calls) != 2 {
		t.Fatalf("%d checkpoint calls, want before and after", len(calls))
	}
	// The before context without the card (a context.* secret ref), the secret refs, the ids; the
	// token only in its header; the snapshot's checkpoint_url (attacker.example) never used.
	want := checkpointBody{OccurrenceID: j.occ.OccurrenceID, Phase: "before", SnapshotHash: snapshotHash, JobID: j.occ.JobID,
		CaseID: "case-1", StepID: "step-charge", Context: map[string]any{"operation": "charge", "amount": 12.0, "customer": map[string]any{"name": "Ada"}},
		SecretRefs: []string{"context.customer.card", "case.metadata.iban"}}
	if !reflect.DeepEqual(calls[0].Body, want) || calls[0].Token != j.token {
		t.Errorf("before checkpoint %+v (token ok: %v)\nwant %+v", calls[0].Body, calls[0].Token == j.token, want)
	}
	want.Phase, want.Context = "after", map[string]any{"operation": "charge", "order": j.order.ID, "receipt": "rcpt-" + j.order.ID}
	if !reflect.DeepEqual(calls[1].Body, want) || calls[1].Token != j.token {
		t.Errorf("after checkpoint %+v\nwant %+v", calls[1].Body, want)
	}
	// Run again: the completed occurrence answers its outcome; nothing is sent or run again.
	again, err := j.run(t, i)
	wantStatus(t, again, err, checkpoint.Completed, "")
	if again.Result != out.Result || len(w.studio.callsOf(j.occ.OccurrenceID)) != 2 {
		t.Errorf("retry %+v, %d calls", again, len(w.studio.callsOf(j.occ.OccurrenceID)))
	}
	j.wantCounts(t, 1, 1)
	st, err := checkpoint.StepState(i.ctx(), i.step, j.occ)
	wantStatus(t, st, err, checkpoint.Completed, "")
	w.noSecrets(t)
}

func testAllowStop(t *testing.T, s store.Store) {
	w := newWorld(t, s, map[string]string{"after": "stop"})
	i := w.instance(behaviour{})
	j := w.job()
	out, err := j.run(t, i)
	wantStatus(t, out, err, checkpoint.Blocked, "after")
	a, _ := w.studio.answer(j.occ.OccurrenceID, "after")
	if out.CheckpointID != a.CheckpointID || !out.HasResult || out.StepStatus() != "failed" {
		t.Errorf("outcome %+v", out)
	}
	if e := out.Err(); e == nil || e.Error() != fmt.Sprintf("Rule checkpoint '%s' returned 'stop'", a.CheckpointID) {
		t.Errorf("Err() = %v", e)
	}
	j.wantCounts(t, 1, 0) // the effect ran; the case does not advance
	again, err := j.run(t, i)
	wantStatus(t, again, err, checkpoint.Blocked, "after")
	j.wantCounts(t, 1, 0)
	if n := len(w.studio.callsOf(j.occ.OccurrenceID)); n != 2 {
		t.Errorf("%d calls", n)
	}
	w.noSecrets(t)
}

func testStopBefore(t *testing.T, s store.Store) {
	w := newWorld(t, s, map[string]string{"before": "stop"})
	i := w.instance(behaviour{})
	j := w.job()
	out, err := j.run(t, i)
	wantStatus(t, out, err, checkpoint.Blocked, "before")
	if out.HasResult || !strings.Contains(out.Err().Error(), "returned 'stop'") {
		t.Errorf("outcome %+v", out)
	}
	j.wantCounts(t, 0, 0)
	if n := len(w.studio.callsOf(j.occ.OccurrenceID)); n != 1 {
		t.Errorf("%d calls, want the before checkpoint only", n)
	}
}

func resumed(job, status, checkpointID string) string {
	return `{"status":"ok","effects":[{"type":"rule.checkpoint.resumed","job_id":"` + job + `","status":"` + status +
		`","summary":{"checkpoint_id":"` + checkpointID + `"}}]}`
}

func testPauseResumeAllow(t *testing.T, s store.Store) {
	w := newWorld(t, s, map[string]string{"before": "pause"})
	a, b := w.instance(behaviour{}), w.instance(behaviour{})
	j := w.job()
	out, err := j.run(t, a)
	wantStatus(t, out, err, checkpoint.Awaiting, "before")
	ans, _ := w.studio.answer(j.occ.OccurrenceID, "before")
	if out.CheckpointID != ans.CheckpointID || out.StepStatus() != "awaiting" || out.HasResult {
		t.Errorf("outcome %+v", out)
	}
	j.wantCounts(t, 0, 0)
	// Retrying the job while it waits answers the same; nothing is sent again.
	again, err := j.run(t, a)
	wantStatus(t, again, err, checkpoint.Awaiting, "before")
	// Studio resumes through the other instance, which runs the effect, the after checkpoint and
	// the advance there.
	res, err := j.resume(t, b, "before", "allow")
	if err != nil || res != resumed(j.occ.JobID, "allow", ans.CheckpointID) {
		t.Fatalf("resume: %s, %v", res, err)
	}
	j.wantCounts(t, 1, 1)
	st, err := checkpoint.StepState(a.ctx(), a.step, j.occ)
	wantStatus(t, st, err, checkpoint.Completed, "")
	if n := len(w.studio.callsOf(j.occ.OccurrenceID)); n != 2 {
		t.Errorf("%d calls", n)
	}
	// Studio delivers the same decision again: acknowledged, nothing runs again.
	res, err = j.resume(t, a, "before", "allow")
	if err != nil || res != resumed(j.occ.JobID, "allow", ans.CheckpointID) {
		t.Errorf("second delivery: %s, %v", res, err)
	}
	j.wantCounts(t, 1, 1)
	w.noSecrets(t)
}

func testPauseResumeStop(t *testing.T, s store.Store) {
	w := newWorld(t, s, map[string]string{"before": "pause"})
	a, b := w.instance(behaviour{}), w.instance(behaviour{})
	j := w.job()
	out, err := j.run(t, a)
	wantStatus(t, out, err, checkpoint.Awaiting, "before")
	res, err := j.resume(t, b, "before", "stop")
	if err != nil || res != resumed(j.occ.JobID, "stop", out.CheckpointID) {
		t.Fatalf("resume: %s, %v", res, err)
	}
	st, err := checkpoint.StepState(a.ctx(), a.step, j.occ)
	wantStatus(t, st, err, checkpoint.Blocked, "before")
	j.wantCounts(t, 0, 0)
	// A contrary decision for a decided checkpoint is refused.
	if _, err := j.resume(t, a, "before", "allow"); !errors.Is(err, checkpoint.ErrResumeMismatch) {
		t.Errorf("allow after stop: %v", err)
	}
	j.wantCounts(t, 0, 0)
}

func testAfterPauseResumeAllow(t *testing.T, s store.Store) {
	w := newWorld(t, s, map[string]string{"after": "pause"})
	a, b := w.instance(behaviour{}), w.instance(behaviour{})
	j := w.job()
	out, err := j.run(t, a)
	wantStatus(t, out, err, checkpoint.Awaiting, "after")
	if !out.HasResult || out.Result.Ref != "rcpt-"+j.order.ID {
		t.Errorf("outcome %+v", out)
	}
	j.wantCounts(t, 1, 0)
	res, err := j.resume(t, b, "after", "allow")
	if err != nil || res != resumed(j.occ.JobID, "allow", out.CheckpointID) {
		t.Fatalf("resume: %s, %v", res, err)
	}
	j.wantCounts(t, 1, 1)
	st, err := checkpoint.StepState(b.ctx(), b.step, j.occ)
	wantStatus(t, st, err, checkpoint.Completed, "")
}

func testResumeRefusals(t *testing.T, s store.Store) {
	w := newWorld(t, s, map[string]string{"before": "pause"})
	a := w.instance(behaviour{})
	j := w.job()
	out, err := j.run(t, a)
	wantStatus(t, out, err, checkpoint.Awaiting, "before")
	ans, _ := w.studio.answer(j.occ.OccurrenceID, "before")
	edit := func(f func(m map[string]any)) []byte {
		var m map[string]any
		_ = json.Unmarshal(j.resumeRequest(t, "before", "allow").Input, &m)
		f(m)
		b, _ := json.Marshal(m)
		return b
	}
	other := j.occ
	other.OccurrenceID = "occ-other"
	otherCase, otherJob := j.occ, j.occ
	otherCase.CaseID, otherJob.JobID = "case-other", "job-other"
	var errs []error
	for _, c := range []struct {
		name string
		req  func() *contract.ActionRequest
		want error
		msg  string
	}{
		{"another occurrence", func() *contract.ActionRequest { return resumeRequestFor(other, "before", "allow", ans) }, checkpoint.ErrResumeMismatch, ""},
		{"another case", func() *contract.ActionRequest { return resumeRequestFor(otherCase, "before", "allow", ans) }, checkpoint.ErrResumeMismatch, ""},
		{"another job", func() *contract.ActionRequest { return resumeRequestFor(otherJob, "before", "allow", ans) }, checkpoint.ErrResumeMismatch, ""},
		{"another checkpoint", func() *contract.ActionRequest {
			r := j.resumeRequest(t, "before", "allow")
			r.Input = edit(func(m map[string]any) { m["checkpoint_id"] = "chk-999" })
			return r
		}, checkpoint.ErrResumeMismatch, ""},
		{"another input hash", func() *contract.ActionRequest {
			r := j.resumeRequest(t, "before", "allow")
			r.Input = edit(func(m map[string]any) { m["input_hash"] = "forged" })
			return r
		}, checkpoint.ErrResumeMismatch, ""},
		{"another snapshot", func() *contract.ActionRequest {
			r := j.resumeRequest(t, "before", "allow")
			r.Input = edit(func(m map[string]any) { m["snapshot_hash"] = "snapshot-other" })
			return r
		}, checkpoint.ErrResumeSnapshot, ""},
		{"the after phase, not reached", func() *contract.ActionRequest { return resumeRequestFor(j.occ, "after", "allow", ans) }, checkpoint.ErrResumeMismatch, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := checkpointResume(a, c.req())
			errs = append(errs, err)
			switch {
			case err == nil:
				t.Fatal("accepted")
			case c.want != nil && !errors.Is(err, c.want):
				t.Fatalf("error %v, want %v", err, c.want)
			case c.msg != "" && !strings.Contains(err.Error(), c.msg):
				t.Fatalf("error %v, want %q", err, c.msg)
			}
		})
	}
	// A request that is no decision is refused as input, every mistake named, nothing changed.
	for _, c := range []struct {
		name string
		req  func() *contract.ActionRequest
		want string
	}{
		{"pause is not a decision", func() *contract.ActionRequest { return j.resumeRequest(t, "before", "pause") },
			`[{"code":"input_option","message":"rule.checkpoint.resume: input.status must be allow or stop: a pause is not a decision (the checkpoint keeps waiting)","field":"status"}]`},
		{"no job nor case in the envelope", func() *contract.ActionRequest {
			r := j.resumeRequest(t, "before", "allow")
			empty := ""
			r.JobID, r.CaseID = &empty, nil
			return r
		}, `[{"code":"input_required","message":"rule.checkpoint.resume: the request's job_id is required","field":"job_id"},` +
			`{"code":"input_required","message":"rule.checkpoint.resume: the request's case_id is required","field":"case_id"}]`},
		{"a phase that is neither", func() *contract.ActionRequest {
			r := j.resumeRequest(t, "before", "allow")
			r.Input = edit(func(m map[string]any) { m["phase"] = "during" })
			return r
		}, `[{"code":"input_option","message":"rule.checkpoint.resume: input.phase must be before or after","field":"phase"}]`},
		{"a status that is no string", func() *contract.ActionRequest {
			r := j.resumeRequest(t, "before", "allow")
			r.Input = edit(func(m map[string]any) { m["status"] = 1 })
			return r
		}, `[{"code":"input_type","message":"rule.checkpoint.resume: input.status must be a string","field":"status"}]`},
		{"a status that is no decision", func() *contract.ActionRequest {
			r := j.resumeRequest(t, "before", "allow")
			r.Input = edit(func(m map[string]any) { m["status"] = "maybe" })
			return r
		}, `[{"code":"input_option","message":"rule.checkpoint.resume: input.status must be allow or stop","field":"status"}]`},
		{"members null, the optional one too", func() *contract.ActionRequest {
			r := j.resumeRequest(t, "before", "allow")
			r.Input = edit(func(m map[string]any) { m["checkpoint_id"], m["decision_id"] = nil, nil })
			return r
		}, `[{"code":"input_required","message":"rule.checkpoint.resume: input.checkpoint_id is required","field":"checkpoint_id"}]`},
		{"an input that is no object", func() *contract.ActionRequest {
			r := j.resumeRequest(t, "before", "allow")
			r.Input = []byte(`["allow"]`)
			return r
		}, `[{"code":"input_type","message":"rule.checkpoint.resume: the input must be a JSON object"}]`},
	} {
		t.Run(c.name, func(t *testing.T) {
			res, err := checkpoint.Resume(a.ctx(), c.req())
			if err != nil {
				t.Fatalf("an error (-32603), not an input refusal: %v", err)
			}
			got, _ := json.Marshal(res.Errors)
			if !res.Refusal() || string(got) != c.want {
				t.Fatalf("refusal %v, errors:\n got %s\nwant %s", res.Refusal(), got, c.want)
			}
		})
	}
	// Another agent's resume for this job: refused, even in the same workspace.
	otherAgent := checkpoint.NewContext(context.Background(), a.svc, a.reg, "other-agent", a.ws)
	r := j.resumeRequest(t, "before", "allow")
	r.AgentSlug = "other-agent"
	if _, err := checkpoint.Resume(otherAgent, r); !errors.Is(err, checkpoint.ErrResumeOtherAgent) {
		t.Errorf("another agent: %v", err)
	}
	// The checkpoint still waits, and the right decision still works.
	st, err := checkpoint.StepState(a.ctx(), a.step, j.occ)
	wantStatus(t, st, err, checkpoint.Awaiting, "before")
	j.wantCounts(t, 0, 0)
	if res, err := j.resume(t, a, "before", "allow"); err != nil || !strings.Contains(res, `"status":"allow"`) {
		t.Fatalf("resume: %s, %v", res, err)
	}
	j.wantCounts(t, 1, 1)
	w.noSecrets(t, errs...)
}

func checkpointResume(i *instance, req *contract.ActionRequest) (string, error) {
	res, err := checkpoint.Resume(i.ctx(), req)
	if err != nil {
		return "", err
	}
	b, _ := json.Marshal(res)
	return string(b), nil
}

// testEarlyDecision: Studio delivers the decision while the before checkpoint's answer is still
// on its way (the occurrence is stored as checking). The decision is kept in the store, answered
// pending_delivery, and applied when the answer arrives: the run goes on by itself.
func testEarlyDecision(t *testing.T, s store.Store) {
	for _, phase := range []string{"before", "after"} {
		t.Run(phase, func(t *testing.T) {
			w := newWorld(t, s, map[string]string{phase: "pause"})
			a, b := w.instance(behaviour{}), w.instance(behaviour{})
			j := w.job()
			var early string
			var earlyErr error
			// The resume runs inside Studio's handler, so the hook must not wait on itself: a
			// resume that wrongly took the held occurrence over sends the checkpoint again and
			// re-enters the hook, which then returns at once and the test fails fast.
			var delivered atomic.Bool
			w.studio.setHook(func(c studioCall, ans answer) {
				if c.Body.Phase == phase && delivered.CompareAndSwap(false, true) {
					req := resumeRequestFor(j.occ, phase, "allow", ans)
					early, earlyErr = checkpointResume(b, req)
				}
			})
			out, err := j.run(t, a)
			wantStatus(t, out, err, checkpoint.Completed, "")
			ans, _ := w.studio.answer(j.occ.OccurrenceID, phase)
			if earlyErr != nil || early != resumed(j.occ.JobID, "pending_delivery", ans.CheckpointID) {
				t.Errorf("early resume: %s, %v", early, earlyErr)
			}
			j.wantCounts(t, 1, 1)
			if n := len(w.studio.callsOf(j.occ.OccurrenceID)); n != 2 {
				t.Errorf("%d checkpoint calls, want before and after once each", n)
			}
		})
	}
}

// testEarlyDecisionMismatch: a decision delivered while its checkpoint is being answered is kept
// (the checkpoint's id and input hash are not known yet); when the answer arrives and the kept
// decision names another checkpoint id or input hash, it is thrown away: the step stays
// awaiting, nothing runs, the early resume never answered the decision as delivered, and the
// right decision still works.
func testEarlyDecisionMismatch(t *testing.T, s store.Store) {
	for _, phase := range []string{"before", "after"} {
		for _, forge := range []struct {
			name string
			edit func(*answer)
		}{
			{"checkpoint id", func(a *answer) { a.CheckpointID += "-forged" }},
			{"input hash", func(a *answer) { a.InputHash += "-forged" }},
		} {
			t.Run(phase+" "+forge.name, func(t *testing.T) {
				w := newWorld(t, s, map[string]string{phase: "pause"})
				a, b := w.instance(behaviour{}), w.instance(behaviour{})
				j := w.job()
				var early string
				var earlyErr error
				// Not a sync.Once: a resume that wrongly took the held occurrence over re-enters
				// the hook from Studio's handler, and must not wait on itself (see testEarlyDecision).
				var delivered atomic.Bool
				w.studio.setHook(func(c studioCall, ans answer) {
					if c.Body.OccurrenceID == j.occ.OccurrenceID && c.Body.Phase == phase && delivered.CompareAndSwap(false, true) {
						forged := ans
						forge.edit(&forged)
						early, earlyErr = checkpointResume(b, resumeRequestFor(j.occ, phase, "allow", forged))
					}
				})
				out, err := j.run(t, a)
				wantStatus(t, out, err, checkpoint.Awaiting, phase)
				ans, _ := w.studio.answer(j.occ.OccurrenceID, phase)
				if out.CheckpointID != ans.CheckpointID {
					t.Errorf("awaiting checkpoint %q, want %q", out.CheckpointID, ans.CheckpointID)
				}
				// The early resume could not be delivered: it says so (pending) or is refused; it
				// never answers allow.
				if earlyErr == nil && !strings.Contains(early, `"status":"pending_delivery"`) {
					t.Errorf("early resume for another checkpoint answered %s", early)
				}
				effects := 0
				if phase == "after" {
					effects = 1
				}
				j.wantCounts(t, effects, 0)
				st, err := checkpoint.StepState(a.ctx(), a.step, j.occ)
				wantStatus(t, st, err, checkpoint.Awaiting, phase)
				if !strings.Contains(w.logs.String(), "discarding a kept decision for another checkpoint") {
					t.Error("the kept decision was not discarded")
				}
				for _, it := range records(t, s, "rulecheckpoint/v1/decision/") {
					if strings.Contains(string(it.Value), j.occ.OccurrenceID) {
						t.Errorf("the discarded decision is still stored: %s", it.Value)
					}
				}
				// Nothing of it is left to apply later: another run still waits; the right
				// decision finishes the step.
				again, err := j.run(t, b)
				wantStatus(t, again, err, checkpoint.Awaiting, phase)
				res, err := j.resume(t, b, phase, "allow")
				if err != nil || res != resumed(j.occ.JobID, "allow", ans.CheckpointID) {
					t.Fatalf("the right resume: %s, %v", res, err)
				}
				j.wantCounts(t, 1, 1)
			})
		}
	}
}

// testEarlyDecisionLostAnswer: Studio decided pause, the answer was lost and the run failed; the
// resume arrives for a checkpoint the occurrence never recorded. It is kept, and the instance
// that received it sends the same checkpoint again, gets the same answer, applies the decision
// and finishes the step.
func testEarlyDecisionLostAnswer(t *testing.T, s store.Store) {
	w := newWorld(t, s, map[string]string{"before": "pause"})
	a, b := w.instance(behaviour{}), w.instance(behaviour{})
	j := w.job()
	w.studio.loseAnswer("before", 1)
	if _, err := j.run(t, a); !errors.Is(err, checkpoint.ErrRequestFailed) {
		t.Fatalf("run with a lost answer: %v", err)
	}
	res, err := j.resume(t, b, "before", "allow")
	ans, _ := w.studio.answer(j.occ.OccurrenceID, "before")
	if err != nil || res != resumed(j.occ.JobID, "allow", ans.CheckpointID) {
		t.Fatalf("resume: %s, %v", res, err)
	}
	j.wantCounts(t, 1, 1)
	calls := w.studio.callsOf(j.occ.OccurrenceID)
	if len(calls) != 3 || calls[0].Raw != calls[1].Raw {
		t.Errorf("%d calls; the before checkpoint must be sent again unchanged", len(calls))
	}
}

func testRetryRules(t *testing.T, s store.Store) {
	w := newWorld(t, s, map[string]string{"before": "pause"})
	i := w.instance(behaviour{})
	j := w.job()
	out, err := j.run(t, i)
	wantStatus(t, out, err, checkpoint.Awaiting, "before")
	g := j.gate(t, i)
	changed := j.before()
	changed["amount"] = 13
	card := j.before()
	card["customer"] = map[string]any{"name": "Ada", "card": "another card"}
	otherStep, otherOrder := j.occ, j.order
	otherStep.StepID, otherOrder.Amount = "step-other", 99
	for _, c := range []struct {
		name string
		run  func() error
		want error
	}{
		{"context", func() error {
			_, err := checkpoint.RunGuardedStep(i.ctx(), g, i.step, j.occ, changed, j.order)
			return err
		}, checkpoint.ErrRetryContext},
		// The hash covers the whole context, secret values included: only Studio's copy omits them.
		{"secret value", func() error {
			_, err := checkpoint.RunGuardedStep(i.ctx(), g, i.step, j.occ, card, j.order)
			return err
		}, checkpoint.ErrRetryContext},
		{"step", func() error {
			_, err := checkpoint.RunGuardedStep(i.ctx(), g, i.step, otherStep, j.before(), j.order)
			return err
		}, checkpoint.ErrRetryStep},
		{"input", func() error {
			_, err := checkpoint.RunGuardedStep(i.ctx(), g, i.step, j.occ, j.before(), otherOrder)
			return err
		}, checkpoint.ErrRetryInput},
		{"snapshot", func() error {
			req := *j.req
			req.Input = []byte(strings.Replace(string(j.req.Input), snapshotHash, "snapshot-hash-2", 1))
			_, err := checkpoint.FromJobStart(i.ctx(), &req)
			return err
		}, checkpoint.ErrRetrySnapshot},
	} {
		if err := c.run(); !errors.Is(err, c.want) || err.Error() != c.want.Error() {
			t.Errorf("%s changed: %v, want %q", c.name, err, c.want)
		}
	}
	if n := len(w.studio.callsOf(j.occ.OccurrenceID)); n != 1 {
		t.Errorf("%d calls", n)
	}
	// A new token for the same snapshot (a retried job.start) replaces the stored one.
	req := *j.req
	newToken := testenv.UniqueName("checkpoint-token-")
	w.tokens = append(w.tokens, newToken)
	req.Input = []byte(strings.Replace(string(j.req.Input), j.token, newToken, 1))
	if _, err := checkpoint.FromJobStart(i.ctx(), &req); err != nil {
		t.Fatal(err)
	}
	if _, err := j.resume(t, i, "before", "allow"); err != nil {
		t.Fatal(err)
	}
	calls := w.studio.callsOf(j.occ.OccurrenceID)
	if len(calls) != 2 || calls[1].Token != newToken {
		t.Errorf("the after checkpoint went with the stored token of the latest job.start: %d calls", len(calls))
	}
	w.noSecrets(t)
}

func testCheckingResends(t *testing.T, s store.Store) {
	for _, phase := range []string{"before", "after"} {
		t.Run(phase, func(t *testing.T) {
			w := newWorld(t, s, nil)
			i := w.instance(behaviour{})
			j := w.job()
			w.studio.failPhase(phase, 1)
			_, err := j.run(t, i)
			if !errors.Is(err, checkpoint.ErrRequestFailed) || !strings.HasPrefix(err.Error(), "Rule checkpoint request failed") {
				t.Fatalf("error %v", err)
			}
			effects := 0
			if phase == "after" {
				effects = 1
			}
			j.wantCounts(t, effects, 0)
			out, err := j.run(t, i)
			wantStatus(t, out, err, checkpoint.Completed, "")
			j.wantCounts(t, 1, 1)
			calls := w.studio.callsOf(j.occ.OccurrenceID)
			var sent []string
			for _, c := range calls {
				if c.Body.Phase == phase {
					sent = append(sent, c.Raw)
				}
			}
			if len(calls) != 3 || len(sent) != 2 || sent[0] != sent[1] {
				t.Errorf("%d calls, %d of %s; the same checkpoint must be sent again", len(calls), len(sent), phase)
			}
			w.noSecrets(t, err)
		})
	}
}

func testEffectFailure(t *testing.T, s store.Store) {
	w := newWorld(t, s, nil)
	fail := true
	i := w.instance(behaviour{effect: func(_ context.Context, o order) (receipt, error) {
		if fail {
			return receipt{}, errBoom
		}
		return receipt{Order: o.ID, Ref: "rcpt-" + o.ID}, nil
	}})
	j := w.job()
	_, err := j.run(t, i)
	var rec *checkpoint.RecoveryError
	if !errors.Is(err, checkpoint.ErrEffectStarted) || !errors.Is(err, errBoom) || !errors.As(err, &rec) {
		t.Fatalf("error %v", err)
	}
	fail = false
	// The effect is never run again, whatever the retries.
	for range 2 {
		if _, err := j.run(t, i); !errors.Is(err, checkpoint.ErrEffectStarted) || err.Error() != checkpoint.ErrEffectStarted.Error() {
			t.Fatalf("retry: %v", err)
		}
	}
	j.wantCounts(t, 1, 0)
	st, err := checkpoint.StepState(i.ctx(), i.step, j.occ)
	wantStatus(t, st, err, checkpoint.RecoveryRequired, "")
	if st.StepStatus() != "failed" || st.HasResult {
		t.Errorf("state %+v", st)
	}
	// The operator established the effect's outcome: recovery records it, sends the after
	// checkpoint and advances once.
	g := j.gate(t, i)
	result := receipt{Order: j.order.ID, Ref: "rcpt-found-by-hand"}
	out, err := checkpoint.RecoverGuardedStep(i.ctx(), g, i.step, j.occ, result)
	wantStatus(t, out, err, checkpoint.Completed, "")
	if out.Result != result {
		t.Errorf("result %+v", out.Result)
	}
	j.wantCounts(t, 1, 1)
	calls := w.studio.callsOf(j.occ.OccurrenceID)
	if len(calls) != 2 || calls[1].Body.Context["receipt"] != "rcpt-found-by-hand" {
		t.Errorf("calls %+v", calls)
	}
	out, err = checkpoint.RecoverGuardedStep(i.ctx(), g, i.step, j.occ, result)
	wantStatus(t, out, err, checkpoint.Completed, "")
	j.wantCounts(t, 1, 1)
}

func testRecoveryContext(t *testing.T, s store.Store) {
	w := newWorld(t, s, nil)
	i := w.instance(behaviour{})
	j := w.job()
	g := j.gate(t, i)
	// Before the effect, there is nothing to recover.
	if _, err := checkpoint.RecoverGuardedStep(i.ctx(), g, i.step, j.occ, receipt{}); !errors.Is(err, checkpoint.ErrNotReady) {
		t.Errorf("recovery of nothing: %v", err)
	}
	w.studio.failPhase("after", 2) // the run and one retry lose the after checkpoint
	if _, err := j.run(t, i); !errors.Is(err, checkpoint.ErrRequestFailed) {
		t.Fatalf("run: %v", err)
	}
	if _, err := checkpoint.RecoverGuardedStep(i.ctx(), g, i.step, j.occ, receipt{Order: j.order.ID, Ref: "wrong"}); !errors.Is(err, checkpoint.ErrRecoveryContext) {
		t.Errorf("another result: %v", err)
	}
	other := &checkpoint.Gate{}
	if _, err := checkpoint.RecoverGuardedStep(i.ctx(), other, i.step, j.occ, receipt{}); err == nil {
		t.Errorf("a zero gate was accepted")
	}
	right := receipt{Order: j.order.ID, Ref: "rcpt-" + j.order.ID}
	if _, err := checkpoint.RecoverGuardedStep(i.ctx(), g, i.step, j.occ, right); !errors.Is(err, checkpoint.ErrRequestFailed) {
		t.Errorf("second loss: %v", err)
	}
	out, err := checkpoint.RecoverGuardedStep(i.ctx(), g, i.step, j.occ, right)
	wantStatus(t, out, err, checkpoint.Completed, "")
	j.wantCounts(t, 1, 1)
	var after []string
	for _, c := range w.studio.callsOf(j.occ.OccurrenceID) {
		if c.Body.Phase == "after" {
			after = append(after, c.Raw)
		}
	}
	if len(after) != 3 || after[0] != after[2] {
		t.Errorf("%d after checkpoints; recovery sends the same one", len(after))
	}
}

func testAmbiguousAdvance(t *testing.T, s store.Store) {
	w := newWorld(t, s, nil)
	i := w.instance(behaviour{advance: func(context.Context, order, receipt) error { return errBoom }})
	j := w.job()
	if _, err := j.run(t, i); !errors.Is(err, checkpoint.ErrAmbiguousAdvance) || !errors.Is(err, errBoom) {
		t.Fatalf("run: %v", err)
	}
	if _, err := j.run(t, i); !errors.Is(err, checkpoint.ErrAmbiguousAdvance) {
		t.Errorf("retry: %v", err)
	}
	if _, err := checkpoint.RecoverGuardedStep(i.ctx(), j.gate(t, i), i.step, j.occ, receipt{Order: j.order.ID, Ref: "rcpt-" + j.order.ID}); !errors.Is(err, checkpoint.ErrAmbiguousAdvance) {
		t.Errorf("recovery: %v", err)
	}
	j.wantCounts(t, 1, 1)
	st, err := checkpoint.StepState(i.ctx(), i.step, j.occ)
	wantStatus(t, st, err, checkpoint.RecoveryRequired, "")
}

// testConcurrent: instances that run one occurrence at once: exactly one proceeds; the others
// get "Rule checkpoint occurrence is active", and so does a recovery meanwhile. A second effect
// starting fails the test at once.
func testConcurrent(t *testing.T, s store.Store) {
	w := newWorld(t, s, nil)
	release := make(chan struct{})
	const n = 4
	started := make(chan struct{}, n)
	block := behaviour{effect: func(_ context.Context, o order) (receipt, error) {
		started <- struct{}{}
		<-release
		return receipt{Order: o.ID, Ref: "rcpt-" + o.ID}, nil
	}}
	var releaseOnce sync.Once
	t.Cleanup(func() { releaseOnce.Do(func() { close(release) }) }) // a failing test leaves no effect blocked
	insts := make([]*instance, n)
	for k := range insts {
		insts[k] = w.instance(block)
	}
	j := w.job()
	g := j.gate(t, insts[0])
	type result struct {
		k   int
		out checkpoint.Outcome[receipt]
		err error
	}
	results := make(chan result, n)
	for k := range insts {
		go func() {
			out, err := checkpoint.RunGuardedStep(insts[k].ctx(), g, insts[k].step, j.occ, j.before(), j.order)
			results <- result{k, out, err}
		}()
	}
	recv(t, started, "the effect to start")
	// Every other run ends, refused, while the effect runs; none starts the effect again.
	for range n - 1 {
		select {
		case r := <-results:
			if !errors.Is(r.err, checkpoint.ErrActive) {
				t.Fatalf("run %d while the effect runs: %+v, %v; want ErrActive", r.k, r.out, r.err)
			}
		case <-started:
			t.Fatal("a second run started the effect")
		case <-time.After(positiveWait):
			t.Fatal("timed out waiting for the other runs to be refused")
		}
	}
	if _, err := checkpoint.RecoverGuardedStep(insts[1].ctx(), g, insts[1].step, j.occ, receipt{}); !errors.Is(err, checkpoint.ErrActive) {
		t.Errorf("recovery during the run: %v", err)
	}
	if _, err := checkpoint.RunGuardedStep(insts[2].ctx(), g, insts[2].step, j.occ, j.before(), j.order); err == nil || err.Error() != "Rule checkpoint occurrence is active" {
		t.Errorf("run during the run: %v", err)
	}
	releaseOnce.Do(func() { close(release) })
	if r := recv(t, results, "the running occurrence to complete"); r.err != nil || r.out.Status != checkpoint.Completed {
		t.Errorf("the run that proceeded: %+v, %v", r.out, r.err)
	}
	j.wantCounts(t, 1, 1)
}

// testLease: the lease is renewed while the effect runs (another instance keeps getting
// "active", however long it takes), and an instance that stalls past its lease loses the
// occurrence to another: exactly one of them finishes it. The clock and the renewals are the
// test's (manualClock): a renewal that is not written, or that goes on after the lease was lost,
// fails at once rather than after a timeout.
func testLease(t *testing.T, s store.Store) {
	// A lease of a minute of the manual clock: a renewal's write is bounded by a quarter lease of
	// real time, or writeTimeout (10 s) when shorter; with a short lease, a store slowed by a
	// loaded machine would miss a renewal.
	const lease = time.Minute
	w := newWorld(t, s, nil)
	clock := newManualClock()
	release, started := make(chan struct{}), make(chan struct{}, 1)
	a := w.instance(behaviour{effect: func(_ context.Context, o order) (receipt, error) {
		started <- struct{}{}
		<-release
		return receipt{Order: o.ID, Ref: "rcpt-" + o.ID}, nil
	}}, clock.renewing(lease))
	b := w.instance(behaviour{}, clock.frozen(lease))
	j := w.job()
	done := make(chan error, 1)
	go func() { _, err := j.run(t, a); done <- err }()
	recv(t, started, "the effect to start")
	timer := clock.effectTimer(t)
	// One tick, one renewal: it is written when the stored lease ends one lease and the skew
	// margin after the manual clock's time. The next timer is armed once it is written.
	renew := func() {
		t.Helper()
		want := clock.Now().Add(lease + checkpoint.SkewMargin)
		timer <- time.Now()
		timer = clock.nextTimer(t, "the renewal to end")
		if got := leaseUntil(t, s, j.occ.OccurrenceID); !got.Equal(want) {
			t.Fatalf("after a renewal the lease ends at %v, want %v", got, want)
		}
	}
	for range 3 {
		clock.advance(lease / 2) // three rounds: well past one lease + skew margin
		renew()
		if _, err := j.run(t, b); !errors.Is(err, checkpoint.ErrActive) {
			t.Fatalf("while the effect runs: %v", err)
		}
	}
	// Without renewals the lease lapses: the occurrence then reads as needing recovery, and
	// still nothing runs the effect again.
	clock.advance(2 * lease)
	if _, err := j.run(t, b); !errors.Is(err, checkpoint.ErrEffectStarted) {
		t.Fatalf("after the lease lapsed: %v", err)
	}
	if st, err := checkpoint.StepState(b.ctx(), b.step, j.occ); err != nil || st.Status != checkpoint.RecoveryRequired {
		t.Fatalf("state after the lease lapsed: %+v, %v", st, err)
	}
	renew()
	if _, err := j.run(t, b); !errors.Is(err, checkpoint.ErrActive) {
		t.Fatalf("renewed again: %v", err)
	}
	if st, err := checkpoint.StepState(b.ctx(), b.step, j.occ); err != nil || st.Status != checkpoint.Running {
		t.Fatalf("state while renewed: %+v, %v", st, err)
	}
	close(release)
	if err := recv(t, done, "the run to end"); err != nil {
		t.Fatal(err)
	}
	j.wantCounts(t, 1, 1)
	if got := leaseUntil(t, s, j.occ.OccurrenceID); !got.IsZero() {
		t.Errorf("a completed occurrence still holds a lease until %v", got)
	}

	// An instance stalled in the before checkpoint past its lease: the other takes over.
	clock.drain()
	j2 := w.job()
	stalled, resume := make(chan struct{}), make(chan struct{})
	var first atomic.Bool
	var resumeOnce sync.Once
	unstall := func() { resumeOnce.Do(func() { close(resume) }) }
	t.Cleanup(unstall) // a failing test must not leave Studio's handler blocked
	w.studio.setHook(func(c studioCall, _ answer) {
		if c.Body.OccurrenceID == j2.occ.OccurrenceID && first.CompareAndSwap(false, true) {
			close(stalled)
			<-resume
		}
	})
	go func() { _, err := j2.run(t, a); done <- err }()
	recv(t, stalled, "the before checkpoint to stall")
	clock.advance(2 * lease)
	out, err := j2.run(t, b)
	unstall()
	wantStatus(t, out, err, checkpoint.Completed, "")
	if err := recv(t, done, "the stalled run to end"); !errors.Is(err, checkpoint.ErrLeaseLost) {
		t.Errorf("the stalled instance: %v", err)
	}
	j2.wantCounts(t, 1, 1)
	w.studio.setHook(nil)

	// An effect that outlives its lease: another instance recovers the occurrence; at its next
	// renewal the first instance finds it lost: its effect's context is cancelled (cause
	// ErrLeaseLost), it returns ErrLeaseLost, and its renewals stop.
	clock.drain()
	causes, started3 := make(chan error, 1), make(chan struct{}, 1)
	c := w.instance(behaviour{effect: func(ctx context.Context, o order) (receipt, error) {
		started3 <- struct{}{}
		<-ctx.Done()
		causes <- context.Cause(ctx)
		return receipt{}, ctx.Err()
	}}, clock.renewing(lease))
	j3 := w.job()
	go func() { _, err := j3.run(t, c); done <- err }()
	recv(t, started3, "the third effect to start")
	timer = clock.effectTimer(t)
	clock.advance(2 * lease)
	found := receipt{Order: j3.order.ID, Ref: "rcpt-recovered"}
	out, err = checkpoint.RecoverGuardedStep(b.ctx(), j3.gate(t, b), b.step, j3.occ, found)
	wantStatus(t, out, err, checkpoint.Completed, "")
	timer <- time.Now()
	select {
	case err := <-done:
		if !errors.Is(err, checkpoint.ErrLeaseLost) {
			t.Errorf("the instance that lost its lease returned %v, want ErrLeaseLost", err)
		}
	case <-clock.armed:
		t.Fatal("the renewal that found the lease lost went on renewing: the effect was not stopped")
	case <-time.After(positiveWait):
		t.Fatal("the instance that lost its lease did not return")
	}
	if cause := recv(t, causes, "the effect's context to end"); !errors.Is(cause, checkpoint.ErrLeaseLost) {
		t.Errorf("the effect's context ended with cause %v, want ErrLeaseLost", cause)
	}
	j3.wantCounts(t, 1, 1)
	if st, err := checkpoint.StepState(b.ctx(), b.step, j3.occ); err != nil || st.Status != checkpoint.Completed || st.Result != found {
		t.Errorf("state after the takeover: %+v, %v", st, err)
	}
}

// testLeaseBoundaries: a running occurrence is held until exactly DefaultLease + SkewMargin after
// its holder's last renewal, and free from that instant (service.go). One nanosecond before,
// another instance reads it as running and is refused (ErrActive), a recovery too; at that
// instant it reads as needing recovery (ErrEffectStarted), and nothing runs the effect again. A
// renewal moves the end. The clock and the renewal are the test's (manualClock), the lease the
// service's default: no wait on real time, so a wrong lease check fails at once.
func testLeaseBoundaries(t *testing.T, s store.Store) {
	w := newWorld(t, s, nil)
	clock := newManualClock()
	release, started := make(chan struct{}), make(chan struct{}, 1)
	var releaseOnce sync.Once
	t.Cleanup(func() { releaseOnce.Do(func() { close(release) }) }) // a failing test leaves no effect blocked
	a := w.instance(behaviour{effect: func(_ context.Context, o order) (receipt, error) {
		started <- struct{}{}
		<-release
		return receipt{Order: o.ID, Ref: "rcpt-" + o.ID}, nil
	}}, clock.renewing(0)) // 0: the service's DefaultLease
	b := w.instance(behaviour{}, clock.frozen(0))
	j := w.job()
	held := checkpoint.DefaultLease + checkpoint.SkewMargin
	done := make(chan error, 1)
	go func() { _, err := j.run(t, a); done <- err }()
	recv(t, started, "the effect to start")
	timer := clock.effectTimer(t)
	claimed := clock.Now() // the clock has not moved since the run took the occurrence
	if got := leaseUntil(t, s, j.occ.OccurrenceID); !got.Equal(claimed.Add(held)) {
		t.Fatalf("the lease ends at %v, want DefaultLease + SkewMargin after the claim (%v)", got, claimed.Add(held))
	}
	// probe reads the occurrence from instance b at the clock's time: held by a (live) or not.
	probe := func(what string, live bool) {
		t.Helper()
		wantState, wantRun := checkpoint.RecoveryRequired, checkpoint.ErrEffectStarted
		if live {
			wantState, wantRun = checkpoint.Running, checkpoint.ErrActive
		}
		if st, err := checkpoint.StepState(b.ctx(), b.step, j.occ); err != nil || st.Status != wantState {
			t.Fatalf("%s: the occurrence reads %+v, %v; want %s", what, st, err, wantState)
		}
		if _, err := j.run(t, b); !errors.Is(err, wantRun) || err.Error() != wantRun.Error() {
			t.Fatalf("%s: another run got %v, want %q", what, err, wantRun)
		}
		if live {
			if _, err := checkpoint.RecoverGuardedStep(b.ctx(), j.gate(t, b), b.step, j.occ, receipt{}); !errors.Is(err, checkpoint.ErrActive) {
				t.Fatalf("%s: a recovery got %v, want ErrActive", what, err)
			}
		}
	}
	clock.set(claimed.Add(held - time.Nanosecond))
	probe("a nanosecond before the claim's lease ends", true)
	// The renewal, at that instant: the next timer is armed once it is written.
	renewed := clock.Now()
	timer <- time.Now()
	clock.nextTimer(t, "the renewal to end")
	if got := leaseUntil(t, s, j.occ.OccurrenceID); !got.Equal(renewed.Add(held)) {
		t.Fatalf("after a renewal the lease ends at %v, want DefaultLease + SkewMargin after it (%v)", got, renewed.Add(held))
	}
	clock.set(claimed.Add(held))
	probe("when the claim's lease would have ended, renewed since", true)
	clock.set(renewed.Add(held - time.Nanosecond))
	probe("a nanosecond before the renewed lease ends", true)
	clock.set(renewed.Add(held))
	probe("when the renewed lease ends", false)
	clock.set(renewed.Add(held + time.Hour))
	probe("long after", false)
	j.wantCounts(t, 1, 0)
	// Nobody took the occurrence over: its holder still finishes it.
	releaseOnce.Do(func() { close(release) })
	if err := recv(t, done, "the run to end"); err != nil {
		t.Fatal(err)
	}
	j.wantCounts(t, 1, 1)
}

// leaseUntil returns the end of the lease held on occurrence occ in s (zero when none is).
func leaseUntil(t testing.TB, s store.Store, occ string) time.Time {
	t.Helper()
	for _, it := range records(t, s, "rulecheckpoint/") {
		var rec struct {
			OccurrenceID string `json:"occurrence_id"`
			Lease        *struct {
				Until time.Time `json:"until"`
			} `json:"lease"`
		}
		if json.Unmarshal(it.Value, &rec) == nil && rec.OccurrenceID == occ && rec.Lease != nil {
			return rec.Lease.Until
		}
	}
	return time.Time{}
}

// testSealed: the stored token opens only with the same Studio key.
func testSealed(t *testing.T, s store.Store) {
	w := newWorld(t, s, nil)
	i := w.instance(behaviour{})
	j := w.job()
	j.gate(t, i)
	if g, err := checkpoint.JobGate(i.ctx(), j.occ.JobID); err != nil || g.SnapshotHash() != snapshotHash || g.JobID() != j.occ.JobID {
		t.Fatalf("JobGate: %v, %v", g, err)
	}
	rotated := w.instance(behaviour{}, func(c *checkpoint.Config) { c.Studio = rotatedKey{c.Studio} })
	_, err := checkpoint.JobGate(rotated.ctx(), j.occ.JobID)
	if !errors.Is(err, checkpoint.ErrTokenUnreadable) {
		t.Errorf("another key: %v", err)
	}
	if _, err := checkpoint.JobGate(i.ctx(), "job-never-started"); !errors.Is(err, checkpoint.ErrNotGoverned) || !errors.Is(err, store.ErrNotFound) {
		t.Errorf("ungoverned job: %v", err)
	}
	// Another agent of the workspace does not get this job's gate, nor can it bind its own.
	otherAgent := checkpoint.NewContext(context.Background(), i.svc, i.reg, "other-agent", i.ws)
	if g, err := checkpoint.JobGate(otherAgent, j.occ.JobID); !errors.Is(err, checkpoint.ErrOtherAgent) || g != nil {
		t.Errorf("another agent's JobGate: %v, %v; want ErrOtherAgent", g, err)
	}
	req := *j.req
	req.AgentSlug = "other-agent"
	if _, err := checkpoint.FromJobStart(otherAgent, &req); !errors.Is(err, checkpoint.ErrOtherAgent) {
		t.Errorf("another agent's job.start for the job: %v; want ErrOtherAgent", err)
	}
	// The same job id in another workspace is another job.
	if _, err := checkpoint.JobGate(checkpoint.NewContext(context.Background(), i.svc, i.reg, agentSlug, i.ws+"-other"), j.occ.JobID); !errors.Is(err, checkpoint.ErrNotGoverned) {
		t.Errorf("the job in another workspace: %v; want ErrNotGoverned", err)
	}
	// A sealed token is bound to its record: copied into another job's gate record, it does not
	// open there.
	j2 := w.job()
	j2.gate(t, i)
	first, second := gateRecordOf(t, s, j.occ.JobID), gateRecordOf(t, s, j2.occ.JobID)
	var rec1, rec2 map[string]any
	if json.Unmarshal(first.Value, &rec1) != nil || json.Unmarshal(second.Value, &rec2) != nil || rec1["sealed_token"] == nil {
		t.Fatalf("gate records %s, %s", first.Value, second.Value)
	}
	rec2["sealed_token"] = rec1["sealed_token"]
	copied, _ := json.Marshal(rec2)
	if _, err := s.Update(context.Background(), second.Key, second.Version, copied, store.Never); err != nil {
		t.Fatal(err)
	}
	_, err = checkpoint.JobGate(i.ctx(), j2.occ.JobID)
	if !errors.Is(err, checkpoint.ErrTokenUnreadable) {
		t.Errorf("a token copied from another job's record: %v; want ErrTokenUnreadable", err)
	}
	// A sealed token too short to hold a nonce and a tag is unreadable, not a crash.
	rec2["sealed_token"] = []byte("abcd")
	short, _ := json.Marshal(rec2)
	second = gateRecordOf(t, s, j2.occ.JobID)
	if _, err := s.Update(context.Background(), second.Key, second.Version, short, store.Never); err != nil {
		t.Fatal(err)
	}
	if _, err := checkpoint.JobGate(i.ctx(), j2.occ.JobID); !errors.Is(err, checkpoint.ErrTokenUnreadable) {
		t.Errorf("a truncated sealed token: %v; want ErrTokenUnreadable", err)
	}
	if g, gerr := checkpoint.JobGate(i.ctx(), j.occ.JobID); gerr != nil || g.JobID() != j.occ.JobID {
		t.Errorf("the original record: %v, %v", g, gerr)
	}
	w.noSecrets(t, err)
}

// gateRecordOf returns the gate record of job in s.
func gateRecordOf(t testing.TB, s store.Store, job string) store.Item {
	t.Helper()
	for _, it := range records(t, s, "rulecheckpoint/v1/gate/") {
		var rec struct {
			JobID string `json:"job_id"`
		}
		if json.Unmarshal(it.Value, &rec) == nil && rec.JobID == job {
			return it
		}
	}
	t.Fatalf("no gate record for job %s", job)
	return store.Item{}
}

type rotatedKey struct{ checkpoint.Studio }

func (rotatedKey) TokenSecret() []byte { return []byte("another-studio-key") }
