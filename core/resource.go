package core

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

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
//	list    {"prefix", "after", "limit", "search"} → resource.listed {resource, items, count, data.next}
//	get     {"id"}                       → resource.got {resource, item}
//	create  the record                   → resource.created {resource, item}
//	update  keyField and the members to change → resource.updated {resource, item}
//	delete  {"id"}                       → resource.deleted {resource, item: {"id"}}
//
// list's count is the number of records that match (id prefix and search) over every page, not
// the page's length; search matches, case-insensitively, a part of any member the resource's
// Display.SearchFields name (every member when it names none). Counting and searching read the
// whole collection, page by page. A member list does not read is refused (input_unknown, one
// error per member), rather than listing everything.
//
// Options change one part and keep the rest: WithOperation serves one operation with the agent's
// own handler, WithKey lets the agent assign ids, BeforeCreate and BeforeUpdate normalise a
// record or set the members the agent owns. A missing record or an existing key is a refusal
// naming the field (it changed nothing).
func ServeResource[T any](a *Agent, id, keyField string, opts ...ResourceOption) {
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
	if def.Display != nil {
		r.search = def.Display.SearchFields
	}
	own := map[string]ActionHandler{}
	for _, o := range opts {
		switch o := o.(type) {
		case operationOption:
			if !slices.Contains(def.Operations, o.op) {
				a.errs = append(a.errs, fmt.Errorf("agent %q: ServeResource %q: WithOperation(%q): the resource declares no such operation", a.slug, id, o.op))
				continue
			}
			own[o.op] = o.h
		case keyOption[T]:
			if !slices.ContainsFunc(def.Fields, func(f contract.ResourceFieldDefinition) bool { return f.ID == o.from }) {
				a.errs = append(a.errs, fmt.Errorf("agent %q: ServeResource %q: WithKey(%q): the resource declares no such field (name the field the key derives from)", a.slug, id, o.from))
				continue
			}
			r.keyOf, r.keyFrom = o.fn, o.from
		case hookOption[T]:
			if o.update {
				r.beforeUpdate = o.fn
			} else {
				r.beforeCreate = o.fn
			}
		default:
			a.errs = append(a.errs, fmt.Errorf("agent %q: ServeResource[%T] %q: option %T is for another record type", a.slug, *new(T), id, o))
		}
	}
	ops := map[string]ActionFunc{"list": r.list, "get": r.get, "create": r.create, "update": r.update, "delete": r.delete}
	for _, op := range def.Operations {
		if h, ok := own[op]; ok {
			a.HandleAction("resource."+id+"."+op, h)
		} else if h, ok := ops[op]; ok {
			a.HandleAction("resource."+id+"."+op, h)
		}
	}
	idField := []contract.FieldDefinition{{ID: "id", Label: def.Label, Type: contract.FieldResourceRef, Required: true}}
	for _, op := range []string{"get", "delete"} {
		if slices.Contains(def.Operations, op) && own[op] == nil {
			a.DeclareInput("resource."+id+"."+op, idField)
		}
	}
}

// ResourceOption changes how ServeResource serves a resource: WithOperation, WithKey,
// BeforeCreate, BeforeUpdate. An option made for another record type than ServeResource's is
// reported by New.
type ResourceOption interface{ resourceOption() }

type operationOption struct {
	op string
	h  ActionHandler
}

type keyOption[T any] struct {
	from string
	fn   func(T) string
}

type hookOption[T any] struct {
	update bool
	fn     func(context.Context, *contract.ActionRequest, *T) error
}

func (operationOption) resourceOption() {}
func (keyOption[T]) resourceOption()    {}
func (hookOption[T]) resourceOption()   {}

// WithOperation serves the operation op ("list", "get", "create", "update", "delete") with h, the
// agent's own handler, instead of the state's; the other operations stay served.
func WithOperation(op string, h ActionHandler) ResourceOption { return operationOption{op, h} }

// WithKey makes the agent assign each record's id: key(v) of the record to create (after
// BeforeCreate), e.g. "c-" + a hash of the email, derived from the resource's field from
// ("email"). The id is written into the record's key member; update finds the record by that
// member as before. A create whose key is taken is refused naming from, the field the operator
// typed, not the key member.
func WithKey[T any](from string, key func(v T) string) ResourceOption {
	return keyOption[T]{from: from, fn: key}
}

// BeforeCreate runs fn on a record before it is created, with the call's request (its actor,
// job...): normalise input (lower-case an email), set the members the agent owns (source,
// created_by). An error refuses the call when it is a contract.InputErrors (e.g.
// contract.InputErrors{contract.InvalidField(...)}), and fails it otherwise.
func BeforeCreate[T any](fn func(ctx context.Context, req *contract.ActionRequest, v *T) error) ResourceOption {
	return hookOption[T]{fn: fn}
}

// BeforeUpdate runs fn on a record with the sent members applied, before it is written, with the
// call's request. It may run more than once for one call (a concurrent write makes the update
// read again): it must only change *v. Errors as BeforeCreate's.
func BeforeUpdate[T any](fn func(ctx context.Context, req *contract.ActionRequest, v *T) error) ResourceOption {
	return hookOption[T]{update: true, fn: fn}
}

type stateResource[T any] struct {
	id, label, key string
	search         []string
	keyOf          func(T) string
	keyFrom        string // the field keyOf derives the key from
	beforeCreate   func(context.Context, *contract.ActionRequest, *T) error
	beforeUpdate   func(context.Context, *contract.ActionRequest, *T) error
}

func (r stateResource[T]) records(ctx context.Context) state.Collection[T] {
	return state.Of[T](ctx, r.id)
}

func (r stateResource[T]) missing(field, id string) *contract.ActionResult {
	return contract.Refuse(contract.InvalidField(field, fmt.Sprintf("%s has no record %q", r.label, id)))
}

// listInput is list's input; listMembers its members, the only ones list accepts.
type listInput struct {
	Prefix string `json:"prefix"`
	After  string `json:"after"`
	Limit  int    `json:"limit"`
	Search string `json:"search"`
}

var listMembers = []string{"prefix", "after", "limit", "search"}

func (r stateResource[T]) list(ctx context.Context, req *contract.ActionRequest) (*contract.ActionResult, error) {
	var in listInput
	if err := req.DecodeInput(&in); err != nil || in.Limit < 0 {
		return contract.Refuse(contract.ResultError{Code: contract.InputType, Message: "list takes prefix, after, search (strings) and limit (an integer, 0 or more)"}), nil
	}
	// A member list does not read (a typo, "query" for "search") would list everything: refused.
	var members map[string]json.RawMessage
	_ = req.DecodeInput(&members) // an object: it decoded into listInput
	var unknown []contract.ResultError
	for _, m := range slices.Sorted(maps.Keys(members)) {
		if !slices.Contains(listMembers, m) {
			unknown = append(unknown, contract.ResultError{Code: contract.InputUnknown, Field: m,
				Message: fmt.Sprintf("resource.%s.list reads prefix, after, limit and search, not %q", r.id, m)})
		}
	}
	if len(unknown) > 0 {
		return contract.Refuse(unknown...), nil
	}
	limit := in.Limit
	if limit == 0 {
		limit = state.DefaultPageSize
	}
	search := strings.ToLower(strings.TrimSpace(in.Search))
	items := []T{}
	count, last, more := 0, "", false
	for rec, err := range r.records(ctx).All(ctx, in.Prefix) {
		if err != nil {
			return nil, err
		}
		if search != "" && !r.matches(rec.Value, search) {
			continue
		}
		count++
		switch {
		case in.After != "" && rec.ID <= in.After:
		case len(items) < limit:
			items, last = append(items, rec.Value), rec.ID
		default:
			more = true
		}
	}
	next := ""
	if more {
		next = last
	}
	e := contract.Effect{Type: contract.EffectResourceListed, Resource: r.id, Items: items, Count: &count}
	if next != "" {
		e.Data = map[string]any{"next": next}
	}
	return contract.OK(e), nil
}

// matches reports whether a search field of v (every member when none is declared) contains
// search, lower-cased.
func (r stateResource[T]) matches(v T, search string) bool {
	b, err := json.Marshal(v)
	if err != nil {
		return false
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(b, &m) != nil {
		return false
	}
	fields := r.search
	if len(fields) == 0 {
		fields = make([]string, 0, len(m))
		for k := range m {
			fields = append(fields, k)
		}
	}
	for _, f := range fields {
		raw, ok := m[f]
		if !ok {
			continue
		}
		var s string
		if json.Unmarshal(raw, &s) != nil {
			s = string(raw) // numbers, booleans, lists: as written
		}
		if strings.Contains(strings.ToLower(s), search) {
			return true
		}
	}
	return false
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

// keyOfInput is the key member of the input, "" when it is missing or not a string.
func (r stateResource[T]) keyOfInput(req *contract.ActionRequest) string {
	raw, _ := req.InputMember(r.key)
	var key string
	_ = json.Unmarshal(raw, &key)
	return key
}

func (r stateResource[T]) required() *contract.ActionResult {
	return contract.Refuse(contract.ResultError{Code: contract.InputRequired, Field: r.key, Message: "Field required"})
}

func (r stateResource[T]) create(ctx context.Context, req *contract.ActionRequest) (*contract.ActionResult, error) {
	var v T
	if err := req.DecodeInput(&v); err != nil {
		return nil, err
	}
	if r.beforeCreate != nil {
		if err := r.beforeCreate(ctx, req, &v); err != nil {
			return contract.Refused(err)
		}
	}
	var key string
	if r.keyOf != nil {
		if key = r.keyOf(v); key == "" {
			return nil, fmt.Errorf("resource %s: the key function gave an empty id", r.id)
		}
		var err error
		if v, err = withMember(v, r.key, key); err != nil {
			return nil, err
		}
	} else if key = memberString(v, r.key); key == "" {
		return r.required(), nil
	}
	err := r.records(ctx).Create(ctx, key, v)
	switch {
	case errors.Is(err, state.ErrExists) && r.keyOf != nil: // the operator typed the source field, not the id
		msg := fmt.Sprintf("%s already has a record with %s %q", r.label, r.keyFrom, memberString(v, r.keyFrom))
		return contract.Refuse(contract.InvalidField(r.keyFrom, msg)), nil
	case errors.Is(err, state.ErrExists):
		return contract.Refuse(contract.InvalidField(r.key, fmt.Sprintf("%s already has a record %q", r.label, key))), nil
	}
	if err != nil {
		return nil, err
	}
	return contract.OK(contract.Effect{Type: contract.EffectResourceCreated, Resource: r.id, Item: v}), nil
}

// update applies the members sent to the record their key member names.
func (r stateResource[T]) update(ctx context.Context, req *contract.ActionRequest) (*contract.ActionResult, error) {
	key := r.keyOfInput(req)
	if key == "" {
		return r.required(), nil
	}
	var refused error
	v, err := r.records(ctx).Update(ctx, key, func(v *T) error {
		if err := req.DecodeInput(v); err != nil {
			return err
		}
		if r.beforeUpdate != nil {
			if err := r.beforeUpdate(ctx, req, v); err != nil {
				refused = err
				return err
			}
		}
		kept, err := withMember(*v, r.key, key) // the key member names the record: it stays
		*v = kept
		return err
	})
	switch {
	case refused != nil && errors.Is(err, refused):
		return contract.Refused(err)
	case errors.Is(err, state.ErrNotFound):
		return r.missing(r.key, key), nil
	case err != nil:
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

// memberString is the string member name of v's JSON, "" when it has none.
func memberString[T any](v T, name string) string {
	b, err := json.Marshal(v)
	if err != nil {
		return ""
	}
	var m map[string]json.RawMessage
	_ = json.Unmarshal(b, &m)
	var s string
	_ = json.Unmarshal(m[name], &s)
	return s
}

// withMember returns v with its JSON member name set to value (through JSON: T is any record
// type); a T without such a member is returned as it is.
func withMember[T any](v T, name, value string) (T, error) {
	if memberString(v, name) == value {
		return v, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return v, err
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return v, fmt.Errorf("resource record %T does not encode as a JSON object: %w", v, err)
	}
	m[name] = value
	if b, err = json.Marshal(m); err != nil {
		return v, err
	}
	var out T
	if err := json.Unmarshal(b, &out); err != nil {
		return v, err
	}
	return out, nil
}
