package core

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/supervaize/svz/core/a2ui"
	"github.com/supervaize/svz/core/contract"
	"github.com/supervaize/svz/core/state"
)

// inputSchema is what an action's input is checked against before its handler runs.
type inputSchema struct {
	fields []contract.FieldDefinition
	mode   contract.InputMode
	// readOnly are members the caller may not set (a resource's read-only fields): dropped.
	readOnly []string
}

// DeclareInput makes the controller check the input of action against fields (every rule, as
// contract.ValidateInput in Submit mode) before its handler runs, e.g. for a job.start fed by a
// Form surface rather than a setup plan. It replaces the schema svz derives (see inputSchemas).
// An undeclared action or an invalid field is reported by New.
func (a *Agent) DeclareInput(action string, fields []contract.FieldDefinition) {
	if !a.declaresAction(action) {
		a.errs = append(a.errs, fmt.Errorf("agent %q: input fields for undeclared action %q", a.slug, action))
		return
	}
	var errs []error
	ids := map[string]bool{}
	for i := range fields {
		if err := fields[i].Validate(); err != nil {
			errs = append(errs, err)
		}
		if ids[fields[i].ID] {
			errs = append(errs, fmt.Errorf("field %q is declared twice", fields[i].ID))
		}
		ids[fields[i].ID] = true
	}
	if err := errors.Join(errs...); err != nil {
		a.errs = append(a.errs, fmt.Errorf("agent %q: input fields of %q: %w", a.slug, action, err))
		return
	}
	if a.inputs == nil {
		a.inputs = map[string]inputSchema{}
	}
	a.inputs[action] = inputSchema{fields: slices.Clone(fields), mode: contract.Submit}
}

// InputFields returns the fields the input of action is checked against before its handler
// runs (see DeclareInput and inputSchemas), nil when svz checks none; e.g. to build a sample call
// with contract.ExampleInput.
func (a *Agent) InputFields(action string) []contract.FieldDefinition {
	if a.cfg.Registration == nil {
		return nil
	}
	return slices.Clone(inputSchemas(a.cfg.Registration, a.inputs)[action].fields)
}

// inputSchemas returns the schema of each action whose input svz checks before the handler:
//
//   - the setup's start action (job.start): every field of the typed setup plan, every rule;
//   - the setup's preview action (job.start.preview): the same fields as a draft (values present
//     are checked, required fields may be missing);
//   - resource.<id>.create: the resource's fields, every rule; resource.<id>.update: the same as
//     a draft. Read-only fields are the agent's: a value sent for one is dropped;
//   - any action given to DeclareInput, which wins.
//
// Other actions (help actions and their {field, values} drafts, step.awaiting.submit whose
// fields belong to each step, job.sync...) are not checked: handlers call
// ActionRequest.DecodeValid with the fields that apply.
func inputSchemas(reg *contract.Registration, declared map[string]inputSchema) map[string]inputSchema {
	out := map[string]inputSchema{}
	if s := reg.JobPolicy.Setup; s != nil {
		if plan, err := s.TypedPlan(); err == nil && plan != nil {
			fields := plan.InputFields()
			out[orDefault(s.StartAction, contract.JobStartAction)] = inputSchema{fields: fields, mode: contract.Submit}
			out[orDefault(s.PreviewAction, contract.JobStartPreviewAction)] = inputSchema{fields: fields, mode: contract.Draft}
		}
	}
	for _, r := range reg.Resources {
		var fields []contract.FieldDefinition
		var readOnly []string
		for _, f := range r.Fields {
			if f.ReadOnly {
				readOnly = append(readOnly, f.ID)
			} else {
				fields = append(fields, f.Field())
			}
		}
		if len(r.Fields) == 0 {
			continue
		}
		if slices.Contains(r.Operations, "create") {
			out["resource."+r.ID+".create"] = inputSchema{fields: fields, mode: contract.Submit, readOnly: readOnly}
		}
		if slices.Contains(r.Operations, "update") {
			out["resource."+r.ID+".update"] = inputSchema{fields: fields, mode: contract.Draft, readOnly: readOnly}
		}
	}
	for id, s := range declared {
		out[id] = s
	}
	return out
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// checkInput checks req.Input against the action's schema and replaces it with its coerced form.
// It returns the refusal to answer when the input does not match.
func (b *boundAgent) checkInput(req *contract.ActionRequest) (*contract.ActionResult, error) {
	s, ok := b.inputSchemas[req.Action]
	if !ok {
		return nil, nil
	}
	in, err := contract.ValidateInput(s.fields, req.Input, s.mode)
	if err != nil {
		return contract.Refused(err)
	}
	if len(s.readOnly) > 0 {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(in, &m); err != nil {
			return nil, fmt.Errorf("input of %s: %w", req.Action, err)
		}
		for _, id := range s.readOnly {
			delete(m, id)
		}
		if in, err = json.Marshal(m); err != nil {
			return nil, fmt.Errorf("input of %s: %w", req.Action, err)
		}
	}
	req.Input = in
	return nil, nil
}

// handlerContext is the context a handler runs with: the state scope of the agent and the
// verified workspace (package state), the agent's A2UI versions (package a2ui) and its parameters
// (Parameter).
func (c *Controller) handlerContext(ctx context.Context, b *boundAgent, v *contract.VerifiedWorkspaceContext) context.Context {
	workspace := ""
	if v != nil {
		workspace = v.WorkspaceID
	}
	ctx = c.withCheckpoints(ctx, b, workspace)
	ctx = c.withJobs(ctx, b, v)
	return c.withParameters(a2ui.NewContext(state.NewContext(ctx, c.cfg.Store, b.slug, workspace), b.versions), b.Agent)
}
