package contract

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// JobSetupPolicy declares guided job setup (V2JobSetupPolicy): the preview, start and submit
// actions (derived into capabilities.actions), the scopes they apply to, and the setup plan.
// Empty action ids are written as their defaults (job.start.preview, job.start,
// step.awaiting.submit).
//
// Plan is nil (written as null), a *SetupPlan or SetupPlan (written in the typed shape and fully
// validated), or any other value that encodes as a JSON object, passed as is — the reference
// accepts a dict plan unchanged. A decoded policy holds its plan as json.RawMessage; TypedPlan
// reads it.
type JobSetupPolicy struct {
	PreviewAction string   `json:"preview_action"`
	StartAction   string   `json:"start_action"`
	SubmitAction  string   `json:"submit_action"`
	ActionScopes  []string `json:"action_scopes"` // workspace, job, case or step
	Plan          any      `json:"plan"`
	Extra         Extra    `json:"-"`
}

// Setup step statuses.
const (
	SetupPending  = "pending"
	SetupAwaiting = "awaiting"
	SetupDone     = "done"
	SetupSkipped  = "skipped"
)

// Setup plan limits.
const (
	SetupStepTitleMaxLength       = 120
	SetupStepDescriptionMaxLength = 300
)

// SetupPlan is the typed plan of guided setup (V2SetupPlan), used in job_policy.setup.plan and
// in ActionResult.SetupPlan. A nil ConfirmationRequired is true.
type SetupPlan struct {
	ConfirmationRequired *bool         `json:"confirmation_required"`
	Steps                []SetupStep   `json:"steps"`
	CostEstimate         *CostEstimate `json:"cost_estimate,omitzero"`
	Extra                Extra         `json:"-"`
}

// SetupStep is one step of a setup plan (V2SetupStep). Id is unique in its plan; title at most
// 120 characters, description at most 300; an empty Status is pending. Each HelpActions id must
// be declared in capabilities.actions with kind "help".
type SetupStep struct {
	ID          string            `json:"id"`
	Title       string            `json:"title"`
	Description string            `json:"description,omitzero"`
	Status      string            `json:"status"`
	Fields      []FieldDefinition `json:"fields"`
	HelpActions []string          `json:"help_actions"`
	Extra       Extra             `json:"-"`
}

// withDefaults returns the policy with its default action ids.
func (s JobSetupPolicy) withDefaults() JobSetupPolicy {
	s.PreviewAction = orDefault(s.PreviewAction, JobStartPreviewAction)
	s.StartAction = orDefault(s.StartAction, JobStartAction)
	s.SubmitAction = orDefault(s.SubmitAction, StepAwaitingSubmitAction)
	return s
}

// TypedPlan returns the policy's plan as a SetupPlan: nil when there is none, the plan itself
// when it is typed, or the decoding of its JSON object otherwise.
func (s *JobSetupPolicy) TypedPlan() (*SetupPlan, error) {
	return typedPlan(s.Plan)
}

func typedPlan(plan any) (*SetupPlan, error) {
	switch p := plan.(type) {
	case nil:
		return nil, nil
	case *SetupPlan:
		return p, nil
	case SetupPlan:
		return &p, nil
	}
	b, err := json.Marshal(plan)
	if err != nil {
		return nil, fmt.Errorf("setup plan: %w", err)
	}
	if string(b) == "null" {
		return nil, nil
	}
	var sp SetupPlan
	if err := json.Unmarshal(b, &sp); err != nil {
		return nil, fmt.Errorf("setup plan: %w", err)
	}
	return &sp, nil
}

// planIsTyped reports whether plan is a SetupPlan value (not a pass-through object).
func planIsTyped(plan any) bool {
	switch p := plan.(type) {
	case *SetupPlan:
		return p != nil
	case SetupPlan:
		return true
	}
	return false
}

// Validate reports why p is not a valid setup plan, or nil: unique step ids, step texts within
// their limits, known statuses, valid fields with unique ids across the plan, depends_on naming
// a field of the plan without cycles, and a valid cost estimate. Whether help actions are
// declared is checked by the registration that holds the plan.
func (p *SetupPlan) Validate() error {
	return errors.Join(p.validate("")...)
}

func (p *SetupPlan) validate(at string) []error {
	var errs []error
	fail := func(path, format string, args ...any) {
		errs = append(errs, &ValidationError{Path: joinPath(at, path), Message: fmt.Sprintf(format, args...)})
	}
	steps := map[string]bool{}
	fieldIDs := map[string]string{} // field id → path of its first declaration
	parents := map[string]string{}  // field id → depends_on.field
	for i := range p.Steps {
		st := &p.Steps[i]
		sp := fmt.Sprintf("steps[%d]", i)
		if strings.TrimSpace(st.ID) == "" {
			fail(sp+".id", "setup steps must have a non-empty id")
		} else if steps[st.ID] {
			fail(sp+".id", "setup step ids must be unique in a plan: '%s' is used twice", st.ID)
		}
		steps[st.ID] = true
		if strings.TrimSpace(st.Title) == "" {
			fail(sp+".title", "setup steps must have a non-empty title")
		} else if n := utf8.RuneCountInString(st.Title); n > SetupStepTitleMaxLength {
			fail(sp+".title", "String should have at most %d characters", SetupStepTitleMaxLength)
		}
		if utf8.RuneCountInString(st.Description) > SetupStepDescriptionMaxLength {
			fail(sp+".description", "String should have at most %d characters", SetupStepDescriptionMaxLength)
		}
		switch st.Status {
		case "", SetupPending, SetupAwaiting, SetupDone, SetupSkipped:
		default:
			fail(sp+".status", "Input should be 'pending', 'awaiting', 'done' or 'skipped'")
		}
		for k := range st.Fields {
			f := &st.Fields[k]
			fp := fmt.Sprintf("%s.fields[%d]", sp, k)
			if err := f.Validate(); err != nil {
				for _, e := range splitJoined(err) {
					fail(fp, "%s", e.Error())
				}
			}
			if f.ID != "" {
				if first, dup := fieldIDs[f.ID]; dup {
					fail(fp+".id", "field '%s' is already declared at %s", f.ID, joinPath(at, first))
				} else {
					fieldIDs[f.ID] = fp
				}
			}
			if f.DependsOn != nil && f.DependsOn.Field != "" {
				parents[f.ID] = f.DependsOn.Field
			}
		}
		for k, h := range st.HelpActions {
			if strings.TrimSpace(h) == "" {
				fail(fmt.Sprintf("%s.help_actions[%d]", sp, k), "help action ids must be non-empty")
			}
		}
	}
	for i := range p.Steps {
		for k := range p.Steps[i].Fields {
			f := &p.Steps[i].Fields[k]
			if f.DependsOn == nil || f.DependsOn.Field == "" || f.DependsOn.Field == f.ID {
				continue
			}
			fp := fmt.Sprintf("steps[%d].fields[%d].depends_on.field", i, k)
			if _, ok := fieldIDs[f.DependsOn.Field]; !ok {
				fail(fp, "field '%s' depends on undeclared field '%s'", f.ID, f.DependsOn.Field)
				continue
			}
			// Follow the chain of parents; coming back to f is a cycle.
			seen := map[string]bool{f.ID: true}
			for cur := f.DependsOn.Field; cur != ""; cur = parents[cur] {
				if seen[cur] {
					if cur == f.ID {
						fail(fp, "field '%s' depends on itself through its parents", f.ID)
					}
					break
				}
				seen[cur] = true
			}
		}
	}
	if p.CostEstimate != nil {
		if err := p.CostEstimate.Validate(); err != nil {
			for _, e := range splitJoined(err) {
				fail("cost_estimate", "%s", e.Error())
			}
		}
	}
	return errs
}

// helpActions lists (path, id) of every help action of the plan.
func (p *SetupPlan) helpActions() [][2]string {
	var out [][2]string
	for i, st := range p.Steps {
		for k, h := range st.HelpActions {
			out = append(out, [2]string{fmt.Sprintf("steps[%d].help_actions[%d]", i, k), h})
		}
	}
	return out
}

// MarshalJSON writes the policy with its default action ids; the plan is null when unset.
func (s JobSetupPolicy) MarshalJSON() ([]byte, error) {
	type plain JobSetupPolicy
	p := plain(s.withDefaults())
	p.ActionScopes = nonNil(p.ActionScopes)
	if p.Plan != nil && !planIsTyped(p.Plan) {
		b, err := json.Marshal(p.Plan)
		if err != nil {
			return nil, fmt.Errorf("job_policy.setup.plan: %w", err)
		}
		if t := bytes.TrimSpace(b); string(t) != "null" && (len(t) == 0 || t[0] != '{') {
			return nil, errors.New("job_policy.setup.plan must be a JSON object")
		}
		p.Plan = json.RawMessage(b)
	}
	return encodeObject(p, s.Extra)
}

// UnmarshalJSON decodes the policy; absent action ids take their defaults and the plan is kept
// as raw JSON (nil when null).
func (s *JobSetupPolicy) UnmarshalJSON(data []byte) error {
	type wire struct {
		PreviewAction string          `json:"preview_action"`
		StartAction   string          `json:"start_action"`
		SubmitAction  string          `json:"submit_action"`
		ActionScopes  []string        `json:"action_scopes"`
		Plan          json.RawMessage `json:"plan"`
	}
	w := wire{PreviewAction: JobStartPreviewAction, StartAction: JobStartAction, SubmitAction: StepAwaitingSubmitAction}
	var extra Extra
	if err := decodeInto(data, "job_policy.setup", &w, &extra); err != nil {
		return err
	}
	*s = JobSetupPolicy{PreviewAction: w.PreviewAction, StartAction: w.StartAction, SubmitAction: w.SubmitAction, ActionScopes: w.ActionScopes, Extra: extra}
	if len(w.Plan) > 0 && !isNull(w.Plan) {
		s.Plan = w.Plan
	}
	return nil
}

// MarshalJSON writes the plan: confirmation_required (true when unset), steps, and the cost
// estimate when set.
func (p SetupPlan) MarshalJSON() ([]byte, error) {
	type plain SetupPlan
	q := plain(p)
	if q.ConfirmationRequired == nil {
		t := true
		q.ConfirmationRequired = &t
	}
	q.Steps = nonNil(q.Steps)
	return encodeObject(q, p.Extra)
}

// UnmarshalJSON decodes the plan, keeping unknown members.
func (p *SetupPlan) UnmarshalJSON(data []byte) error {
	type plain SetupPlan
	return decodeInto(data, "setup plan", (*plain)(p), &p.Extra)
}

// MarshalJSON writes the step: status pending when unset, fields and help_actions as [] when
// empty.
func (s SetupStep) MarshalJSON() ([]byte, error) {
	type plain SetupStep
	p := plain(s)
	p.Status = orDefault(p.Status, SetupPending)
	p.Fields = nonNil(p.Fields)
	p.HelpActions = nonNil(p.HelpActions)
	return encodeObject(p, s.Extra)
}

// UnmarshalJSON decodes the step; an absent status is pending.
func (s *SetupStep) UnmarshalJSON(data []byte) error {
	type plain SetupStep
	p := plain{Status: SetupPending}
	if err := decodeInto(data, "setup step", &p, &p.Extra); err != nil {
		return err
	}
	*s = SetupStep(p)
	return nil
}

// splitJoined returns the errors joined in err (or err itself).
func splitJoined(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// SetupField returns the field id of the registration's setup plan (job_policy.setup.plan).
func (r *Registration) SetupField(id string) (FieldDefinition, bool) {
	if r == nil || r.JobPolicy.Setup == nil {
		return FieldDefinition{}, false
	}
	plan, err := r.JobPolicy.Setup.TypedPlan()
	if err != nil || plan == nil {
		return FieldDefinition{}, false
	}
	for _, st := range plan.Steps {
		for _, f := range st.Fields {
			if f.ID == id {
				return f, true
			}
		}
	}
	return FieldDefinition{}, false
}

// CheckDraft reports why the draft of a help action does not fit the setup field it targets, or
// nil: the value of a list field must be a list of objects keyed by its item fields, never free
// text (seed 000). A draft for a field the setup plan does not declare is not judged here.
func (r *Registration) CheckDraft(d *FieldDraft) error {
	if d == nil || d.Value == nil {
		return nil
	}
	f, ok := r.SetupField(d.Field)
	if !ok || f.Type != FieldList {
		return nil
	}
	if err := checkListValue(d.Value, f.ItemFields); err != nil {
		return fmt.Errorf("draft.value for list field %q: %w", f.ID, err)
	}
	return nil
}
