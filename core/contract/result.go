package contract

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"

	"github.com/supervaize/svz/core/internal/wirejson"
)

// Action result statuses. A status of "error" is a normal result, not a JSON-RPC error.
const (
	StatusOK    = "ok"
	StatusError = "error"
)

// ActionResult is what an action handler returns (V2ActionResult). On the wire, absent optional
// members are omitted (the reference serializes it with exclude_none); effects are always written,
// [] when there are none.
type ActionResult struct {
	Status       string        `json:"status"`
	Effects      []Effect      `json:"effects" wire:"nonnil"`
	JobState     *JobState     `json:"job_state,omitzero"`
	ReplaySafety *ReplaySafety `json:"replay_safety,omitzero"`
	// SetupPlan is a *SetupPlan, or any value that encodes as a JSON object (passed as is).
	SetupPlan any            `json:"setup_plan,omitzero"`
	Draft     *FieldDraft    `json:"draft,omitzero"`
	DryRun    *DryRunOutcome `json:"dry_run,omitzero"`
	Errors    []ResultError  `json:"errors,omitzero"`
	Extra     Extra          `json:"-"`
}

// Effect is one typed effect of an action (V2Effect). Only Type is required; zero-valued members
// are omitted on the wire (a nil slice or map is absent, an empty non-nil one is written).
//
// Item takes any value that encodes as a JSON object (a struct, a map, a pointer to either, a
// json.RawMessage object); Items and Rows any slice or array of such values, e.g. []Contact. A
// nil slice of a concrete type (var out []Contact) is written as [], never null; a nil Item,
// Items or Rows is absent. Decoded effects hold map[string]any and []any.
type Effect struct {
	Type       string           `json:"type"`
	JobID      string           `json:"job_id,omitzero"`
	CaseID     string           `json:"case_id,omitzero"`
	StepID     string           `json:"step_id,omitzero"`
	Resource   string           `json:"resource,omitzero"`
	Dataset    string           `json:"dataset,omitzero"`
	ArtifactID string           `json:"artifact_id,omitzero"`
	Status     string           `json:"status,omitzero"`
	Message    string           `json:"message,omitzero"`
	Count      *int             `json:"count,omitzero"`
	Item       any              `json:"item,omitzero"`
	Items      any              `json:"items,omitzero"`
	Rows       any              `json:"rows,omitzero"`
	Errors     []map[string]any `json:"errors,omitzero"`
	Gaps       []map[string]any `json:"gaps,omitzero"`
	Summary    map[string]any   `json:"summary,omitzero"`
	Case       map[string]any   `json:"case,omitzero"`
	Data       map[string]any   `json:"data,omitzero"`
	Extra      Extra            `json:"-"`
}

// ReplaySafety declares how a result may be replayed (V2ReplaySafetyMetadata). Nil booleans take
// the reference defaults on the wire: stable_external_ids_required true,
// strictly_idempotent_response false, convergent true.
type ReplaySafety struct {
	DedupeKeys                 []string `json:"dedupe_keys" wire:"nonnil"`
	StableExternalIDsRequired  *bool    `json:"stable_external_ids_required"`
	StrictlyIdempotentResponse *bool    `json:"strictly_idempotent_response"`
	Convergent                 *bool    `json:"convergent"`
	Extra                      Extra    `json:"-"`
}

// ResultError is one entry of ActionResult.Errors (or SurfaceResult.Errors), e.g.
// {"code": "idempotency_conflict", "message": "..."}. An error about an input field names it:
// Field is the id of the declared field and, inside a list field, Item is the row index and
// ItemField the id of the item field. Build them with InvalidField and the validators
// (ValidateInput, ActionRequest.DecodeValid); refuse with Refuse.
type ResultError struct {
	Code      string `json:"code"`
	Message   string `json:"message,omitzero"`
	Field     string `json:"field,omitzero"`
	Item      *int   `json:"item,omitzero"`
	ItemField string `json:"item_field,omitzero"`
	// LeaseExpiresAt (RFC 3339) and RetryAfterSeconds come with idempotency_in_progress: when
	// the running claim ends unless renewed, and how long to wait before retrying.
	LeaseExpiresAt    string `json:"lease_expires_at,omitzero"`
	RetryAfterSeconds *int   `json:"retry_after_seconds,omitzero"`
	Extra             Extra  `json:"-"`
}

// FieldDraft is the answer of a help action (V2FieldDraft): a proposed value for the target setup
// field (nil for a pure check) and suggestions. Studio shows it as an editable draft and never
// applies it by itself.
type FieldDraft struct {
	Field       string       `json:"field"`
	Value       any          `json:"value,omitzero"`
	Suggestions []Suggestion `json:"suggestions" wire:"nonnil"`
	Extra       Extra        `json:"-"`
}

// Suggestion severities.
const (
	SeverityInfo    = "info"
	SeverityWarning = "warning"
	SeverityError   = "error"
)

// Suggestion is one remark of a help action (V2Suggestion).
type Suggestion struct {
	Message       string `json:"message"`
	Severity      string `json:"severity"`
	Field         string `json:"field,omitzero"`
	ProposedValue any    `json:"proposed_value,omitzero"`
	Extra         Extra  `json:"-"`
}

// DryRunOutcome is the answer of a dry-run action (V2DryRunOutcome).
type DryRunOutcome struct {
	ExpiresAt    string        `json:"expires_at,omitzero"`
	Deletable    bool          `json:"deletable"`
	CostIncurred *CostEstimate `json:"cost_incurred,omitzero"`
	Extra        Extra         `json:"-"`
}

// SurfaceResult is what a surface handler returns (V2SurfaceResult). Unlike action results, its
// absent versions are written as null (the reference does not exclude None here). Document is an
// opaque A2UI document: any JSON object.
type SurfaceResult struct {
	Surface            string          `json:"surface"`
	A2UIVersion        *string         `json:"a2ui_version"`
	A2UICatalogVersion *string         `json:"a2ui_catalog_version"`
	Document           json.RawMessage `json:"document"`
	// Errors, when set, tells Studio why the surface cannot be shown as asked (a business error,
	// e.g. the job it is about does not exist). The reference model keeps it as an extra member.
	Errors []ResultError `json:"errors,omitzero"`
	Extra  Extra         `json:"-"`
}

// Validate reports why r is not a valid V2ActionResult, or nil.
func (r *ActionResult) Validate() error {
	var errs []error
	if r.Status != StatusOK && r.Status != StatusError {
		errs = append(errs, fmt.Errorf("status must be %q or %q, not %q", StatusOK, StatusError, r.Status))
	}
	for i, e := range r.Effects {
		if e.Type == "" {
			errs = append(errs, fmt.Errorf("effects[%d].type is required", i))
		}
		if err := e.checkShapes(); err != nil {
			errs = append(errs, fmt.Errorf("effects[%d].%w", i, err))
		}
	}
	if r.JobState != nil {
		if err := r.JobState.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("job_state: %w", err))
		}
	}
	if r.SetupPlan != nil {
		b, err := json.Marshal(r.SetupPlan)
		if err != nil {
			errs = append(errs, fmt.Errorf("setup_plan: %w", err))
		} else if !isObject(b) {
			errs = append(errs, errors.New("setup_plan must be a JSON object"))
		}
	}
	if r.Draft != nil {
		if r.Draft.Field == "" {
			errs = append(errs, errors.New("draft.field is required"))
		}
		for i, s := range r.Draft.Suggestions {
			if s.Message == "" {
				errs = append(errs, fmt.Errorf("draft.suggestions[%d].message is required", i))
			}
			switch s.Severity {
			case SeverityInfo, SeverityWarning, SeverityError:
			default:
				errs = append(errs, fmt.Errorf("draft.suggestions[%d].severity must be info, warning or error, not %q", i, s.Severity))
			}
		}
	}
	if r.DryRun != nil && r.DryRun.CostIncurred != nil {
		if err := r.DryRun.CostIncurred.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("dry_run.cost_incurred: %w", err))
		}
	}
	for i, e := range r.Errors {
		if e.Code == "" {
			errs = append(errs, fmt.Errorf("errors[%d].code is required", i))
		}
	}
	return errors.Join(errs...)
}

// Validate reports why r is not a valid V2SurfaceResult, or nil.
func (r *SurfaceResult) Validate() error {
	var errs []error
	if r.Surface == "" {
		errs = append(errs, errors.New("surface is required"))
	}
	// Seed 000: "a surface result needs surface and document" (the reference defaults it to {}).
	// A result that only reports why the surface cannot be shown (Errors) goes without one.
	switch {
	case len(r.Document) == 0 && len(r.Errors) == 0:
		errs = append(errs, errors.New("document is required: the A2UI document of the surface, a JSON object"))
	case len(r.Document) > 0 && !isObjectJSON(r.Document):
		errs = append(errs, errors.New("document must be a JSON object"))
	}
	for i, e := range r.Errors {
		if e.Code == "" {
			errs = append(errs, fmt.Errorf("errors[%d].code is required", i))
		}
	}
	return errors.Join(errs...)
}

// MarshalJSON writes the result: effects as [] when empty, absent members omitted, unknown
// members kept.
func (r ActionResult) MarshalJSON() ([]byte, error) { return marshal(&r) }

func (r *ActionResult) wire(e *encoder) error { return e.object(r, r.Extra) }

// UnmarshalJSON decodes a result, keeping unknown members. It does not validate: call Validate.
func (r *ActionResult) UnmarshalJSON(data []byte) error {
	type plain ActionResult
	return decodeInto(data, "action result", (*plain)(r), &r.Extra)
}

// MarshalJSON writes the effect with its unknown members; a nil slice in Items or Rows as [].
func (e Effect) MarshalJSON() ([]byte, error) { return marshal(&e) }

func (e *Effect) wire(enc *encoder) error {
	if isNilSlice(e.Items) || isNilSlice(e.Rows) {
		p := *e
		p.Items, p.Rows = emptyIfNilSlice(p.Items), emptyIfNilSlice(p.Rows)
		e = &p
	}
	return enc.object(e, e.Extra)
}

// UnmarshalJSON decodes an effect, keeping unknown members. A member given as "" whose field
// leaves out the empty string (job_id, case_id...) is also kept in Extra, so that the effect is
// written back with it, as received.
func (e *Effect) UnmarshalJSON(data []byte) error {
	type plain Effect
	if err := decodeInto(data, "effect", (*plain)(e), &e.Extra); err != nil {
		return err
	}
	p := planOf(reflect.TypeFor[Effect]())
	for name, v := range wirejson.Members(data) {
		if string(v) != `""` {
			continue
		}
		if f := p.field(string(wirejson.Name(name))); f != nil && f.omit != nil {
			if e.Extra == nil {
				e.Extra = Extra{}
			}
			e.Extra[f.name] = json.RawMessage(`""`)
		}
	}
	return nil
}

// SetIDs copies a request's job, case and step ids into the effect as the reference does: an
// absent (nil) id stays absent, an empty one is written "" (through Extra: a Go string cannot
// tell empty from absent).
func (e *Effect) SetIDs(jobID, caseID, stepID *string) {
	for _, id := range [...]struct {
		name string
		v    *string
		dst  *string
	}{{"job_id", jobID, &e.JobID}, {"case_id", caseID, &e.CaseID}, {"step_id", stepID, &e.StepID}} {
		switch {
		case id.v == nil:
		case *id.v == "":
			if e.Extra == nil {
				e.Extra = Extra{}
			}
			e.Extra[id.name] = json.RawMessage(`""`)
		default:
			*id.dst = *id.v
		}
	}
}

// MarshalJSON writes the metadata with the reference defaults filled in.
func (s ReplaySafety) MarshalJSON() ([]byte, error) { return marshal(&s) }

func (s *ReplaySafety) wire(e *encoder) error {
	p := *s
	p.StableExternalIDsRequired = boolOr(p.StableExternalIDsRequired, true)
	p.StrictlyIdempotentResponse = boolOr(p.StrictlyIdempotentResponse, false)
	p.Convergent = boolOr(p.Convergent, true)
	return e.object(&p, s.Extra)
}

// UnmarshalJSON decodes the metadata, keeping unknown members.
func (s *ReplaySafety) UnmarshalJSON(data []byte) error {
	type plain ReplaySafety
	return decodeInto(data, "replay_safety", (*plain)(s), &s.Extra)
}

func boolOr(b *bool, def bool) *bool {
	if b != nil {
		return b
	}
	return &def
}

// MarshalJSON writes the error with its unknown members.
func (e ResultError) MarshalJSON() ([]byte, error) { return marshal(&e) }

func (e *ResultError) wire(enc *encoder) error { return enc.object(e, e.Extra) }

// UnmarshalJSON decodes the error, keeping unknown members.
func (e *ResultError) UnmarshalJSON(data []byte) error {
	type plain ResultError
	return decodeInto(data, "result error", (*plain)(e), &e.Extra)
}

// MarshalJSON writes the draft; suggestions as [] when empty.
func (d FieldDraft) MarshalJSON() ([]byte, error) { return marshal(&d) }

func (d *FieldDraft) wire(e *encoder) error { return e.object(d, d.Extra) }

// UnmarshalJSON decodes the draft, keeping unknown members.
func (d *FieldDraft) UnmarshalJSON(data []byte) error {
	type plain FieldDraft
	return decodeInto(data, "draft", (*plain)(d), &d.Extra)
}

// MarshalJSON writes the suggestion with its unknown members.
func (s Suggestion) MarshalJSON() ([]byte, error) { return marshal(&s) }

func (s *Suggestion) wire(e *encoder) error { return e.object(s, s.Extra) }

// UnmarshalJSON decodes the suggestion, keeping unknown members.
func (s *Suggestion) UnmarshalJSON(data []byte) error {
	type plain Suggestion
	return decodeInto(data, "suggestion", (*plain)(s), &s.Extra)
}

// MarshalJSON writes the outcome with its unknown members.
func (o DryRunOutcome) MarshalJSON() ([]byte, error) { return marshal(&o) }

func (o *DryRunOutcome) wire(e *encoder) error { return e.object(o, o.Extra) }

// UnmarshalJSON decodes the outcome, keeping unknown members.
func (o *DryRunOutcome) UnmarshalJSON(data []byte) error {
	type plain DryRunOutcome
	return decodeInto(data, "dry_run", (*plain)(o), &o.Extra)
}

// MarshalJSON writes the result; absent versions as null and an absent document as {}.
func (r SurfaceResult) MarshalJSON() ([]byte, error) { return marshal(&r) }

func (r *SurfaceResult) wire(e *encoder) error {
	if len(r.Document) == 0 {
		p := *r
		p.Document = json.RawMessage("{}")
		r = &p
	}
	return e.object(r, r.Extra)
}

// UnmarshalJSON decodes the result, keeping unknown members. It does not validate.
func (r *SurfaceResult) UnmarshalJSON(data []byte) error {
	type plain SurfaceResult
	return decodeInto(data, "surface result", (*plain)(r), &r.Extra)
}
