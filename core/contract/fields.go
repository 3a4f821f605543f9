package contract

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/supervaize/svz/core/internal/wirejson"
)

// Field types Studio knows how to render. Unknown types are rendered as string.
const (
	FieldString      = "string"
	FieldText        = "text"
	FieldBoolean     = "boolean"
	FieldInteger     = "integer"
	FieldNumber      = "number"
	FieldDate        = "date"
	FieldSelect      = "select"
	FieldMultiSelect = "multi_select"
	FieldResourceRef = "resource_ref"
	FieldFile        = "file"
	FieldList        = "list"
)

// DisplayTextMaxLength bounds labels and descriptions shown by Studio (V2_DISPLAY_TEXT_MAX_LENGTH)
// and field descriptions.
const DisplayTextMaxLength = 300

// FieldDefinition describes one input: a setup-plan field (V2SetupFieldDefinition), a human-review
// field of an awaiting step (V2AwaitingFieldDefinition) or an item field of a list. id, label, type
// and required are always written; the optional keys are written only when set, so definitions
// that do not use them serialize as before. File fields carry Accept, MaxBytes and Storage. An
// empty Type means the context's default: string for setup fields, boolean for awaiting fields.
// ResourceField and ResourceFieldDefinition.Field convert between the two field types.
type FieldDefinition struct {
	ID            string            `json:"id"`
	Label         string            `json:"label"`
	Type          string            `json:"type"`
	ItemFields    []FieldDefinition `json:"item_fields,omitzero"`
	Required      bool              `json:"required"`
	Default       any               `json:"default,omitzero"`
	Placeholder   string            `json:"placeholder,omitzero"`
	Description   string            `json:"description,omitzero"`
	Multiline     bool              `json:"multiline,omitzero"`
	MinRows       *int              `json:"min_rows,omitzero"`
	Options       []FieldOption     `json:"options,omitzero"`
	OptionsSource *OptionsSource    `json:"options_source,omitzero"`
	DependsOn     *DependsOn        `json:"depends_on,omitzero"`
	Validation    *FieldValidation  `json:"validation,omitzero"`
	// Accept lists the extensions and media types a file field allows (".md,text/markdown"),
	// MaxBytes the largest file Studio accepts for it, Storage where the bytes live: "studio"
	// (the agent gets a reference) or "inline" (the content travels in the action's JSON).
	Accept   string `json:"accept,omitzero"`
	MaxBytes int64  `json:"max_bytes,omitzero"`
	Storage  string `json:"storage,omitzero"`
	Extra    Extra  `json:"-"`
}

// File field storages.
const (
	StorageStudio = "studio"
	StorageInline = "inline"
)

// FieldOption is one choice of a select or multi_select field. Plain strings are not options.
type FieldOption struct {
	Value string `json:"value"`
	Label string `json:"label"`
	Extra Extra  `json:"-"`
}

// OptionsSource takes a field's options from a resource (V2ResourceFieldOptionsSource).
type OptionsSource struct {
	Type       string  `json:"type"` // always "resource"
	Resource   string  `json:"resource"`
	ValueField string  `json:"value_field"` // "id" when empty
	LabelField *string `json:"label_field"`
	Extra      Extra   `json:"-"`
}

// DependsOn makes a field active only while its parent's value (stringified) is in In. Parents
// may chain.
type DependsOn struct {
	Field string   `json:"field"`
	In    []string `json:"in"`
	Extra Extra    `json:"-"`
}

// FieldValidation holds the rules of a field (V2FieldValidation). min_length, max_length and
// pattern suit string, text and unknown types; min and max suit integer and number; min_items and
// max_items suit multi_select and list. Message replaces the generic error.
type FieldValidation struct {
	MinLength *int     `json:"min_length,omitzero"`
	MaxLength *int     `json:"max_length,omitzero"`
	Pattern   string   `json:"pattern,omitzero"`
	Min       *float64 `json:"min,omitzero"`
	Max       *float64 `json:"max,omitzero"`
	MinItems  *int     `json:"min_items,omitzero"`
	MaxItems  *int     `json:"max_items,omitzero"`
	Message   string   `json:"message,omitzero"`
	Extra     Extra    `json:"-"`
}

// ResourceFieldDefinition is a field of a resource form (V2ResourceFieldDefinition). Its historical
// members are always written (options_source as null when unset); the optional keys shared with
// FieldDefinition only when set.
type ResourceFieldDefinition struct {
	ID            string            `json:"id"`
	Label         string            `json:"label"`
	Type          string            `json:"type"` // "string" when empty
	Required      bool              `json:"required"`
	ReadOnly      bool              `json:"read_only"`
	Multiline     bool              `json:"multiline"`
	OptionsSource *OptionsSource    `json:"options_source"`
	ItemFields    []FieldDefinition `json:"item_fields,omitzero"`
	Default       any               `json:"default,omitzero"`
	Placeholder   string            `json:"placeholder,omitzero"`
	Description   string            `json:"description,omitzero"`
	MinRows       *int              `json:"min_rows,omitzero"`
	Options       []FieldOption     `json:"options,omitzero"`
	DependsOn     *DependsOn        `json:"depends_on,omitzero"`
	Validation    *FieldValidation  `json:"validation,omitzero"`
	Accept        string            `json:"accept,omitzero"`
	MaxBytes      int64             `json:"max_bytes,omitzero"`
	Storage       string            `json:"storage,omitzero"`
	Extra         Extra             `json:"-"`
}

// Field returns the resource field as a FieldDefinition, the type of forms, setup plans and
// awaiting steps: one schema for every input. ReadOnly has no counterpart and is kept in Extra
// as "read_only" when set.
func (f ResourceFieldDefinition) Field() FieldDefinition {
	extra := cloneExtra(f.Extra)
	if f.ReadOnly {
		if extra == nil {
			extra = Extra{}
		}
		extra["read_only"] = json.RawMessage("true")
	}
	return FieldDefinition{
		ID: f.ID, Label: f.Label, Type: f.Type, ItemFields: f.ItemFields, Required: f.Required, Default: f.Default,
		Placeholder: f.Placeholder, Description: f.Description, Multiline: f.Multiline, MinRows: f.MinRows,
		Options: f.Options, OptionsSource: f.OptionsSource, DependsOn: f.DependsOn, Validation: f.Validation,
		Accept: f.Accept, MaxBytes: f.MaxBytes, Storage: f.Storage, Extra: extra,
	}
}

// ResourceField returns f as a resource field definition (a "read_only" member of Extra sets
// ReadOnly).
func (f FieldDefinition) ResourceField() ResourceFieldDefinition {
	extra := cloneExtra(f.Extra)
	readOnly := false
	if v, ok := extra["read_only"]; ok {
		readOnly = string(bytes.TrimSpace(v)) == "true"
		delete(extra, "read_only")
		if len(extra) == 0 {
			extra = nil
		}
	}
	return ResourceFieldDefinition{
		ID: f.ID, Label: f.Label, Type: f.Type, Required: f.Required, ReadOnly: readOnly, Multiline: f.Multiline,
		OptionsSource: f.OptionsSource, ItemFields: f.ItemFields, Default: f.Default, Placeholder: f.Placeholder,
		Description: f.Description, MinRows: f.MinRows, Options: f.Options, DependsOn: f.DependsOn,
		Validation: f.Validation, Accept: f.Accept, MaxBytes: f.MaxBytes, Storage: f.Storage, Extra: extra,
	}
}

// Fields converts resource fields to FieldDefinitions.
func Fields(resource []ResourceFieldDefinition) []FieldDefinition {
	out := make([]FieldDefinition, len(resource))
	for i, f := range resource {
		out[i] = f.Field()
	}
	return out
}

// ResourceFields converts FieldDefinitions to resource fields.
func ResourceFields(fields []FieldDefinition) []ResourceFieldDefinition {
	out := make([]ResourceFieldDefinition, len(fields))
	for i, f := range fields {
		out[i] = f.ResourceField()
	}
	return out
}

// Cost estimate statuses.
const (
	CostEstimated = "estimated"
	CostUnknown   = "unknown"
)

// CostEstimate is a cost range (V2CostEstimate). Clients show a range or "unknown", never a single
// number. With status unknown, unit, min and max are absent.
type CostEstimate struct {
	Status string   `json:"status"`
	Unit   string   `json:"unit,omitzero"` // free label shown as is: USD, tokens, credits...
	Min    *float64 `json:"min,omitzero"`
	Max    *float64 `json:"max,omitzero"`
	Basis  string   `json:"basis,omitzero"` // plain text, at most 300 characters
	Extra  Extra    `json:"-"`
}

// Validate reports why c is not a valid cost estimate, or nil.
func (c *CostEstimate) Validate() error {
	var errs []error
	switch c.Status {
	case CostEstimated:
		if c.Min == nil || c.Max == nil {
			errs = append(errs, errors.New("an estimated cost needs min and max (a range, never a single number)"))
		} else {
			if *c.Min < 0 || *c.Max < 0 {
				errs = append(errs, errors.New("cost min and max must be at least 0"))
			}
			if *c.Max < *c.Min {
				errs = append(errs, fmt.Errorf("cost max (%g) must be at least min (%g)", *c.Max, *c.Min))
			}
		}
	case CostUnknown:
		if c.Unit != "" || c.Min != nil || c.Max != nil {
			errs = append(errs, errors.New("an unknown cost must not have unit, min or max"))
		}
	default:
		errs = append(errs, fmt.Errorf("cost status must be %q or %q, not %q", CostEstimated, CostUnknown, c.Status))
	}
	if utf8.RuneCountInString(c.Basis) > DisplayTextMaxLength {
		errs = append(errs, fmt.Errorf("cost basis must be at most %d characters", DisplayTextMaxLength))
	}
	return errors.Join(errs...)
}

// Validate reports why f is not a valid field definition, or nil. Sibling references (depends_on
// naming an existing field) are checked by the plan or form that holds the fields.
func (f *FieldDefinition) Validate() error {
	return validateField(fieldView{
		id: f.ID, label: f.Label, typ: f.Type, itemFields: f.ItemFields, description: f.Description,
		multiline: f.Multiline, minRows: f.MinRows, options: f.Options, optionsSource: f.OptionsSource,
		dependsOn: f.DependsOn, validation: f.Validation, accept: f.Accept, maxBytes: f.MaxBytes, storage: f.Storage, defaultValue: f.Default,
	}, false)
}

// Validate reports why f is not a valid resource field definition, or nil.
func (f *ResourceFieldDefinition) Validate() error {
	return validateField(fieldView{
		id: f.ID, label: f.Label, typ: f.Type, itemFields: f.ItemFields, description: f.Description,
		multiline: f.Multiline, minRows: f.MinRows, options: f.Options, optionsSource: f.OptionsSource,
		dependsOn: f.DependsOn, validation: f.Validation, accept: f.Accept, maxBytes: f.MaxBytes, storage: f.Storage, defaultValue: f.Default,
	}, false)
}

// fieldView is what the field rules look at, common to both definition types.
type fieldView struct {
	id, label, typ, description string
	itemFields                  []FieldDefinition
	multiline                   bool
	minRows                     *int
	options                     []FieldOption
	optionsSource               *OptionsSource
	dependsOn                   *DependsOn
	validation                  *FieldValidation
	accept, storage             string
	maxBytes                    int64
	defaultValue                any
}

func validateField(f fieldView, isItem bool) error {
	var errs []error
	name := f.id
	if strings.TrimSpace(f.id) == "" {
		errs = append(errs, errors.New("field id is required"))
		name = "<no id>"
	}
	if strings.TrimSpace(f.label) == "" {
		errs = append(errs, fmt.Errorf("field %q: label is required", name))
	}
	typ := f.typ
	if typ == "" {
		typ = FieldString
	}
	switch {
	case typ == FieldList && isItem:
		errs = append(errs, fmt.Errorf("field %q: an item field cannot be a list (one level of nesting)", name))
	case typ == FieldList && len(f.itemFields) == 0:
		errs = append(errs, fmt.Errorf("field %q: item_fields is required when type is list", name))
	case typ != FieldList && len(f.itemFields) > 0:
		errs = append(errs, fmt.Errorf("field %q: item_fields is only allowed when type is list", name))
	}
	if typ == FieldList && !isItem {
		seen := map[string]bool{}
		for i := range f.itemFields {
			it := &f.itemFields[i]
			if seen[it.ID] {
				errs = append(errs, fmt.Errorf("field %q: item field %q is declared twice", name, it.ID))
			}
			seen[it.ID] = true
			if err := validateField(fieldView{
				id: it.ID, label: it.Label, typ: it.Type, itemFields: it.ItemFields, description: it.Description,
				multiline: it.Multiline, minRows: it.MinRows, options: it.Options, optionsSource: it.OptionsSource,
				dependsOn: it.DependsOn, validation: it.Validation, accept: it.Accept, maxBytes: it.MaxBytes, storage: it.Storage, defaultValue: it.Default,
			}, true); err != nil {
				errs = append(errs, fmt.Errorf("field %q: item_fields: %w", name, err))
			}
		}
	}
	if utf8.RuneCountInString(f.description) > DisplayTextMaxLength {
		errs = append(errs, fmt.Errorf("field %q: description must be at most %d characters", name, DisplayTextMaxLength))
	}
	if f.minRows != nil {
		if !f.multiline {
			errs = append(errs, fmt.Errorf("field %q: min_rows is only allowed with multiline", name))
		}
		if *f.minRows < 1 {
			errs = append(errs, fmt.Errorf("field %q: min_rows must be at least 1", name))
		}
	}
	if typ == FieldList && !isItem && f.defaultValue != nil {
		if err := checkListValue(f.defaultValue, f.itemFields); err != nil {
			errs = append(errs, fmt.Errorf("field %q: default: %w", name, err))
		}
	}
	for i, o := range f.options {
		if o.Value == "" || o.Label == "" {
			errs = append(errs, fmt.Errorf("field %q: options[%d] needs both value and label (an option is {\"value\", \"label\"})", name, i))
		}
	}
	if s := f.optionsSource; s != nil {
		if s.Type != "resource" {
			errs = append(errs, fmt.Errorf("field %q: options_source.type must be \"resource\", not %q", name, s.Type))
		}
		if strings.TrimSpace(s.Resource) == "" {
			errs = append(errs, fmt.Errorf("field %q: options_source.resource is required", name))
		}
	}
	if d := f.dependsOn; d != nil {
		if strings.TrimSpace(d.Field) == "" {
			errs = append(errs, fmt.Errorf("field %q: depends_on.field is required", name))
		}
		if d.Field == f.id {
			errs = append(errs, fmt.Errorf("field %q: depends_on cannot name the field itself", name))
		}
		if len(d.In) == 0 {
			errs = append(errs, fmt.Errorf("field %q: depends_on.in needs at least one value", name))
		}
	}
	if typ == FieldFile {
		if f.storage != "" && f.storage != StorageStudio && f.storage != StorageInline {
			errs = append(errs, fmt.Errorf("field %q: storage must be %q or %q, not %q", name, StorageStudio, StorageInline, f.storage))
		}
		if f.maxBytes < 0 {
			errs = append(errs, fmt.Errorf("field %q: max_bytes must be at least 0", name))
		}
	} else if f.accept != "" || f.maxBytes != 0 || f.storage != "" {
		errs = append(errs, fmt.Errorf("field %q: accept, max_bytes and storage only apply to a file field", name))
	}
	if v := f.validation; v != nil {
		if err := v.check(typ); err != nil {
			errs = append(errs, fmt.Errorf("field %q: validation: %w", name, err))
		}
	}
	return errors.Join(errs...)
}

// checkListValue reports why v is not the value of a list field with the given item fields: a
// list of objects keyed by item field ids, never free text.
func checkListValue(v any, items []FieldDefinition) error {
	b, err := AppendJSON(nil, v)
	if err != nil {
		return err
	}
	if wirejson.IsNull(b) {
		return nil
	}
	ids := make([]string, len(items))
	for i, it := range items {
		ids[i] = it.ID
	}
	want := fmt.Errorf("a list field's value must be a list of objects keyed by its item fields (%s), never free text", strings.Join(ids, ", "))
	if wirejson.Kind(b) != '[' {
		return want
	}
	for el := range wirejson.Elements(b) {
		if wirejson.Kind(el) != '{' {
			return want
		}
		for name := range wirejson.Members(el) {
			if key := string(wirejson.Name(name)); !slices.Contains(ids, key) {
				return fmt.Errorf("%q is not one of the item fields (%s)", key, strings.Join(ids, ", "))
			}
		}
	}
	return nil
}

// check rejects rules that do not suit the field type, and empty ranges.
func (v *FieldValidation) check(typ string) error {
	var errs []error
	textual := true
	switch typ {
	case FieldBoolean, FieldInteger, FieldNumber, FieldDate, FieldSelect, FieldMultiSelect, FieldResourceRef, FieldFile, FieldList:
		textual = false
	}
	numeric := typ == FieldInteger || typ == FieldNumber
	counted := typ == FieldMultiSelect || typ == FieldList
	reject := func(rule string, set, ok bool) {
		if set && !ok {
			errs = append(errs, fmt.Errorf("%s does not apply to a %s field", rule, typ))
		}
	}
	reject("min_length", v.MinLength != nil, textual)
	reject("max_length", v.MaxLength != nil, textual)
	reject("pattern", v.Pattern != "", textual)
	reject("min", v.Min != nil, numeric)
	reject("max", v.Max != nil, numeric)
	reject("min_items", v.MinItems != nil, counted)
	reject("max_items", v.MaxItems != nil, counted)
	for _, n := range []struct {
		name string
		v    *int
	}{{"min_length", v.MinLength}, {"max_length", v.MaxLength}, {"min_items", v.MinItems}, {"max_items", v.MaxItems}} {
		if n.v != nil && *n.v < 0 {
			errs = append(errs, fmt.Errorf("%s must be at least 0", n.name))
		}
	}
	if v.MinLength != nil && v.MaxLength != nil && *v.MaxLength < *v.MinLength {
		errs = append(errs, errors.New("max_length must be at least min_length"))
	}
	if v.Min != nil && v.Max != nil && *v.Max < *v.Min {
		errs = append(errs, errors.New("max must be at least min"))
	}
	if v.MinItems != nil && v.MaxItems != nil && *v.MaxItems < *v.MinItems {
		errs = append(errs, errors.New("max_items must be at least min_items"))
	}
	if v.Pattern != "" {
		if _, err := regexp.Compile(v.Pattern); err != nil {
			errs = append(errs, fmt.Errorf("pattern is not a valid regular expression (RE2 syntax, as Go's regexp): %w", err))
		}
	}
	return errors.Join(errs...)
}

// MarshalJSON writes the definition with its unknown members; an empty type is written as string.
func (f FieldDefinition) MarshalJSON() ([]byte, error) { return marshal(&f) }

func (f *FieldDefinition) wire(e *encoder) error {
	if f.Type == "" {
		p := *f
		p.Type = FieldString
		f = &p
	}
	return e.object(f, f.Extra)
}

// UnmarshalJSON decodes the definition, keeping unknown members.
func (f *FieldDefinition) UnmarshalJSON(data []byte) error {
	type plain FieldDefinition
	return decodeInto(data, "field definition", (*plain)(f), &f.Extra)
}

// MarshalJSON writes the definition; an empty type is written as string.
func (f ResourceFieldDefinition) MarshalJSON() ([]byte, error) { return marshal(&f) }

func (f *ResourceFieldDefinition) wire(e *encoder) error {
	if f.Type == "" {
		p := *f
		p.Type = FieldString
		f = &p
	}
	return e.object(f, f.Extra)
}

// UnmarshalJSON decodes the definition, keeping unknown members.
func (f *ResourceFieldDefinition) UnmarshalJSON(data []byte) error {
	type plain ResourceFieldDefinition
	return decodeInto(data, "resource field definition", (*plain)(f), &f.Extra)
}

// MarshalJSON writes the option with its unknown members.
func (o FieldOption) MarshalJSON() ([]byte, error) { return marshal(&o) }

func (o *FieldOption) wire(e *encoder) error { return e.object(o, o.Extra) }

// UnmarshalJSON decodes an option; a plain string is rejected.
func (o *FieldOption) UnmarshalJSON(data []byte) error {
	type plain FieldOption
	return decodeInto(data, "field option (an object with value and label)", (*plain)(o), &o.Extra)
}

// MarshalJSON writes the source; value_field "id" when empty.
func (s OptionsSource) MarshalJSON() ([]byte, error) { return marshal(&s) }

func (s *OptionsSource) wire(e *encoder) error {
	p := *s
	p.Type = orDefault(p.Type, "resource")
	p.ValueField = orDefault(p.ValueField, "id")
	return e.object(&p, s.Extra)
}

// UnmarshalJSON decodes the source, keeping unknown members.
func (s *OptionsSource) UnmarshalJSON(data []byte) error {
	type plain OptionsSource
	return decodeInto(data, "options_source", (*plain)(s), &s.Extra)
}

// MarshalJSON writes the dependency with its unknown members.
func (d DependsOn) MarshalJSON() ([]byte, error) { return marshal(&d) }

func (d *DependsOn) wire(e *encoder) error { return e.object(d, d.Extra) }

// UnmarshalJSON decodes the dependency, keeping unknown members.
func (d *DependsOn) UnmarshalJSON(data []byte) error {
	type plain DependsOn
	return decodeInto(data, "depends_on", (*plain)(d), &d.Extra)
}

// MarshalJSON writes the rules with their unknown members.
func (v FieldValidation) MarshalJSON() ([]byte, error) { return marshal(&v) }

func (v *FieldValidation) wire(e *encoder) error { return e.object(v, v.Extra) }

// UnmarshalJSON decodes the rules, keeping unknown members.
func (v *FieldValidation) UnmarshalJSON(data []byte) error {
	type plain FieldValidation
	return decodeInto(data, "validation", (*plain)(v), &v.Extra)
}

// MarshalJSON writes the estimate with its unknown members.
func (c CostEstimate) MarshalJSON() ([]byte, error) { return marshal(&c) }

func (c *CostEstimate) wire(e *encoder) error { return e.object(c, c.Extra) }

// UnmarshalJSON decodes the estimate, keeping unknown members.
func (c *CostEstimate) UnmarshalJSON(data []byte) error {
	type plain CostEstimate
	return decodeInto(data, "cost estimate", (*plain)(c), &c.Extra)
}
