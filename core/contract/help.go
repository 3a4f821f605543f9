package contract

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
)

// HelpInput is the input of a help action (kind "help"): the id of the setup field to draft and
// the current draft values of the form, as Studio sends them ({"field", "values"}). A draft is
// partial and unchecked: read it with Text or DecodeValues, which never refuse it.
type HelpInput struct {
	Field  string                     `json:"field"`
	Values map[string]json.RawMessage `json:"values"`
}

// HelpInput returns the request's input as a help input; an input of another shape gives the
// members that fit (a help action answers every draft, even a malformed one).
func (r *ActionRequest) HelpInput() HelpInput {
	var h HelpInput
	for n, raw := range membersOf(r.Input) {
		switch n {
		case "field":
			h.Field, _ = asString(raw)
		case "values":
			_ = json.Unmarshal(raw, &h.Values)
		}
	}
	return h
}

func membersOf(obj json.RawMessage) map[string]json.RawMessage {
	m, _ := asObject(inputOrEmpty(obj))
	return m
}

// Text returns the draft value of the field name as text: a string as is, a number as written,
// true or false; "" when the value is absent, null, a list or an object.
func (h HelpInput) Text(name string) string {
	raw := bytes.TrimSpace(h.Values[name])
	if len(raw) == 0 || raw[0] == '[' || raw[0] == '{' || raw[0] == 'n' {
		return ""
	}
	return stringified(raw)[0]
}

// DecodeValues decodes the draft values into v (a struct or a map) leniently: each value is
// coerced as its field says (Draft rules of ValidateInput: "3" for an integer field is 3, "yes"
// for a boolean true), a value that does not fit its field is left out, and so is a member v's
// Go type cannot hold, so the rest still decodes. It returns the errors of the values left out,
// e.g. to answer them as suggestions.
func (h HelpInput) DecodeValues(v any, fields []FieldDefinition) InputErrors {
	m := make(map[string]json.RawMessage, len(h.Values))
	for k, raw := range h.Values {
		m[k] = raw
	}
	var dropped InputErrors
	for range len(fields) + 1 {
		obj, _ := json.Marshal(m)
		coerced, err := ValidateInput(fields, obj, Draft)
		if err == nil {
			m, _ = asObject(coerced)
			break
		}
		errs, ok := err.(InputErrors)
		if !ok {
			break
		}
		n := len(m)
		for _, e := range errs {
			if e.Field != "" {
				delete(m, e.Field)
			}
		}
		dropped = append(dropped, errs...)
		if len(m) == n { // nothing more to leave out
			break
		}
	}
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		one, _ := json.Marshal(map[string]json.RawMessage{k: m[k]})
		// Tried on a scratch value first: a failed decode may have set part of the member.
		if t := reflect.TypeOf(v); t != nil && t.Kind() == reflect.Pointer {
			if json.Unmarshal(one, reflect.New(t.Elem()).Interface()) != nil {
				continue // a member v cannot hold is left out
			}
		}
		_ = json.Unmarshal(one, v)
	}
	return dropped
}
