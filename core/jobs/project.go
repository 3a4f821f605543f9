package jobs

import (
	"encoding/json"
	"time"

	"github.com/supervaize/svz/core/contract"
)

// jobStatus is the job's status in job_state.
func jobStatus(r *record) string {
	switch r.Status {
	case taskAwaiting:
		return contract.StateAwaiting
	case taskCompleted:
		return contract.StateCompleted
	case taskFailed, taskFailing:
		return contract.StateFailed
	case taskStopped:
		return contract.StateCancelled
	}
	return contract.StateActive
}

// snapshot projects the task's record and its step records (in number order) as job_state: the
// step records first, then the open steps.
func (s *Service) snapshot(reg *Registry, r *record, records []*stepRecord) *contract.JobState {
	if !terminal(r.Status) && r.Status != taskFailing && !s.now().Before(r.Deadline) {
		// Past its timeout, a job nobody delivers (it waits for an answer, or its queue lost it)
		// is failed: its next delivery records it so.
		r = r.clone()
		r.Status, r.Error = taskFailed, timeoutMessage(r)
	}
	status := jobStatus(r)
	snap := &contract.JobState{
		Job: contract.Job{ID: r.Job, AgentSlug: r.Agent, MissionID: r.Mission, Status: status,
			Source: contract.JobSource{Type: contract.SourceFreshStart}},
		Cases: []contract.Case{},
	}
	if r.Error != "" {
		b, _ := json.Marshal(map[string]string{"message": r.Error})
		snap.Job.Extra = contract.Extra{"error": b}
	}
	if r.Status == taskStopped && r.Cancel != "" {
		label := r.Cancel
		if len(label) > contract.JobDisplayMaxLength {
			label = label[:contract.JobDisplayMaxLength]
		}
		snap.Job.Display = &contract.JobDisplay{StateLabel: label}
	}
	if w := r.Wait; w != nil && r.Status == taskPending {
		b, _ := json.Marshal(waiting{Reason: w.Reason, StepID: stepIDOrEmpty(r.Job, w.Step), Limit: w.Limit, Until: w.Until})
		if snap.Job.Extra == nil {
			snap.Job.Extra = contract.Extra{}
		}
		snap.Job.Extra["waiting"] = b
	}

	// The steps shown, in order: recorded ones (the first record of each name), then open ones.
	var steps []*stepRecord
	seen := map[string]bool{}
	for _, st := range records {
		if st.Hidden || seen[st.Name] {
			continue
		}
		seen[st.Name] = true
		steps = append(steps, st)
	}
	for _, st := range r.Open {
		if !seen[st.Name] {
			seen[st.Name] = true
			steps = append(steps, st)
		}
	}

	// Cases in order of first appearance, each placed by its first step.
	defLane := s.laneOf(r.Agent)
	type caseView struct {
		rec   caseRecord
		steps []contract.Step
	}
	var order []string
	cases := map[string]*caseView{}
	caseOf := func(id, lane, title string) *caseView {
		if c, ok := cases[id]; ok {
			return c
		}
		c := &caseView{rec: caseRecord{ID: id, Lane: lane, Title: title}}
		cases[id] = c
		order = append(order, id)
		return c
	}
	for _, st := range steps {
		c := caseOf(cmpOr(st.Case, defaultCase), st.Lane, st.CaseTitle)
		c.steps = append(c.steps, stepView(r.Job, st))
		for _, p := range st.Progress {
			if pc := cases[p.ID]; pc != nil && p.Ver >= pc.rec.Ver {
				pc.rec.Done, pc.rec.Total, pc.rec.Progress, pc.rec.Ver = p.Done, p.Total, true, p.Ver
			} else if pc == nil {
				c := caseOf(p.ID, "", "")
				c.rec.Done, c.rec.Total, c.rec.Progress, c.rec.Ver = p.Done, p.Total, true, p.Ver
			}
		}
	}
	for _, cr := range r.Cases {
		c := caseOf(cr.ID, cr.Lane, cr.Title)
		if cr.Progress && cr.Ver >= c.rec.Ver {
			c.rec.Done, c.rec.Total, c.rec.Progress, c.rec.Ver = cr.Done, cr.Total, true, cr.Ver
		}
	}
	if len(order) == 0 {
		caseOf(defaultCase, "", "")
	}
	last := ""
	if len(steps) > 0 {
		last = cmpOr(steps[len(steps)-1].Case, defaultCase)
	}
	for _, id := range order {
		c := cases[id]
		if c.rec.Lane == "" && c.rec.Title == "" && id == defaultCase {
			c.rec.Lane, c.rec.Title = defLane, r.Work
		}
		cs := contract.Case{ID: CaseID(r.Job, id), Lane: cmpOr(c.rec.Lane, contract.DefaultLane), Title: c.rec.Title,
			Metadata: map[string]any{}, Steps: c.steps}
		if cs.Steps == nil {
			cs.Steps = []contract.Step{}
		}
		if c.rec.Progress {
			cs.Metadata["progress"] = map[string]int{"done": c.rec.Done, "total": c.rec.Total}
		}
		cs.Status = caseStatus(status, cs.Steps, len(steps) > 0 && last != id)
		snap.Cases = append(snap.Cases, cs)
	}
	if w := reg.lookup(r.Work); w != nil {
		if view := w.options().view; view != nil {
			byName := make(map[string]*stepRecord, len(records))
			for _, st := range records {
				if _, dup := byName[st.Name]; !dup {
					byName[st.Name] = st
				}
			}
			view(snap, Results{rec: r, steps: byName})
		}
	}
	return snap
}

// waiting is job_state's "waiting" member of a job that waits before its next delivery: for a
// retry's backoff, a timer (Sleep) or a limit's turn.
type waiting struct {
	Reason string    `json:"reason"`
	StepID string    `json:"step_id,omitempty"`
	Limit  string    `json:"limit,omitempty"`
	Until  time.Time `json:"until,omitzero"`
}

func stepIDOrEmpty(job, name string) string {
	if name == "" {
		return ""
	}
	return StepID(job, name)
}

// stepView is one step of job_state.
func stepView(job string, st *stepRecord) contract.Step {
	step := contract.Step{ID: StepID(job, st.Name), Activity: cmpOr(st.Activity, contract.ActivityOperation), Status: st.Status,
		Title: cmpOr(st.Title, st.Name), Outputs: []contract.ArtifactRef{}}
	switch st.Status {
	case stepAwaiting:
		step.Awaiting = st.Awaiting
	case stepSleeping:
		step.Status = contract.StatePending
		b, _ := json.Marshal(st.Until)
		step.Extra = contract.Extra{"scheduled_at": b}
	case stepCompleted:
		for _, a := range st.Outputs {
			step.Outputs = append(step.Outputs, contract.ArtifactRef{ID: a.ID, Type: a.Type, Title: a.Title, MediaType: a.MediaType})
		}
	}
	if st.Items > 0 {
		done := st.Done
		if st.Status == stepCompleted {
			done = st.Items
		}
		b, _ := json.Marshal(map[string]int{"done": done, "total": st.Items})
		if step.Extra == nil {
			step.Extra = contract.Extra{}
		}
		step.Extra["items"] = b
	}
	return step
}

// caseStatus derives a case's status from its steps: failed, awaiting or active when a step is;
// completed when all are and the job is done, or when the job moved past them (movedPast); else
// active, as the work goes on and may add steps to it.
func caseStatus(job string, steps []contract.Step, movedPast bool) string {
	if len(steps) == 0 {
		if job == contract.StateCompleted || job == contract.StateCancelled || job == contract.StateFailed {
			return job
		}
		return contract.StatePending
	}
	seen := map[string]bool{}
	for _, s := range steps {
		seen[s.Status] = true
	}
	for _, st := range []string{contract.StateFailed, contract.StateAwaiting, contract.StateActive, contract.StateCancelled} {
		if seen[st] {
			return st
		}
	}
	if seen[contract.StatePending] { // a timer's step: the work is in the case, waiting
		return contract.StateActive
	}
	if movedPast || job == contract.StateCompleted || job == contract.StateCancelled || job == contract.StateFailed {
		return contract.StateCompleted
	}
	return contract.StateActive
}
