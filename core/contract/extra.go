package contract

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
)

// Extra holds the members of a JSON object that its Go type does not declare. The reference
// models accept and keep unknown members (pydantic extra="allow"), so every contract type here
// keeps them too: they survive a decode/encode round trip and are written after the declared
// members, sorted by name. A member of Extra whose name a declared field uses never overrides
// that field: it is written, in the field's place, only when the field itself is left out (a
// zero value with omitzero). That is how a member the Go zero value cannot express is sent, such
// as an explicitly empty id in an effect (see Effect.SetIDs).
type Extra map[string]json.RawMessage

// decodeObject decodes the JSON object data into known (a pointer to a struct whose exported
// fields carry json tags) and returns the members known does not declare.
func decodeObject(data []byte, known any) (Extra, error) {
	data = bytes.TrimSpace(data)
	if len(data) == 0 || data[0] != '{' {
		return nil, fmt.Errorf("expected a JSON object")
	}
	var all map[string]json.RawMessage
	if err := json.Unmarshal(data, &all); err != nil {
		return nil, err
	}
	// encoding/json matches member names case-insensitively; the reference does not. Only the
	// exact declared names reach known, everything else is extra.
	names := jsonNames(reflect.TypeOf(known))
	var extra Extra
	var declared bytes.Buffer
	declared.WriteByte('{')
	for k, v := range all {
		if _, ok := names[k]; !ok {
			if extra == nil {
				extra = make(Extra)
			}
			extra[k] = v
			continue
		}
		if declared.Len() > 1 {
			declared.WriteByte(',')
		}
		kb, _ := json.Marshal(k)
		declared.Write(kb)
		declared.WriteByte(':')
		declared.Write(v)
	}
	declared.WriteByte('}')
	// UseNumber keeps numbers in free-form members (map[string]any, any) exact, so a decoded value
	// re-encodes as it came (an integer above 2^53 stays that integer).
	dec := json.NewDecoder(bytes.NewReader(declared.Bytes()))
	dec.UseNumber()
	if err := dec.Decode(known); err != nil {
		return nil, err
	}
	return extra, nil
}

// decodeInto decodes data into known (a pointer to an alias of the destination) and its unknown
// members into extra; what names the shape in errors.
func decodeInto(data []byte, what string, known any, extra *Extra) error {
	x, err := decodeObject(data, known)
	if err != nil {
		return fmt.Errorf("decode %s: %w", what, err)
	}
	*extra = x
	return nil
}

// encodeObject encodes known (a struct or a pointer to one) and appends the members of extra
// that known does not declare, sorted by name.
func encodeObject(known any, extra Extra) ([]byte, error) {
	b, err := json.Marshal(known)
	if err != nil {
		return nil, err
	}
	if len(extra) == 0 {
		return b, nil
	}
	names := jsonNames(reflect.TypeOf(known))
	keys := make([]string, 0, len(extra))
	for k := range extra {
		if _, ok := names[k]; !ok {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return b, nil
	}
	slices.Sort(keys)
	var buf bytes.Buffer
	buf.Grow(len(b) + 32*len(keys))
	buf.Write(b[:len(b)-1]) // drop the closing brace
	first := len(b) == 2    // "{}"
	for _, k := range keys {
		v := extra[k]
		if !json.Valid(v) {
			return nil, fmt.Errorf("extra member %q is not valid JSON", k)
		}
		if !first {
			buf.WriteByte(',')
		}
		first = false
		kb, _ := json.Marshal(k)
		buf.Write(kb)
		buf.WriteByte(':')
		if err := json.Compact(&buf, v); err != nil {
			return nil, fmt.Errorf("extra member %q: %w", k, err)
		}
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

// jsonNames returns the member names that encoding/json uses for the struct type t (or *t),
// following embedded structs the way encoding/json does.
func jsonNames(t reflect.Type) map[string]struct{} {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	names := make(map[string]struct{}, t.NumField())
	collectNames(t, names)
	return names
}

func collectNames(t reflect.Type, names map[string]struct{}) {
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				collectNames(ft, names)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		names[name] = struct{}{}
	}
}
