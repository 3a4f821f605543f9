package state_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/supervaize/svz/core/state"
	"github.com/supervaize/svz/core/store"
)

// opener returns a fresh store for one subtest.
type opener func(t testing.TB) store.Store

// conformance runs every state subtest on the stores open returns: the same checks for every
// backend.
func conformance(t *testing.T, open opener) {
	for _, st := range []struct {
		name string
		fn   func(t *testing.T, s store.Store, agent string)
	}{
		{"CreateGetDelete", testCreateGetDelete},
		{"UpdateAndUpsert", testUpdateAndUpsert},
		{"GetOrCreate", testGetOrCreate},
		{"Expiry", testExpiry},
		{"ConcurrentUpdatesLoseNothing", testConcurrentUpdates},
		{"WorkspaceIsolation", testWorkspaceIsolation},
		{"ListAcrossPages", testListAcrossPages},
		{"TooLarge", testTooLarge},
	} {
		t.Run(st.name, func(t *testing.T) {
			s := open(t)
			t.Cleanup(func() { _ = s.Close() })
			// A fresh agent slug per subtest keeps subtests apart on a shared table.
			st.fn(t, s, "agent-"+strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-")))
		})
	}
}

type job struct {
	Status string `json:"status"`
	Count  int    `json:"count"`
	Notes  string `json:"notes,omitempty"`
}

func ws(s store.Store, agent, workspace string) context.Context {
	return state.NewContext(context.Background(), s, agent, workspace)
}

func testCreateGetDelete(t *testing.T, s store.Store, agent string) {
	ctx := ws(s, agent, "w1")
	jobs := state.Of[job](ctx, "jobs")
	if err := jobs.Create(ctx, "job-1", job{Status: "active"}); err != nil {
		t.Fatal(err)
	}
	if err := jobs.Create(ctx, "job-1", job{Status: "other"}); !errors.Is(err, state.ErrExists) {
		t.Errorf("second Create: %v, want ErrExists", err)
	}
	rec, err := jobs.GetRecord(ctx, "job-1")
	if err != nil || rec.Value.Status != "active" || rec.ID != "job-1" || rec.Version == 0 || !rec.ExpiresAt.IsZero() {
		t.Errorf("GetRecord = %+v, %v; want the record, never expiring", rec, err)
	}
	if _, err := jobs.Get(ctx, "job-2"); !errors.Is(err, state.ErrNotFound) {
		t.Errorf("Get of a missing id: %v, want ErrNotFound", err)
	}
	if err := jobs.Delete(ctx, "job-1"); err != nil {
		t.Fatal(err)
	}
	if err := jobs.Delete(ctx, "job-1"); err != nil {
		t.Errorf("Delete of a missing record: %v", err)
	}
	if _, err := jobs.Get(ctx, "job-1"); !errors.Is(err, state.ErrNotFound) {
		t.Errorf("Get after Delete: %v", err)
	}
	for _, bad := range []string{"", strings.Repeat("x", store.MaxKeyLen)} {
		if err := jobs.Create(ctx, bad, job{}); !errors.Is(err, state.ErrInvalid) {
			t.Errorf("Create(%.10q…): %v, want ErrInvalid", bad, err)
		}
	}
}

func testUpdateAndUpsert(t *testing.T, s store.Store, agent string) {
	ctx := ws(s, agent, "w1")
	jobs := state.Of[job](ctx, "jobs")
	if _, err := jobs.Update(ctx, "missing", func(j *job) error { return nil }); !errors.Is(err, state.ErrNotFound) {
		t.Errorf("Update of a missing record: %v, want ErrNotFound", err)
	}
	got, err := jobs.Upsert(ctx, "job-1", func(j *job) error { j.Count++; return nil })
	if err != nil || got.Count != 1 {
		t.Fatalf("Upsert of a missing record = %+v, %v", got, err)
	}
	got, err = jobs.Upsert(ctx, "job-1", func(j *job) error { j.Count++; return nil })
	if err != nil || got.Count != 2 {
		t.Fatalf("Upsert of an existing record = %+v, %v", got, err)
	}
	before, _ := jobs.GetRecord(ctx, "job-1")
	if _, err := jobs.Update(ctx, "job-1", func(j *job) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if after, _ := jobs.GetRecord(ctx, "job-1"); after.Version != before.Version {
		t.Error("an update that changed nothing wrote the record")
	}
	stop := errors.New("refused")
	if _, err := jobs.Update(ctx, "job-1", func(j *job) error { j.Count = 99; return stop }); !errors.Is(err, stop) {
		t.Errorf("Update whose fn fails: %v, want its error", err)
	}
	if j, _ := jobs.Get(ctx, "job-1"); j.Count != 2 {
		t.Errorf("a failed update wrote: %+v", j)
	}
}

func testExpiry(t *testing.T, s store.Store, agent string) {
	ctx := ws(s, agent, "w1")
	jobs := state.Of[job](ctx, "jobs")
	at := time.Now().Add(time.Hour).Truncate(time.Millisecond)
	if err := jobs.Create(ctx, "temp", job{}, state.ExpiresAt(at)); err != nil {
		t.Fatal(err)
	}
	if r, _ := jobs.GetRecord(ctx, "temp"); !r.ExpiresAt.Equal(at) {
		t.Errorf("ExpiresAt = %v, want %v", r.ExpiresAt, at)
	}
	// An update keeps the expiry unless it sets one; ExpiresAt(store.Never) removes it.
	if _, err := jobs.Update(ctx, "temp", func(j *job) error { j.Count = 1; return nil }); err != nil {
		t.Fatal(err)
	}
	if r, _ := jobs.GetRecord(ctx, "temp"); !r.ExpiresAt.Equal(at) {
		t.Errorf("after an update ExpiresAt = %v, want it kept (%v)", r.ExpiresAt, at)
	}
	if _, err := jobs.Update(ctx, "temp", func(j *job) error { return nil }, state.ExpiresAt(store.Never)); err != nil {
		t.Fatal(err)
	}
	if r, _ := jobs.GetRecord(ctx, "temp"); !r.ExpiresAt.IsZero() {
		t.Errorf("after ExpiresAt(Never) ExpiresAt = %v, want never", r.ExpiresAt)
	}
}

// testConcurrentUpdates increments one counter from many goroutines (as many instances would):
// compare-and-swap with retry must lose no increment.
func testConcurrentUpdates(t *testing.T, s store.Store, agent string) {
	const goroutines, each = 16, 5
	ctx := ws(s, agent, "w1")
	counter := state.Of[job](ctx, "counters")
	if err := counter.Create(ctx, "c", job{}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, goroutines*each)
	for g := range goroutines {
		wg.Go(func() {
			for i := range each {
				_, err := counter.Update(ctx, "c", func(j *job) error {
					j.Count++
					j.Notes = fmt.Sprintf("last: %d/%d", g, i)
					return nil
				})
				if err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("Update: %v", err)
	}
	if j, err := counter.Get(ctx, "c"); err != nil || j.Count != goroutines*each {
		t.Errorf("counter = %+v, %v; want %d: an update was lost", j, err, goroutines*each)
	}
}

// testWorkspaceIsolation: records of one verified workspace are invisible from another, from
// another agent, and from the agent-wide collections, whatever the ids, collection names and
// workspace ids (which could collide in a key without escaping).
func testWorkspaceIsolation(t *testing.T, s store.Store, agent string) {
	a := ws(s, agent, "x")
	if err := state.Of[job](a, "y/z").Create(a, "1", job{Status: "secret of x"}); err != nil {
		t.Fatal(err)
	}
	if err := state.Of[job](a, "jobs").Create(a, "job-1", job{Status: "secret of x"}); err != nil {
		t.Fatal(err)
	}
	for _, probe := range []struct {
		name        string
		ctx         context.Context
		coll, id    string
		agentWide   bool
		listsPrefix string
	}{
		{"another workspace, same ids", ws(s, agent, "x2"), "jobs", "job-1", false, ""},
		{"a workspace id that extends the key", ws(s, agent, "x/y"), "z", "1", false, ""},
		{"a collection that extends the key", ws(s, agent, "x"), "y", "z/1", false, ""},
		{"an empty-looking workspace", ws(s, agent, "%78"), "jobs", "job-1", false, ""},
		{"another agent, same workspace", ws(s, agent+"-other", "x"), "jobs", "job-1", false, ""},
		{"an agent slug that extends the key", ws(s, agent+"/w/x", ""), "jobs", "job-1", true, ""},
		{"the agent-wide collection", ws(s, agent, "x"), "jobs", "job-1", true, ""},
		{"an id that climbs", ws(s, agent, "x3"), "jobs", "../../x/jobs/job-1", false, ""},
	} {
		c := state.Of[job](probe.ctx, probe.coll)
		if probe.agentWide {
			c = state.AgentOf[job](probe.ctx, probe.coll)
		}
		if j, err := c.Get(probe.ctx, probe.id); !errors.Is(err, state.ErrNotFound) {
			t.Errorf("%s: Get = %+v, %v; want ErrNotFound", probe.name, j, err)
		}
		// Each probe writes its own value, so a listing that reaches another probe's records (or
		// x's) shows a value that is not the probe's.
		mine := "mine: " + probe.name
		if err := c.Create(probe.ctx, probe.id, job{Status: mine}); err != nil {
			t.Errorf("%s: Create = %v (it must be a separate record)", probe.name, err)
		}
		if j, err := c.Get(probe.ctx, probe.id); err != nil || j.Status != mine {
			t.Errorf("%s: Get after Create = %+v, %v", probe.name, j, err)
		}
		if _, ok := s.(store.Lister); ok {
			var ids []string
			for r, err := range c.All(probe.ctx, "") {
				if err != nil || r.Value.Status != mine {
					t.Errorf("%s: listing shows %+v, %v", probe.name, r, err)
				}
				ids = append(ids, r.ID)
			}
			if len(ids) != 1 || ids[0] != probe.id {
				t.Errorf("%s: listing shows ids %q, want only %q", probe.name, ids, probe.id)
			}
		}
	}
	// Listed from x, in the order probes wrote, every collection holds x's records only.
	if _, ok := s.(store.Lister); ok {
		for coll, want := range map[string]string{"jobs": "job-1=secret of x", "y": "z/1=mine: a collection that extends the key",
			"y/z": "1=secret of x", "z": "", "a": ""} {
			var got []string
			for r, err := range state.Of[job](a, coll).All(a, "") {
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, r.ID+"="+r.Value.Status)
			}
			if strings.Join(got, ",") != want {
				t.Errorf("x's collection %q lists %q, want %q", coll, got, want)
			}
		}
	}
	if j, _ := state.Of[job](a, "jobs").Get(a, "job-1"); j.Status != "secret of x" {
		t.Errorf("x's record changed: %+v", j)
	}
	if j, _ := state.Of[job](a, "y/z").Get(a, "1"); j.Status != "secret of x" {
		t.Errorf("x's record changed: %+v", j)
	}
	// A bootstrap call has no workspace: workspace collections refuse, agent-wide ones work.
	boot := ws(s, agent, "")
	if _, err := state.Of[job](boot, "jobs").Get(boot, "job-1"); !errors.Is(err, state.ErrNoScope) {
		t.Errorf("workspace collection without a workspace: %v, want ErrNoScope", err)
	}
	if _, err := state.Of[job](context.Background(), "jobs").Get(context.Background(), "job-1"); !errors.Is(err, state.ErrNoScope) {
		t.Errorf("without a scope: %v, want ErrNoScope", err)
	}
}

func testListAcrossPages(t *testing.T, s store.Store, agent string) {
	if _, ok := s.(store.Lister); !ok {
		t.Skipf("%T does not implement store.Lister yet", s)
	}
	ctx := ws(s, agent, "w1")
	cases := state.Of[job](ctx, "cases")
	var want []string
	for i := range 23 {
		id := fmt.Sprintf("job-1/case-%03d", i)
		want = append(want, id)
		if err := cases.Create(ctx, id, job{Count: i}); err != nil {
			t.Fatal(err)
		}
	}
	for _, other := range []string{"job-10/case-000", "job-0/case-000", "job-1"} {
		if err := cases.Create(ctx, other, job{}); err != nil {
			t.Fatal(err)
		}
	}
	// Another workspace and another collection with the same ids must not appear.
	o := ws(s, agent, "w2")
	_ = state.Of[job](o, "cases").Create(o, "job-1/case-005", job{})
	_ = state.Of[job](ctx, "jobs").Create(ctx, "job-1/case-005", job{})

	for _, limit := range []int{1, 4, 23, 1000} {
		var got []string
		opts := state.ListOptions{Prefix: "job-1/", Limit: limit}
		for pages := 0; ; pages++ {
			if pages > 100 {
				t.Fatal("List does not end")
			}
			p, err := cases.List(ctx, opts)
			if err != nil {
				t.Fatal(err)
			}
			if len(p.Records) > limit {
				t.Fatalf("a page of %d records with limit %d", len(p.Records), limit)
			}
			for _, r := range p.Records {
				got = append(got, r.ID)
				if r.Value.Count != len(got)-1 {
					t.Errorf("record %s = %+v", r.ID, r.Value)
				}
			}
			if p.Next == "" {
				break
			}
			opts.After = p.Next
		}
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("pages of %d: %v\nwant %v", limit, got, want)
		}
	}
	n := 0
	for r, err := range cases.All(ctx, "job-1/case-01") {
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(r.ID, "job-1/case-01") {
			t.Errorf("All yielded %s", r.ID)
		}
		n++
	}
	if n != 10 {
		t.Errorf("All(job-1/case-01) yielded %d records, want 10", n)
	}
}

func testTooLarge(t *testing.T, s store.Store, agent string) {
	ctx := ws(s, agent, "w1")
	jobs := state.Of[job](ctx, "jobs")
	big := job{Notes: strings.Repeat("n", s.MaxValueSize())}
	err := jobs.Create(ctx, "big", big)
	if !errors.Is(err, state.ErrTooLarge) || !strings.Contains(err.Error(), fmt.Sprintf("more than this store accepts (%d bytes)", s.MaxValueSize())) {
		t.Errorf("Create of a record over the limit: %v; want ErrTooLarge naming the limit", err)
	}
	if _, err := jobs.Get(ctx, "big"); !errors.Is(err, state.ErrNotFound) {
		t.Errorf("the refused record was written: %v", err)
	}
	if err := jobs.Create(ctx, "small", job{}); err != nil {
		t.Fatal(err)
	}
	if _, err := jobs.Update(ctx, "small", func(j *job) error { j.Notes = big.Notes; return nil }); !errors.Is(err, state.ErrTooLarge) {
		t.Errorf("Update over the limit: %v, want ErrTooLarge", err)
	}
	if j, _ := jobs.Get(ctx, "small"); j.Notes != "" {
		t.Error("the refused update was written")
	}
}

func testGetOrCreate(t *testing.T, s store.Store, agent string) {
	ctx := ws(s, agent, "w1")
	jobs := state.Of[job](ctx, "jobs")
	v, created, err := jobs.GetOrCreate(ctx, "job-1", job{Status: "active", Count: 1})
	if err != nil || !created || v != (job{Status: "active", Count: 1}) {
		t.Fatalf("first GetOrCreate = %+v, %v, %v; want the new record, created", v, created, err)
	}
	v, created, err = jobs.GetOrCreate(ctx, "job-1", job{Status: "other"})
	if err != nil || created || v != (job{Status: "active", Count: 1}) {
		t.Errorf("second GetOrCreate = %+v, %v, %v; want the existing record, not created", v, created, err)
	}
	if got, err := jobs.Get(ctx, "job-1"); err != nil || got.Status != "active" {
		t.Errorf("Get after GetOrCreate = %+v, %v; the existing record must stay", got, err)
	}
	if _, _, err := jobs.GetOrCreate(ctx, "", job{}); !errors.Is(err, state.ErrInvalid) {
		t.Errorf("GetOrCreate of an empty id: %v, want ErrInvalid", err)
	}

	// Racing callers: exactly one creates, and every one gets the winner's value.
	const n = 8
	var wg sync.WaitGroup
	values := make([]job, n)
	createdBy := make([]bool, n)
	for i := range n {
		wg.Go(func() {
			var err error
			values[i], createdBy[i], err = jobs.GetOrCreate(ctx, "job-race", job{Status: "active", Count: i})
			if err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	winners := 0
	for i := range n {
		if createdBy[i] {
			winners++
		}
		if values[i] != values[0] {
			t.Errorf("caller %d got %+v, caller 0 %+v: every caller must get the stored record", i, values[i], values[0])
		}
	}
	if winners != 1 {
		t.Errorf("%d callers created the record, want exactly 1", winners)
	}
}
