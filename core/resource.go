package core

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/supervaize/svz/core/contract"
	"github.com/supervaize/svz/core/state"
)

// ServeResource registers the handlers of the declared operations list, get, create, update and
// delete of resource id, storing its records as T in the state collection of the same name, per
// verified workspace. Each record's id is its member keyField (a string field of T's JSON), so
// create refuses a second record with the same key. Operations the resource does not declare
// are not registered; import and custom operations are the agent's own handlers.
//
// Inputs and effects (create and update inputs are checked against the resource's fields first):
//
//	list    {"prefix", "after", "limit"} → resource.listed {resource, items, count, data.next}
//	get     {"id"}                       → resource.got {resource, item}
//	create  the record                   → resource.created {resource, item}
//	update  keyField and the members to change → resource.updated {resource, item}
//	delete  {"id"}                       → resource.deleted {resource, item: {"id"}}
//
// A missing record or an existing key is a refusal naming the field (it changed nothing).
func ServeResource[T any](a *Agent, id, keyField string) {
	var def *contract.ResourceDefinition
	for i := range a.cfg.Registration.Resources {
		if a.cfg.Registration.Resources[i].ID == id {
			def = &a.cfg.Registration.Resources[i]
		}
	}
	if def == nil {
		a.errs = append(a.errs, fmt.Errorf("agent %q: ServeResource: no resource %q is declared", a.slug, id))
		return
	}
	r := stateResource[T]{id: id, label: def.Label, key: keyField}
	ops := map[string]ActionFunc{"list": r.list, "get": r.get, "create": r.put, "update": r.put, "delete": r.delete}
	for _, op := range def.Operations {
		if h, ok := ops[op]; ok {
			a.HandleAction("resource."+id+"."+op, h)
		}
	}
	idField := []contract.FieldDefinition{{ID: "id", Label: def.Label, Type: contract.FieldResourceRef, Required: true}}
	for _, op := range []string{"get", "delete"} {
		if slices.Contains(def.Operations, op) {
			a.DeclareInput("resource."+id+"."+op, idField)
		}
	}
}

type stateResource[T any] struct{ id, label, key string }

func (r stateResource[T]) records(ctx context.Context) state.Collection[T] {
	return state.Of[T](ctx, r.id)
}

func (r stateResource[T]) missing(field, id string) *contract.ActionResult {
	return contract.Refuse(contract.InvalidField(field, fmt.Sprintf("%s has no record %q", r.label, id)))
}

func (r stateResource[T]) list(ctx context.Context, req *contract.ActionRequest) (*contract.ActionResult, error) {
	var in state.ListOptions
	if err := req.DecodeInput(&in); err != nil {
		return contract.Refuse(contract.ResultError{Code: contract.InputType, Message: "list takes prefix, after (strings) and limit (an integer)"}), nil
	}
	page, err := r.records(ctx).List(ctx, in)
	if err != nil {
		return nil, err
	}
	items := make([]T, len(page.Records))
	for i, rec := range page.Records {
		items[i] = rec.Value
	}
	e := contract.Effect{Type: contract.EffectResourceListed, Resource: r.id, Items: items, Count: &[]int{len(items)}[0]}
	if page.Next != "" {
		e.Data = map[string]any{"next": page.Next}
	}
	return contract.OK(e), nil
}

func (r stateResource[T]) get(ctx context.Context, req *contract.ActionRequest) (*contract.ActionResult, error) {
	var in struct{ ID string }
	if err := req.DecodeInput(&in); err != nil {
		return nil, err
	}
	v, err := r.records(ctx).Get(ctx, in.ID)
	if errors.Is(err, state.ErrNotFound) {
		return r.missing("id", in.ID), nil
	}
	if err != nil {
		return nil, err
	}
	return contract.OK(contract.Effect{Type: contract.EffectResourceGot, Resource: r.id, Item: v}), nil
}

// put creates a record or updates one with the members sent.
func (r stateResource[T]) put(ctx context.Context, req *contract.ActionRequest) (*contract.ActionResult, error) {
	var in map[string]json.RawMessage
	if err := req.DecodeInput(&in); err != nil {
		return nil, err
	}
	var key string
	if json.Unmarshal(in[r.key], &key) != nil || key == "" {
		return contract.Refuse(contract.ResultError{Code: contract.InputRequired, Field: r.key, Message: "Field required"}), nil
	}
	if req.Action == "resource."+r.id+".create" {
		var v T
		if err := req.DecodeInput(&v); err != nil {
			return nil, err
		}
		err := r.records(ctx).Create(ctx, key, v)
		if errors.Is(err, state.ErrExists) {
			return contract.Refuse(contract.InvalidField(r.key, fmt.Sprintf("%s already has a record %q", r.label, key))), nil
		}
		if err != nil {
			return nil, err
		}
		return contract.OK(contract.Effect{Type: contract.EffectResourceCreated, Resource: r.id, Item: v}), nil
	}
	v, err := r.records(ctx).Update(ctx, key, func(v *T) error { return req.DecodeInput(v) })
	if errors.Is(err, state.ErrNotFound) {
		return r.missing(r.key, key), nil
	}
	if err != nil {
		return nil, err
	}
	return contract.OK(contract.Effect{Type: contract.EffectResourceUpdated, Resource: r.id, Item: v}), nil
}

func (r stateResource[T]) delete(ctx context.Context, req *contract.ActionRequest) (*contract.ActionResult, error) {
	var in struct{ ID string }
	if err := req.DecodeInput(&in); err != nil {
		return nil, err
	}
	if err := r.records(ctx).Delete(ctx, in.ID); err != nil {
		return nil, err
	}
	return contract.OK(contract.Effect{Type: contract.EffectResourceDeleted, Resource: r.id, Item: map[string]string{"id": in.ID}}), nil
}
