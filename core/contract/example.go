package contract

import (
	"encoding/json"
	"math"
	"strings"
)

// ExampleInput returns an input that fields accept (ValidateInput, Submit rules) when one can be
// found, for a ready-to-run sample call such as local mode's banner: each field with a default
// takes it, and each required field without one takes the first value of its kind that passes
// its rules — an option, the placeholder, the bound of a number, a date, a text of the right
// length, a common shape for a pattern (an email, a URL...), rows for a list. Optional fields
// without a default are left out, and so is a field no example fits.
func ExampleInput(fields []FieldDefinition) map[string]any {
	out := map[string]any{}
	for _, f := range fields {
		if v, ok := exampleValue(f); ok {
			out[f.ID] = v
		}
	}
	return out
}

func exampleValue(f FieldDefinition) (any, bool) {
	if f.Default != nil {
		return f.Default, true
	}
	if !f.Required {
		return nil, false
	}
	check := f
	check.DependsOn = nil
	for _, v := range exampleCandidates(&f) {
		raw, err := json.Marshal(map[string]any{f.ID: v})
		if err != nil {
			continue
		}
		if _, err := ValidateInput([]FieldDefinition{check}, raw, Submit); err == nil {
			return v, true
		}
	}
	return nil, false
}

// exampleCandidates are the values tried for f, best first.
func exampleCandidates(f *FieldDefinition) []any {
	rules := f.Validation
	if rules == nil {
		rules = &FieldValidation{}
	}
	var opts []string
	for _, o := range f.Options {
		opts = append(opts, o.Value)
	}
	switch f.Type {
	case FieldBoolean:
		return []any{false, true}
	case FieldInteger, FieldNumber:
		var c []any
		for _, b := range []*float64{rules.Min, rules.Max} {
			if b == nil {
				continue
			}
			if f.Type == FieldInteger {
				c = append(c, math.Ceil(*b), math.Floor(*b))
			} else {
				c = append(c, *b)
			}
		}
		return append(c, 1, 0)
	case FieldDate:
		return []any{"2026-01-01"}
	case FieldSelect, FieldResourceRef:
		c := make([]any, 0, len(opts)+2)
		for _, o := range opts {
			c = append(c, o)
		}
		return append(c, f.Placeholder, "example")
	case FieldMultiSelect:
		n := 1
		if rules.MinItems != nil {
			n = max(*rules.MinItems, 1)
		}
		if len(opts) >= n {
			return []any{opts[:n]}
		}
		return nil
	case FieldList:
		n := 1
		if rules.MinItems != nil {
			n = max(*rules.MinItems, 1)
		}
		rows := make([]any, n)
		for i := range rows {
			rows[i] = ExampleInput(f.ItemFields)
		}
		return []any{rows}
	case FieldFile:
		return []any{map[string]any{"storage": "inline", "filename": "example.txt", "media_type": "text/plain",
			"size": 5, "encoding": "base64", "content": "aGVsbG8="}}
	}
	// Text: the placeholder, a word, then the common shapes a pattern asks for.
	c := []any{}
	if f.Placeholder != "" {
		c = append(c, f.Placeholder)
	}
	word := "example"
	if rules.MinLength != nil && *rules.MinLength > len(word) {
		word += strings.Repeat("x", *rules.MinLength-len(word))
	}
	if rules.MaxLength != nil && *rules.MaxLength < len(word) {
		word = word[:max(*rules.MaxLength, 1)]
	}
	return append(c, word, "ann@example.com", "https://example.com", "+33123456789", "12345", "EXAMPLE", "example-1")
}
