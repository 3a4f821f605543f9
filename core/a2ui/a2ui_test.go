package a2ui_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/supervaize/svz/core/a2ui"
	"github.com/supervaize/svz/core/contract"
)

// TestDocumentReviewIsTheSeedsExample builds seed 000's DocumentReview example and compares it,
// member for member, with the seed's JSON.
func TestDocumentReviewIsTheSeedsExample(t *testing.T) {
	ctx := a2ui.NewContext(context.Background(), &a2ui.Versions{A2UI: "v0.8", Catalog: "research-agent.2026-05-16"})
	res, err := a2ui.Result(ctx, contract.SurfaceStepAwaiting, a2ui.DocumentReview{
		Document: a2ui.ReviewedDocument{Title: "Review", Field: "review_text", Language: "markdown", Value: "# Draft\n\nReview this content.",
			Validation: []a2ui.ReviewCheck{{ID: "readiness", Label: "Ready for approval", Status: "review"}}},
		Submit: a2ui.Submit{Action: "step.awaiting.submit", Label: "Approve"},
		Fields: []contract.FieldDefinition{
			{ID: "review_text", Label: "Review text", Type: "text", Multiline: true, Required: true},
			{ID: "approve_review", Label: "Approve review", Type: "boolean", Required: true},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	seed := `{"type":"DocumentReview","document":{"title":"Review","field":"review_text","language":"markdown",` +
		`"value":"# Draft\n\nReview this content.","validation":[{"id":"readiness","label":"Ready for approval","status":"review"}]},` +
		`"submit":{"action":"step.awaiting.submit","label":"Approve"},"fields":[{"id":"review_text","label":"Review text","type":"text",` +
		`"multiline":true,"required":true},{"id":"approve_review","label":"Approve review","type":"boolean","required":true}]}`
	var got, want any
	_ = json.Unmarshal(res.Document, &got)
	_ = json.Unmarshal([]byte(seed), &want)
	gb, _ := json.Marshal(got)
	wb, _ := json.Marshal(want)
	if string(gb) != string(wb) {
		t.Errorf("document = %s\nseed     = %s", res.Document, seed)
	}
	if *res.A2UIVersion != "v0.8" || *res.A2UICatalogVersion != "research-agent.2026-05-16" || res.Surface != contract.SurfaceStepAwaiting {
		t.Errorf("result = %+v", res)
	}
}

// TestFormIsHelloWorlds: the Form builder gives the Hello World job.start document byte for byte
// (spec §10), from FieldDefinitions.
func TestFormIsHelloWorlds(t *testing.T) {
	res, err := a2ui.Result(context.Background(), "job.start", a2ui.Form{
		ID: "supervaizer.local.hello_world.job.start", Title: "Start Hello World",
		Fields: []contract.FieldDefinition{
			{ID: "count", Label: "How many times to say hello", Type: "number", Required: true, Default: 3},
			{ID: "enable_human_review", Label: "Enable human review", Type: "boolean", Default: false},
		},
		Submit: a2ui.Submit{Action: "job.start", Label: "Start"}, Preview: &a2ui.Submit{Action: "job.start.preview"},
		State: map[string]any{"draft_session_id": nil},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"type":"Form","id":"supervaizer.local.hello_world.job.start","title":"Start Hello World","fields":[` +
		`{"id":"count","label":"How many times to say hello","type":"number","required":true,"default":3},` +
		`{"id":"enable_human_review","label":"Enable human review","type":"boolean","required":false,"default":false}],` +
		`"submit":{"action":"job.start","label":"Start"},"preview":{"action":"job.start.preview"},"state":{"draft_session_id":null}}`
	if string(res.Document) != want {
		t.Errorf("form = %s\nwant   %s", res.Document, want)
	}
	if res.A2UIVersion != nil {
		t.Error("versions outside a handler's context must be null")
	}
}

func TestDocumentsAreValidated(t *testing.T) {
	for name, doc := range map[string]any{
		"form without submit":          a2ui.Form{},
		"form with a bad field":        a2ui.Form{Submit: a2ui.Submit{Action: "a"}, Fields: []contract.FieldDefinition{{ID: "x"}}},
		"form with twice a field":      a2ui.Form{Submit: a2ui.Submit{Action: "a"}, Fields: []contract.FieldDefinition{{ID: "x", Label: "X"}, {ID: "x", Label: "X"}}},
		"form depending on a stranger": a2ui.Form{Submit: a2ui.Submit{Action: "a"}, Fields: []contract.FieldDefinition{{ID: "x", Label: "X", DependsOn: &contract.DependsOn{Field: "y", In: []string{"1"}}}}},
		"review of a missing field":    a2ui.DocumentReview{Submit: a2ui.Submit{Action: "a"}, Document: a2ui.ReviewedDocument{Field: "text"}},
		"detail without title":         a2ui.Detail{},
		"import without columns":       &a2ui.ResourceImport{ID: "i", Title: "I", Resource: "r", Submit: contract.SubmitDefinition{Action: "a"}},
	} {
		if _, err := a2ui.Result(context.Background(), "s", doc); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	res, err := a2ui.Result(context.Background(), "case.step.detail", a2ui.Detail{Title: "Report", Facts: []a2ui.Fact{{Label: "Leads", Value: 3}},
		Body: &a2ui.Body{Language: "markdown", Value: "# R"}, Artifacts: []contract.ArtifactRef{{ID: "report:1", Type: "report"}}})
	if err != nil || !strings.HasPrefix(string(res.Document), `{"type":"Detail","title":"Report","facts":[{"label":"Leads","value":3}]`) {
		t.Errorf("detail = %s, %v", res.Document, err)
	}
}

func TestFailed(t *testing.T) {
	ctx := a2ui.NewContext(context.Background(), &a2ui.Versions{A2UI: "v0.8", Catalog: "c.1"})
	res, err := a2ui.Failed(ctx, "case.step.awaiting", contract.ResultError{Code: "job_not_found", Message: "No job"})
	b, _ := json.Marshal(res)
	want := `{"surface":"case.step.awaiting","a2ui_version":"v0.8","a2ui_catalog_version":"c.1","document":{},"errors":[{"code":"job_not_found","message":"No job"}]}`
	if err != nil || string(b) != want || res.Validate() != nil {
		t.Errorf("failed = %s, %v\nwant %s", b, err, want)
	}
	// A failure without an error to show is the handler's mistake.
	if res, err := a2ui.Failed(ctx, "case.step.awaiting"); res != nil || err == nil || err.Error() != "a2ui: case.step.awaiting: Failed needs the errors to show" {
		t.Errorf("no errors = %v, %v", res, err)
	}
}

// TestReadOnlyReview: a document shown for review but not edited names no field.
func TestReadOnlyReview(t *testing.T) {
	doc := a2ui.DocumentReview{
		Document: a2ui.ReviewedDocument{Title: "Report", Field: "report", Language: "markdown", Value: "# Leads"},
		Submit:   a2ui.Submit{Action: "step.awaiting.submit", Label: "Send"},
		Fields:   []contract.FieldDefinition{{ID: "approved", Label: "Approve", Type: contract.FieldBoolean, Required: true}},
	}
	if _, err := a2ui.Result(context.Background(), "case.step.awaiting", doc); err == nil ||
		!strings.Contains(err.Error(), `document.field "report" names none of the fields (set document.ReadOnly for a document shown but not edited)`) {
		t.Errorf("editable document naming no field: %v", err)
	}
	doc.Document.ReadOnly = true
	res, err := a2ui.Result(context.Background(), "case.step.awaiting", doc)
	want := `{"type":"DocumentReview","document":{"title":"Report","field":"report","language":"markdown","value":"# Leads","read_only":true},` +
		`"submit":{"action":"step.awaiting.submit","label":"Send"},"fields":[{"id":"approved","label":"Approve","type":"boolean","required":true}]}`
	if err != nil || string(res.Document) != want {
		t.Errorf("read-only review = %s, %v\nwant %s", res.Document, err, want)
	}
}
