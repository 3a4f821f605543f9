package contract

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Context item scopes.
const (
	ContextScopeWorkspace = "workspace"
	ContextScopeMission   = "mission"
)

// ContextAssignment is the input of the context.assign action (V2ContextAssignment): references
// to the Studio context items selected for a job, not their content. An empty Items is an
// explicit "no context", not an error. The agent opens each item once, checks that the version
// it gets is the assigned one (failing the whole assignment otherwise), and keeps the content
// with its provenance; a new context.assign is the only refresh.
type ContextAssignment struct {
	Items      []ContextAssignmentItem `json:"items"`
	MissionID  *string                 `json:"mission_id"`
	JobID      string                  `json:"job_id"`
	AssignedAt string                  `json:"assigned_at"` // ISO-8601, stamped by Studio
	Extra      Extra                   `json:"-"`
}

// ContextAssignmentItem is one assigned context item (V2ContextAssignmentItem).
type ContextAssignmentItem struct {
	Ref     string `json:"ref"`     // e.g. supervaize.context.mission.january-brief
	Version int    `json:"version"` // the item's version when it was selected
	Scope   string `json:"scope"`   // workspace or mission
	Title   string `json:"title"`
	Extra   Extra  `json:"-"`
}

// DecodeContextAssignment decodes and validates a context.assign input the way the reference
// model validates it: every member is required except mission_id, strings are never coerced
// from other types, versions accept integers, integral floats and numeric strings (pydantic's
// lax mode), unknown members are kept. The error lists every problem (FieldErrors).
func DecodeContextAssignment(input json.RawMessage) (*ContextAssignment, error) {
	var errs FieldErrors
	obj, ok := asObject(input)
	if !ok {
		return nil, FieldErrors{{Type: errModel, Loc: []any{}, Msg: "Input should be a valid dictionary or instance of V2ContextAssignment"}}
	}
	a := &ContextAssignment{}
	str := func(m map[string]json.RawMessage, loc []any, name string, required bool) (string, bool) {
		v, ok := m[name]
		delete(m, name)
		l := append(loc[:len(loc):len(loc)], name)
		if !ok {
			if required {
				errs = append(errs, FieldError{Type: errMissing, Loc: l, Msg: msgMissing})
			}
			return "", false
		}
		if isNull(v) && !required {
			return "", false
		}
		var s string
		if len(bytes.TrimSpace(v)) == 0 || bytes.TrimSpace(v)[0] != '"' || json.Unmarshal(v, &s) != nil {
			errs = append(errs, FieldError{Type: errString, Loc: l, Msg: msgString})
			return "", false
		}
		return s, true
	}
	if raw, ok := obj["items"]; !ok {
		errs = append(errs, FieldError{Type: errMissing, Loc: []any{"items"}, Msg: msgMissing})
	} else {
		var items []json.RawMessage
		if json.Unmarshal(raw, &items) != nil || isNull(raw) {
			errs = append(errs, FieldError{Type: "list_type", Loc: []any{"items"}, Msg: "Input should be a valid list"})
		}
		a.Items = make([]ContextAssignmentItem, 0, len(items))
		for i, it := range items {
			loc := []any{"items", i}
			m, ok := asObject(it)
			if !ok {
				errs = append(errs, FieldError{Type: errModel, Loc: loc, Msg: "Input should be a valid dictionary or instance of V2ContextAssignmentItem"})
				continue
			}
			// Members in declaration order, as pydantic reports them.
			var item ContextAssignmentItem
			item.Ref, _ = str(m, loc, "ref", true)
			if v, ok := m["version"]; !ok {
				errs = append(errs, FieldError{Type: errMissing, Loc: append(loc[:2:2], "version"), Msg: msgMissing})
			} else {
				n, fe := laxInt(v)
				if fe != nil {
					fe.Loc = append(loc[:2:2], "version")
					errs = append(errs, *fe)
				}
				item.Version = n
				delete(m, "version")
			}
			// A Literal: any other value, a string or not, is a literal_error.
			if v, ok := m["scope"]; !ok {
				errs = append(errs, FieldError{Type: errMissing, Loc: append(loc[:2:2], "scope"), Msg: msgMissing})
			} else {
				var scope string
				if json.Unmarshal(v, &scope) != nil || scope != ContextScopeWorkspace && scope != ContextScopeMission {
					errs = append(errs, FieldError{Type: "literal_error", Loc: append(loc[:2:2], "scope"), Msg: "Input should be 'workspace' or 'mission'"})
				}
				item.Scope = scope
				delete(m, "scope")
			}
			item.Title, _ = str(m, loc, "title", true)
			item.Extra = restOf(m)
			a.Items = append(a.Items, item)
		}
		delete(obj, "items")
	}
	if s, ok := str(obj, nil, "mission_id", false); ok {
		a.MissionID = &s
	}
	a.JobID, _ = str(obj, nil, "job_id", true)
	a.AssignedAt, _ = str(obj, nil, "assigned_at", true)
	a.Extra = restOf(obj)
	if len(errs) > 0 {
		return nil, errs
	}
	if err := a.Validate(); err != nil {
		// Only the model rule can fail here: the scopes were checked above.
		return nil, FieldErrors{{Type: errValue, Loc: []any{}, Msg: "Value error, " + err.Error()}}
	}
	return a, nil
}

// restOf returns the members left in m as Extra, or nil.
func restOf(m map[string]json.RawMessage) Extra {
	if len(m) == 0 {
		return nil
	}
	e := make(Extra, len(m))
	for k, v := range m {
		e[k] = v
	}
	return e
}

// Validate reports every reason a is not a valid assignment, or nil: item scopes must be
// workspace or mission, and mission-scoped items need a non-blank mission_id. Like the reference,
// it accepts blank refs and ids.
func (a *ContextAssignment) Validate() error {
	var p problems
	mission := false
	for i, it := range a.Items {
		at := fmt.Sprintf("items[%d]", i)
		switch it.Scope {
		case ContextScopeMission:
			mission = true
		case ContextScopeWorkspace:
		default:
			p.add(at+".scope", "Input should be 'workspace' or 'mission'")
		}
	}
	if mission && (a.MissionID == nil || strings.TrimSpace(*a.MissionID) == "") {
		p.add("", "mission_id is required when the assignment contains mission-scoped items")
	}
	return errors.Join(p...)
}

// MarshalJSON writes the assignment; items [] when empty, mission_id null when unset.
func (a ContextAssignment) MarshalJSON() ([]byte, error) {
	type plain ContextAssignment
	p := plain(a)
	p.Items = nonNil(p.Items)
	return encodeObject(p, a.Extra)
}

// UnmarshalJSON decodes the assignment without validating it (see DecodeContextAssignment).
func (a *ContextAssignment) UnmarshalJSON(data []byte) error {
	type plain ContextAssignment
	return decodeInto(data, "context assignment", (*plain)(a), &a.Extra)
}

// MarshalJSON writes the item.
func (it ContextAssignmentItem) MarshalJSON() ([]byte, error) {
	type plain ContextAssignmentItem
	return encodeObject(plain(it), it.Extra)
}

// UnmarshalJSON decodes the item, keeping unknown members.
func (it *ContextAssignmentItem) UnmarshalJSON(data []byte) error {
	type plain ContextAssignmentItem
	return decodeInto(data, "context assignment item", (*plain)(it), &it.Extra)
}
