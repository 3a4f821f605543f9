package idempotency

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/supervaize/svz/core/contract"
	"github.com/supervaize/svz/core/store"
	"github.com/supervaize/svz/core/store/memory"
)

// uaStore counts UpdateAppend calls and can fail them.
type uaStore struct {
	*memory.Store
	calls int
	fail  error // returned after doing the write when applied is true, instead of it otherwise
	apply bool
	// late: the failed UpdateAppend lands later, just before the next Update (a statement the
	// server commits after its client gave up on the answer).
	late    bool
	pending func()
}

func (s *uaStore) Update(ctx context.Context, key string, version uint64, value []byte, exp time.Time) (store.Record, error) {
	if s.pending != nil {
		s.pending()
		s.pending = nil
	}
	return s.Store.Update(ctx, key, version, value, exp)
}

func (s *uaStore) UpdateAppend(ctx context.Context, key string, version uint64, value []byte, exp time.Time,
	name string, data []byte, keep store.Retention) (store.Record, error) {
	s.calls++
	if s.late {
		s.pending = func() { _, _ = s.Store.UpdateAppend(ctx, key, version, value, exp, name, data, keep) }
		return store.Record{}, s.fail
	}
	if s.fail != nil && !s.apply {
		return store.Record{}, s.fail
	}
	r, err := s.Store.UpdateAppend(ctx, key, version, value, exp, name, data, keep)
	if err == nil && s.fail != nil {
		return store.Record{}, s.fail // applied, answer lost
	}
	return r, err
}

// TestDoAppending: a run's result and its event are written in one UpdateAppend and the caller
// is told not to append; a replay appends nothing. When the store cannot, or the write failed
// before writing, the record is written apart and the caller appends; a write whose outcome is
// unknown counts as appended exactly when the record holds the result.
func TestDoAppending(t *testing.T) {
	ctx := context.Background()
	run := func(context.Context) (*contract.ActionResult, error) {
		return &contract.ActionResult{Status: contract.StatusOK, Effects: []contract.Effect{{Type: "job.started", Message: "hello"}}}, nil
	}
	event := func(l store.Log) Event {
		return Event{Log: l, Name: "effects", Data: func(res *contract.ActionResult) ([]byte, error) {
			return []byte(fmt.Sprintf("%d effects", len(res.Effects))), nil
		}}
	}
	entries := func(t *testing.T, l store.Log) int {
		t.Helper()
		r, err := l.ReadLog(ctx, "effects", 0, 10)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range r.Entries {
			if string(e.Data) != "1 effects" {
				t.Errorf("entry %q", e.Data)
			}
		}
		return len(r.Entries)
	}
	for _, tc := range []struct {
		name         string
		fail         error
		apply        bool
		late         bool
		otherLog     bool
		wantAppended bool
		wantEntries  int
	}{
		{name: "one write", wantAppended: true, wantEntries: 1},
		{name: "another log", otherLog: true},
		{name: "refused before writing", fail: fmt.Errorf("wrapped: %w", store.ErrInvalid)},
		{name: "unknown outcome, not written", fail: errors.New("connection reset")},
		{name: "unknown outcome, written", fail: errors.New("connection reset"), apply: true, wantAppended: true, wantEntries: 1},
		{name: "unknown outcome, written after the read", fail: errors.New("timeout"), late: true, wantAppended: true, wantEntries: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &uaStore{Store: memory.New(), fail: tc.fail, apply: tc.apply, late: tc.late}
			g := New(s)
			var l store.Log = s
			if tc.otherLog {
				l = memory.New()
			}
			req := internalRequest(`{"n":1}`)
			res, appended, err := g.DoAppending(ctx, req, run, event(l))
			if err != nil || res.Status != contract.StatusOK {
				t.Fatalf("DoAppending: %+v, %v", res, err)
			}
			if appended != tc.wantAppended || entries(t, s) != tc.wantEntries {
				t.Errorf("appended %v with %d entries in the store's log, want %v and %d", appended, entries(t, s), tc.wantAppended, tc.wantEntries)
			}
			if rs := res.ReplaySafety; rs == nil || rs.StrictlyIdempotentResponse == nil || !*rs.StrictlyIdempotentResponse {
				t.Errorf("the result is not marked replayable: %+v", rs)
			}
			// The result is recorded either way: a replay answers it and appends nothing.
			again, appended, err := g.DoAppending(ctx, req, func(context.Context) (*contract.ActionResult, error) {
				t.Fatal("the handler ran again")
				return nil, nil
			}, event(l))
			if err != nil || appended || again.Status != contract.StatusOK {
				t.Fatalf("replay: %+v, appended %v, %v", again, appended, err)
			}
			if n := entries(t, s); n != tc.wantEntries {
				t.Errorf("%d entries after a replay, want %d", n, tc.wantEntries)
			}
		})
	}
}
