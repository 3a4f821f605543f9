package contract_test

import (
	"encoding/json"
	"testing"

	"github.com/supervaize/svz/core/contract"
)

func TestExampleInput(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	n := func(v int) *int { return &v }
	fields := []contract.FieldDefinition{
		{ID: "count", Label: "Count", Type: contract.FieldInteger, Required: true, Default: 3},
		{ID: "budget", Label: "Budget", Type: contract.FieldNumber, Required: true, Validation: &contract.FieldValidation{Min: f(10.5)}},
		{ID: "seats", Label: "Seats", Type: contract.FieldInteger, Required: true, Validation: &contract.FieldValidation{Min: f(2.5), Max: f(9)}},
		{ID: "email", Label: "Email", Required: true, Validation: &contract.FieldValidation{Pattern: `^[^@\s]+@[^@\s]+$`}},
		{ID: "site", Label: "Site", Required: true, Placeholder: "https://acme.example", Validation: &contract.FieldValidation{Pattern: `^https://`}},
		{ID: "code", Label: "Code", Required: true, Validation: &contract.FieldValidation{MinLength: n(10)}},
		{ID: "mode", Label: "Mode", Type: contract.FieldSelect, Required: true, Options: []contract.FieldOption{{Value: "fast", Label: "Fast"}}},
		{ID: "tags", Label: "Tags", Type: contract.FieldMultiSelect, Required: true, Validation: &contract.FieldValidation{MinItems: n(2)},
			Options: []contract.FieldOption{{Value: "a", Label: "A"}, {Value: "b", Label: "B"}, {Value: "c", Label: "C"}}},
		{ID: "day", Label: "Day", Type: contract.FieldDate, Required: true},
		{ID: "ok", Label: "OK", Type: contract.FieldBoolean, Required: true},
		{ID: "contacts", Label: "Contacts", Type: contract.FieldList, Required: true,
			ItemFields: []contract.FieldDefinition{{ID: "name", Label: "Name", Required: true}, {ID: "note", Label: "Note"}}},
		{ID: "notes", Label: "Notes"}, // optional, no default: left out
		{ID: "impossible", Label: "X", Validation: &contract.FieldValidation{Pattern: `^zz\d{40}$`}}, // optional
	}
	in := contract.ExampleInput(fields)
	b, _ := json.Marshal(in)
	const want = `{"budget":10.5,"code":"examplexxx","contacts":[{"name":"example"}],"count":3,"day":"2026-01-01","email":"ann@example.com",` +
		`"mode":"fast","ok":false,"seats":3,"site":"https://acme.example","tags":["a","b"]}`
	if string(b) != want {
		t.Errorf("ExampleInput = %s\nwant %s", b, want)
	}
	if _, err := contract.ValidateInput(fields, b, contract.Submit); err != nil {
		t.Errorf("the example is refused: %v", err)
	}
	// A required field no example fits is left out (the call then names it).
	if in := contract.ExampleInput([]contract.FieldDefinition{{ID: "x", Label: "X", Required: true,
		Validation: &contract.FieldValidation{Pattern: `^zz\d{40}$`}}}); len(in) != 0 {
		t.Errorf("impossible field: %v", in)
	}
}
