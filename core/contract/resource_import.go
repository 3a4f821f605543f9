package contract

import (
	"errors"
	"fmt"
	"slices"
)

// Resource import formats.
const (
	ImportCSV  = "csv"
	ImportXLSX = "xlsx"
)

// ResourceImportDocumentType is the A2UI document type of a resource import surface.
const ResourceImportDocumentType = "ResourceImport"

// ResourceImportDocument is the A2UI document of an import surface
// (V2A2UIResourceImportDocument): Studio reads it to show the required format, validate CSV rows
// before submitting, and route the typed import action. Use it as a SurfaceResult document.
// A nil AcceptedFormats is ["csv"].
type ResourceImportDocument struct {
	Type            string                    `json:"type"` // "ResourceImport"; "" is written as such
	ID              string                    `json:"id"`
	Title           string                    `json:"title"`
	Resource        string                    `json:"resource"`
	AcceptedFormats []string                  `json:"accepted_formats"`
	Fields          []ResourceFieldDefinition `json:"fields"`  // contextual fields, e.g. a campaign picker
	Columns         []ResourceImportColumn    `json:"columns"` // row columns
	Submit          SubmitDefinition          `json:"submit"`
	State           map[string]any            `json:"state"`
	Extra           Extra                     `json:"-"`
}

// ResourceImportColumn is one row column of an import (V2A2UIResourceImportColumn); an empty
// Type is "string" and an empty Label is written as null.
type ResourceImportColumn struct {
	ID       string `json:"id"`
	Label    string `json:"label"`
	Type     string `json:"type"`
	Required bool   `json:"required"`
	Extra    Extra  `json:"-"`
}

// SubmitDefinition names the action a document submits to (V2A2UISubmitDefinition); an empty
// Label is written as null.
type SubmitDefinition struct {
	Action string `json:"action"`
	Label  string `json:"label"`
	Extra  Extra  `json:"-"`
}

// Validate reports every reason d is not a valid import document, or nil.
func (d *ResourceImportDocument) Validate() error {
	var p problems
	if d.Type != "" && d.Type != ResourceImportDocumentType {
		p.add("type", "Input should be 'ResourceImport'")
	}
	p.nonEmpty("id", d.ID)
	p.nonEmpty("title", d.Title)
	p.nonEmpty("resource", d.Resource)
	formats := d.formats()
	for i, f := range formats {
		if f != ImportCSV && f != ImportXLSX {
			p.add(fmt.Sprintf("accepted_formats[%d]", i), "Input should be 'csv' or 'xlsx'")
		}
	}
	for i := range d.Fields {
		p.addErr(fmt.Sprintf("fields[%d]", i), d.Fields[i].Validate())
	}
	for i, c := range d.Columns {
		p.nonEmpty(fmt.Sprintf("columns[%d].id", i), c.ID)
	}
	p.nonEmpty("submit.action", d.Submit.Action)
	if len(d.Columns) == 0 && slices.Contains(formats, ImportCSV) {
		p.add("", "ResourceImport documents that accept csv must declare columns")
	}
	return errors.Join(p...)
}

func (d *ResourceImportDocument) formats() []string {
	if d.AcceptedFormats == nil {
		return []string{ImportCSV}
	}
	return d.AcceptedFormats
}

// MarshalJSON writes the document with its defaults.
func (d ResourceImportDocument) MarshalJSON() ([]byte, error) {
	type plain ResourceImportDocument
	p := plain(d)
	p.Type = orDefault(p.Type, ResourceImportDocumentType)
	p.AcceptedFormats = d.formats()
	p.Fields = nonNil(p.Fields)
	p.Columns = nonNil(p.Columns)
	if p.State == nil {
		p.State = map[string]any{}
	}
	return encodeObject(p, d.Extra)
}

// UnmarshalJSON decodes the document; absent members take their defaults.
func (d *ResourceImportDocument) UnmarshalJSON(data []byte) error {
	type plain ResourceImportDocument
	p := plain{Type: ResourceImportDocumentType, AcceptedFormats: []string{ImportCSV}}
	if err := decodeInto(data, "ResourceImport document", &p, &p.Extra); err != nil {
		return err
	}
	*d = ResourceImportDocument(p)
	return nil
}

type importColumnWire struct {
	ID       string     `json:"id"`
	Label    nullString `json:"label"`
	Type     string     `json:"type"`
	Required bool       `json:"required"`
}

// MarshalJSON writes the column; type string when empty, label null when empty.
func (c ResourceImportColumn) MarshalJSON() ([]byte, error) {
	return encodeObject(importColumnWire{c.ID, nullString(c.Label), orDefault(c.Type, FieldString), c.Required}, c.Extra)
}

// UnmarshalJSON decodes the column; an absent type is string.
func (c *ResourceImportColumn) UnmarshalJSON(data []byte) error {
	w := importColumnWire{Type: FieldString}
	var extra Extra
	if err := decodeInto(data, "import column", &w, &extra); err != nil {
		return err
	}
	*c = ResourceImportColumn{ID: w.ID, Label: string(w.Label), Type: w.Type, Required: w.Required, Extra: extra}
	return nil
}

type submitWire struct {
	Action string     `json:"action"`
	Label  nullString `json:"label"`
}

// MarshalJSON writes the submit definition; label null when empty.
func (s SubmitDefinition) MarshalJSON() ([]byte, error) {
	return encodeObject(submitWire{s.Action, nullString(s.Label)}, s.Extra)
}

// UnmarshalJSON decodes the submit definition, keeping unknown members.
func (s *SubmitDefinition) UnmarshalJSON(data []byte) error {
	var w submitWire
	var extra Extra
	if err := decodeInto(data, "submit", &w, &extra); err != nil {
		return err
	}
	*s = SubmitDefinition{Action: w.Action, Label: string(w.Label), Extra: extra}
	return nil
}
