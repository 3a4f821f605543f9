package leads

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/supervaize/svz/core/checkpoint"
	"github.com/supervaize/svz/core/contract"
	"github.com/supervaize/svz/core/state"
)

// Setup is the job.start input: the plan's fields, checked and coerced by svz before start runs.
type Setup struct {
	Industry      string  `json:"industry"`
	Region        string  `json:"region"`
	Leads         int     `json:"leads"`
	Mode          string  `json:"mode"`
	Budget        float64 `json:"budget,omitempty"`
	RequireReview bool    `json:"require_review"`
	ReviewerEmail string  `json:"reviewer_email,omitempty"`
}

// Lead is one lead found. Contact is the contacts resource's record.
type Lead struct {
	Email   string `json:"email"`
	Name    string `json:"name"`
	Company string `json:"company"`
	Score   int    `json:"score"`
}

type Contact struct {
	Lead
	JobID string `json:"job_id,omitempty"`
}

// Job is the agent's record of a job: everything job.sync needs to rebuild its snapshot.
type Job struct {
	ID        string  `json:"id"`
	MissionID string  `json:"mission_id"`
	Status    string  `json:"status"`
	Setup     Setup   `json:"setup"`
	Leads     []Lead  `json:"leads"`
	Credits   float64 `json:"credits"`
	Report    string  `json:"report"`
	Review    string  `json:"review,omitempty"` // approved or rejected
	Comment   string  `json:"comment,omitempty"`
	// Governed: job.start carried Studio's rule_snapshot; the import runs under rule checkpoints
	// (governed.go). Imported is how many leads the guarded import imported.
	Governed bool `json:"governed,omitempty"`
	Imported int  `json:"imported,omitempty"`
}

// rate is the cost of one lead, in credits.
func rate(mode string) float64 {
	if mode == "thorough" {
		return 3
	}
	return 1
}

func estimate(s Setup) *contract.CostEstimate {
	n := float64(max(s.Leads, 1)) * rate(s.Mode)
	return &contract.CostEstimate{Status: contract.CostEstimated, Unit: "credits", Min: ptr(n), Max: ptr(n * 1.5),
		Basis: fmt.Sprintf("%s mode, %d leads; the high end counts retries", s.Mode, s.Leads)}
}

// find is the research itself (a deterministic stand-in for a search API).
func find(s Setup, n int) []Lead {
	out := make([]Lead, n)
	region := strings.ToLower(strings.Join(strings.Fields(s.Region), "-"))
	for i := range out {
		company := fmt.Sprintf("%s-%s-%03d", s.Industry, region, i+1)
		out[i] = Lead{Email: "contact@" + company + ".example", Name: fmt.Sprintf("Contact %d", i+1), Company: company, Score: 100 - i%100}
	}
	return out
}

func report(s Setup, leads []Lead) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# %d %s leads in %s\n\n| Company | Email | Score |\n|---|---|---|\n", len(leads), s.Industry, s.Region)
	for _, l := range leads {
		fmt.Fprintf(&b, "| %s | %s | %d |\n", l.Company, l.Email, l.Score)
	}
	return b.String()
}

func jobs(ctx context.Context) state.Collection[Job] { return state.Of[Job](ctx, "jobs") }

func jobOf(ctx context.Context, id *string) (Job, error) {
	if id == nil {
		return Job{}, state.ErrNotFound
	}
	return jobs(ctx).Get(ctx, *id)
}

func notFound(id *string) contract.ResultError {
	return contract.ResultError{Code: "job_not_found", Message: fmt.Sprintf("No job %q in this workspace", deref(id))}
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// failed answers an error about a job: a business error when the job does not exist, an
// internal error (the store is down...) otherwise.
func failed(id *string, err error) (*contract.ActionResult, error) {
	if errors.Is(err, state.ErrNotFound) || errors.Is(err, state.ErrInvalid) {
		e := notFound(id)
		return contract.Fail(e.Code, e.Message), nil
	}
	return nil, err
}

func suggestRegion(_ context.Context, req *contract.ActionRequest) (*contract.ActionResult, error) {
	var in struct {
		Values Setup `json:"values"`
	}
	_ = req.DecodeInput(&in) // a draft: anything may be missing
	region := map[string]string{"saas": "North America", "retail": "Western Europe", "health": "DACH"}[in.Values.Industry]
	draft := &contract.FieldDraft{Field: "region", Value: region}
	if region == "" {
		draft.Suggestions = []contract.Suggestion{{Message: "Pick an industry first", Severity: contract.SeverityInfo, Field: "industry"}}
		draft.Value = nil
	}
	return &contract.ActionResult{Status: contract.StatusOK, Draft: draft}, nil
}

func preview(_ context.Context, req *contract.ActionRequest) (*contract.ActionResult, error) {
	var s Setup
	if err := req.DecodeInput(&s); err != nil {
		return nil, err
	}
	plan := Plan()
	plan.Steps[0].Status = done(s.Industry != "" && s.Region != "")
	plan.Steps[1].Status = done(s.Leads > 0)
	plan.Steps[2].Status = done(!s.RequireReview || s.ReviewerEmail != "")
	plan.CostEstimate = estimate(s)
	return &contract.ActionResult{Status: contract.StatusOK, SetupPlan: plan,
		Effects: []contract.Effect{{Type: contract.EffectJobStartPreviewed, Message: plan.CostEstimate.Basis}}}, nil
}

func done(ok bool) string {
	if ok {
		return contract.SetupDone
	}
	return contract.SetupAwaiting
}

// testRun is the dry run: three sample leads, at their real cost, and nothing kept or sent.
func testRun(_ context.Context, req *contract.ActionRequest) (*contract.ActionResult, error) {
	var s Setup
	if err := req.DecodeInput(&s); err != nil {
		return nil, err
	}
	n := 3 * rate(s.Mode)
	return &contract.ActionResult{Status: contract.StatusOK,
		Effects: []contract.Effect{{Type: "job.tested", Items: find(s, 3), Message: "3 sample leads"}},
		DryRun:  &contract.DryRunOutcome{Deletable: true, CostIncurred: &contract.CostEstimate{Status: contract.CostEstimated, Unit: "credits", Min: &n, Max: &n, Basis: "3 sample leads"}},
	}, nil
}

// start runs the research and parks the report for review. The job record is written with Upsert
// so a run that starts again (its first process died: see docs/state.md) converges on it. A
// governed job (Studio sent a rule_snapshot) imports under rule checkpoints (governed.go).
func (gv governance) start(ctx context.Context, req *contract.ActionRequest) (*contract.ActionResult, error) {
	var s Setup
	if err := req.DecodeInput(&s); err != nil {
		return nil, err
	}
	if req.JobID == nil {
		return contract.Refuse(contract.ResultError{Code: contract.InputRequired, Field: "job_id", Message: "job.start needs the job_id Studio assigns"}), nil
	}
	gate, refused, err := gateOf(ctx, req)
	if refused != nil || err != nil {
		return refused, err
	}
	leads := find(s, s.Leads)
	job := Job{ID: *req.JobID, MissionID: req.MissionID, Status: contract.StateAwaiting, Setup: s, Leads: leads,
		Credits: float64(len(leads)) * rate(s.Mode), Report: report(s, leads), Governed: gate != nil}
	if !s.RequireReview && !job.Governed {
		job.Status, job.Review = contract.StateCompleted, "approved"
		if err := importLeads(ctx, job); err != nil {
			return nil, err
		}
	}
	if !s.RequireReview && job.Governed {
		job.Status, job.Review = contract.StateActive, "approved" // the guarded import completes it
	}
	if _, err := jobs(ctx).Upsert(ctx, job.ID, func(j *Job) error { *j = job; return nil }); err != nil {
		return nil, err
	}
	var imp *checkpoint.Outcome[ImportResult]
	if !s.RequireReview && job.Governed {
		if imp, err = gv.importLeadsOf(ctx, job); err != nil {
			return nil, err
		}
		if job, err = jobs(ctx).Get(ctx, job.ID); err != nil {
			return nil, err
		}
	}
	snap := job.snapshot(imp)
	return contract.OK(contract.Effect{Type: contract.EffectJobStarted, JobID: job.ID, Status: snap.Job.Status,
		Message: fmt.Sprintf("Found %d leads", len(leads))}).WithJobState(snap), nil
}

func importLeads(ctx context.Context, job Job) error {
	for _, l := range job.Leads {
		if _, err := state.Of[Contact](ctx, Contacts).Upsert(ctx, l.Email, func(c *Contact) error { *c = Contact{Lead: l, JobID: job.ID}; return nil }); err != nil {
			return err
		}
	}
	return nil
}

// sync rebuilds the job's snapshot from the store: the same state gives the same projection.
func (gv governance) sync(ctx context.Context, req *contract.ActionRequest) (*contract.ActionResult, error) {
	job, err := jobOf(ctx, req.JobID)
	if err != nil {
		return failed(req.JobID, err)
	}
	imp, err := gv.importState(ctx, job)
	if err != nil {
		return nil, err
	}
	snap := job.snapshot(imp)
	return contract.OK(contract.Effect{Type: contract.EffectJobSynced, JobID: job.ID, Status: snap.Job.Status}).WithJobState(snap), nil
}

// submitReview records the review; an approval imports the leads (under rule checkpoints for a
// governed job: submitting the approval again continues an import that could not finish).
func (gv governance) submitReview(ctx context.Context, req *contract.ActionRequest) (*contract.ActionResult, error) {
	var in struct {
		Report   string `json:"report"`
		Approved bool   `json:"approved"`
		Comment  string `json:"comment"`
	}
	if err := req.DecodeValid(&in, reviewFields()); err != nil {
		return contract.Refused(err)
	}
	job, err := jobs(ctx).Update(ctx, deref(req.JobID), func(j *Job) error {
		if j.Governed && j.Status == contract.StateActive && j.Review == "approved" && in.Approved {
			return nil // the approval again: the guarded import goes on below
		}
		if j.Status != contract.StateAwaiting {
			return errAnswered
		}
		j.Report, j.Comment, j.Status, j.Review = in.Report, in.Comment, contract.StateCompleted, "rejected"
		if in.Approved {
			j.Review = "approved"
			if j.Governed {
				j.Status = contract.StateActive // the guarded import completes it
			}
		}
		return nil
	})
	switch {
	case errors.Is(err, errAnswered):
		return contract.Refuse(contract.ResultError{Code: contract.InputInvalid, Message: "This review was already submitted"}), nil
	case err != nil:
		return failed(req.JobID, err)
	}
	var imp *checkpoint.Outcome[ImportResult]
	if in.Approved {
		if imp, err = gv.importLeadsOf(ctx, job); err != nil {
			return nil, err
		}
		if job, err = jobs(ctx).Get(ctx, job.ID); err != nil {
			return nil, err
		}
	}
	return contract.OK(contract.Effect{Type: contract.EffectStepAwaitingSubmitted, JobID: job.ID, CaseID: job.ID + "-report",
		StepID: job.ID + "-review", Status: contract.StateCompleted, Message: "Review " + job.Review}).WithJobState(job.snapshot(imp)), nil
}

var errAnswered = errors.New("already answered")

func stop(ctx context.Context, req *contract.ActionRequest) (*contract.ActionResult, error) {
	job, err := jobs(ctx).Update(ctx, deref(req.JobID), func(j *Job) error {
		if j.Status == contract.StateAwaiting {
			j.Status = contract.StateCancelled
		}
		return nil
	})
	if err != nil {
		return failed(req.JobID, err)
	}
	return contract.OK(contract.Effect{Type: contract.EffectJobStopped, JobID: job.ID, Status: job.Status}).WithJobState(job.snapshot(nil)), nil
}

func getArtifact(ctx context.Context, req *contract.ActionRequest) (*contract.ActionResult, error) {
	var in struct {
		ArtifactID string `json:"artifact_id"`
	}
	if err := req.DecodeInput(&in); err != nil {
		return nil, err
	}
	id, _ := strings.CutPrefix(in.ArtifactID, "report:")
	job, err := jobs(ctx).Get(ctx, id)
	if err != nil {
		return failed(&id, err)
	}
	return contract.OK(contract.Effect{Type: contract.EffectArtifactLoaded, ArtifactID: in.ArtifactID,
		Data: map[string]any{"media_type": "text/markdown", "content": job.Report}}), nil
}

// queryRuns is the lead_runs dataset: one row per job of the workspace.
func queryRuns(ctx context.Context, _ *contract.ActionRequest) (*contract.ActionResult, error) {
	type row struct {
		JobID   string  `json:"job_id"`
		Status  string  `json:"status"`
		Leads   int     `json:"leads"`
		Credits float64 `json:"credits"`
	}
	var rows []row
	for r, err := range jobs(ctx).All(ctx, "") {
		if err != nil {
			return nil, err
		}
		rows = append(rows, row{r.ID, r.Value.Status, len(r.Value.Leads), r.Value.Credits})
	}
	return contract.OK(contract.Effect{Type: contract.EffectDatasetQueried, Dataset: Runs, Count: ptr(len(rows)), Rows: rows}), nil
}

// snapshot is the job's state as Studio shows it: the research case in the work lane, the report
// case in the deliverable lane, whose review step awaits the operator. A governed job's import
// (imp, when it started) is a step of the report case, and its status is the job's: awaiting
// while a rule checkpoint is paused, failed when one stopped it.
func (j Job) snapshot(imp *checkpoint.Outcome[ImportResult]) *contract.JobState {
	review := contract.Step{ID: j.ID + "-review", Activity: contract.ActivityOperation, Status: j.Status, Title: "Review the report"}
	if j.Review != "" {
		review.Status = contract.StateCompleted
	}
	status := j.Status
	if imp != nil {
		status = imp.StepStatus()
	}
	if j.Status == contract.StateAwaiting {
		review.Awaiting = &contract.Awaiting{Reason: contract.AwaitingHumanInput, Surface: contract.SurfaceStepAwaiting,
			Action: contract.StepAwaitingSubmitAction, Fields: reviewFields()}
	}
	if j.Review != "" {
		review.Outputs = j.artifacts()[1:]
	}
	steps := []contract.Step{review}
	if imp != nil {
		steps = append(steps, contract.Step{ID: importOccurrence(j.ID).StepID, Activity: contract.ActivityOperation, Status: status,
			Title: "Import the leads into contacts"})
	}
	return &contract.JobState{
		Job: contract.Job{ID: j.ID, AgentSlug: Slug, MissionID: j.MissionID, Status: status,
			Source:  contract.JobSource{Type: contract.SourceFreshStart},
			Display: &contract.JobDisplay{EntityLabel: "Lead run", StateLabel: status},
			Extra:   contract.Extra{"information": []byte(fmt.Sprintf(`{"cost":{"total_cost":%g}}`, j.Credits))}},
		Cases: []contract.Case{
			{ID: j.ID + "-research", Lane: "work", Title: "Research", Status: contract.StateCompleted, Steps: []contract.Step{{
				ID: j.ID + "-find", Activity: contract.ActivityOperation, Status: contract.StateCompleted, Title: fmt.Sprintf("Find %d leads", j.Setup.Leads),
				Outputs: j.artifacts()[:1]}}},
			{ID: j.ID + "-report", Lane: "deliverable", Title: "Report", Status: status, Steps: steps},
		},
	}
}

func (j Job) artifacts() []contract.ArtifactRef {
	return []contract.ArtifactRef{
		{ID: "leads:" + j.ID, Type: "lead_list", Title: fmt.Sprintf("%d leads", len(j.Leads))},
		{ID: "report:" + j.ID, Type: "report", Title: "Lead report", MediaType: "text/markdown"},
	}
}
