package workbench_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"

	"github.com/supervaize/svz/core"
	"github.com/supervaize/svz/core/config"
	"github.com/supervaize/svz/core/contract"
	"github.com/supervaize/svz/examples/helloworld/hello"
)

// The showcase agent declares what Hello World does not: a setup plan whose fields use every type
// and key of the field schema (seed 000), a DocumentReview awaiting surface, a document type the
// workbench has no renderer for, a help action, a dry-run action, a resource, a dataset and rule
// checkpoints. The browser tests drive it beside Hello World.
const showcaseSlug = "field-showcase"

func intp(n int) *int           { return &n }
func floatp(f float64) *float64 { return &f }

// showcaseFields are the setup plan's fields, and the job.start form's.
func showcaseFields() []contract.FieldDefinition {
	file := contract.FieldDefinition{ID: "report", Label: "Report (.md)", Type: contract.FieldFile,
		Description: "A markdown file sent inline (base64) with the action",
		Extra:       contract.Extra{"accept": json.RawMessage(`".md,text/markdown"`), "max_bytes": json.RawMessage(`4096`), "storage": json.RawMessage(`"inline"`)}}
	return []contract.FieldDefinition{
		{ID: "goal", Label: "Goal", Type: contract.FieldString, Required: true, Placeholder: "What should the agent do?",
			Description: "The job's goal, shown to the operator",
			Validation:  &contract.FieldValidation{MinLength: intp(3), Pattern: "^[A-Za-z]", Message: "Start with a letter, 3 characters at least"}},
		{ID: "brief", Label: "Brief", Type: contract.FieldText, Multiline: true, MinRows: intp(4), Validation: &contract.FieldValidation{MaxLength: intp(500)}},
		{ID: "budget", Label: "Budget", Type: contract.FieldNumber, Default: 10, Validation: &contract.FieldValidation{Min: floatp(0), Message: "Budget cannot be negative"}},
		{ID: "runs", Label: "Runs", Type: contract.FieldInteger, Required: true, Default: 5, Validation: &contract.FieldValidation{Min: floatp(1), Max: floatp(50)}},
		{ID: "notify", Label: "Notify me", Type: contract.FieldBoolean, Default: true, Description: "Send a message when the job ends"},
		{ID: "mode", Label: "Mode", Type: contract.FieldSelect, Required: true, Placeholder: "Pick a mode",
			Options: []contract.FieldOption{{Value: "fast", Label: "Fast"}, {Value: "custom", Label: "Custom"}}},
		{ID: "depth", Label: "Depth", Type: contract.FieldInteger, DependsOn: &contract.DependsOn{Field: "mode", In: []string{"custom"}}},
		{ID: "channels", Label: "Channels", Type: contract.FieldMultiSelect,
			Options:    []contract.FieldOption{{Value: "email", Label: "Email"}, {Value: "sms", Label: "SMS"}, {Value: "chat", Label: "Chat"}},
			Validation: &contract.FieldValidation{MinItems: intp(1)}},
		{ID: "start_on", Label: "Start on", Type: contract.FieldDate},
		{ID: "contact", Label: "Contact", Type: contract.FieldResourceRef, OptionsSource: &contract.OptionsSource{Type: "resource", Resource: "contacts"}},
		file,
		{ID: "targets", Label: "Targets", Type: contract.FieldList, Validation: &contract.FieldValidation{MaxItems: intp(3)},
			ItemFields: []contract.FieldDefinition{
				{ID: "name", Label: "Name", Type: contract.FieldString, Required: true},
				{ID: "url", Label: "URL", Type: contract.FieldString},
			}},
		{ID: "accent", Label: "Accent colour", Type: "color", Placeholder: "#336699"},
	}
}

func showcaseAgent() (*core.Agent, error) {
	plan := &contract.SetupPlan{
		Steps:        []contract.SetupStep{{ID: "scope", Title: "Scope", Description: "What the job does", Fields: showcaseFields(), HelpActions: []string{"goal.suggest"}}},
		CostEstimate: &contract.CostEstimate{Status: contract.CostEstimated, Unit: "credits", Min: floatp(5), Max: floatp(20), Basis: "for 50 runs"},
	}
	reg, err := contract.BuildRegistration(contract.RegistrationSpec{
		AgentSlug: showcaseSlug, DisplayName: "Field Showcase", A2UICatalogVersion: "showcase.1",
		Surfaces: []contract.SurfaceSpec{
			contract.SurfaceDefinition{ID: "job.start", Label: "Start", Description: "Every field type of the field schema"},
			contract.SurfaceID("case.step.awaiting"),
			contract.SurfaceDefinition{ID: "mission.overview", Label: "Overview", Description: "A document the workbench shows generically"},
		},
		Actions: []contract.ActionSpec{
			contract.ActionID("job.start"), contract.ActionID("step.awaiting.submit"),
			contract.ActionDefinition{ID: "goal.suggest", Kind: "help", ReadOnly: true, TargetField: "goal", Label: "Suggest a goal"},
			contract.ActionDefinition{ID: "job.test", DryRun: true, Label: "Test run", Description: "Runs once, sends nothing"},
		},
		JobPolicy:       &contract.JobPolicy{Setup: &contract.JobSetupPolicy{Plan: plan}},
		Resources:       []contract.ResourceDefinition{{ID: "contacts", Label: "Contacts", Operations: []string{"list"}, Scope: contract.ScopeWorkspace}},
		Datasets:        []contract.DatasetDefinition{{ID: "runs", Label: "Runs", Scope: contract.ScopeMission}},
		RuleCheckpoints: &contract.RuleCheckpoints{Phases: []string{"before", "after"}},
	})
	if err != nil {
		return nil, err
	}
	a, err := core.NewAgent(core.AgentConfig{
		Name: "Field Showcase", Version: "0.1", Description: "Every field type, document type and action flag the workbench shows.",
		Registration:    reg,
		Introduction:    &contract.Introduction{Tagline: "Shows every field", Summary: "A test agent of the workbench.", ExampleGoals: []string{"Greet the team"}},
		FullDescription: &contract.FullDescription{Format: contract.FullDescriptionMarkdown, Content: "# Field Showcase\n\nEvery field type."},
		BillingCatalog:  []contract.BillingCatalogItem{{SKU: "run", Unit: "run", Description: "One run"}},
	})
	if err != nil {
		return nil, err
	}
	a.HandleSurface("job.start", core.SurfaceFunc(func(_ context.Context, r *contract.SurfaceRequest) (*contract.SurfaceResult, error) {
		return document(r.Surface, map[string]any{
			"type": "Form", "id": "showcase.job.start", "title": "Start a showcase job", "fields": showcaseFields(),
			"submit": map[string]string{"action": "job.start", "label": "Start"}, "preview": map[string]string{"action": "job.start.preview", "label": "Preview"},
			"state": map[string]any{"draft_session_id": r.DraftSessionID},
		})
	}))
	a.HandleSurface("case.step.awaiting", core.SurfaceFunc(func(_ context.Context, r *contract.SurfaceRequest) (*contract.SurfaceResult, error) {
		return document(r.Surface, map[string]any{
			"type": "DocumentReview",
			"document": map[string]any{"title": "Review", "field": "review_text", "language": "markdown", "value": "# Draft\n\nReview this content.",
				"validation": []map[string]string{{"id": "readiness", "label": "Ready for approval", "status": "review"}}},
			"submit": map[string]string{"action": "step.awaiting.submit", "label": "Approve"},
			"fields": []contract.FieldDefinition{
				{ID: "review_text", Label: "Review text", Type: contract.FieldText, Multiline: true, Required: true},
				{ID: "approve_review", Label: "Approve review", Type: contract.FieldBoolean, Required: true},
			},
			"state": map[string]any{"job_id": r.JobID, "case_id": r.CaseID, "step_id": r.StepID},
		})
	}))
	a.HandleSurface("mission.overview", core.SurfaceFunc(func(_ context.Context, r *contract.SurfaceRequest) (*contract.SurfaceResult, error) {
		return document(r.Surface, map[string]any{"type": "Dashboard", "title": "Overview",
			"widgets": []map[string]any{{"kind": "metric", "label": "Runs", "value": 42}}})
	}))
	a.HandleAction("job.start", core.ActionFunc(func(_ context.Context, r *contract.ActionRequest) (*contract.ActionResult, error) {
		var in struct {
			Goal string `json:"goal"`
		}
		_ = json.Unmarshal(r.Input, &in)
		if in.Goal == "taken" {
			return &contract.ActionResult{Status: contract.StatusError, Effects: []contract.Effect{},
				Errors: []contract.ResultError{fieldError("input_invalid", "goal", "This goal is already used by another job")}}, nil
		}
		var data map[string]any
		_ = json.Unmarshal(r.Input, &data)
		jobID := deref(r.JobID)
		return &contract.ActionResult{
			Status:  contract.StatusOK,
			Effects: []contract.Effect{{Type: "job.started", JobID: jobID, Status: "awaiting", Data: data}},
			JobState: &contract.JobState{
				Job: contract.Job{ID: jobID, MissionID: r.MissionID, AgentSlug: r.AgentSlug, Status: "awaiting", Source: contract.JobSource{Type: "fresh_start"}},
				Cases: []contract.Case{{ID: "case-1", Lane: contract.DefaultLane, Title: in.Goal, Status: "awaiting", Steps: []contract.Step{{
					ID: "review", Activity: contract.ActivityOperation, Status: "awaiting", Title: "Review",
					Awaiting: &contract.Awaiting{Reason: "review", Surface: "case.step.awaiting", Action: "step.awaiting.submit",
						Fields: []contract.FieldDefinition{{ID: "approve_review", Label: "Approve review", Type: contract.FieldBoolean, Required: true}}},
				}}}},
			},
		}, nil
	}))
	a.HandleAction("job.start.preview", core.ActionFunc(func(context.Context, *contract.ActionRequest) (*contract.ActionResult, error) {
		return &contract.ActionResult{Status: contract.StatusOK, Effects: []contract.Effect{{Type: "job.start.previewed"}}, SetupPlan: plan}, nil
	}))
	a.HandleAction("step.awaiting.submit", core.ActionFunc(func(_ context.Context, r *contract.ActionRequest) (*contract.ActionResult, error) {
		return &contract.ActionResult{Status: contract.StatusOK, Effects: []contract.Effect{{Type: "step.awaiting.submitted",
			JobID: deref(r.JobID), CaseID: deref(r.CaseID), StepID: deref(r.StepID), Status: "completed"}}}, nil
	}))
	a.HandleAction("goal.suggest", core.ActionFunc(func(context.Context, *contract.ActionRequest) (*contract.ActionResult, error) {
		return &contract.ActionResult{Status: contract.StatusOK, Effects: []contract.Effect{}, Draft: &contract.FieldDraft{Field: "goal", Value: "Greet the team",
			Suggestions: []contract.Suggestion{{Message: "Name who to greet", Severity: contract.SeverityInfo, Field: "goal"}}}}, nil
	}))
	a.HandleAction("job.test", core.ActionFunc(func(context.Context, *contract.ActionRequest) (*contract.ActionResult, error) {
		return &contract.ActionResult{Status: contract.StatusOK, Effects: []contract.Effect{{Type: "job.tested", Message: "one run, nothing sent"}},
			DryRun: &contract.DryRunOutcome{ExpiresAt: "2026-12-31T00:00:00Z", Deletable: true,
				CostIncurred: &contract.CostEstimate{Status: contract.CostEstimated, Unit: "credits", Min: floatp(1), Max: floatp(1)}}}, nil
	}))
	a.HandleAction("resource.contacts.list", core.ActionFunc(func(context.Context, *contract.ActionRequest) (*contract.ActionResult, error) {
		return &contract.ActionResult{Status: contract.StatusOK, Effects: []contract.Effect{{Type: "resource.listed", Resource: "contacts"}}}, nil
	}))
	return a, nil
}

// fieldError is an error result about an input field. It is decoded from its wire form so that
// the field lands where the contract keeps it (a member of ResultError, or an extra member where
// the contract has none yet): either way it is written as "field".
func fieldError(code, field, message string) contract.ResultError {
	var e contract.ResultError
	b, _ := json.Marshal(map[string]string{"code": code, "field": field, "message": message})
	if err := json.Unmarshal(b, &e); err != nil {
		panic(err)
	}
	return e
}

func document(surface string, doc any) (*contract.SurfaceResult, error) {
	b, err := json.Marshal(doc)
	if err != nil {
		return nil, err
	}
	v, catalog := "v0.8", "showcase.1"
	return &contract.SurfaceResult{Surface: surface, A2UIVersion: &v, A2UICatalogVersion: &catalog, Document: b}, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// buildBoth is a controller serving Hello World and the showcase agent.
func buildBoth(ctx context.Context, getenv func(string) string, log *slog.Logger) (http.Handler, error) {
	h, err := hello.NewAgent()
	if err != nil {
		return nil, err
	}
	s, err := showcaseAgent()
	if err != nil {
		return nil, err
	}
	return config.NewController(ctx, getenv, log, h, s)
}
