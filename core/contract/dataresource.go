package contract

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
)

// DataResource operations, in the order the registration lists them. Each is also the last part
// of the grant scope a DataResource call requires: resource.<name>.<op>.
const (
	DataOpList   = "list"
	DataOpGet    = "get"
	DataOpCreate = "create"
	DataOpUpdate = "update"
	DataOpDelete = "delete"
	DataOpImport = "import"
)

// DataResource field types (FieldType) and edit policies (Editable).
const (
	DataFieldString   = "string"
	DataFieldInteger  = "integer"
	DataFieldBoolean  = "boolean"
	DataFieldDate     = "date"
	DataFieldDateTime = "datetime"
	DataFieldText     = "text"
	DataFieldEmail    = "email"
	DataFieldURL      = "url"

	EditableAlways     = "always"      // on the create and edit forms
	EditableCreateOnly = "create_only" // set on create, read-only on edit
	EditableNever      = "never"       // agent-controlled, never a form input
)

// DataResource is one entry of an agent registration's data_resources (DataResourceContract): a
// named collection of business objects Studio lists, shows and edits generically through the
// agent's /api/agents/{slug}/data/{name}/ routes. Empty members take the reference's defaults on
// output: DisplayName from Name ("contact_notes" → "Contact Notes"), Scope "workspace",
// RequiresContext ["workspace_id"]. ReadOnly, Importable and Operations say what the agent serves.
type DataResource struct {
	Name            string              `json:"name"`
	DisplayName     string              `json:"display_name"`
	Description     string              `json:"description"`
	Fields          []DataResourceField `json:"fields"`
	ReadOnly        bool                `json:"read_only"`
	Importable      bool                `json:"importable"`
	Operations      DataOperations      `json:"operations"`
	Scope           string              `json:"scope"`
	RequiresContext []string            `json:"requires_context"`
	Extra           Extra               `json:"-"`
}

// DataOperations says which routes of a DataResource the agent serves.
type DataOperations struct {
	List   bool `json:"list"`
	Get    bool `json:"get"`
	Create bool `json:"create"`
	Update bool `json:"update"`
	Delete bool `json:"delete"`
	Import bool `json:"import"`
}

// Has reports whether op (DataOpList...) is served.
func (o DataOperations) Has(op string) bool {
	switch op {
	case DataOpList:
		return o.List
	case DataOpGet:
		return o.Get
	case DataOpCreate:
		return o.Create
	case DataOpUpdate:
		return o.Update
	case DataOpDelete:
		return o.Delete
	case DataOpImport:
		return o.Import
	}
	return false
}

// Names returns the served operations, in registration order.
func (o DataOperations) Names() []string {
	var out []string
	for _, op := range [...]string{DataOpList, DataOpGet, DataOpCreate, DataOpUpdate, DataOpDelete, DataOpImport} {
		if o.Has(op) {
			out = append(out, op)
		}
	}
	return out
}

// DataResourceField describes one attribute of a DataResource's items for Studio's list, detail
// and forms (DataResourceFieldContract). Empty members take the reference's defaults on output:
// FieldType "string", Editable "always", VisibleOn [list, detail, create, edit], Label, Description
// and RelatedResource null, and DisplayLabel is Label or the title-cased Name.
type DataResourceField struct {
	Name            string   `json:"name"`
	FieldType       string   `json:"field_type"`
	Label           string   `json:"label"`
	Required        bool     `json:"required"` // required on the create form
	Editable        string   `json:"editable"`
	VisibleOn       []string `json:"visible_on"`
	Description     string   `json:"description"`      // help text
	RelatedResource string   `json:"related_resource"` // the DataResource this field references
	Sensitive       bool     `json:"sensitive"`        // masked for non-manager users
	DisplayLabel    string   `json:"display_label"`
	Extra           Extra    `json:"-"`
}

// ValidDataResourceName reports whether name is a DataResource name: ^[a-z0-9][a-z0-9_-]*$, so it
// is one URL path segment and part of a scope.
func ValidDataResourceName(name string) bool {
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case 'a' <= c && c <= 'z', '0' <= c && c <= '9':
		case (c == '_' || c == '-') && i > 0:
		default:
			return false
		}
	}
	return name != ""
}

// Validate reports every reason r is not a valid DataResource declaration, or nil.
func (r *DataResource) Validate() error {
	var p problems
	if !ValidDataResourceName(r.Name) {
		p.add("name", "String should match pattern '^[a-z0-9][a-z0-9_-]*$'")
	}
	p.scope("scope", r.Scope)
	seen := map[string]bool{}
	for i := range r.Fields {
		at := fmt.Sprintf("fields[%d]", i)
		p.addErr(at, r.Fields[i].Validate())
		if n := r.Fields[i].Name; n != "" {
			if seen[n] {
				p.add(at+".name", "field '%s' is declared twice; each field must have a unique name", n)
			}
			seen[n] = true
		}
	}
	return errors.Join(p...)
}

// Validate reports every reason f is not a valid field, or nil.
func (f *DataResourceField) Validate() error {
	var p problems
	p.nonEmpty("name", f.Name)
	switch f.FieldType {
	case "", DataFieldString, DataFieldInteger, DataFieldBoolean, DataFieldDate, DataFieldDateTime, DataFieldText, DataFieldEmail, DataFieldURL:
	default:
		p.add("field_type", "Input should be 'string', 'integer', 'boolean', 'date', 'datetime', 'text', 'email' or 'url'")
	}
	switch f.Editable {
	case "", EditableAlways, EditableCreateOnly, EditableNever:
	default:
		p.add("editable", "Input should be 'always', 'create_only' or 'never'")
	}
	return errors.Join(p...)
}

// MarshalJSON writes the declaration with the reference's defaults.
func (r DataResource) MarshalJSON() ([]byte, error) {
	type plain DataResource
	p := plain(r)
	p.DisplayName = orDefault(p.DisplayName, pyTitle(strings.ReplaceAll(p.Name, "_", " ")))
	p.Fields = nonNil(p.Fields)
	p.Scope = orDefault(p.Scope, ScopeWorkspace)
	if p.RequiresContext == nil {
		p.RequiresContext = []string{"workspace_id"}
	}
	return encodeObject(p, r.Extra)
}

// UnmarshalJSON decodes a declaration, keeping unknown members.
func (r *DataResource) UnmarshalJSON(data []byte) error {
	type plain DataResource
	return decodeInto(data, "data resource", (*plain)(r), &r.Extra)
}

// MarshalJSON writes the field with the reference's defaults.
func (f DataResourceField) MarshalJSON() ([]byte, error) {
	type wire struct {
		Name            string     `json:"name"`
		FieldType       string     `json:"field_type"`
		Label           nullString `json:"label"`
		Required        bool       `json:"required"`
		Editable        string     `json:"editable"`
		VisibleOn       []string   `json:"visible_on"`
		Description     nullString `json:"description"`
		RelatedResource nullString `json:"related_resource"`
		Sensitive       bool       `json:"sensitive"`
		DisplayLabel    string     `json:"display_label"`
	}
	visible := f.VisibleOn
	if visible == nil {
		visible = []string{"list", "detail", "create", "edit"}
	}
	label := f.DisplayLabel
	if label == "" {
		label = orDefault(f.Label, pyTitle(strings.ReplaceAll(f.Name, "_", " ")))
	}
	return encodeObject(wire{
		Name: f.Name, FieldType: orDefault(f.FieldType, DataFieldString), Label: nullString(f.Label), Required: f.Required,
		Editable: orDefault(f.Editable, EditableAlways), VisibleOn: visible, Description: nullString(f.Description),
		RelatedResource: nullString(f.RelatedResource), Sensitive: f.Sensitive, DisplayLabel: label,
	}, f.Extra)
}

// UnmarshalJSON decodes a field, keeping unknown members; null strings become "".
func (f *DataResourceField) UnmarshalJSON(data []byte) error {
	type wire struct {
		Name            string     `json:"name"`
		FieldType       string     `json:"field_type"`
		Label           nullString `json:"label"`
		Required        bool       `json:"required"`
		Editable        string     `json:"editable"`
		VisibleOn       []string   `json:"visible_on"`
		Description     nullString `json:"description"`
		RelatedResource nullString `json:"related_resource"`
		Sensitive       bool       `json:"sensitive"`
		DisplayLabel    nullString `json:"display_label"`
	}
	var w wire
	var extra Extra
	if err := decodeInto(data, "data resource field", &w, &extra); err != nil {
		return err
	}
	*f = DataResourceField{
		Name: w.Name, FieldType: w.FieldType, Label: string(w.Label), Required: w.Required, Editable: w.Editable,
		VisibleOn: w.VisibleOn, Description: string(w.Description), RelatedResource: string(w.RelatedResource),
		Sensitive: w.Sensitive, DisplayLabel: string(w.DisplayLabel), Extra: extra,
	}
	return nil
}

// pyTitle is Python's str.title(): a cased character is upper-cased after an uncased one (start,
// space, digit, punctuation) and lower-cased after a cased one.
func pyTitle(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	prevCased := false
	for _, r := range s {
		if prevCased {
			b.WriteRune(unicode.ToLower(r))
		} else {
			b.WriteRune(unicode.ToTitle(r))
		}
		prevCased = unicode.IsUpper(r) || unicode.IsLower(r) || unicode.IsTitle(r)
	}
	return b.String()
}
