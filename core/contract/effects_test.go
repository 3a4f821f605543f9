package contract_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/supervaize/svz/core/contract"
)

type contact struct {
	ID    string `json:"id"`
	Email string `json:"email"`
}

// TestEffectTypedItems: Item, Items and Rows take typed values; a nil slice is written [], and a
// value that is not an object (or a list of objects) makes the result invalid.
func TestEffectTypedItems(t *testing.T) {
	var none []contact
	res := contract.ActionResult{Status: contract.StatusOK, Effects: []contract.Effect{
		{Type: contract.EffectResourceListed, Resource: "contacts", Items: []contact{{"c-1", "a@b.c"}}},
		{Type: contract.EffectResourceCreated, Resource: "contacts", Item: &contact{"c-2", "d@e.f"}},
		{Type: contract.EffectDatasetQueried, Dataset: "runs", Rows: none, Count: new(int)},
		{Type: "custom", Item: json.RawMessage(`{"a":1}`), Items: []any{map[string]any{"b": 2}, contact{}}},
	}}
	if err := res.Validate(); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"status":"ok","effects":[{"type":"resource.listed","resource":"contacts","items":[{"id":"c-1","email":"a@b.c"}]},` +
		`{"type":"resource.created","resource":"contacts","item":{"id":"c-2","email":"d@e.f"}},` +
		`{"type":"dataset.queried","dataset":"runs","count":0,"rows":[]},` +
		`{"type":"custom","item":{"a":1},"items":[{"b":2},{"id":"","email":""}]}]}`
	if string(b) != want {
		t.Errorf("effects = %s\nwant      %s", b, want)
	}
	for name, e := range map[string]contract.Effect{
		"item a string":     {Type: "x", Item: "c-1"},
		"item a list":       {Type: "x", Item: []contact{}},
		"item nil pointer":  {Type: "x", Item: (*contact)(nil)},
		"items an object":   {Type: "x", Items: contact{}},
		"items of strings":  {Type: "x", Items: []string{"a"}},
		"rows of numbers":   {Type: "x", Rows: []any{map[string]any{}, 3}},
		"item a raw list":   {Type: "x", Item: json.RawMessage(`[1]`)},
		"items a raw array": {Type: "x", Items: json.RawMessage(`[{}]`)},
	} {
		r := contract.ActionResult{Status: contract.StatusOK, Effects: []contract.Effect{e}}
		if err := r.Validate(); err == nil || !strings.Contains(err.Error(), "effects[0].") {
			t.Errorf("%s: Validate = %v, want an error naming the effect", name, err)
		}
	}
}

func TestSurfaceResultErrors(t *testing.T) {
	r := contract.SurfaceResult{Surface: "case.step.awaiting", Errors: []contract.ResultError{{Code: "step_not_found", Message: "No such step"}}}
	if err := r.Validate(); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(r)
	if want := `{"surface":"case.step.awaiting","a2ui_version":null,"a2ui_catalog_version":null,"document":{},"errors":[{"code":"step_not_found","message":"No such step"}]}`; string(b) != want {
		t.Errorf("surface result = %s\nwant %s", b, want)
	}
	r.Errors[0].Code = ""
	if r.Validate() == nil {
		t.Error("an error without a code validated")
	}
}

// TestResourceOperationFlags: per-operation flags on the resource make list and get read-only
// while keeping the resource's scope, and an explicit definition without a scope keeps the
// derived one (it used to fall back to job silently).
func TestResourceOperationFlags(t *testing.T) {
	reg, err := contract.BuildRegistration(contract.RegistrationSpec{
		AgentSlug: "s", DisplayName: "S", A2UICatalogVersion: "s.1",
		Actions: []contract.ActionSpec{
			contract.ActionDefinition{ID: "resource.contacts.delete", Label: "Remove"},
			contract.ActionDefinition{ID: "dataset.runs.query", Label: "Runs", ReadOnly: true},
			contract.ActionDefinition{ID: "resource.contacts.import", Scope: contract.ScopeJob},
		},
		Resources: []contract.ResourceDefinition{{ID: "contacts", Label: "Contacts", Scope: contract.ScopeMission,
			Operations: []string{"list", "get", "create", "delete", "import"}, ReadOnlyOperations: []string{"list", "get"}}},
		Datasets: []contract.DatasetDefinition{{ID: "runs", Label: "Runs"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, a := range reg.Capabilities.Actions {
		got[a.ID] = a.Scope
		if a.ReadOnly {
			got[a.ID] += " read-only"
		}
	}
	want := map[string]string{
		"resource.contacts.list": "mission read-only", "resource.contacts.get": "mission read-only",
		"resource.contacts.create": "mission", "resource.contacts.delete": "mission", "resource.contacts.import": "job",
		"dataset.runs.query": "workspace read-only",
	}
	for id, w := range want {
		if got[id] != w {
			t.Errorf("%s = %q, want %q", id, got[id], w)
		}
	}
	if _, err := contract.BuildRegistration(contract.RegistrationSpec{AgentSlug: "s", DisplayName: "S", A2UICatalogVersion: "s.1",
		Resources: []contract.ResourceDefinition{{ID: "c", Label: "C", Operations: []string{"list"}, ReadOnlyOperations: []string{"get"}}},
	}); err == nil || !strings.Contains(err.Error(), `ReadOnlyOperations names "get"`) {
		t.Errorf("a read-only operation the resource does not have: %v", err)
	}
}
