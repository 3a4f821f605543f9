package checkpoint_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/supervaize/svz/core/checkpoint"
	"github.com/supervaize/svz/core/store"
)

// Tests that each kill a mutant a mutation run left alive, on the memory store.

// A claim whose write landed but was answered as a conflict (a lost answer whose retry did not
// recognise its own write; the shipped backends do recognise it) makes the run read the
// occurrence again: the lease it finds is its own, so it goes on rather than calling itself
// active. Reading back its own write is the only way a runner sees its own lease.
func TestRetryGoesOnAfterReadingBackItsOwnClaim(t *testing.T) {
	s := newHookStore(t)
	w := newWorld(t, s, nil)
	// A clock that never moves: the lease read back is live, whatever the machine's load.
	clock := newManualClock()
	i := w.instance(behaviour{}, clock.frozen(0))
	j := w.job()
	w.studio.failPhase("before", 1)
	if _, err := j.run(t, i); !errors.Is(err, checkpoint.ErrRequestFailed) {
		t.Fatalf("first run: %v, want ErrRequestFailed", err)
	}
	var applied atomic.Bool
	s.setHook(func(ctx context.Context, op, key string, value []byte) error {
		var rec struct {
			Lease *json.RawMessage `json:"lease"`
		}
		if op != "update" || !strings.HasPrefix(key, stepKeys) || json.Unmarshal(value, &rec) != nil || rec.Lease == nil ||
			!applied.CompareAndSwap(false, true) {
			return nil
		}
		// The claim is written, and its answer says it lost.
		cur, err := s.Store.Get(ctx, key)
		if err != nil {
			return err
		}
		if _, err := s.Store.Update(ctx, key, cur.Version, value, store.Never); err != nil {
			return err
		}
		return store.ErrConflict
	})
	out, err := j.run(t, i)
	if !applied.Load() {
		t.Fatal("the retry never claimed the occurrence")
	}
	wantStatus(t, out, err, checkpoint.Completed, "")
	j.wantCounts(t, 1, 1)
	if until := leaseUntil(t, s, j.occ.OccurrenceID); !until.IsZero() {
		t.Errorf("the occurrence is still held, until %s", until)
	}
}

// noSnapshotHash answers every checkpoint without Studio's snapshot_hash (the HTTP client refuses
// such an answer itself: this reaches the package's own check).
type noSnapshotHash struct{ checkpoint.Studio }

func (s noSnapshotHash) RuleCheckpoint(ctx context.Context, token string, r checkpoint.Request) (checkpoint.Response, error) {
	resp, err := s.Studio.RuleCheckpoint(ctx, token, r)
	resp.SnapshotHash = ""
	return resp, err
}

// An allow that does not name the snapshot it decided under is not the job's snapshot's
// decision: the step fails with ErrResponseHash, the effect never called.
func TestRetryRefusesAnAnswerWithoutSnapshotHash(t *testing.T) {
	w := memoryWorld(t, nil)
	i := w.instance(behaviour{}, func(c *checkpoint.Config) { c.Studio = noSnapshotHash{c.Studio} })
	j := w.job()
	out, err := j.run(t, i)
	if !errors.Is(err, checkpoint.ErrResponseHash) || err.Error() != checkpoint.ErrResponseHash.Error() {
		t.Fatalf("run: %+v, %v; want ErrResponseHash", out, err)
	}
	j.wantCounts(t, 0, 0)
	if n := len(w.studio.callsOf(j.occ.OccurrenceID)); n != 1 {
		t.Errorf("%d checkpoint calls, want the before checkpoint only", n)
	}
	// The answer is not recorded: the before checkpoint waits to be sent again.
	st, err := checkpoint.StepState(i.ctx(), i.step, j.occ)
	wantStatus(t, st, err, checkpoint.Running, "")
}

// A job.start delivered again with the same token but other secret_refs stores the new refs: the
// job's later requests (JobGate, a resume on any instance) keep the new secret out of Studio's
// contexts, not the old one.
func TestFromJobStartAgainStoresNewSecretRefs(t *testing.T) {
	w := memoryWorld(t, map[string]string{"before": "pause"})
	i := w.instance(behaviour{})
	j := w.job()
	if _, err := checkpoint.FromJobStart(i.ctx(), j.req, checkpoint.WithSecretRefs("context.a")); err != nil {
		t.Fatal(err)
	}
	if _, err := checkpoint.FromJobStart(i.ctx(), j.req, checkpoint.WithSecretRefs("context.b")); err != nil {
		t.Fatal(err)
	}
	g, err := checkpoint.JobGate(i.ctx(), j.occ.JobID)
	if err != nil {
		t.Fatal(err)
	}
	if got := g.SecretRefs(); !slices.Equal(got, []string{"context.b"}) {
		t.Errorf("JobGate's secret_refs %q, want [context.b]", got)
	}
	before := map[string]any{"operation": "charge", "a": "no-longer-secret", "b": "new-secret"}
	out, err := checkpoint.RunGuardedStep(i.ctx(), g, i.step, j.occ, before, j.order)
	wantStatus(t, out, err, checkpoint.Awaiting, "before")
	calls := w.studio.callsOf(j.occ.OccurrenceID)
	if len(calls) != 1 {
		t.Fatalf("%d checkpoint calls, want 1", len(calls))
	}
	got, _ := json.Marshal(calls[0].Body.Context)
	if want := `{"a":"no-longer-secret","operation":"charge"}`; string(got) != want {
		t.Errorf("before context sent:\n got %s\nwant %s", got, want)
	}
	if refs := calls[0].Body.SecretRefs; !slices.Equal(refs, []string{"context.b"}) {
		t.Errorf("secret_refs sent %q, want [context.b]", refs)
	}
}

// sentContexts records the context of every checkpoint request as the package hands it to
// Studio, before the HTTP client re-encodes it.
type sentContexts struct {
	checkpoint.Studio
	mu   sync.Mutex
	sent []string
}

func (s *sentContexts) RuleCheckpoint(ctx context.Context, token string, r checkpoint.Request) (checkpoint.Response, error) {
	s.mu.Lock()
	s.sent = append(s.sent, string(r.Context))
	s.mu.Unlock()
	return s.Studio.RuleCheckpoint(ctx, token, r)
}

// With no context.* secret_refs, Studio still receives the canonical JSON of the context (the
// bytes whose hash is recorded), not encoding/json's: members sorted, '<' '&' '>' not escaped
// for HTML, non-ASCII as \u escapes.
func TestRecordSendsTheCanonicalContext(t *testing.T) {
	w := memoryWorld(t, map[string]string{"before": "pause"})
	var spy *sentContexts
	i := w.instance(behaviour{}, func(c *checkpoint.Config) {
		spy = &sentContexts{Studio: c.Studio}
		c.Studio = spy
	})
	j := w.job()
	// Only a case.* ref: nothing is removed from the context.
	g, err := checkpoint.FromJobStart(i.ctx(), j.req, checkpoint.WithSecretRefs("case.metadata.iban"))
	if err != nil {
		t.Fatal(err)
	}
	// Fields out of order, and characters encoding/json writes otherwise.
	before := struct {
		Z int    `json:"z"`
		A string `json:"a"`
	}{Z: 1, A: "<&>é"}
	out, err := checkpoint.RunGuardedStep(i.ctx(), g, i.step, j.occ, before, j.order)
	wantStatus(t, out, err, checkpoint.Awaiting, "before")
	const want = `{"a":"<&>\u00e9","z":1}`
	spy.mu.Lock()
	sent := slices.Clone(spy.sent)
	spy.mu.Unlock()
	if len(sent) != 1 || sent[0] != want {
		t.Fatalf("contexts sent %q, want [%q]", sent, want)
	}
	// The recorded context_hash is the hash of exactly those bytes.
	sum := sha256.Sum256([]byte(want))
	var hashes []string
	for _, it := range records(t, w.store, stepKeys) {
		var rec struct {
			OccurrenceID string `json:"occurrence_id"`
			Before       struct {
				ContextHash string `json:"context_hash"`
			} `json:"before"`
		}
		if json.Unmarshal(it.Value, &rec) == nil && rec.OccurrenceID == j.occ.OccurrenceID {
			hashes = append(hashes, rec.Before.ContextHash)
		}
	}
	if wantHash := hex.EncodeToString(sum[:]); !slices.Equal(hashes, []string{wantHash}) {
		t.Errorf("recorded context_hash %q, want [%s]", hashes, wantHash)
	}
}
