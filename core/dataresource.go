package core

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"runtime/debug"
	"slices"
	"strings"

	"github.com/supervaize/svz/core/contract"
	"github.com/supervaize/svz/core/store"
)

// DataResource declares a collection of an agent's business objects (projects, contacts,
// prompts...) that Studio lists, shows, creates, edits, deletes and imports generically, through
// the routes under /api/agents/{slug}/data/{Name}/ (spec §8). T is the item type: anything that
// encodes to a JSON object (a struct, a map[string]any...). Callbacks left nil are operations the
// resource does not serve: Studio learns which from the registration's data_resources, and a call
// of one answers 501.
//
// Every call is verified with the workspace grant (scope resource.<Name>.<op>) before a callback
// runs; the callback gets the verified DataContext. A callback error answers:
//   - ErrDataNotFound (or an error wrapping it) from Get, Update or Delete: 404
//     {"detail": "<name> '<id>' not found"};
//   - a *DataError (PermissionDenied...): its 4xx status and detail, sent as they are;
//   - anything else, or a panic: 500 {"detail": "Internal Server Error"}, the error logged, never sent.
type DataResource[T any] struct {
	// Name is the route segment and scope part: ^[a-z0-9][a-z0-9_-]*$, unique per agent.
	Name string
	// DisplayName defaults to the title-cased Name; Description and Fields tell Studio how to
	// render items.
	DisplayName string
	Description string
	Fields      []contract.DataResourceField
	// Scope is Studio's context boundary: workspace (default), mission or job. RequiresContext are
	// the context keys Studio must send (["workspace_id"] by default).
	Scope           string
	RequiresContext []string

	// List returns every item; the route slices it with the request's skip and limit, as the
	// reference does. For a collection too large to load whole, set ListPage instead (one of the
	// two is required).
	List func(ctx context.Context, dc *DataContext) ([]T, error)
	// ListPage returns at most page.Limit items after skipping page.Skip.
	ListPage func(ctx context.Context, dc *DataContext, page DataPage) ([]T, error)
	// Get returns one item, or ErrDataNotFound.
	Get func(ctx context.Context, dc *DataContext, id string) (T, error)
	// Create stores a new item and returns it; the result must have an "id" member. Required by
	// Update and Delete: a resource without Create is read-only.
	Create func(ctx context.Context, dc *DataContext, item T) (T, error)
	// Update replaces an item and returns it, or ErrDataNotFound.
	Update func(ctx context.Context, dc *DataContext, id string, item T) (T, error)
	// Delete removes an item, or returns ErrDataNotFound when there was none.
	Delete func(ctx context.Context, dc *DataContext, id string) error
	// Import stores a batch of items and returns a summary that encodes to a JSON object.
	Import func(ctx context.Context, dc *DataContext, items []T) (any, error)
}

// DataPage is the window of a paginated listing: 0 ≤ Skip ≤ 2^53 (a larger skip is lowered to it)
// and 1 ≤ Limit ≤ 1000, so Skip+Limit never overflows.
type DataPage struct {
	Skip  int
	Limit int
}

// DataContext is what a DataResource callback knows about the call. The workspace comes from the
// verified grant, never from the request's headers; the mission is what Studio says and is NOT
// verified.
type DataContext struct {
	// WorkspaceID and WorkspaceSlug are the verified token's (key agent-side data on them).
	WorkspaceID   string
	WorkspaceSlug *string
	// MissionID is X-Supervaize-Mission-Id as sent ("" when absent): unverified.
	MissionID string
	// Mission is set only when Studio sent X-Supervaize-Mission-Metadata (SDK 1.8.0): the mission
	// id and its decoded metadata object. It is unsigned: use it to narrow results, never as an
	// access boundary.
	Mission *contract.MissionContext
	// AgentSlug is the agent the route belongs to; RequestID is X-Supervaize-Request-Id.
	AgentSlug string
	RequestID string
	// Authorization is the verified workspace grant.
	Authorization *contract.VerifiedWorkspaceContext
	// Store is the controller's store (Config.Store; nil without one), where items outlive the
	// request on every platform. Namespace keys by agent and verified workspace.
	Store store.Store
}

// ErrDataNotFound is what Get, Update and Delete return (possibly wrapped) for an absent item.
var ErrDataNotFound = errors.New("data resource item not found")

// DataError is a callback's answer to the caller: a 4xx HTTP status and a detail sent as
// {"detail": Detail}. A status outside 400–499 is treated as an internal error (500, not sent).
type DataError struct {
	Status int
	Detail string
}

func (e *DataError) Error() string { return fmt.Sprintf("HTTP %d: %s", e.Status, e.Detail) }

// PermissionDenied is the answer of a callback that refuses the call: HTTP 403 {"detail": detail}
// (the reference's PermissionError).
func PermissionDenied(detail string) error {
	return &DataError{Status: http.StatusForbidden, Detail: detail}
}

// DataResourceDeclaration is a DataResource of any item type, as Agent.AddDataResource takes it.
type DataResourceDeclaration interface {
	dataResource() (*dataResource, error)
}

var _ DataResourceDeclaration = DataResource[map[string]any]{}

// AddDataResource declares a DataResource on the agent. A declaration mistake (a bad name, a
// duplicate name, a missing List, Update or Delete without Create) is reported by New.
func (a *Agent) AddDataResource(r DataResourceDeclaration) {
	if r == nil {
		a.errs = append(a.errs, fmt.Errorf("agent %q: nil DataResource", a.slug))
		return
	}
	d, err := r.dataResource()
	if err != nil {
		a.errs = append(a.errs, fmt.Errorf("agent %q: %w", a.slug, err))
		return
	}
	for _, other := range a.data {
		if other.decl.Name == d.decl.Name {
			//lint:ignore ST1005 the reference SDK's exact message
			a.errs = append(a.errs, fmt.Errorf("Duplicate DataResource name '%s' on agent '%s'; each data resource must have a unique name per agent.", d.decl.Name, a.cfg.Name))
			return
		}
	}
	a.data = append(a.data, d)
}

// DataResources returns the agent's DataResource declarations as Studio receives them.
func (a *Agent) DataResources() []contract.DataResource {
	out := make([]contract.DataResource, len(a.data))
	for i, d := range a.data {
		out[i] = d.decl
	}
	return out
}

// dataResourcesJSON is the registration's data_resources member.
func (a *Agent) dataResourcesJSON() json.RawMessage {
	if len(a.data) == 0 {
		return nil
	}
	b, err := json.Marshal(a.DataResources())
	if err != nil {
		// Each declaration was encoded once by AddDataResource: this cannot fail.
		panic(fmt.Sprintf("core: encode data_resources: %v", err))
	}
	return b
}

// dataResource is a DataResource with its item type erased: callbacks take and return JSON.
// Bodies are decoded (decodeItem, decodeItems) before the grant is checked, so that a malformed
// body answers 422 whatever the token, as the reference's FastAPI does.
type dataResource struct {
	decl        contract.DataResource
	list        func(ctx context.Context, dc *DataContext, page DataPage) ([]byte, error)
	get         func(ctx context.Context, dc *DataContext, id string) ([]byte, error)
	decodeItem  func(body []byte) (any, error)
	decodeItems func(body []byte) (any, error)
	create      func(ctx context.Context, dc *DataContext, item any) ([]byte, error)
	update      func(ctx context.Context, dc *DataContext, id string, item any) ([]byte, error)
	delete      func(ctx context.Context, dc *DataContext, id string) error
	importer    func(ctx context.Context, dc *DataContext, items any) ([]byte, error)
}

func (r DataResource[T]) dataResource() (*dataResource, error) {
	var errs []error
	switch {
	case r.List == nil && r.ListPage == nil:
		errs = append(errs, fmt.Errorf("DataResource '%s' must define List or ListPage", r.Name))
	case r.List != nil && r.ListPage != nil:
		errs = append(errs, fmt.Errorf("DataResource '%s' defines both List and ListPage: keep one", r.Name))
	}
	if (r.Update != nil || r.Delete != nil) && r.Create == nil {
		errs = append(errs, fmt.Errorf("DataResource '%s' defines Update or Delete but not Create: a writable DataResource must define Create", r.Name))
	}
	decl := contract.DataResource{
		Name:            r.Name,
		DisplayName:     r.DisplayName,
		Description:     r.Description,
		Fields:          r.Fields,
		ReadOnly:        r.Create == nil,
		Importable:      r.Import != nil,
		Scope:           r.Scope,
		RequiresContext: r.RequiresContext,
		Operations: contract.DataOperations{
			List:   r.List != nil || r.ListPage != nil,
			Get:    r.Get != nil,
			Create: r.Create != nil,
			Update: r.Update != nil,
			Delete: r.Delete != nil,
			Import: r.Import != nil,
		},
	}
	if err := decl.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("DataResource '%s': %w", r.Name, err))
	} else if fieldsHaveExtra(decl.Fields) {
		// Only invalid JSON in a field's Extra can fail the encoding: without any, the encode (and
		// encoding/json building its encoders on first use, at every cold start) is skipped.
		if _, err := json.Marshal(decl); err != nil {
			errs = append(errs, fmt.Errorf("DataResource '%s': %w", r.Name, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}

	d := &dataResource{decl: decl}
	d.list = func(ctx context.Context, dc *DataContext, page DataPage) ([]byte, error) {
		if r.ListPage == nil {
			items, err := r.List(ctx, dc)
			if err != nil {
				return nil, err
			}
			return encodeDataItems(dataWindow(items, page))
		}
		items, err := r.ListPage(ctx, dc, page)
		if err != nil {
			return nil, err
		}
		return encodeDataItems(items[:min(len(items), page.Limit)])
	}
	if r.Get != nil {
		d.get = func(ctx context.Context, dc *DataContext, id string) ([]byte, error) {
			return encodeDataResult(r.Get(ctx, dc, id))
		}
	}
	d.decodeItem = func(body []byte) (any, error) { return decodeDataBody[T](body, []any{"body"}) }
	d.decodeItems = func(body []byte) (any, error) { return decodeDataItems[T](body) }
	if r.Create != nil {
		d.create = func(ctx context.Context, dc *DataContext, item any) ([]byte, error) {
			return encodeDataResult(r.Create(ctx, dc, item.(T)))
		}
	}
	if r.Update != nil {
		d.update = func(ctx context.Context, dc *DataContext, id string, item any) ([]byte, error) {
			return encodeDataResult(r.Update(ctx, dc, id, item.(T)))
		}
	}
	d.delete = r.Delete
	if r.Import != nil {
		d.importer = func(ctx context.Context, dc *DataContext, items any) ([]byte, error) {
			return encodeDataResult(r.Import(ctx, dc, items.([]T)))
		}
	}
	return d, nil
}

// fieldsHaveExtra reports whether a field has Extra members (the declaration built here has none).
func fieldsHaveExtra(fields []contract.DataResourceField) bool {
	return slices.ContainsFunc(fields, func(f contract.DataResourceField) bool { return len(f.Extra) > 0 })
}

// dataWindow is items[skip:skip+limit], empty past the end.
func dataWindow[T any](items []T, page DataPage) []T {
	if page.Skip >= len(items) {
		return nil
	}
	items = items[page.Skip:]
	if len(items) > page.Limit {
		items = items[:page.Limit]
	}
	return items
}

// encodeDataResult encodes a callback's result, which must be a JSON object.
func encodeDataResult[T any](v T, err error) ([]byte, error) {
	if err != nil {
		return nil, err
	}
	return encodeDataObject(v)
}

func encodeDataObject(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("the callback's result cannot be encoded: %w", err)
	}
	if b[0] != '{' {
		return nil, fmt.Errorf("the callback returned %s, not something that encodes to a JSON object", jsonKind(b))
	}
	return b, nil
}

// encodeDataItems encodes a listing: a JSON array of objects.
func encodeDataItems[T any](items []T) ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteByte('[')
	for i := range items {
		b, err := encodeDataObject(items[i])
		if err != nil {
			return nil, fmt.Errorf("item %d: %w", i, err)
		}
		if i > 0 {
			buf.WriteByte(',')
		}
		buf.Write(b)
	}
	buf.WriteByte(']')
	return buf.Bytes(), nil
}

// jsonKind names the kind of the JSON value b starts with, for an error message.
func jsonKind(b []byte) string {
	switch b[0] {
	case '[':
		return "a JSON array"
	case '"':
		return "a JSON string"
	case 'n':
		return "null"
	case 't', 'f':
		return "a JSON boolean"
	}
	return "a JSON number"
}

// decodeDataBody decodes a request body already known to be JSON of the right shape (an object, or an
// array of objects) into T; a value of the wrong type answers 422 in pydantic's words.
func decodeDataBody[T any](body []byte, loc []any) (T, error) {
	var v T
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return v, &unprocessable{errs: []validationDetail{typeErrorDetail(err, body, loc)}}
	}
	return v, nil
}

// decodeDataItems decodes an import body already known to be a JSON array of objects into []T,
// record by record, so that an error names its record (["body", i, member]) as pydantic's does;
// every record's first error is reported.
func decodeDataItems[T any](body []byte) ([]T, error) {
	var raw []json.RawMessage
	if err := json.Unmarshal(body, &raw); err != nil {
		return nil, &unprocessable{errs: []validationDetail{typeErrorDetail(err, body, []any{"body"})}}
	}
	items := make([]T, len(raw))
	u := &unprocessable{}
	for i, rec := range raw {
		v, err := decodeDataBody[T](rec, []any{"body", i})
		if err != nil {
			ue, _ := errors.AsType[*unprocessable](err)
			u.errs = append(u.errs, ue.errs...)
			continue
		}
		items[i] = v
	}
	if len(u.errs) > 0 {
		return nil, u
	}
	return items, nil
}

// typeErrorDetail turns a decoding error into a FastAPI validation detail.
func typeErrorDetail(err error, body []byte, loc []any) validationDetail {
	te, ok := errors.AsType[*json.UnmarshalTypeError](err)
	if !ok {
		return validationDetail{Type: "value_error", Loc: loc, Msg: "Value error, " + err.Error(), Input: json.RawMessage(body)}
	}
	var path []string
	if te.Field != "" {
		path = strings.Split(te.Field, ".")
		for _, p := range path {
			loc = append(loc, p)
		}
	}
	d := validationDetail{Loc: loc, Input: valueAt(body, path)}
	switch te.Type.Kind() {
	case reflect.String:
		d.Type, d.Msg = "string_type", "Input should be a valid string"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		d.Type, d.Msg = "int_type", "Input should be a valid integer"
	case reflect.Float32, reflect.Float64:
		d.Type, d.Msg = "float_type", "Input should be a valid number"
	case reflect.Bool:
		d.Type, d.Msg = "bool_type", "Input should be a valid boolean"
	case reflect.Slice, reflect.Array:
		d.Type, d.Msg = "list_type", "Input should be a valid list"
	case reflect.Map, reflect.Struct:
		d.Type, d.Msg = "dict_type", "Input should be a valid dictionary"
	default:
		d.Type, d.Msg = "value_error", "Value error, expected "+te.Type.String()
	}
	return d
}

// valueAt returns the member of the JSON object body at path (object member names), or nil.
func valueAt(body []byte, path []string) json.RawMessage {
	v := json.RawMessage(body)
	for _, name := range path {
		var obj map[string]json.RawMessage
		if json.Unmarshal(v, &obj) != nil {
			return nil
		}
		if v = obj[name]; v == nil {
			return nil
		}
	}
	return v
}

// runData runs a callback, turning a panic into an error.
func runData[T any](call func() (T, error)) (res T, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("data resource callback panicked: %v\n%s", p, debug.Stack())
		}
	}()
	return call()
}
