package contract

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestDataResourceJSON pins the registration's data_resources entry (the reference's
// DataResource.registration_info): member order, defaults, derived labels, unknown members kept.
func TestDataResourceJSON(t *testing.T) {
	r := DataResource{
		Name:        "contact_knowledge",
		Description: "What the agent knows",
		Fields: []DataResourceField{
			{Name: "id", Editable: EditableNever, VisibleOn: []string{"list", "detail"}},
			{Name: "first_name", Label: "Given Name", Required: true},
			{Name: "email2work", FieldType: DataFieldEmail, Description: "Work address", RelatedResource: "contacts", Sensitive: true},
		},
		Importable: true,
		Operations: DataOperations{List: true, Get: true, Create: true, Import: true},
	}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"name":"contact_knowledge","display_name":"Contact Knowledge","description":"What the agent knows","fields":[` +
		`{"name":"id","field_type":"string","label":null,"required":false,"editable":"never","visible_on":["list","detail"],"description":null,"related_resource":null,"sensitive":false,"display_label":"Id"},` +
		`{"name":"first_name","field_type":"string","label":"Given Name","required":true,"editable":"always","visible_on":["list","detail","create","edit"],"description":null,"related_resource":null,"sensitive":false,"display_label":"Given Name"},` +
		`{"name":"email2work","field_type":"email","label":null,"required":false,"editable":"always","visible_on":["list","detail","create","edit"],"description":"Work address","related_resource":"contacts","sensitive":true,"display_label":"Email2Work"}],` +
		`"read_only":false,"importable":true,"operations":{"list":true,"get":true,"create":true,"update":false,"delete":false,"import":true},` +
		`"scope":"workspace","requires_context":["workspace_id"]}`
	if string(b) != want {
		t.Fatalf("\n got %s\nwant %s", b, want)
	}
	var back DataResource
	in := strings.Replace(want, `"scope"`, `"studio_hint":{"x":1},"scope"`, 1)
	if err := json.Unmarshal([]byte(in), &back); err != nil {
		t.Fatal(err)
	}
	again, _ := json.Marshal(back)
	if string(again) != strings.Replace(want, `,"scope":"workspace","requires_context":["workspace_id"]}`, `,"scope":"workspace","requires_context":["workspace_id"],"studio_hint":{"x":1}}`, 1) {
		t.Fatalf("round trip %s", again)
	}
	if got := back.Operations.Names(); strings.Join(got, ",") != "list,get,create,import" {
		t.Errorf("names %v", got)
	}
}

func TestDataResourceValidate(t *testing.T) {
	for name, ok := range map[string]bool{
		"contacts": true, "a": true, "9lives": true, "a_b-c": true,
		"": false, "_a": false, "-a": false, "Contacts": false, "bad name": false, "a/b": false, "{id}": false, "é": false,
	} {
		r := DataResource{Name: name}
		if err := r.Validate(); (err == nil) != ok || ValidDataResourceName(name) != ok {
			t.Errorf("name %q: %v", name, err)
		}
	}
	r := DataResource{Name: "x", Scope: "team", Fields: []DataResourceField{{Name: "a", FieldType: "money", Editable: "sometimes"}, {Name: "a"}}}
	const want = "scope: Input should be 'workspace', 'mission' or 'job'\n" +
		"fields[0].field_type: Input should be 'string', 'integer', 'boolean', 'date', 'datetime', 'text', 'email' or 'url'\n" +
		"fields[0].editable: Input should be 'always', 'create_only' or 'never'\n" +
		"fields[1].name: field 'a' is declared twice; each field must have a unique name"
	if err := r.Validate(); err == nil || err.Error() != want {
		t.Errorf("%v", err)
	}
}

func TestPyTitle(t *testing.T) {
	for in, want := range map[string]string{
		"contact notes": "Contact Notes", "first name": "First Name", "a1b": "A1B", "item-id": "Item-Id", "ÉCOLE été": "École Été", "": "", "x": "X",
	} {
		if got := pyTitle(in); got != want {
			t.Errorf("pyTitle(%q) = %q, want %q", in, got, want)
		}
	}
}
