package jobs

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"
	"time"

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
