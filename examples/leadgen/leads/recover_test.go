package leads_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/supervaize/svz/core/contract"
	"github.com/supervaize/svz/core/store"
	"github.com/supervaize/svz/core/store/memory"
	"github.com/supervaize/svz/core/svztest"
	"github.com/supervaize/svz/examples/leadgen/leads"
	"github.com/supervaize/svz/internal/testenv"
)

// crashingStore interrupts the import inside its effect: the write of its second contact fails,
// so the import stops half done (one contact of three written) and the occurrence stays recorded
// as started with its outcome unknown, as a crash there leaves it (core/checkpoint never calls an
// effect that started again, whether it failed or its process died).
type crashingStore struct {
	*memory.Store
	contacts atomic.Int32
}

var errCrashed = errors.New("the instance crashed")

func (s *crashingStore) dead(key string) bool {
	return strings.Contains(key, leads.Contacts) && s.contacts.Add(1) == 2
}

func (s *crashingStore) Create(ctx context.Context, key string, value []byte, exp time.Time) (store.Record, error) {
	if s.dead(key) {
		return store.Record{}, errCrashed
	}
	return s.Store.Create(ctx, key, value, exp)
}

func (s *crashingStore) Update(ctx context.Context, key string, version uint64, value []byte, exp time.Time) (store.Record, error) {
	if s.dead(key) {
		return store.Record{}, errCrashed
	}
	return s.Store.Update(ctx, key, version, value, exp)
}

// TestGovernedImportRecovers: Studio's allow reaches an instance that is interrupted inside the
// import (the guarded effect started, its outcome never recorded); the woken job runs again to the
// import, and leadgen's recovery (recover_guarded_step: the upserts redone, their count recorded
// as the effect's result) sends the after checkpoint and completes the job with every contact,
// where the job used to fail with "Started rule-gated effect requires an explicit recovery
// handler". A retried resume then changes nothing.
func TestGovernedImportRecovers(t *testing.T) {
	ds := standIn(t, map[string]string{"before": "pause"})
	checkpoints := checkpointsOf(t, ds)
	s := memory.New()
	t.Cleanup(func() { _ = s.Close() })
	instance := func(st store.Store) *svztest.Harness {
		a, err := leads.NewAgent(leads.Delays{})
		if err != nil {
			t.Fatal(err)
		}
		return svztest.New(t, a, svztest.WithStore(st), svztest.WithRuleCheckpoints(checkpoints))
	}
	h1, dying := instance(s), instance(&crashingStore{Store: s})
	token := testenv.UniqueName("rule-snapshot-token-")

	h1.Invoke(t, contract.JobStartAction, governedInput("Nordics", token), svztest.JobID("rec-1"))
	approve(t, h1, "rec-1")
	h1.WaitJob(t, "rec-1", contract.StateAwaiting)
	rec := lastCheckpoint(t, ds)
	resume := func(h *svztest.Harness) svztest.Response {
		return h.Call(t, "supervaizer/action.invoke", h.Request(t, contract.RuleCheckpointResumeAction,
			resumeInput(rec, "before", "allow", "rec-1-import-1"), svztest.JobID("rec-1"), svztest.CaseID("rec-1-report")))
	}
	// The decision is recorded: the resume answers it, and what the step does next is logged.
	if resp := resume(dying); resp.Error != nil {
		t.Fatalf("the resume on the instance that crashed = %s", resp.Body)
	}
	if n := contactsOf(t, h1, "rec-1"); n != 1 {
		t.Fatalf("%d contacts written before the crash, want 1", n)
	}
	res := h1.WaitJob(t, "rec-1", contract.StateCompleted)
	if st := stepOf(res, "rec-1-import"); st == nil || st.Status != contract.StateCompleted {
		t.Fatalf("job.sync = %s", res.JSON)
	}
	if n := contactsOf(t, h1, "rec-1"); n != 3 {
		t.Errorf("%d contacts after the recovery, want 3", n)
	}
	after := lastCheckpoint(t, ds)
	if after.Decision != "allow" || !strings.Contains(string(after.Request), `"phase":"after"`) || !strings.Contains(string(after.Request), `"imported":3`) {
		t.Errorf("the after checkpoint the recovery sent: %+v %s", after, after.Request)
	}
	// Studio retries the resume, here on the other instance: the job stays completed.
	if resp := resume(h1); resp.Error != nil {
		t.Fatalf("the retried resume = %s", resp.Body)
	}
	if res := h1.Invoke(t, contract.JobSyncAction, nil, svztest.JobID("rec-1")); res.JobState.Job.Status != contract.StateCompleted || contactsOf(t, h1, "rec-1") != 3 {
		t.Errorf("after the retried resume = %s", res.JSON)
	}
}
