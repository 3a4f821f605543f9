package contract_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/supervaize/svz/core/contract"
)

// FuzzValidateInput checks arbitrary input against a schema using every type and rule: it never
// panics; a refusal is made of input errors; an accepted input comes back as a JSON object that
// validates again to itself (coercion is idempotent).
func FuzzValidateInput(f *testing.F) {
	fields := []contract.FieldDefinition{
		field("s", "string", rules(contract.FieldValidation{MinLength: ptr(1), MaxLength: ptr(5), Pattern: "^[a-z]*$"})),
		field("t", "text"), field("u", "color"),
		field("b", "boolean"), field("i", "integer", rules(contract.FieldValidation{Min: ptr(-5.0), Max: ptr(5.0)})),
		field("n", "number", withDefault(1.5)), field("d", "date"),
		field("m", "select", options("a", "b"), required), field("ms", "multi_select", options("a", "b"), rules(contract.FieldValidation{MaxItems: ptr(2)})),
		field("r", "resource_ref"), field("f", "file", file("", ".md,image/*", 100)),
		field("dep", "integer", required, dependsOn("m", "b")),
		field("l", "list", func(fd *contract.FieldDefinition) {
			fd.ItemFields = []contract.FieldDefinition{field("e", "string", required), field("k", "boolean", withDefault(false))}
		}),
	}
	for _, seed := range []string{
		`{"s":"ab","b":"yes","i":"3","m":"b","dep":1,"l":[{"e":"x"}]}`,
		`{"m":"a","ms":["a","b"],"d":"2026-01-01","f":{"storage":"inline","filename":"a.md","size":1,"content":"x"}}`,
		`{"i":1e400,"n":"-0","l":"free text","m":null}`, `[]`, `{"s":"\ud800"}`, `{"i":9223372036854775808}`,
	} {
		f.Add(seed, true)
		f.Add(seed, false)
	}
	f.Fuzz(func(t *testing.T, input string, submit bool) {
		if !json.Valid([]byte(input)) {
			return // the request decoder refuses invalid JSON before any action runs
		}
		mode := contract.Draft
		if submit {
			mode = contract.Submit
		}
		out, err := contract.ValidateInput(fields, json.RawMessage(input), mode)
		if err != nil {
			var ie contract.InputErrors
			if !errors.As(err, &ie) || len(ie) == 0 {
				t.Fatalf("error %v is not input errors", err)
			}
			for _, e := range ie {
				if !contract.IsInputError(e.Code) || e.Message == "" {
					t.Fatalf("error %+v", e)
				}
			}
			return
		}
		var m map[string]json.RawMessage
		if json.Unmarshal(out, &m) != nil {
			t.Fatalf("output %s is not an object", out)
		}
		again, err := contract.ValidateInput(fields, out, mode)
		if err != nil || string(again) != string(out) {
			t.Fatalf("validating the output again: %s, %v; want %s", again, err, out)
		}
	})
}
