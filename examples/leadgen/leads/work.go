package leads

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"strings"
	"time"

	"github.com/supervaize/svz/core"
	"github.com/supervaize/svz/core/checkpoint"
	"github.com/supervaize/svz/core/contract"
	"github.com/supervaize/svz/core/jobs"
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

// Job is the agent's record of a job (written by its report step) for the surfaces, artifacts and
// dataset; the job's steps and status are the task svz keeps (package jobs).
type Job struct {
	ID      string  `json:"id"`
	Setup   Setup   `json:"setup"`
	Leads   []Lead  `json:"leads"`
	Credits float64 `json:"credits"`
	Report  string  `json:"report"`
	Review  string  `json:"review,omitempty"` // approved or rejected
	Comment string  `json:"comment,omitempty"`
}

// rate is the cost of one lead, in credits.
func rate(mode string) float64 { return map[bool]float64{true: 3, false: 1}[mode == "thorough"] }

// find and score are the research itself (deterministic stand-ins for a search API and a model).
func find(s Setup, n int) []Lead {
	out := make([]Lead, n)
	region := strings.ToLower(strings.Join(strings.Fields(s.Region), "-"))
	for i := range out {
		company := fmt.Sprintf("%s-%s-%03d", s.Industry, region, i+1)
		out[i] = Lead{Email: "contact@" + company + ".example", Name: fmt.Sprintf("Contact %d", i+1), Company: company}
	}
	return out
}

// score is the model's call for one lead (LEADGEN_SCORE_DELAY long): a unit of the score fan-out.
func (a *leadAgent) score(ctx context.Context, l Lead) (Lead, error) {
	l.Score = 100 - int(crc32.ChecksumIEEE([]byte(l.Email))%50)
	select {
	case <-ctx.Done():
		return l, ctx.Err()
	case <-time.After(a.delays.Score):
		return l, nil
	}
}

func report(s Setup, leads []Lead) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# %d %s leads in %s\n\n| Company | Email | Score |\n|---|---|---|\n", len(leads), s.Industry, s.Region)
	for _, l := range leads {
		fmt.Fprintf(&b, "| %s | %s | %d |\n", l.Company, l.Email, l.Score)
	}
	return b.String()
}

func records(ctx context.Context) state.Collection[Job] { return state.Of[Job](ctx, "jobs") }

func suggestRegion(_ context.Context, req *contract.ActionRequest) (*contract.ActionResult, error) {
	region := map[string]string{"saas": "North America", "retail": "Western Europe", "health": "DACH"}[req.HelpInput().Text("industry")]
	draft := &contract.FieldDraft{Field: "region", Value: region}
	if region == "" {
		draft.Value, draft.Suggestions = nil, []contract.Suggestion{{Message: "Pick an industry first", Severity: contract.SeverityInfo, Field: "industry"}}
	}
	return &contract.ActionResult{Status: contract.StatusOK, Draft: draft}, nil
}

func preview(_ context.Context, req *contract.ActionRequest) (*contract.ActionResult, error) {
	var s Setup
	if err := req.DecodeInput(&s); err != nil {
		return nil, err
	}
	plan := Plan()
	plan.Steps[0].Status = planStatus[s.Industry != "" && s.Region != ""]
	plan.Steps[1].Status = planStatus[s.Leads > 0]
	plan.Steps[2].Status = planStatus[!s.RequireReview || s.ReviewerEmail != ""]
	n := float64(max(s.Leads, 1)) * rate(s.Mode)
	plan.CostEstimate = &contract.CostEstimate{Status: contract.CostEstimated, Unit: "credits", Min: ptr(n), Max: ptr(n * 1.5),
		Basis: fmt.Sprintf("%s mode, %d leads; the high end counts retries", s.Mode, s.Leads)}
	return &contract.ActionResult{Status: contract.StatusOK, SetupPlan: plan,
		Effects: []contract.Effect{{Type: contract.EffectJobStartPreviewed, Message: plan.CostEstimate.Basis}}}, nil
}

// planStatus is a setup step's status: done once its fields are.
var planStatus = map[bool]string{true: contract.SetupDone, false: contract.SetupAwaiting}

// testRun is the dry run: three sample leads, at their real cost, and nothing kept or sent.
func (a *leadAgent) testRun(ctx context.Context, req *contract.ActionRequest) (*contract.ActionResult, error) {
	var s Setup
	if err := req.DecodeInput(&s); err != nil {
		return nil, err
	}
	sample, n := find(s, 3), 3*rate(s.Mode)
	for i := range sample {
		sample[i], _ = a.score(ctx, sample[i])
	}
	return &contract.ActionResult{Status: contract.StatusOK,
		Effects: []contract.Effect{{Type: "job.tested", Items: sample, Message: "3 sample leads"}},
		DryRun:  &contract.DryRunOutcome{Deletable: true, CostIncurred: &contract.CostEstimate{Status: contract.CostEstimated, Unit: "credits", Min: &n, Max: &n, Basis: "3 sample leads"}}}, nil
}

// Run is the input of the lead search (the background work); Review the review step's answer.
type Run struct {
	JobID    string `json:"job_id"`
	Setup    Setup  `json:"setup"`
	Governed bool   `json:"governed,omitempty"` // job.start carried Studio's rule_snapshot (governed.go)
}

type Review struct {
	Report   string `json:"report"`
	Approved bool   `json:"approved"`
	Comment  string `json:"comment,omitempty"`
}

// start starts the lead search in the background: the answer shows the job active at once, and
// job.sync follows its steps. A governed job imports under rule checkpoints (governed.go).
func (a *leadAgent) start(ctx context.Context, req *contract.ActionRequest) (*contract.ActionResult, error) {
	var s Setup
	if err := req.DecodeInput(&s); err != nil {
		return nil, err
	}
	// A governed job.start carries Studio's rule_snapshot: its gate is kept for the job's import.
	// svz answers the refusals (a snapshot it cannot take, no job_id) as such.
	_, err := checkpoint.FromJobStart(ctx, req)
	if err != nil && !errors.Is(err, checkpoint.ErrNoSnapshot) {
		return nil, err
	}
	return a.work.Started(ctx, req, Run{JobID: req.Job(), Setup: s, Governed: err == nil})
}

// Where the steps show in job_state: research in the work lane, the report in the deliverable one.
var (
	research = jobs.InCase("research", "work", "Research")
	delivery = jobs.InCase("report", "deliverable", "Report")
)

// search is the lead search, in steps whose results svz keeps in the store: a delivery that a
// crash or a deploy cut short continues at the first unfinished step, on any instance.
func (a *leadAgent) search(ctx context.Context, r Run) error {
	s, id := r.Setup, r.JobID
	found, err := jobs.Step(ctx, "find", func(ctx context.Context) ([]Lead, error) { return a.lookUp(ctx, s) },
		research, jobs.Title(fmt.Sprintf("Find %d leads", s.Leads)), jobs.Outputs(artifacts(id, s.Leads)[0]))
	if err != nil {
		return err
	}
	leads, err := jobs.Map(ctx, "score", found, a.score, research, jobs.Concurrency(10), jobs.Title("Score the leads"))
	if err != nil {
		return err
	}
	job := Job{ID: id, Setup: s, Leads: leads, Credits: float64(len(leads)) * rate(s.Mode), Report: report(s, leads)}
	if _, err = jobs.Step(ctx, "report", func(ctx context.Context) (float64, error) {
		_, _, err := records(ctx).GetOrCreate(ctx, id, job)
		return job.Credits, err
	}, delivery, jobs.Title("Write the report")); err != nil {
		return err
	}
	if s.RequireReview {
		ans, err := jobs.Await[Review](ctx, "review", contract.Awaiting{Fields: reviewFields()}, delivery, jobs.Title("Review the report"), jobs.Outputs(artifacts(id, s.Leads)[1]))
		if err != nil {
			return err
		}
		if job, err = jobs.Step(ctx, "decide", func(ctx context.Context) (Job, error) {
			return records(ctx).Update(ctx, id, func(j *Job) error {
				j.Report, j.Comment, j.Review = ans.Report, ans.Comment, map[bool]string{true: "approved", false: "rejected"}[ans.Approved]
				return nil
			})
		}, delivery, jobs.Title("Apply the review")); err != nil || job.Review != "approved" {
			return err
		}
	}
	// The CRM's cool-down (none by default): the job sleeps, and nothing runs meanwhile.
	if err := jobs.Sleep(ctx, "cool-down", a.delays.Import, delivery, jobs.Title("Wait for the CRM's import window")); err != nil {
		return err
	}
	importing := []jobs.StepOption{delivery, jobs.Under(crmImports), jobs.Title("Import the leads into contacts")}
	if r.Governed {
		_, err = jobs.Guarded(ctx, "import", a.imp, beforeImport(job), id, importLeads, importing...)
	} else {
		_, err = jobs.Step(ctx, "import", func(ctx context.Context) (int, error) { return importLeads(ctx, id) }, importing...)
	}
	return err
}

// crmImports bounds the imports into the CRM, across every instance and workspace (its API's quota).
var crmImports = jobs.NewLimit("crm.import", jobs.Rate(30, time.Minute), jobs.Shared())

// cleanUp undoes a failed job's partial import (jobs.OnFailure): its contacts are deleted.
func cleanUp(ctx context.Context, r Run, _ jobs.Failure) (err error) {
	for c, err := range state.Of[Contact](ctx, Contacts).All(ctx, "") {
		if err == nil && c.Value.JobID == r.JobID {
			err = state.Of[Contact](ctx, Contacts).Delete(ctx, c.ID)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// lookUp is the demo directory's search: batches of ten leads, each LEADGEN_FIND_DELAY long, so
// that a job visibly runs a while.
func (a *leadAgent) lookUp(ctx context.Context, s Setup) ([]Lead, error) {
	for done := 0; done < s.Leads; done += 10 {
		_ = jobs.Progress(ctx, "research", done, s.Leads)
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(a.delays.Find):
		}
	}
	_ = jobs.Progress(ctx, "research", s.Leads, s.Leads)
	return find(s, s.Leads), nil
}

// view adds the lead run's label and cost (the report step's result) to svz's job state.
func view(js *contract.JobState, r jobs.Results) {
	var credits float64
	r.Decode("report", &credits)
	js.Job.Display = &contract.JobDisplay{EntityLabel: "Lead run", StateLabel: js.Job.Status}
	js.Job.Information = contract.CostIn(credits, "credits")
}

// importLeads adds the leads of job id to the contacts.
func importLeads(ctx context.Context, id string) (int, error) {
	job, err := records(ctx).Get(ctx, id)
	if err != nil {
		return 0, err
	}
	for _, l := range job.Leads {
		if _, err := state.Of[Contact](ctx, Contacts).Upsert(ctx, l.Email, func(c *Contact) error { *c = Contact{Lead: l, JobID: id}; return nil }); err != nil {
			return 0, err
		}
	}
	return len(job.Leads), nil
}

// statusOf is the job's status in its state ("" when it has none).
func statusOf(ctx context.Context, id string) (status string) {
	if js, err := jobs.State(ctx, id); err == nil {
		status = js.Job.Status
	}
	return status
}

// reportArtifact is the report artifact ("report:<job>"): svz answers artifact.get with it, or
// artifact_not_found when the job has none (state.ErrNotFound).
func reportArtifact(ctx context.Context, id string) (core.Artifact, error) {
	job, err := records(ctx).Get(ctx, strings.TrimPrefix(id, "report:"))
	return core.Artifact{Title: "Lead report", MediaType: "text/markdown", Content: job.Report}, err
}

// runs are the lead_runs dataset's rows: one per job of the workspace.
func runs(ctx context.Context, _ *contract.ActionRequest) (rows []map[string]any, err error) {
	for r, err := range records(ctx).All(ctx, "") {
		if err != nil {
			return nil, err
		}
		rows = append(rows, map[string]any{"job_id": r.ID, "status": statusOf(ctx, r.ID), "leads": len(r.Value.Leads), "credits": r.Value.Credits})
	}
	return rows, nil
}

func artifacts(id string, n int) []contract.ArtifactRef {
	return []contract.ArtifactRef{
		{ID: "leads:" + id, Type: "lead_list", Title: fmt.Sprintf("%d leads", n)},
		{ID: "report:" + id, Type: "report", Title: "Lead report", MediaType: "text/markdown"},
	}
}
