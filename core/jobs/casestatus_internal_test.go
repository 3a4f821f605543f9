package jobs

import (
	"testing"
	"time"

	"github.com/supervaize/svz/core/contract"
)

// TestCaseStatus: a case whose steps are all completed is completed only when the job is done or
// the work moved on to another case; while the work is still in it, it is active.
func TestCaseStatus(t *testing.T) {
	step := func(c, name, status string) *stepRecord { return &stepRecord{Name: name, Case: c, Status: status} }
	done, running := stepCompleted, stepActive
	for _, tc := range []struct {
		name   string
		status string // the task's
		steps  []*stepRecord
		want   map[string]string // case → status
	}{
		{"one case, its step answered, the job goes on", taskPending,
			[]*stepRecord{step("a", "review", done)}, map[string]string{"a": contract.StateActive}},
		{"one case, every step done, the job done", taskCompleted,
			[]*stepRecord{step("a", "find", done), step("a", "import", done)}, map[string]string{"a": contract.StateCompleted}},
		{"the work moved on to b", taskPending,
			[]*stepRecord{step("a", "find", done), step("b", "score", running)}, map[string]string{"a": contract.StateCompleted, "b": contract.StateActive}},
		{"b's steps done, the work still in b", taskPending,
			[]*stepRecord{step("a", "find", done), step("b", "score", done)}, map[string]string{"a": contract.StateCompleted, "b": contract.StateActive}},
		{"the work came back to a", taskPending,
			[]*stepRecord{step("a", "find", done), step("b", "score", done), step("a", "report", done)}, map[string]string{"a": contract.StateActive, "b": contract.StateCompleted}},
		{"the job failed after a's steps", taskFailed,
			[]*stepRecord{step("a", "find", done)}, map[string]string{"a": contract.StateCompleted}},
		{"a step awaits", taskAwaiting,
			[]*stepRecord{step("a", "find", done), step("a", "review", stepAwaiting)}, map[string]string{"a": contract.StateAwaiting}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			now := time.Now()
			// Completed steps have records of their own; the others are the task's open steps.
			var records []*stepRecord
			r := &record{Job: "job-1", Work: "w", Status: tc.status, Created: now, Deadline: now.Add(time.Hour),
				Cases: []caseRecord{{ID: "a", Title: "A"}, {ID: "b", Title: "B"}}}
			for _, st := range tc.steps {
				if st.Status == stepCompleted {
					records = append(records, st)
				} else {
					r.Open = append(r.Open, st)
				}
			}
			if tc.want["b"] == "" {
				r.Cases = r.Cases[:1]
			}
			s := &Service{cfg: Config{Now: time.Now}}
			snap := s.snapshot(NewRegistry(), r, records)
			got := map[string]string{}
			for _, c := range snap.Cases {
				got[c.ID[len("job-1-"):]] = c.Status
			}
			for c, want := range tc.want {
				if got[c] != want {
					t.Errorf("case %s: %s, want %s (all: %v)", c, got[c], want, got)
				}
			}
		})
	}
}

// TestRunningStep: the dead-letter message names the last open step that runs, looking past open
// steps that wait (a branch of Parallel may wait while another runs).
func TestRunningStep(t *testing.T) {
	step := func(name, status string) *stepRecord { return &stepRecord{Name: name, Status: status} }
	for _, tc := range []struct {
		open []*stepRecord
		want string
	}{
		{nil, ""},
		{[]*stepRecord{step("wait", stepAwaiting)}, ""},
		{[]*stepRecord{step("slow", stepActive), step("wait", stepAwaiting)}, "slow"},
		{[]*stepRecord{step("a", stepActive), step("b", stepActive)}, "b"},
	} {
		got := ""
		if st := runningStep(&record{Open: tc.open}); st != nil {
			got = st.Name
		}
		if got != tc.want {
			t.Errorf("open %d steps: %q, want %q", len(tc.open), got, tc.want)
		}
	}
}

// TestByteSize: sizes in messages, in decimal units.
func TestByteSize(t *testing.T) {
	for n, want := range map[int]string{0: "0 B", 999: "999 B", 1000: "1 KB", 400_000: "400 KB", 999_999: "1000 KB", 1_000_000: "1 MB", 1_500_000: "1.5 MB"} {
		if got := byteSize(n); got != want {
			t.Errorf("byteSize(%d) = %q, want %q", n, got, want)
		}
	}
}
