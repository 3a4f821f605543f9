// Package leads is a lead-generation agent: the realistic example of svz (examples/helloworld is
// the protocol's minimal one). The operator sets a job up through a guided setup plan (target,
// volume, review), previews its cost, may try a dry run, then starts it. job.start answers at
// once: the search runs in the background (package jobs) in steps, in two cases in two lanes
// (research in "work": find, then score, a fan-out of one model call per lead; the report in
// "deliverable": report, review, import), waits for a human review of the report, and on approval
// adds the leads to the contacts resource, at a rate the CRM allows; a job that fails for good has
// its partial import undone.
// Everything it keeps lives in the controller's store, per verified workspace, so it runs the
// same on Lambda, Cloud Run or a plain server, and any instance continues a job.
package leads

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/supervaize/svz/adapters/platform"
	"github.com/supervaize/svz/core"
	"github.com/supervaize/svz/core/a2ui"
	"github.com/supervaize/svz/core/checkpoint"
	"github.com/supervaize/svz/core/contract"
	"github.com/supervaize/svz/core/jobs"
	"github.com/supervaize/svz/internal/envvar"
)

// Identity of the agent, its own actions, its resource and its dataset.
const (
	Name          = "Leadgen Agent"
	Slug          = "leadgen-agent"
	SuggestRegion = "region.suggest"
	TestRun       = "job.test"
	Contacts      = "contacts"
	Runs          = "lead_runs"
)

func ptr[T any](v T) *T { return &v }

// Plan is the guided setup: its fields are also the job.start form and the schema svz checks
// job.start's input against.
func Plan() *contract.SetupPlan {
	return &contract.SetupPlan{Steps: []contract.SetupStep{
		{ID: "target", Title: "Target", HelpActions: []string{SuggestRegion}, Fields: []contract.FieldDefinition{
			{ID: "industry", Label: "Industry", Type: contract.FieldSelect, Required: true, Options: []contract.FieldOption{{Value: "saas", Label: "SaaS"}, {Value: "retail", Label: "Retail"}, {Value: "health", Label: "Health"}}},
			{ID: "region", Label: "Region", Type: contract.FieldString, Required: true, Validation: &contract.FieldValidation{MaxLength: ptr(60)}},
		}},
		{ID: "volume", Title: "Volume", Fields: []contract.FieldDefinition{
			{ID: "leads", Label: "Leads to find", Type: contract.FieldInteger, Required: true, Default: 50, Validation: &contract.FieldValidation{Min: ptr(1.0), Max: ptr(500.0)}},
			{ID: "mode", Label: "Mode", Type: contract.FieldSelect, Default: "fast", Options: []contract.FieldOption{{Value: "fast", Label: "Fast"}, {Value: "thorough", Label: "Thorough"}}},
			{ID: "budget", Label: "Budget (credits)", Type: contract.FieldNumber, DependsOn: &contract.DependsOn{Field: "mode", In: []string{"thorough"}}, Validation: &contract.FieldValidation{Min: ptr(0.0), Message: "Budget cannot be negative"}},
		}},
		{ID: "review", Title: "Review", Fields: []contract.FieldDefinition{
			{ID: "require_review", Label: "Review the report before import", Type: contract.FieldBoolean, Default: true},
			{ID: "reviewer_email", Label: "Reviewer", Type: contract.FieldString, DependsOn: &contract.DependsOn{Field: "require_review", In: []string{"true"}},
				Validation: &contract.FieldValidation{Pattern: `^[^@\s]+@[^@\s]+$`, Message: "Enter an email address"}},
		}},
	}}
}

// reviewFields are the fields of the awaiting review step.
func reviewFields() []contract.FieldDefinition {
	return []contract.FieldDefinition{
		{ID: "report", Label: "Report", Type: contract.FieldText, Multiline: true, MinRows: ptr(8), Required: true},
		{ID: "approved", Label: "Import these leads into contacts", Type: contract.FieldBoolean, Required: true},
		{ID: "comment", Label: "Comment", Type: contract.FieldText, Validation: &contract.FieldValidation{MaxLength: ptr(500)}},
	}
}

// Registration is the agent's Supervaizer v2 registration.
func Registration() (*contract.Registration, error) {
	return contract.BuildRegistration(contract.RegistrationSpec{
		AgentSlug: Slug, DisplayName: Name, A2UICatalogVersion: "leadgen.2026-12-01",
		Surfaces: []contract.SurfaceSpec{contract.SurfaceID(contract.SurfaceJobStart), contract.SurfaceID(contract.SurfaceStepAwaiting), contract.SurfaceID(contract.SurfaceStepDetail)},
		Actions: []contract.ActionSpec{
			contract.ActionDefinition{ID: SuggestRegion, Kind: contract.KindHelp, ReadOnly: true, TargetField: "region", Label: "Suggest a region"},
			contract.ActionDefinition{ID: TestRun, DryRun: true, Label: "Test run", Description: "Find three sample leads; nothing is kept or sent."},
			contract.ActionDefinition{ID: contract.JobStopAction, Label: "Stop"},
			contract.ActionDefinition{ID: contract.ArtifactGetAction, ReadOnly: true},
		},
		CaseLanes:     []contract.CaseLane{{ID: "work", Label: "Research", Default: true}, {ID: "deliverable", Label: "Report"}},
		ArtifactTypes: []contract.ArtifactType{{Type: "report", Label: "Lead report", RendererSurface: contract.SurfaceStepDetail}, {Type: "lead_list", Label: "Lead list"}},
		JobPolicy:     &contract.JobPolicy{Sync: &contract.JobSyncPolicy{}, Setup: &contract.JobSetupPolicy{Plan: Plan()}},
		Resources: []contract.ResourceDefinition{{ID: Contacts, Label: "Contacts", AutoSurface: true, // fields: its form, and the schema of create and update
			Fields: []contract.ResourceFieldDefinition{{ID: "email", Label: "Email", Required: true, Validation: &contract.FieldValidation{Pattern: `^[^@\s]+@[^@\s]+$`}},
				{ID: "name", Label: "Name"}, {ID: "company", Label: "Company"},
				{ID: "score", Label: "Score", Type: contract.FieldInteger, Validation: &contract.FieldValidation{Min: ptr(0.0), Max: ptr(100.0)}},
				{ID: "job_id", Label: "Found by job", ReadOnly: true}},
			Operations: []string{"list", "get", "create", "update", "delete"}, ReadOnlyOperations: []string{"list", "get"},
			Display: &contract.ResourceDisplay{TitleField: "email", Columns: []string{"email", "name", "company", "score"}, SearchFields: []string{"email", "name", "company"}}}},
		Datasets: []contract.DatasetDefinition{{ID: Runs, Label: "Lead runs", AutoSurface: true, Display: &contract.ResourceDisplay{Columns: []string{"job_id", "status", "leads", "credits"}}}},
		// Both phases; the reviewer's email kept out of the contexts Studio sees.
		RuleCheckpoints: &contract.RuleCheckpoints{Phases: []string{contract.PhaseBefore, contract.PhaseAfter}, SecretRefs: []string{"context.reviewer_email"}},
	})
}

// The settings that slow the demo's stand-ins (Go durations, default 0), so that a user sees a job
// run for a while: each batch of ten leads of the search, each lead's score (a model call), and
// the wait before the import (a CRM's cool-down: a durable timer).
const (
	FindDelay  = "LEADGEN_FIND_DELAY"
	ScoreDelay = "LEADGEN_SCORE_DELAY"
	ImportWait = "LEADGEN_IMPORT_WAIT"
)

// Delays are the settings' values.
type Delays struct{ Find, Score, Import time.Duration }

// leadAgent is the agent's background work (the lead search) and its guarded import.
type leadAgent struct {
	delays Delays
	work   *jobs.Work[Run]
	imp    *checkpoint.Step[string, int]
}

// NewAgent returns the agent with its handlers, its stand-ins as slow as d says.
func NewAgent(d Delays) (*core.Agent, error) {
	reg, err := Registration()
	if err != nil {
		return nil, err
	}
	a, err := core.NewAgent(core.AgentConfig{Name: Name, Version: "1.0.0", Registration: reg,
		Description:  "Finds leads for a target market, reports them for review and imports the approved ones.",
		Introduction: &contract.Introduction{Tagline: "Sourced leads, reviewed before import", Summary: "Finds leads for a market, drafts a report, imports what you approve.", ExampleGoals: []string{"Find 50 SaaS leads in Europe"}},
	})
	if err != nil {
		return nil, err
	}
	a.DeclareInput(TestRun, Plan().InputFields()) // the dry run takes the job.start form as is
	// The email is the contact's key (the import upserts by it): one contact per address, whatever its case.
	core.ServeResource[Contact](a, Contacts, "email", core.BeforeCreate(func(_ context.Context, _ *contract.ActionRequest, c *Contact) error {
		c.Email = strings.ToLower(c.Email)
		return nil
	}))
	core.ServeDataset(a, Runs, runs)
	core.ServeArtifacts(a, reportArtifact)            // artifact.get: the report of a job
	la := &leadAgent{delays: d, imp: defineImport(a)} // the guarded import of governed jobs
	// svz serves job.sync, job.stop and step.awaiting.submit; a job that fails for good is cleaned up.
	la.work = jobs.Define(a, "leads.search", la.search, jobs.View(view), jobs.OnFailure(cleanUp))
	a.HandleSurface(contract.SurfaceJobStart, core.SurfaceFunc(startForm))
	a.HandleSurface(contract.SurfaceStepAwaiting, core.SurfaceFunc(jobSurface))
	a.HandleSurface(contract.SurfaceStepDetail, core.SurfaceFunc(jobSurface))
	for id, h := range map[string]core.ActionFunc{SuggestRegion: suggestRegion, contract.JobStartPreviewAction: preview, TestRun: la.testRun,
		contract.JobStartAction: la.start} {
		a.HandleAction(id, h)
	}
	return a, nil
}

// Build is the controller configured from the environment (adapters/platform runs it); the
// delays are read here, so that a wrong value stops the start.
func Build(ctx context.Context, getenv func(string) string, log *slog.Logger) (http.Handler, error) {
	var d Delays
	for name, v := range map[string]*time.Duration{FindDelay: &d.Find, ScoreDelay: &d.Score, ImportWait: &d.Import} {
		var err error
		if *v, err = envvar.Duration(getenv, name, 0, 0, 24*time.Hour); err != nil {
			return nil, err
		}
	}
	return platform.Agents(func() (*core.Agent, error) { return NewAgent(d) })(ctx, getenv, log)
}

func startForm(ctx context.Context, req *contract.SurfaceRequest) (*contract.SurfaceResult, error) {
	return a2ui.Result(ctx, req.Surface, a2ui.Form{
		ID: "leadgen.job.start", Title: "Find leads", Fields: Plan().InputFields(), State: map[string]any{"draft_session_id": req.DraftSessionID},
		Submit: a2ui.Submit{Action: contract.JobStartAction, Label: "Start"}, Preview: &a2ui.Submit{Action: contract.JobStartPreviewAction}})
}

// jobSurface is a job's review document (case.step.awaiting) and report detail (case.step.detail).
func jobSurface(ctx context.Context, req *contract.SurfaceRequest) (*contract.SurfaceResult, error) {
	job, err := records(ctx).Get(ctx, req.Job())
	if err != nil {
		return a2ui.Failed(ctx, req.Surface, contract.ResultError{Code: "job_not_found", Message: fmt.Sprintf("No job %q in this workspace", req.Job())})
	}
	if req.Surface == contract.SurfaceStepAwaiting {
		return a2ui.Result(ctx, req.Surface, a2ui.DocumentReview{
			Document: a2ui.ReviewedDocument{Title: "Lead report", Field: "report", Language: "markdown", Value: job.Report,
				Validation: []a2ui.ReviewCheck{{ID: "leads", Label: fmt.Sprintf("%d leads found", len(job.Leads)), Status: "review"}}},
			Submit: a2ui.Submit{Action: contract.StepAwaitingSubmitAction, Label: "Submit review"},
			Fields: reviewFields(),
		})
	}
	return a2ui.Result(ctx, req.Surface, a2ui.Detail{
		Title: "Lead report", Summary: fmt.Sprintf("%d %s leads in %s", len(job.Leads), job.Setup.Industry, job.Setup.Region),
		Facts: []a2ui.Fact{{Label: "Status", Value: statusOf(ctx, job.ID)}, {Label: "Credits", Value: job.Credits}, {Label: "Review", Value: job.Review}},
		Body:  &a2ui.Body{Language: "markdown", Value: job.Report}, Artifacts: artifacts(job.ID, len(job.Leads)),
	})
}
