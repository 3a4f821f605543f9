// Package a2ui builds the A2UI documents surface handlers return, typed, from the same
// contract.FieldDefinition values as setup plans, awaiting steps and resources, and wraps them in
// a contract.SurfaceResult carrying the agent's A2UI and catalog versions:
//
//	return a2ui.Result(ctx, req.Surface, a2ui.Form{
//		Title:  "Start a campaign",
//		Fields: plan.InputFields(),
//		Submit: a2ui.Submit{Action: "job.start", Label: "Start"},
//	})
//
// Form, DocumentReview and ResourceImport are the shapes the seeds name. Detail is svz's shape for
// case.step.detail views, whose document the seeds leave to the agent (Studio renders unknown
// documents generically). Every builder validates its document before it is sent.
package a2ui

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/supervaize/svz/core/contract"
)

// Document types.
const (
	TypeForm           = "Form"
	TypeDocumentReview = "DocumentReview"
	TypeResourceImport = contract.ResourceImportDocumentType
	TypeDetail         = "Detail"
)

type versionsKey struct{}

// Versions are the versions Result writes in a surface result: the agent registration's
// a2ui_version and a2ui_catalog_version.
type Versions struct {
	A2UI, Catalog string
}

// NewContext returns ctx carrying v: the controller calls it for every handler with its agent's
// versions.
func NewContext(ctx context.Context, v *Versions) context.Context {
	return context.WithValue(ctx, versionsKey{}, v)
}

// Result wraps doc (a document of this package, or any value that encodes as a JSON object) in
// the surface result of surface, with the agent's versions from ctx (null when ctx has none). A
// document with a Validate method is validated first.
func Result(ctx context.Context, surface string, doc any) (*contract.SurfaceResult, error) {
	if v, ok := doc.(interface{ Validate() error }); ok {
		if err := v.Validate(); err != nil {
			return nil, fmt.Errorf("a2ui: %s document: %w", surface, err)
		}
	}
	b, err := json.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("a2ui: %s document: %w", surface, err)
	}
	res := &contract.SurfaceResult{Surface: surface, Document: b}
	if v, ok := ctx.Value(versionsKey{}).(*Versions); ok && v != nil {
		a2ui, catalog := v.A2UI, v.Catalog
		res.A2UIVersion, res.A2UICatalogVersion = &a2ui, &catalog
	}
	return res, nil
}

// Failed is the surface result of a surface that cannot be shown as asked, e.g. the review of a
// step that does not exist: an empty document and the errors, for Studio to show instead. It
// returns as Result and a surface handler do (return a2ui.Failed(ctx, req.Surface, errs...));
// without an error to show, it is an error itself.
func Failed(ctx context.Context, surface string, errs ...contract.ResultError) (*contract.SurfaceResult, error) {
	if len(errs) == 0 {
		return nil, fmt.Errorf("a2ui: %s: Failed needs the errors to show", surface)
	}
	res, _ := Result(ctx, surface, struct{}{}) // an empty document always encodes
	res.Errors = errs
	return res, nil
}

// Submit names the action a document submits to, with an optional button label.
type Submit struct {
	Action string `json:"action"`
	Label  string `json:"label,omitzero"`
}

// Form is a form document: fields (the schema job.start validates against when they come from the
// setup plan), the submit action, an optional preview action and opaque state Studio sends back.
type Form struct {
	ID      string                     `json:"id,omitzero"`
	Title   string                     `json:"title,omitzero"`
	Fields  []contract.FieldDefinition `json:"fields"`
	Submit  Submit                     `json:"submit"`
	Preview *Submit                    `json:"preview,omitzero"`
	State   any                        `json:"state,omitzero"`
}

// MarshalJSON writes the form with "type": "Form" first.
func (f Form) MarshalJSON() ([]byte, error) {
	type plain Form
	p := plain(f)
	if p.Fields == nil {
		p.Fields = []contract.FieldDefinition{}
	}
	return json.Marshal(struct {
		Type string `json:"type"`
		plain
	}{TypeForm, p})
}

// Validate reports why f is not a valid form: a submit action, valid fields with unique ids,
// depends_on naming a field of the form.
func (f Form) Validate() error {
	errs := validateFields(f.Fields)
	if f.Submit.Action == "" {
		errs = append(errs, errors.New("submit.action is required"))
	}
	if f.Preview != nil && f.Preview.Action == "" {
		errs = append(errs, errors.New("preview.action is required"))
	}
	return errors.Join(errs...)
}

// DocumentReview is a review document for an awaiting step (seed 000): the document to review
// (its text is submitted in the field Document.Field), the submit action and typed fields.
type DocumentReview struct {
	Document ReviewedDocument           `json:"document"`
	Submit   Submit                     `json:"submit"`
	Fields   []contract.FieldDefinition `json:"fields"`
	State    any                        `json:"state,omitzero"`
}

// ReviewedDocument is the content under review. Field is the id of the form field that carries
// the (edited) text; Language says how to render Value (e.g. "markdown"). A document shown for
// review but not edited (a report the operator approves or rejects through the fields) sets
// ReadOnly: its Field then needs no form field, and may be empty.
type ReviewedDocument struct {
	Title      string        `json:"title"`
	Field      string        `json:"field"`
	Language   string        `json:"language,omitzero"`
	Value      string        `json:"value"`
	ReadOnly   bool          `json:"read_only,omitzero"`
	Validation []ReviewCheck `json:"validation,omitzero"`
}

// ReviewCheck is one readiness check shown with the document.
type ReviewCheck struct {
	ID     string `json:"id"`
	Label  string `json:"label"`
	Status string `json:"status"`
}

// MarshalJSON writes the document with "type": "DocumentReview" first.
func (d DocumentReview) MarshalJSON() ([]byte, error) {
	type plain DocumentReview
	p := plain(d)
	if p.Fields == nil {
		p.Fields = []contract.FieldDefinition{}
	}
	return json.Marshal(struct {
		Type string `json:"type"`
		plain
	}{TypeDocumentReview, p})
}

// Validate reports why d is not a valid review: a submit action, valid fields, and, unless the
// document is read-only, Document.Field naming one of them.
func (d DocumentReview) Validate() error {
	errs := validateFields(d.Fields)
	if d.Submit.Action == "" {
		errs = append(errs, errors.New("submit.action is required"))
	}
	found := d.Document.ReadOnly
	for _, f := range d.Fields {
		found = found || f.ID == d.Document.Field
	}
	if !found {
		errs = append(errs, fmt.Errorf("document.field %q names none of the fields (set document.ReadOnly for a document shown but not edited)", d.Document.Field))
	}
	return errors.Join(errs...)
}

// ResourceImport is the import document of a resource (V2A2UIResourceImportDocument).
type ResourceImport = contract.ResourceImportDocument

// Detail is svz's detail view for case.step.detail (a step or an artifact): a title, a summary,
// label/value facts, an optional body (e.g. markdown) and the artifacts it shows. The seeds name
// detail views but fix no document; Studio renders an unknown document generically.
type Detail struct {
	ID        string                 `json:"id,omitzero"`
	Title     string                 `json:"title"`
	Summary   string                 `json:"summary,omitzero"`
	Facts     []Fact                 `json:"facts,omitzero"`
	Body      *Body                  `json:"body,omitzero"`
	Artifacts []contract.ArtifactRef `json:"artifacts,omitzero"`
	Actions   []Submit               `json:"actions,omitzero"`
}

// Fact is one label/value line of a Detail.
type Fact struct {
	Label string `json:"label"`
	Value any    `json:"value"`
}

// Body is a Detail's content and how to render it (markdown, text, json...).
type Body struct {
	Language string `json:"language"`
	Value    string `json:"value"`
}

// MarshalJSON writes the view with "type": "Detail" first.
func (d Detail) MarshalJSON() ([]byte, error) {
	type plain Detail
	return json.Marshal(struct {
		Type string `json:"type"`
		plain
	}{TypeDetail, plain(d)})
}

// Validate reports why d is not a valid detail view: a title, artifacts with id and type.
func (d Detail) Validate() error {
	var errs []error
	if d.Title == "" {
		errs = append(errs, errors.New("title is required"))
	}
	for i, a := range d.Artifacts {
		if a.ID == "" || a.Type == "" {
			errs = append(errs, fmt.Errorf("artifacts[%d] needs id and type", i))
		}
	}
	return errors.Join(errs...)
}

// validateFields checks each field and that ids are unique and depends_on names a sibling.
func validateFields(fields []contract.FieldDefinition) []error {
	var errs []error
	ids := map[string]bool{}
	for i := range fields {
		if err := fields[i].Validate(); err != nil {
			errs = append(errs, fmt.Errorf("fields[%d]: %w", i, err))
		}
		if ids[fields[i].ID] {
			errs = append(errs, fmt.Errorf("fields[%d]: id %q is used twice", i, fields[i].ID))
		}
		ids[fields[i].ID] = true
	}
	for i, f := range fields {
		if f.DependsOn != nil && !ids[f.DependsOn.Field] {
			errs = append(errs, fmt.Errorf("fields[%d]: depends_on names %q, which is not a field of this document", i, f.DependsOn.Field))
		}
	}
	return errs
}
