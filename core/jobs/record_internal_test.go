package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/supervaize/svz/core/contract"
	"github.com/supervaize/svz/core/store"
	"github.com/supervaize/svz/core/store/memory"
)

// TestRecordClone: a clone shares no map with its record (a write that is refused leaves the
// record as read), and keeps an absent map absent.
func TestRecordClone(t *testing.T) {
	bare := &record{Job: "j", Open: []*stepRecord{{Name: "a"}}}
	if c := bare.clone(); !reflect.DeepEqual(c, bare) {
		t.Fatalf("clone %+v of %+v", c, bare)
	}
	r := &record{Job: "j", Wakes: map[string]json.RawMessage{"a": []byte(`1`)}, Open: []*stepRecord{{Name: "a", ItemTries: map[int]int{0: 1}}}}
	c := r.clone()
	if !reflect.DeepEqual(c, r) {
		t.Fatalf("clone %+v of %+v", c, r)
	}
	c.Wakes["b"] = []byte(`2`)
	c.Open[0].ItemTries[1] = 2
	if len(r.Wakes) != 1 || len(r.Open[0].ItemTries) != 1 {
		t.Fatalf("the record changed with its clone: wakes %v, item tries %v", r.Wakes, r.Open[0].ItemTries)
	}
}

// TestCaseOf: the case of an id, nil for none.
func TestCaseOf(t *testing.T) {
	r := &record{Cases: []caseRecord{{ID: "a"}, {ID: "b"}}}
	if c := r.caseOf("b"); c != &r.Cases[1] {
		t.Fatalf("case b: %+v", c)
	}
	if c := r.caseOf("c"); c != nil {
		t.Fatalf("case c: %+v", c)
	}
}

// TestFailJobLeavesAnEndedJob: failing a job that ended already changes nothing, and writes
// nothing.
func TestFailJobLeavesAnEndedJob(t *testing.T) {
	s := memory.New()
	svc := NewService(Config{Store: s, Dispatcher: nopDispatcher{}, Works: func(string) (*Registry, time.Duration, bool) { return nil, 0, false }})
	ctx := context.Background()
	m := Message{Agent: "a", Workspace: "w", Job: "j", Work: "x"}
	b, err := svc.encode(&record{Format: recordFormat, Agent: "a", Workspace: "w", Job: "j", Work: "x", Status: taskCompleted})
	if err != nil {
		t.Fatal(err)
	}
	before, err := s.Create(ctx, m.Key(), b, store.Never)
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.failJob(ctx, m, CauseDelivery, "late"); err != nil {
		t.Fatal(err)
	}
	after, err := s.Get(ctx, m.Key())
	if err != nil {
		t.Fatal(err)
	}
	if after.Version != before.Version {
		t.Fatalf("an ended job's record was written again: version %d, was %d", after.Version, before.Version)
	}
}

// TestOwn: a delivery takes over a lease as its own only when asked to (the first scan of a
// pool of an instance name) and the holder is a delivery of that name.
func TestOwn(t *testing.T) {
	for _, tc := range []struct {
		instance, holder string
		takeOverOwn      bool
		want             bool
	}{
		{"i1", "i1#0a", true, true},
		{"i1", "i1#0a", false, false}, // a live delivery of this process
		{"i1", "i2#0a", true, false},
		{"i1", "i10#0a", true, false},
		{"", "#0a", true, false}, // no name: no lease is its own
		{"", "0a", true, false},
	} {
		s := &Service{instance: tc.instance}
		if got := s.own(tc.holder, Delivery{takeOverOwn: tc.takeOverOwn}); got != tc.want {
			t.Errorf("instance %q, holder %q, take over own %t: own %t", tc.instance, tc.holder, tc.takeOverOwn, got)
		}
	}
	if h := (&Service{instance: "i1"}).newHolder(); !strings.HasPrefix(h, "i1#") || len(h) != len("i1#")+16 {
		t.Errorf("holder %q of instance i1", h)
	}
	if h := (&Service{}).newHolder(); strings.Contains(h, "#") || len(h) != 16 {
		t.Errorf("holder %q of no instance", h)
	}
}

// TestStoppedBeforeItsDelivery: a job whose stop was asked while nobody ran it (its holder
// died) ends stopped at its next delivery without entering the work.
func TestStoppedBeforeItsDelivery(t *testing.T) {
	reg := NewRegistry()
	entered := false
	w := Define(regOwner{reg}, "x", func(context.Context, struct{}) error { entered = true; return nil })
	svc := NewService(Config{Store: memory.New(), Dispatcher: nopDispatcher{}, Works: func(string) (*Registry, time.Duration, bool) { return reg, 0, true }})
	ctx := NewContext(context.Background(), svc, reg, "a", &contract.VerifiedWorkspaceContext{GrantID: "g", WorkspaceID: "w", AgentSlug: "a"})
	job := "j"
	if _, err := w.Start(ctx, &contract.ActionRequest{AgentSlug: "a", Action: contract.JobStartAction, JobID: &job, MissionID: "m", Input: []byte(`{}`)}, struct{}{}); err != nil {
		t.Fatal(err)
	}
	m := Message{Agent: "a", Workspace: "w", Job: job, Work: "x"}
	if _, err := svc.update(ctx, m.Key(), func(r *record) (bool, error) { r.Stop, r.Deliveries = true, 1; return true, nil }); err != nil {
		t.Fatal(err)
	}
	if err := svc.Deliver(context.Background(), m, Delivery{}); err != nil {
		t.Fatal(err)
	}
	r, _, err := svc.load(ctx, m.Key())
	if err != nil {
		t.Fatal(err)
	}
	if entered || r.Status != taskStopped {
		t.Fatalf("the work was entered: %t; the task is %s", entered, r.Status)
	}
}

// TestCheckLeaseAfterALostHalt: once a delivery found it lost its lease (a lapsed lease it could
// not confirm: another item of a fan-out may go on meanwhile), CheckLease says so, though the
// task's record still names it.
func TestCheckLeaseAfterALostHalt(t *testing.T) {
	s := memory.New()
	svc := NewService(Config{Store: s, Dispatcher: nopDispatcher{}, Works: func(string) (*Registry, time.Duration, bool) { return nil, 0, false }})
	ctx := context.Background()
	b, err := svc.encode(&record{Format: recordFormat, Agent: "a", Workspace: "w", Job: "j", Work: "x", Status: taskPending, Holder: "h", LeaseUntil: svc.now().Add(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	key := Message{Agent: "a", Workspace: "w", Job: "j"}.Key()
	if _, err := s.Create(ctx, key, b, store.Never); err != nil {
		t.Fatal(err)
	}
	tk := &task{svc: svc, key: key, holder: "h", leaseUntil: svc.now().Add(time.Minute)}
	in := context.WithValue(ctx, taskCtxKey{}, tk)
	if err := CheckLease(in); err != nil {
		t.Fatalf("holding the lease: %v", err)
	}
	tk.setHalt(lostHalt)
	if err := CheckLease(in); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("after a lost halt: %v, want ErrLeaseLost", err)
	}
}
