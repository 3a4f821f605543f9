package contract

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/supervaize/svz/internal/golden"
)

func importDoc() ResourceImportDocument {
	return ResourceImportDocument{
		ID:       "campaign_contacts.import",
		Title:    "Import contacts",
		Resource: "campaign_contacts",
		Fields: []ResourceFieldDefinition{{ID: "campaign_id", Label: "Campaign", Required: true,
			OptionsSource: &OptionsSource{Type: "resource", Resource: "campaigns"}}},
		Columns: []ResourceImportColumn{{ID: "email", Label: "Email", Required: true}, {ID: "phone_number"}},
		Submit:  SubmitDefinition{Action: "resource.campaign_contacts.import", Label: "Import"},
	}
}

func TestResourceImportDocumentGolden(t *testing.T) {
	d := importDoc()
	if err := d.Validate(); err != nil {
		t.Fatal(err)
	}
	b := mustMarshal(t, d)
	golden.JSON(t, "resource_import.json", b)
	var back ResourceImportDocument
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if string(mustMarshal(t, back)) != string(b) {
		t.Error("round trip changed the document")
	}
	// Absent members take the reference defaults.
	var sparse ResourceImportDocument
	if err := json.Unmarshal([]byte(`{"id":"i","title":"T","resource":"r","columns":[{"id":"c"}],"submit":{"action":"a"},"hint":"kept"}`), &sparse); err != nil {
		t.Fatal(err)
	}
	const want = `{"type":"ResourceImport","id":"i","title":"T","resource":"r","accepted_formats":["csv"],"fields":[],` +
		`"columns":[{"id":"c","label":null,"type":"string","required":false}],"submit":{"action":"a","label":null},"state":{},"hint":"kept"}`
	if got := string(mustMarshal(t, sparse)); got != want {
		t.Errorf("got %s\nwant %s", got, want)
	}
}

func TestResourceImportDocumentValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*ResourceImportDocument)
		want []string
	}{
		{"valid", func(*ResourceImportDocument) {}, nil},
		{"xlsx only needs no columns", func(d *ResourceImportDocument) { d.AcceptedFormats = []string{ImportXLSX}; d.Columns = nil }, nil},
		{"csv by default needs columns", func(d *ResourceImportDocument) { d.Columns = nil }, []string{
			"ResourceImport documents that accept csv must declare columns",
		}},
		{"csv needs columns", func(d *ResourceImportDocument) {
			d.AcceptedFormats = []string{ImportXLSX, ImportCSV}
			d.Columns = []ResourceImportColumn{}
		}, []string{
			"ResourceImport documents that accept csv must declare columns",
		}},
		{"shape", func(d *ResourceImportDocument) {
			d.Type = "Form"
			d.Resource = ""
			d.AcceptedFormats = []string{"json"}
			d.Columns[1].ID = " "
			d.Submit.Action = ""
			d.Fields[0].OptionsSource.Resource = ""
		}, []string{
			"type: Input should be 'ResourceImport'",
			"resource: String should have at least 1 character",
			"accepted_formats[0]: Input should be 'csv' or 'xlsx'",
			`fields[0]: field "campaign_id": options_source.resource is required`,
			"columns[1].id: String should have at least 1 character",
			"submit.action: String should have at least 1 character",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := importDoc()
			tc.edit(&d)
			err := d.Validate()
			if tc.want == nil {
				if err != nil {
					t.Fatalf("unexpected: %v", err)
				}
				return
			}
			if err == nil || err.Error() != strings.Join(tc.want, "\n") {
				t.Errorf("error:\n%v\nwant:\n%s", err, strings.Join(tc.want, "\n"))
			}
		})
	}
}
