package contract

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"mime"
	"path"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Codes of the errors input validation answers with. Every code starts with "input_": a result
// made only of such errors (and no effect) changed nothing, so it does not consume the request's
// idempotency key (see ActionResult.Refusal).
const (
	InputRequired  = "input_required"   // a required field is missing or empty
	InputType      = "input_type"       // the value is not of the field's type and cannot be coerced
	InputOption    = "input_option"     // not one of the field's options
	InputMinLength = "input_min_length" // validation.min_length
	InputMaxLength = "input_max_length" // validation.max_length
	InputPattern   = "input_pattern"    // validation.pattern
	InputMin       = "input_min"        // validation.min
	InputMax       = "input_max"        // validation.max
	InputMinItems  = "input_min_items"  // validation.min_items
	InputMaxItems  = "input_max_items"  // validation.max_items
	InputFile      = "input_file"       // a file value that is malformed, too large or of a type accept refuses
	InputInvalid   = "input_invalid"    // the agent's own check of a field (InvalidField)
	InputUnknown   = "input_unknown"    // a member the action does not read (a typo, another action's)
)

// IsInputError reports whether code is one of the input validation codes (prefix "input_").
func IsInputError(code string) bool { return strings.HasPrefix(code, "input_") }

// InvalidField is the error of a field the agent itself refuses (a business rule the schema
// cannot express, e.g. an address already in the list): code input_invalid.
func InvalidField(field, message string) ResultError {
	return ResultError{Code: InputInvalid, Field: field, Message: message}
}

// InputErrors is the error of an input that does not match its fields: one ResultError per
// field (per row and item field inside a list field), in the fields' order.
type InputErrors []ResultError

func (e InputErrors) Error() string {
	parts := make([]string, len(e))
	for i, fe := range e {
		at := fe.Field
		if fe.Item != nil {
			at += "[" + strconv.Itoa(*fe.Item) + "]." + fe.ItemField
		}
		parts[i] = at + ": " + fe.Message
	}
	return "invalid input: " + strings.Join(parts, "; ")
}

// Refuse is the result of an action that refused its input and changed nothing: status "error",
// no effect, the errors given. Such a result does not consume the idempotency key.
func Refuse(errs ...ResultError) *ActionResult {
	return &ActionResult{Status: StatusError, Effects: []Effect{}, Errors: errs}
}

// Refused turns the error of DecodeValid or ValidateInput into the handler's answer: the
// refusal result for InputErrors, err itself otherwise (answered as an internal error):
//
//	if err := req.DecodeValid(&in, fields); err != nil {
//		return contract.Refused(err)
//	}
func Refused(err error) (*ActionResult, error) {
	if ie, ok := err.(InputErrors); ok {
		return Refuse(ie...), nil
	}
	return nil, err
}

// Refusal reports whether r is a refusal that changed nothing: status "error", at least one
// error and every error an input error (IsInputError), and no effect, job_state, setup_plan,
// draft or dry_run.
func (r *ActionResult) Refusal() bool {
	if r.Status != StatusError || len(r.Errors) == 0 || len(r.Effects) > 0 || r.JobState != nil ||
		r.SetupPlan != nil || r.Draft != nil || r.DryRun != nil {
		return false
	}
	for _, e := range r.Errors {
		if !IsInputError(e.Code) {
			return false
		}
	}
	return true
}

// InputMode says which rules of a schema apply to an input.
type InputMode int

const (
	// Submit checks a complete submission (job.start, step.awaiting.submit, a resource create):
	// missing fields take their default, and required fields must then have a value.
	Submit InputMode = iota
	// Draft checks a partial one (job.start.preview, a resource update): the values present are
	// coerced and checked; missing fields stay missing, defaults are not filled in.
	Draft
)

// DecodeValid checks the request input against fields (Submit rules, see ValidateInput) and
// decodes the coerced input into v. A mismatch is an InputErrors (answer it with Refused); any
// other error is v's (a Go type that does not fit the schema).
func (r *ActionRequest) DecodeValid(v any, fields []FieldDefinition) error {
	in, err := ValidateInput(fields, r.Input, Submit)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(in, v); err != nil {
		return fmt.Errorf("decode input of action %q: %w", r.Action, err)
	}
	return nil
}

// InputFields returns the awaiting fields with their types written in: a field without a type
// is a boolean in an awaiting step.
func (a *Awaiting) InputFields() []FieldDefinition {
	out := make([]FieldDefinition, len(a.Fields))
	for i, f := range a.Fields {
		if f.Type == "" {
			f.Type = FieldBoolean
		}
		out[i] = f
	}
	return out
}

// ValidateInput checks an action's input (a JSON object) against the fields declared for it, the
// field schema of seed 000, and returns the input coerced, or InputErrors with one error per
// field. The returned input keeps members no field declares; it holds:
//
//   - string, text and unknown types: a string; validation min_length and max_length count
//     characters, pattern must match somewhere in the value (Go RE2 syntax, unanchored, like
//     pydantic's pattern);
//   - boolean: true or false; also "true"/"false", "yes"/"no", "on"/"off", "1"/"0", "t"/"f",
//     "y"/"n" (any case) and the numbers 1 and 0;
//   - integer: a JSON integer; also 12.0 and "12"; min and max bound it;
//   - number: a JSON number; also a numeric string; NaN and infinities are refused;
//   - date: "YYYY-MM-DD", a real calendar day;
//   - select: one of the option values (any string when the options come from options_source);
//     multi_select: a list of them, min_items and max_items bounding its length;
//   - resource_ref: a non-empty string id (one of the options when the field has options);
//   - file: the object Studio sends for the field's storage — studio {storage, file_id,
//     filename, media_type, size, sha256}, inline {storage, filename, media_type, size, encoding,
//     content} — whose size is at most max_bytes and whose extension or media type is in accept;
//     inline base64 content must decode to size bytes;
//   - list: a list of objects keyed by item field id, each checked against item_fields with the
//     same rules (errors name the row in Item and the item field in ItemField).
//
// A null, and an empty string for a non-text type, are no value. In Submit mode a missing field
// takes its default, then a required field without a value (or with "" or []) is an error. A
// field whose depends_on parent (stringified: true/false, numbers as written, each value of a
// list) is not in its "in" list is inactive: it is neither required nor checked, and its value is
// dropped from the returned input. validation.message replaces the generic message of the rule
// errors (lengths, pattern, bounds, item counts), not of type errors.
func ValidateInput(fields []FieldDefinition, input json.RawMessage, mode InputMode) (json.RawMessage, error) {
	m, ok := asObject(inputOrEmpty(input))
	if !ok {
		return nil, InputErrors{{Code: InputType, Message: msgDict}}
	}
	errs := validateObject(fields, m, mode, nil)
	if len(errs) > 0 {
		return nil, errs
	}
	out, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("encode the validated input: %w", err)
	}
	return out, nil
}

// validateObject checks and coerces the members of m in place. item is the row index when m is
// a row of a list field.
func validateObject(fields []FieldDefinition, m map[string]json.RawMessage, mode InputMode, item *listRow) InputErrors {
	byID := make(map[string]*FieldDefinition, len(fields))
	for i := range fields {
		byID[fields[i].ID] = &fields[i]
	}
	// Coerce every declared field first: depends_on compares the coerced parent values.
	fieldErrs := make(map[string]InputErrors, len(fields))
	for i := range fields {
		f := &fields[i]
		raw, present := m[f.ID]
		if present && isNoValue(raw, f.Type) {
			present = false
			delete(m, f.ID)
		}
		if !present && mode == Submit && f.Default != nil {
			if b, err := json.Marshal(f.Default); err == nil {
				raw, present = b, true
				m[f.ID] = b
			}
		}
		if !present {
			if f.Required && mode == Submit {
				fieldErrs[f.ID] = InputErrors{item.err(f.ID, InputRequired, msgMissing)}
			}
			continue
		}
		v, errs := coerce(f, raw, mode, item)
		if len(errs) > 0 {
			fieldErrs[f.ID] = errs
			continue
		}
		m[f.ID] = v
	}
	var out InputErrors
	active := map[string]bool{}
	for i := range fields {
		f := &fields[i]
		if !isActive(f, byID, m, active, 0) {
			delete(m, f.ID)
			continue
		}
		if errs := fieldErrs[f.ID]; len(errs) > 0 {
			out = append(out, errs...)
			continue
		}
		if mode == Submit && f.Required && isEmptyValue(m[f.ID]) {
			out = append(out, item.err(f.ID, InputRequired, msgMissing))
		}
	}
	return out
}

// isActive follows f's depends_on chain (memoized in active; depth guards a cycle the
// registration would have refused).
func isActive(f *FieldDefinition, byID map[string]*FieldDefinition, m map[string]json.RawMessage, active map[string]bool, depth int) bool {
	if f.DependsOn == nil {
		return true
	}
	if a, ok := active[f.ID]; ok {
		return a
	}
	a := false
	if depth < 32 {
		parent, declared := byID[f.DependsOn.Field]
		parentActive := !declared || isActive(parent, byID, m, active, depth+1)
		if v, ok := m[f.DependsOn.Field]; ok && parentActive {
			for _, s := range stringified(v) {
				if containsString(f.DependsOn.In, s) {
					a = true
					break
				}
			}
		}
	}
	active[f.ID] = a
	return a
}

func containsString(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// stringified returns the strings a depends_on "in" list is compared with: a string itself,
// true/false, a number as written, each element of a list.
func stringified(v json.RawMessage) []string {
	v = bytes.TrimSpace(v)
	if len(v) == 0 {
		return nil
	}
	switch v[0] {
	case '"':
		var s string
		_ = json.Unmarshal(v, &s)
		return []string{s}
	case '[':
		var items []json.RawMessage
		_ = json.Unmarshal(v, &items)
		var out []string
		for _, it := range items {
			out = append(out, stringified(it)...)
		}
		return out
	case '{', 'n':
		return nil
	}
	return []string{string(v)}
}

// isNoValue reports a null, or an empty string for a type whose values are not text.
func isNoValue(raw json.RawMessage, typ string) bool {
	raw = bytes.TrimSpace(raw)
	if string(raw) == "null" {
		return true
	}
	return string(raw) == `""` && !isTextType(typ)
}

// isEmptyValue reports "" and [], which a required field may not be.
func isEmptyValue(raw json.RawMessage) bool {
	s := string(bytes.TrimSpace(raw))
	return s == `""` || s == "[]"
}

func isTextType(typ string) bool {
	switch typ {
	case FieldBoolean, FieldInteger, FieldNumber, FieldDate, FieldSelect, FieldMultiSelect, FieldResourceRef, FieldFile, FieldList:
		return false
	}
	return true // string, text, "" and unknown types (rendered as string)
}

// listRow locates errors inside a list field: the field id and row index.
type listRow struct {
	field string
	index int
}

// err builds the error of field id, inside the row when r is set.
func (r *listRow) err(id, code, msg string) ResultError {
	if r == nil {
		return ResultError{Code: code, Field: id, Message: msg}
	}
	i := r.index
	return ResultError{Code: code, Field: r.field, Item: &i, ItemField: id, Message: msg}
}

// coerce checks one present value against its field and returns it coerced.
func coerce(f *FieldDefinition, raw json.RawMessage, mode InputMode, row *listRow) (json.RawMessage, InputErrors) {
	fail := func(code, msg string) (json.RawMessage, InputErrors) {
		return nil, InputErrors{row.err(f.ID, code, msg)}
	}
	rule := func(code, msg string) (json.RawMessage, InputErrors) {
		if f.Validation != nil && f.Validation.Message != "" {
			msg = f.Validation.Message
		}
		return fail(code, msg)
	}
	rules := f.Validation
	if rules == nil {
		rules = &FieldValidation{}
	}
	raw = bytes.TrimSpace(raw)
	switch f.Type {
	case FieldBoolean:
		b, ok := coerceBool(raw)
		if !ok {
			return fail(InputType, "Input should be a valid boolean")
		}
		return json.RawMessage(strconv.FormatBool(b)), nil
	case FieldInteger, FieldNumber:
		n, text, code, msg := coerceNumber(raw, f.Type == FieldInteger)
		if code != "" {
			return fail(code, msg)
		}
		if rules.Min != nil && n < *rules.Min {
			return rule(InputMin, "Input should be greater than or equal to "+formatNumber(*rules.Min))
		}
		if rules.Max != nil && n > *rules.Max {
			return rule(InputMax, "Input should be less than or equal to "+formatNumber(*rules.Max))
		}
		return text, nil
	case FieldDate:
		s, ok := asString(raw)
		if !ok {
			return fail(InputType, msgString)
		}
		if _, err := time.Parse(time.DateOnly, s); err != nil || len(s) != len(time.DateOnly) {
			return fail(InputType, "Input should be a valid date in the format YYYY-MM-DD")
		}
		return raw, nil
	case FieldSelect, FieldResourceRef:
		s, ok := asString(raw)
		if !ok {
			return fail(InputType, msgString)
		}
		if f.Type == FieldResourceRef && strings.TrimSpace(s) == "" {
			return fail(InputRequired, msgMissing)
		}
		if msg := checkOption(f, s); msg != "" {
			return fail(InputOption, msg)
		}
		return raw, nil
	case FieldMultiSelect:
		var items []json.RawMessage
		if len(raw) == 0 || raw[0] != '[' || json.Unmarshal(raw, &items) != nil {
			return fail(InputType, "Input should be a valid list")
		}
		for _, it := range items {
			s, ok := asString(it)
			if !ok {
				return fail(InputType, "Input should be a valid list of strings")
			}
			if msg := checkOption(f, s); msg != "" {
				return fail(InputOption, msg)
			}
		}
		if code, msg := checkCount(rules, len(items)); code != "" {
			return rule(code, msg)
		}
		return raw, nil
	case FieldList:
		return coerceList(f, raw, mode, rules, rule)
	case FieldFile:
		if msg := checkFile(f, raw); msg != "" {
			return fail(InputFile, msg)
		}
		return raw, nil
	}
	// string, text and unknown types.
	s, ok := asString(raw)
	if !ok {
		return fail(InputType, msgString)
	}
	n := utf8.RuneCountInString(s)
	if rules.MinLength != nil && n < *rules.MinLength {
		return rule(InputMinLength, "String should have at least "+plural(*rules.MinLength, "character"))
	}
	if rules.MaxLength != nil && n > *rules.MaxLength {
		return rule(InputMaxLength, "String should have at most "+plural(*rules.MaxLength, "character"))
	}
	if rules.Pattern != "" {
		re, err := regexp.Compile(rules.Pattern)
		if err != nil || !re.MatchString(s) {
			return rule(InputPattern, "String should match pattern '"+rules.Pattern+"'")
		}
	}
	return raw, nil
}

func coerceList(f *FieldDefinition, raw json.RawMessage, mode InputMode, rules *FieldValidation,
	rule func(code, msg string) (json.RawMessage, InputErrors)) (json.RawMessage, InputErrors) {
	var rows []json.RawMessage
	if len(raw) == 0 || raw[0] != '[' || json.Unmarshal(raw, &rows) != nil {
		return nil, InputErrors{{Code: InputType, Field: f.ID, Message: "Input should be a valid list of objects, one per row (never free text)"}}
	}
	var errs InputErrors
	out := make([]map[string]json.RawMessage, len(rows))
	for i, r := range rows {
		m, ok := asObject(r)
		if !ok {
			idx := i
			errs = append(errs, ResultError{Code: InputType, Field: f.ID, Item: &idx, Message: msgDict})
			continue
		}
		errs = append(errs, validateObject(f.ItemFields, m, mode, &listRow{field: f.ID, index: i})...)
		out[i] = m
	}
	if len(errs) > 0 {
		return nil, errs
	}
	if code, msg := checkCount(rules, len(rows)); code != "" {
		return rule(code, msg)
	}
	b, err := json.Marshal(out)
	if err != nil {
		return nil, InputErrors{{Code: InputType, Field: f.ID, Message: msgDict}}
	}
	return b, nil
}

func checkCount(rules *FieldValidation, n int) (string, string) {
	if rules.MinItems != nil && n < *rules.MinItems {
		return InputMinItems, fmt.Sprintf("List should have at least %s after validation, not %d", plural(*rules.MinItems, "item"), n)
	}
	if rules.MaxItems != nil && n > *rules.MaxItems {
		return InputMaxItems, fmt.Sprintf("List should have at most %s after validation, not %d", plural(*rules.MaxItems, "item"), n)
	}
	return "", ""
}

// checkOption returns why s is not one of f's options, or "". A field whose options come from a
// resource (options_source) or that declares none accepts any value.
func checkOption(f *FieldDefinition, s string) string {
	if len(f.Options) == 0 || f.OptionsSource != nil {
		return ""
	}
	quoted := make([]string, len(f.Options))
	for i, o := range f.Options {
		if o.Value == s {
			return ""
		}
		quoted[i] = "'" + o.Value + "'"
	}
	if len(quoted) == 1 {
		return "Input should be " + quoted[0]
	}
	return "Input should be " + strings.Join(quoted[:len(quoted)-1], ", ") + " or " + quoted[len(quoted)-1]
}

func asString(raw json.RawMessage) (string, bool) {
	if len(raw) == 0 || raw[0] != '"' {
		return "", false
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}

// coerceBool accepts what pydantic's lax bool accepts.
func coerceBool(raw json.RawMessage) (bool, bool) {
	switch string(raw) {
	case "true":
		return true, true
	case "false":
		return false, true
	}
	if s, ok := asString(raw); ok {
		switch strings.ToLower(s) {
		case "true", "1", "yes", "on", "t", "y":
			return true, true
		case "false", "0", "no", "off", "f", "n":
			return false, true
		}
		return false, false
	}
	if f, err := strconv.ParseFloat(string(raw), 64); err == nil && (f == 0 || f == 1) {
		return f == 1, true
	}
	return false, false
}

// coerceNumber reads a JSON number, a numeric string or a boolean. It returns the value, its
// coerced JSON (numbers as written when they are already JSON numbers), or an error code and
// message.
func coerceNumber(raw json.RawMessage, integer bool) (float64, json.RawMessage, string, string) {
	typeMsg := "Input should be a valid number"
	if integer {
		typeMsg = "Input should be a valid integer"
	}
	text := string(raw)
	fromString := false
	switch {
	case text == "true":
		return 1, json.RawMessage("1"), "", ""
	case text == "false":
		return 0, json.RawMessage("0"), "", ""
	case len(raw) > 0 && raw[0] == '"':
		s, _ := asString(raw)
		text, fromString = strings.TrimSpace(s), true
	case len(raw) == 0 || raw[0] == '{' || raw[0] == '[' || raw[0] == 'n':
		return 0, nil, InputType, typeMsg
	}
	if integer {
		if i, err := strconv.ParseInt(text, 10, 64); err == nil {
			return float64(i), json.RawMessage(strconv.FormatInt(i, 10)), "", ""
		}
	}
	f, err := strconv.ParseFloat(text, 64)
	if err != nil || (fromString && !jsonNumber(text)) {
		if fromString {
			if integer {
				return 0, nil, InputType, typeMsg + ", unable to parse string as an integer"
			}
			return 0, nil, InputType, typeMsg + ", unable to parse string as a number"
		}
		return 0, nil, InputType, typeMsg
	}
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, nil, InputType, "Input should be a finite number"
	}
	if integer {
		if f != math.Trunc(f) {
			return 0, nil, InputType, typeMsg + ", got a number with a fractional part"
		}
		if math.Abs(f) >= 1<<63 {
			return 0, nil, InputType, typeMsg
		}
		return f, json.RawMessage(strconv.FormatInt(int64(f), 10)), "", ""
	}
	if fromString {
		return f, json.RawMessage(strconv.FormatFloat(f, 'g', -1, 64)), "", ""
	}
	return f, raw, "", ""
}

// jsonNumber reports whether s is spelled like a JSON number (so "0x1p3", "Inf" or "1_000" are
// not numbers even though ParseFloat reads some of them).
func jsonNumber(s string) bool {
	return json.Valid([]byte(s)) && s != "" && (s[0] == '-' || (s[0] >= '0' && s[0] <= '9'))
}

func formatNumber(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return strconv.Itoa(n) + " " + word + "s"
}

// fileValue is the value Studio sends for a file field.
type fileValue struct {
	Storage   *string `json:"storage"`
	FileID    *string `json:"file_id"`
	Filename  *string `json:"filename"`
	MediaType *string `json:"media_type"`
	Size      *int64  `json:"size"`
	SHA256    *string `json:"sha256"`
	Encoding  *string `json:"encoding"`
	Content   *string `json:"content"`
}

// checkFile returns why raw is not a valid value of the file field f, or "".
func checkFile(f *FieldDefinition, raw json.RawMessage) string {
	if len(raw) == 0 || raw[0] != '{' {
		return "Input should be a file object ({storage, filename, media_type, size, …})"
	}
	var v fileValue
	if err := json.Unmarshal(raw, &v); err != nil {
		return "Input should be a file object ({storage, filename, media_type, size, …}): " + err.Error()
	}
	if v.Storage == nil || (*v.Storage != StorageStudio && *v.Storage != StorageInline) {
		return `File storage should be "studio" or "inline"`
	}
	if f.Storage != "" && *v.Storage != f.Storage {
		return fmt.Sprintf("File storage should be %q for this field, not %q", f.Storage, *v.Storage)
	}
	if v.Filename == nil || strings.TrimSpace(*v.Filename) == "" {
		return "File filename is required"
	}
	if v.Size == nil || *v.Size < 0 {
		return "File size is required (a number of bytes)"
	}
	if f.MaxBytes > 0 && *v.Size > f.MaxBytes {
		return fmt.Sprintf("File is %d bytes, larger than the %d bytes this field accepts", *v.Size, f.MaxBytes)
	}
	switch *v.Storage {
	case StorageStudio:
		if v.FileID == nil || strings.TrimSpace(*v.FileID) == "" {
			return "File file_id is required with storage studio"
		}
		if v.SHA256 != nil {
			if b, err := hex.DecodeString(*v.SHA256); err != nil || len(b) != 32 {
				return "File sha256 should be 64 hexadecimal digits"
			}
		}
	case StorageInline:
		if v.Content == nil {
			return "File content is required with storage inline"
		}
		enc := ""
		if v.Encoding != nil {
			enc = strings.ToLower(*v.Encoding)
		}
		var n int
		switch enc {
		case "base64":
			b, err := base64.StdEncoding.DecodeString(*v.Content)
			if err != nil {
				return "File content is not valid base64"
			}
			n = len(b)
		case "", "utf-8", "utf8":
			n = len(*v.Content)
		default:
			return fmt.Sprintf("File encoding %q is not supported: use base64 or utf-8", *v.Encoding)
		}
		if int64(n) != *v.Size {
			return fmt.Sprintf("File content is %d bytes but size says %d", n, *v.Size)
		}
	}
	if f.Accept != "" {
		media := ""
		if v.MediaType != nil {
			media = *v.MediaType
		}
		if !accepts(f.Accept, *v.Filename, media) {
			return "File type is not accepted: expected " + f.Accept
		}
	}
	return ""
}

// accepts reports whether a file matches an accept list: extensions (".md"), media types
// ("text/markdown") and wildcards ("image/*"), compared case-insensitively.
func accepts(accept, filename, mediaType string) bool {
	ext := strings.ToLower(path.Ext(filename))
	mt, _, err := mime.ParseMediaType(mediaType)
	if err != nil {
		mt = strings.ToLower(strings.TrimSpace(mediaType))
	}
	for _, a := range strings.Split(accept, ",") {
		a = strings.ToLower(strings.TrimSpace(a))
		switch {
		case a == "":
		case strings.HasPrefix(a, "."):
			if ext == a {
				return true
			}
		case strings.HasSuffix(a, "/*"):
			if mt != "" && strings.HasPrefix(mt, strings.TrimSuffix(a, "*")) {
				return true
			}
		case mt == a:
			return true
		}
	}
	return false
}

// InputFields returns the fields of every step of the plan, in order: the schema of the input of
// the setup's start action (and of its preview, as a draft).
func (p *SetupPlan) InputFields() []FieldDefinition {
	var out []FieldDefinition
	for _, st := range p.Steps {
		out = append(out, st.Fields...)
	}
	return out
}
