package leads_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/supervaize/svz/core/contract"
	"github.com/supervaize/svz/core/store"
	"github.com/supervaize/svz/core/store/memory"
	"github.com/supervaize/svz/core/svztest"
	"github.com/supervaize/svz/examples/leadgen/leads"
)

// The score is a fan-out (one model call per lead), the import waits for the CRM's cool-down (a
// durable timer, LEADGEN_IMPORT_WAIT) and runs under the CRM's rate.
func TestScoreFanOutAndCoolDown(t *testing.T) {
	a, err := leads.NewAgent(leads.Delays{Import: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	h := svztest.New(t, a)
	h.Invoke(t, contract.JobStartAction, setup, svztest.JobID("fan-1"))
	res := h.WaitJob(t, "fan-1", contract.StateAwaiting)
	score := stepOf(res, "fan-1-score")
	if score == nil || score.Status != contract.StateCompleted || string(score.Extra["items"]) != `{"done":3,"total":3}` {
		t.Fatalf("the score step = %s", res.JSON)
	}
	approve(t, h, "fan-1")
	// The job sleeps an hour before its import: nothing imported meanwhile.
	var sleep *contract.Step
	for deadline := time.Now().Add(svztest.WaitJobTimeout); sleep == nil || sleep.Status != contract.StatePending; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the job did not sleep before its import: %s", res.JSON)
		}
		res = h.Invoke(t, contract.JobSyncAction, nil, svztest.JobID("fan-1"))
		sleep = stepOf(res, "fan-1-cool-down")
	}
	if n := contactsOf(t, h, "fan-1"); n != 0 || res.JobState.Job.Extra["waiting"] == nil {
		t.Fatalf("%d contacts imported during the cool-down; job.sync = %s", n, res.JSON)
	}
	h.Advance(t, time.Hour)
	res = h.WaitJob(t, "fan-1", contract.StateCompleted)
	if n := contactsOf(t, h, "fan-1"); n != 3 || stepOf(res, "fan-1-cool-down").Status != contract.StateCompleted {
		t.Errorf("%d contacts after the cool-down; job.sync = %s", n, res.JSON)
	}
}

// failingImport fails every contact write after the first few: the import stops half done, and
// its retries fail the same way.
type failingImport struct {
	*memory.Store
	contacts atomic.Int32
}

func (s *failingImport) broken(key string) bool {
	return strings.Contains(key, "/"+leads.Contacts+"/") && s.contacts.Add(1) > 2
}

func (s *failingImport) Create(ctx context.Context, key string, value []byte, exp time.Time) (store.Record, error) {
	if s.broken(key) {
		return store.Record{}, errors.New("the CRM refuses the write")
	}
	return s.Store.Create(ctx, key, value, exp)
}

// A job whose import fails for good has its partial import undone (jobs.OnFailure).
func TestFailedImportIsUndone(t *testing.T) {
	s := &failingImport{Store: memory.New()}
	t.Cleanup(func() { _ = s.Close() })
	a, err := leads.NewAgent(leads.Delays{})
	if err != nil {
		t.Fatal(err)
	}
	h := svztest.New(t, a, svztest.WithStore(s))
	noReview := map[string]any{"industry": "saas", "region": "Western Europe", "leads": "5", "require_review": "false"}
	h.Invoke(t, contract.JobStartAction, noReview, svztest.JobID("bad-1"))
	for deadline := time.Now().Add(svztest.WaitJobTimeout); contactsOf(t, h, "bad-1") != 2; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the import did not start")
		}
	}
	// Its retries (after 5 s, then 10 s) fail too; then the job fails and its handler cleans up.
	for _, wait := range []time.Duration{5 * time.Second, 10 * time.Second} {
		waitFor(t, h, "bad-1", func(js *contract.JobState) bool { return js.Job.Extra["waiting"] != nil })
		h.Advance(t, wait)
	}
	res := h.WaitJob(t, "bad-1", contract.StateFailed)
	var e struct{ Message string }
	_ = json.Unmarshal(res.JobState.Job.Extra["error"], &e)
	if !strings.HasPrefix(e.Message, `step "import" failed 3 times; last error: `) {
		t.Errorf("the job's error = %q", e.Message)
	}
	for deadline := time.Now().Add(svztest.WaitJobTimeout); contactsOf(t, h, "bad-1") != 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d contacts of the failed job left", contactsOf(t, h, "bad-1"))
		}
	}
}

// waitFor polls job.sync until ok says so.
func waitFor(t *testing.T, h *svztest.Harness, job string, ok func(*contract.JobState) bool) {
	t.Helper()
	for deadline := time.Now().Add(svztest.WaitJobTimeout); ; time.Sleep(10 * time.Millisecond) {
		res := h.Invoke(t, contract.JobSyncAction, nil, svztest.JobID(job))
		if res.JobState != nil && ok(res.JobState) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("job.sync of %s = %s", job, res.JSON)
		}
	}
}

func TestDelaySettings(t *testing.T) {
	for _, name := range []string{leads.FindDelay, leads.ScoreDelay, leads.ImportWait} {
		for _, value := range []string{"soon", "-1s", "25h"} {
			env := map[string]string{name: value, "SUPERVAIZER_STORE": "memory"}
			_, err := leads.Build(context.Background(), func(k string) string { return env[k] }, slog.New(slog.DiscardHandler))
			if want := name + `="` + value + `": must be a duration such as 30s, 5m or 1h, from 0s to 24h0m0s`; err == nil || err.Error() != want {
				t.Errorf("%s=%s: %v\nwant %s", name, value, err, want)
			}
		}
	}
}
