package idempotency

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/supervaize/svz/core/contract"
	"github.com/supervaize/svz/core/store"
	"github.com/supervaize/svz/core/store/memory"
	"github.com/supervaize/svz/core/store/storetest"
)

// watched signals every Update it passes on.
type watched struct {
	store.Store
	updates chan error
}

func (w *watched) Update(ctx context.Context, key string, version uint64, value []byte, exp time.Time) (store.Record, error) {
	r, err := w.Store.Update(ctx, key, version, value, exp)
	w.updates <- err
	return r, err
}

func internalRequest(input string) *contract.ActionRequest {
	key, job := "k-1", "job-1"
	return &contract.ActionRequest{
		RequestID: "r-1", Workspace: contract.WorkspaceRef{ID: "w"}, MissionID: "m", AgentSlug: "s",
		Surface: "job.start", Action: "job.start", Input: json.RawMessage(input), JobID: &job, IdempotencyKey: &key,
		WorkspaceAuthorization: &contract.VerifiedWorkspaceContext{WorkspaceID: "w"},
	}
}

// TestRenewalKeepsALiveRunsKey runs a handler far past its lease on a manual clock: every
// renewal (triggered here instead of by a timer) moves the claim's expiry, so retries keep
// getting idempotency_in_progress with the time left, and never a second run. When the claim is
// lost anyway (no renewal before it lapsed and another run took the key), the next renewal
// cancels the first run's context.
func TestRenewalKeepsALiveRunsKey(t *testing.T) {
	clock := storetest.NewClock()
	mem := memory.New(memory.WithClock(clock.Now))
	w := &watched{Store: mem, updates: make(chan error, 16)}
	var logs bytes.Buffer
	tick := make(chan time.Time)
	g := New(w, WithClock(clock.Now), WithLogger(slog.New(slog.NewJSONHandler(&logs, nil))), WithMaxRun(time.Hour))
	g.after = func(d time.Duration) <-chan time.Time {
		if d != DefaultLease/4 {
			t.Errorf("renewal period = %v, want a quarter lease", d)
		}
		return tick
	}

	started, canceled := make(chan struct{}), make(chan error, 1)
	runs := 0
	first := make(chan error, 1)
	go func() {
		_, err := g.Do(context.Background(), internalRequest(`{}`), func(ctx context.Context) (*contract.ActionResult, error) {
			runs++
			close(started)
			<-ctx.Done()
			canceled <- ctx.Err()
			return &contract.ActionResult{Status: contract.StatusOK}, nil
		})
		first <- err
	}()
	<-started
	other := func(ctx context.Context) (*contract.ActionResult, error) {
		return &contract.ActionResult{Status: contract.StatusOK}, nil
	}
	inProgress := func(wantRetry string) {
		t.Helper()
		res, err := g.Do(context.Background(), internalRequest(`{}`), other)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(res)
		if !strings.Contains(string(b), `"code":"idempotency_in_progress"`) || !strings.Contains(string(b), `"retry_after_seconds":`+wantRetry+`}`) {
			t.Fatalf("retry during the run = %s; want in progress, retry after %s s", b, wantRetry)
		}
	}
	inProgress("22")
	for range 8 { // 8 × 15 s: six times the lease
		clock.Advance(15 * time.Second)
		inProgress("7")
		tick <- clock.Now()
		if err := <-w.updates; err != nil {
			t.Fatalf("renewal: %v", err)
		}
		inProgress("22")
	}

	// The holder stalls past its lease: another run takes the key, and the stalled holder's next
	// renewal finds it gone and stops its run.
	clock.Advance(DefaultLease + SkewMargin)
	res, err := g.Do(context.Background(), internalRequest(`{}`), other)
	if err != nil || res.Status != contract.StatusOK {
		t.Fatalf("after the lease lapsed: %+v, %v; want a run", res, err)
	}
	if err := <-w.updates; err != nil { // the second run records its result
		t.Fatal(err)
	}
	tick <- clock.Now()
	if err := <-w.updates; !errors.Is(err, store.ErrConflict) {
		t.Fatalf("renewal of a lost claim: %v, want a conflict", err)
	}
	if err := <-canceled; !errors.Is(err, context.Canceled) {
		t.Errorf("the first run's context ended with %v, want canceled", err)
	}
	<-w.updates // its attempt to record the result, refused
	if err := <-first; err != nil {
		t.Errorf("first Do: %v", err)
	}
	if runs != 1 || !strings.Contains(logs.String(), "running claim was lost") {
		t.Errorf("runs = %d, logs = %s", runs, logs.String())
	}
}
