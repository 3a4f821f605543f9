package contract_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/supervaize/svz/core/contract"
)

func ptr[T any](v T) *T { return &v }

func field(id, typ string, opts ...func(*contract.FieldDefinition)) contract.FieldDefinition {
	f := contract.FieldDefinition{ID: id, Label: strings.ToUpper(id[:1]) + id[1:], Type: typ}
	for _, o := range opts {
		o(&f)
	}
	return f
}

func required(f *contract.FieldDefinition) { f.Required = true }

func rules(v contract.FieldValidation) func(*contract.FieldDefinition) {
	return func(f *contract.FieldDefinition) { f.Validation = &v }
}

func options(values ...string) func(*contract.FieldDefinition) {
	return func(f *contract.FieldDefinition) {
		for _, v := range values {
			f.Options = append(f.Options, contract.FieldOption{Value: v, Label: strings.ToUpper(v)})
		}
	}
}

func dependsOn(parent string, in ...string) func(*contract.FieldDefinition) {
	return func(f *contract.FieldDefinition) { f.DependsOn = &contract.DependsOn{Field: parent, In: in} }
}

func withDefault(v any) func(*contract.FieldDefinition) {
	return func(f *contract.FieldDefinition) { f.Default = v }
}

func file(storage, accept string, maxBytes int64) func(*contract.FieldDefinition) {
	return func(f *contract.FieldDefinition) { f.Storage, f.Accept, f.MaxBytes = storage, accept, maxBytes }
}

// fieldErr is an expected error: "code field message" or "code field[item].item_field message".
type fieldErr struct {
	code, field string
	item        *int
	itemField   string
	msg         string
}

func e(code, field, msg string) fieldErr { return fieldErr{code: code, field: field, msg: msg} }

func ei(code, field string, item int, itemField, msg string) fieldErr {
	return fieldErr{code: code, field: field, item: &item, itemField: itemField, msg: msg}
}

// TestValidateInput covers every field type and every rule of seed 000's field schema, in Submit
// and Draft modes: coercions give the coerced JSON, failures one error per field.
func TestValidateInput(t *testing.T) {
	studioFile := `{"storage":"studio","file_id":"f-1","filename":"r.md","media_type":"text/markdown","size":10,"sha256":"` + strings.Repeat("ab", 32) + `"}`
	reportFile := field("report", contract.FieldFile, file(contract.StorageStudio, ".md,text/markdown", 100))
	inlineFile := field("doc", contract.FieldFile, file(contract.StorageInline, "image/*,.txt", 5))
	contacts := field("contacts", contract.FieldList, func(f *contract.FieldDefinition) {
		f.ItemFields = []contract.FieldDefinition{
			field("email", contract.FieldString, required, rules(contract.FieldValidation{Pattern: "^[^@]+@[^@]+$"})),
			field("score", contract.FieldInteger, withDefault(0)),
			field("vip", contract.FieldBoolean),
		}
		f.Validation = &contract.FieldValidation{MinItems: ptr(1), MaxItems: ptr(2)}
	})
	for _, tc := range []struct {
		name   string
		fields []contract.FieldDefinition
		input  string
		mode   contract.InputMode
		want   string // the coerced input, when valid
		errs   []fieldErr
	}{
		// string, text and unknown types
		{name: "string kept", fields: []contract.FieldDefinition{field("s", "string")}, input: `{"s":"é"}`, want: `{"s":"é"}`},
		{name: "string from a number refused", fields: []contract.FieldDefinition{field("s", "")}, input: `{"s":12}`,
			errs: []fieldErr{e(contract.InputType, "s", "Input should be a valid string")}},
		{name: "text min_length counts characters", fields: []contract.FieldDefinition{field("t", "text", rules(contract.FieldValidation{MinLength: ptr(3)}))},
			input: `{"t":"éé"}`, errs: []fieldErr{e(contract.InputMinLength, "t", "String should have at least 3 characters")}},
		{name: "min_length 1 singular", fields: []contract.FieldDefinition{field("t", "text", rules(contract.FieldValidation{MinLength: ptr(1)}))},
			input: `{"t":""}`, errs: []fieldErr{e(contract.InputMinLength, "t", "String should have at least 1 character")}},
		{name: "max_length", fields: []contract.FieldDefinition{field("t", "text", rules(contract.FieldValidation{MaxLength: ptr(2)}))},
			input: `{"t":"abc"}`, errs: []fieldErr{e(contract.InputMaxLength, "t", "String should have at most 2 characters")}},
		{name: "pattern searches, unanchored", fields: []contract.FieldDefinition{field("s", "string", rules(contract.FieldValidation{Pattern: "[0-9]+"}))},
			input: `{"s":"ab12"}`, want: `{"s":"ab12"}`},
		{name: "pattern refused", fields: []contract.FieldDefinition{field("s", "string", rules(contract.FieldValidation{Pattern: "^[a-z]+$"}))},
			input: `{"s":"AB"}`, errs: []fieldErr{e(contract.InputPattern, "s", "String should match pattern '^[a-z]+$'")}},
		{name: "message replaces a rule's message", fields: []contract.FieldDefinition{field("s", "string", rules(contract.FieldValidation{Pattern: "^[a-z]+$", Message: "Lower case only"}))},
			input: `{"s":"AB"}`, errs: []fieldErr{e(contract.InputPattern, "s", "Lower case only")}},
		{name: "message does not replace a type error", fields: []contract.FieldDefinition{field("s", "string", rules(contract.FieldValidation{MaxLength: ptr(3), Message: "Short please"}))},
			input: `{"s":true}`, errs: []fieldErr{e(contract.InputType, "s", "Input should be a valid string")}},
		{name: "unknown type validated as string", fields: []contract.FieldDefinition{field("c", "color", rules(contract.FieldValidation{MaxLength: ptr(7)}))},
			input: `{"c":"#ff00ff00"}`, errs: []fieldErr{e(contract.InputMaxLength, "c", "String should have at most 7 characters")}},
		{name: "empty string is a value of a text field", fields: []contract.FieldDefinition{field("s", "string")}, input: `{"s":""}`, want: `{"s":""}`},

		// boolean
		{name: "boolean coercions", fields: []contract.FieldDefinition{field("a", "boolean"), field("b", "boolean"), field("c", "boolean"), field("d", "boolean"), field("e", "boolean")},
			input: `{"a":"Yes","b":"off","c":1,"d":0.0,"e":false}`, want: `{"a":true,"b":false,"c":true,"d":false,"e":false}`},
		{name: "boolean refused", fields: []contract.FieldDefinition{field("a", "boolean")}, input: `{"a":"maybe"}`,
			errs: []fieldErr{e(contract.InputType, "a", "Input should be a valid boolean")}},
		{name: "boolean 2 refused", fields: []contract.FieldDefinition{field("a", "boolean")}, input: `{"a":2}`,
			errs: []fieldErr{e(contract.InputType, "a", "Input should be a valid boolean")}},

		// integer
		{name: "integer coercions", fields: []contract.FieldDefinition{field("a", "integer"), field("b", "integer"), field("c", "integer"), field("d", "integer"), field("e", "integer")},
			input: `{"a":12,"b":"12","c":12.0,"d":" -3 ","e":true}`, want: `{"a":12,"b":12,"c":12,"d":-3,"e":1}`},
		{name: "integer keeps its digits", fields: []contract.FieldDefinition{field("a", "integer")}, input: `{"a":9007199254740993}`, want: `{"a":9007199254740993}`},
		{name: "integer with a fraction", fields: []contract.FieldDefinition{field("a", "integer")}, input: `{"a":1.5}`,
			errs: []fieldErr{e(contract.InputType, "a", "Input should be a valid integer, got a number with a fractional part")}},
		{name: "integer from text", fields: []contract.FieldDefinition{field("a", "integer")}, input: `{"a":"twelve"}`,
			errs: []fieldErr{e(contract.InputType, "a", "Input should be a valid integer, unable to parse string as an integer")}},
		{name: "integer min", fields: []contract.FieldDefinition{field("a", "integer", rules(contract.FieldValidation{Min: ptr(1.0)}))}, input: `{"a":0}`,
			errs: []fieldErr{e(contract.InputMin, "a", "Input should be greater than or equal to 1")}},
		{name: "integer max", fields: []contract.FieldDefinition{field("a", "integer", rules(contract.FieldValidation{Max: ptr(10.0)}))}, input: `{"a":"11"}`,
			errs: []fieldErr{e(contract.InputMax, "a", "Input should be less than or equal to 10")}},

		// number
		{name: "number coercions", fields: []contract.FieldDefinition{field("a", "number"), field("b", "number"), field("c", "number")},
			input: `{"a":1.50,"b":"2.5","c":"1e3"}`, want: `{"a":1.50,"b":2.5,"c":1000}`},
		{name: "number not finite", fields: []contract.FieldDefinition{field("a", "number")}, input: `{"a":"NaN"}`,
			errs: []fieldErr{e(contract.InputType, "a", "Input should be a valid number, unable to parse string as a number")}},
		{name: "number from an object", fields: []contract.FieldDefinition{field("a", "number")}, input: `{"a":{}}`,
			errs: []fieldErr{e(contract.InputType, "a", "Input should be a valid number")}},
		{name: "number min with message (seed example)", fields: []contract.FieldDefinition{field("budget", "number", rules(contract.FieldValidation{Min: ptr(0.0), Message: "Budget cannot be negative"}))},
			input: `{"budget":-0.5}`, errs: []fieldErr{e(contract.InputMin, "budget", "Budget cannot be negative")}},
		{name: "number max fractional bound", fields: []contract.FieldDefinition{field("a", "number", rules(contract.FieldValidation{Max: ptr(0.5)}))}, input: `{"a":0.75}`,
			errs: []fieldErr{e(contract.InputMax, "a", "Input should be less than or equal to 0.5")}},
		{name: "empty string is no number", fields: []contract.FieldDefinition{field("a", "number")}, input: `{"a":""}`, want: `{}`},

		// date
		{name: "date", fields: []contract.FieldDefinition{field("d", "date")}, input: `{"d":"2026-02-28"}`, want: `{"d":"2026-02-28"}`},
		{name: "date not a day", fields: []contract.FieldDefinition{field("d", "date")}, input: `{"d":"2026-02-30"}`,
			errs: []fieldErr{e(contract.InputType, "d", "Input should be a valid date in the format YYYY-MM-DD")}},
		{name: "date with a time", fields: []contract.FieldDefinition{field("d", "date")}, input: `{"d":"2026-02-28T10:00:00Z"}`,
			errs: []fieldErr{e(contract.InputType, "d", "Input should be a valid date in the format YYYY-MM-DD")}},

		// select, multi_select, resource_ref
		{name: "select option", fields: []contract.FieldDefinition{field("m", "select", options("fast", "custom"))}, input: `{"m":"fast"}`, want: `{"m":"fast"}`},
		{name: "select not an option", fields: []contract.FieldDefinition{field("m", "select", options("fast", "custom", "slow"))}, input: `{"m":"Fast"}`,
			errs: []fieldErr{e(contract.InputOption, "m", "Input should be 'fast', 'custom' or 'slow'")}},
		{name: "select from a resource accepts any id", fields: []contract.FieldDefinition{field("m", "select", options("a"), func(f *contract.FieldDefinition) {
			f.OptionsSource = &contract.OptionsSource{Type: "resource", Resource: "lists"}
		})}, input: `{"m":"list-9"}`, want: `{"m":"list-9"}`},
		{name: "select number refused", fields: []contract.FieldDefinition{field("m", "select", options("1"))}, input: `{"m":1}`,
			errs: []fieldErr{e(contract.InputType, "m", "Input should be a valid string")}},
		{name: "multi_select", fields: []contract.FieldDefinition{field("m", "multi_select", options("a", "b"), rules(contract.FieldValidation{MinItems: ptr(1), MaxItems: ptr(2)}))},
			input: `{"m":["a","b"]}`, want: `{"m":["a","b"]}`},
		{name: "multi_select option", fields: []contract.FieldDefinition{field("m", "multi_select", options("a", "b"))}, input: `{"m":["a","c"]}`,
			errs: []fieldErr{e(contract.InputOption, "m", "Input should be 'a' or 'b'")}},
		{name: "multi_select min_items", fields: []contract.FieldDefinition{field("m", "multi_select", options("a", "b"), rules(contract.FieldValidation{MinItems: ptr(1)}))},
			input: `{"m":[]}`, errs: []fieldErr{e(contract.InputMinItems, "m", "List should have at least 1 item after validation, not 0")}},
		{name: "multi_select max_items", fields: []contract.FieldDefinition{field("m", "multi_select", options("a", "b", "c"), rules(contract.FieldValidation{MaxItems: ptr(2)}))},
			input: `{"m":["a","b","c"]}`, errs: []fieldErr{e(contract.InputMaxItems, "m", "List should have at most 2 items after validation, not 3")}},
		{name: "multi_select not a list", fields: []contract.FieldDefinition{field("m", "multi_select")}, input: `{"m":"a"}`,
			errs: []fieldErr{e(contract.InputType, "m", "Input should be a valid list")}},
		{name: "resource_ref", fields: []contract.FieldDefinition{field("r", "resource_ref")}, input: `{"r":"contact-1"}`, want: `{"r":"contact-1"}`},
		{name: "resource_ref blank", fields: []contract.FieldDefinition{field("r", "resource_ref")}, input: `{"r":"  "}`,
			errs: []fieldErr{e(contract.InputRequired, "r", "Field required")}},
		{name: "resource_ref object refused", fields: []contract.FieldDefinition{field("r", "resource_ref")}, input: `{"r":{"id":"c"}}`,
			errs: []fieldErr{e(contract.InputType, "r", "Input should be a valid string")}},

		// required and default
		{name: "required missing", fields: []contract.FieldDefinition{field("a", "string", required), field("b", "integer", required)}, input: `{}`,
			errs: []fieldErr{e(contract.InputRequired, "a", "Field required"), e(contract.InputRequired, "b", "Field required")}},
		{name: "required empty string and null", fields: []contract.FieldDefinition{field("a", "text", required), field("b", "select", required, options("x"))}, input: `{"a":"","b":null}`,
			errs: []fieldErr{e(contract.InputRequired, "a", "Field required"), e(contract.InputRequired, "b", "Field required")}},
		{name: "required false boolean is a value", fields: []contract.FieldDefinition{field("ok", "boolean", required)}, input: `{"ok":false}`, want: `{"ok":false}`},
		{name: "default fills a missing field", fields: []contract.FieldDefinition{field("n", "integer", required, withDefault(3)), field("mode", "select", options("fast"), withDefault("fast"))},
			input: `{}`, want: `{"mode":"fast","n":3}`},
		{name: "draft: required may be missing, no default", mode: contract.Draft, fields: []contract.FieldDefinition{field("a", "string", required), field("n", "integer", withDefault(3))},
			input: `{"x":1}`, want: `{"x":1}`},
		{name: "draft: present values are still checked", mode: contract.Draft, fields: []contract.FieldDefinition{field("n", "integer", rules(contract.FieldValidation{Min: ptr(1.0)}))},
			input: `{"n":"0"}`, errs: []fieldErr{e(contract.InputMin, "n", "Input should be greater than or equal to 1")}},
		{name: "unknown members kept", fields: []contract.FieldDefinition{field("a", "integer")}, input: `{"name":"Job 7","a":"2"}`, want: `{"a":2,"name":"Job 7"}`},
		{name: "one error per field, in field order", fields: []contract.FieldDefinition{field("b", "integer"), field("a", "string", rules(contract.FieldValidation{MinLength: ptr(2), Pattern: "x"}))},
			input: `{"a":"y","b":"z"}`, errs: []fieldErr{e(contract.InputType, "b", "Input should be a valid integer, unable to parse string as an integer"),
				e(contract.InputMinLength, "a", "String should have at least 2 characters")}},

		// depends_on
		{name: "inactive field: not required, value dropped", fields: []contract.FieldDefinition{field("mode", "select", options("fast", "custom")),
			field("budget", "number", required, dependsOn("mode", "custom"))}, input: `{"mode":"fast","budget":"junk"}`, want: `{"mode":"fast"}`},
		{name: "active field checked", fields: []contract.FieldDefinition{field("mode", "select", options("fast", "custom")),
			field("budget", "number", required, dependsOn("mode", "custom"))}, input: `{"mode":"custom"}`, errs: []fieldErr{e(contract.InputRequired, "budget", "Field required")}},
		{name: "depends_on a boolean parent, stringified", fields: []contract.FieldDefinition{field("review", "boolean"),
			field("reviewer", "string", required, dependsOn("review", "true"))}, input: `{"review":"yes","reviewer":"ann"}`, want: `{"review":true,"reviewer":"ann"}`},
		{name: "depends_on a number and a list parent", fields: []contract.FieldDefinition{field("n", "integer"), field("tags", "multi_select", options("a", "b")),
			field("x", "string", required, dependsOn("n", "2")), field("y", "string", required, dependsOn("tags", "b"))},
			input: `{"n":"2","tags":["a","b"]}`, errs: []fieldErr{e(contract.InputRequired, "x", "Field required"), e(contract.InputRequired, "y", "Field required")}},
		{name: "parents chain: an inactive parent deactivates its children", fields: []contract.FieldDefinition{field("mode", "select", options("fast", "custom")),
			field("level", "select", options("high", "low"), dependsOn("mode", "custom")), field("cap", "integer", required, dependsOn("level", "high"))},
			input: `{"mode":"fast","level":"high"}`, want: `{"mode":"fast"}`},

		// file
		{name: "file studio", fields: []contract.FieldDefinition{reportFile}, input: `{"report":` + studioFile + `}`, want: `{"report":` + studioFile + `}`},
		{name: "file of exactly max_bytes", fields: []contract.FieldDefinition{reportFile}, input: `{"report":` + strings.Replace(studioFile, `"size":10`, `"size":100`, 1) + `}`,
			want: `{"report":` + strings.Replace(studioFile, `"size":10`, `"size":100`, 1) + `}`},
		{name: "file too large", fields: []contract.FieldDefinition{reportFile}, input: `{"report":` + strings.Replace(studioFile, `"size":10`, `"size":101`, 1) + `}`,
			errs: []fieldErr{e(contract.InputFile, "report", "File is 101 bytes, larger than the 100 bytes this field accepts")}},
		{name: "file type not accepted", fields: []contract.FieldDefinition{reportFile}, input: `{"report":` + strings.NewReplacer(`r.md`, `r.pdf`, `text/markdown`, `application/pdf`).Replace(studioFile) + `}`,
			errs: []fieldErr{e(contract.InputFile, "report", "File type is not accepted: expected .md,text/markdown")}},
		{name: "file accepted by media type alone", fields: []contract.FieldDefinition{reportFile}, input: `{"report":` + strings.Replace(studioFile, `r.md`, `notes`, 1) + `}`,
			want: `{"report":` + strings.Replace(studioFile, `r.md`, `notes`, 1) + `}`},
		{name: "file other storage", fields: []contract.FieldDefinition{reportFile}, input: `{"report":{"storage":"inline","filename":"r.md","size":1,"content":"x"}}`,
			errs: []fieldErr{e(contract.InputFile, "report", `File storage should be "studio" for this field, not "inline"`)}},
		{name: "file studio without file_id", fields: []contract.FieldDefinition{reportFile}, input: `{"report":{"storage":"studio","filename":"r.md","size":1}}`,
			errs: []fieldErr{e(contract.InputFile, "report", "File file_id is required with storage studio")}},
		{name: "file inline base64", fields: []contract.FieldDefinition{inlineFile}, input: `{"doc":{"storage":"inline","filename":"a.png","media_type":"image/png","size":3,"encoding":"base64","content":"AQID"}}`,
			want: `{"doc":{"storage":"inline","filename":"a.png","media_type":"image/png","size":3,"encoding":"base64","content":"AQID"}}`},
		{name: "file inline size mismatch", fields: []contract.FieldDefinition{inlineFile}, input: `{"doc":{"storage":"inline","filename":"a.txt","media_type":"text/plain","size":2,"encoding":"base64","content":"AQID"}}`,
			errs: []fieldErr{e(contract.InputFile, "doc", "File content is 3 bytes but size says 2")}},
		{name: "file not an object", fields: []contract.FieldDefinition{inlineFile}, input: `{"doc":"a.txt"}`,
			errs: []fieldErr{e(contract.InputFile, "doc", "Input should be a file object ({storage, filename, media_type, size, …})")}},

		// list
		{name: "list rows coerced, defaults filled, unknown kept", fields: []contract.FieldDefinition{contacts},
			input: `{"contacts":[{"email":"a@b.c","vip":"yes","note":"x"}]}`, want: `{"contacts":[{"email":"a@b.c","note":"x","score":0,"vip":true}]}`},
		{name: "list errors name the row and item field", fields: []contract.FieldDefinition{contacts},
			input: `{"contacts":[{"email":"a@b.c","score":"x"},{"vip":true}]}`,
			errs: []fieldErr{ei(contract.InputType, "contacts", 0, "score", "Input should be a valid integer, unable to parse string as an integer"),
				ei(contract.InputRequired, "contacts", 1, "email", "Field required")}},
		{name: "list is never free text", fields: []contract.FieldDefinition{contacts}, input: `{"contacts":"a@b.c, d@e.f"}`,
			errs: []fieldErr{e(contract.InputType, "contacts", "Input should be a valid list of objects, one per row (never free text)")}},
		{name: "list row not an object", fields: []contract.FieldDefinition{contacts}, input: `{"contacts":["a@b.c"]}`,
			errs: []fieldErr{{code: contract.InputType, field: "contacts", item: ptr(0), msg: "Input should be a valid dictionary"}}},
		{name: "list max_items", fields: []contract.FieldDefinition{contacts}, input: `{"contacts":[{"email":"a@b"},{"email":"c@d"},{"email":"e@f"}]}`,
			errs: []fieldErr{e(contract.InputMaxItems, "contacts", "List should have at most 2 items after validation, not 3")}},
		{name: "required list empty", fields: []contract.FieldDefinition{field("l", "list", required, func(f *contract.FieldDefinition) {
			f.ItemFields = []contract.FieldDefinition{field("a", "string")}
		})}, input: `{"l":[]}`, errs: []fieldErr{e(contract.InputRequired, "l", "Field required")}},

		{name: "input not an object", fields: nil, input: `[1]`, errs: []fieldErr{e(contract.InputType, "", "Input should be a valid dictionary")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for i := range tc.fields {
				if err := tc.fields[i].Validate(); err != nil {
					t.Fatalf("the test's field %q is invalid: %v", tc.fields[i].ID, err)
				}
			}
			got, err := contract.ValidateInput(tc.fields, json.RawMessage(tc.input), tc.mode)
			if tc.errs == nil {
				if err != nil {
					t.Fatalf("ValidateInput: %v", err)
				}
				if string(got) != tc.want {
					t.Errorf("coerced = %s\nwant      %s", got, tc.want)
				}
				return
			}
			var ie contract.InputErrors
			if !errors.As(err, &ie) {
				t.Fatalf("ValidateInput = %s, %v; want input errors", got, err)
			}
			if len(ie) != len(tc.errs) {
				t.Fatalf("errors = %+v\nwant %d", ie, len(tc.errs))
			}
			for i, w := range tc.errs {
				g := ie[i]
				if g.Code != w.code || g.Field != w.field || g.Message != w.msg || g.ItemField != w.itemField ||
					(g.Item == nil) != (w.item == nil) || (g.Item != nil && *g.Item != *w.item) {
					t.Errorf("errors[%d] = %+v (item %v)\nwant %+v (item %v)", i, g, g.Item, w, w.item)
				}
				if !contract.IsInputError(g.Code) {
					t.Errorf("errors[%d].code %q is not an input error", i, g.Code)
				}
			}
			res := contract.Refuse(ie...)
			if !res.Refusal() || res.Validate() != nil {
				t.Errorf("Refuse(...) = %+v is not a valid refusal", res)
			}
		})
	}
}

// TestFieldErrorsOnTheWire pins the JSON of a refusal: field, item and item_field next to code
// and message.
func TestFieldErrorsOnTheWire(t *testing.T) {
	_, err := contract.ValidateInput([]contract.FieldDefinition{
		field("budget", "number", rules(contract.FieldValidation{Min: ptr(0.0), Message: "Budget cannot be negative"})),
		field("rows", "list", func(f *contract.FieldDefinition) {
			f.ItemFields = []contract.FieldDefinition{field("email", "string", required)}
		}),
	}, json.RawMessage(`{"budget":-1,"rows":[{}]}`), contract.Submit)
	res, rerr := contract.Refused(err)
	if rerr != nil {
		t.Fatal(rerr)
	}
	b, _ := json.Marshal(res)
	want := `{"status":"error","effects":[],"errors":[{"code":"input_min","message":"Budget cannot be negative","field":"budget"},` +
		`{"code":"input_required","message":"Field required","field":"rows","item":0,"item_field":"email"}]}`
	if string(b) != want {
		t.Errorf("refusal = %s\nwant      %s", b, want)
	}
	if _, err := contract.Refused(errors.New("boom")); err == nil {
		t.Error("Refused of another error must return it")
	}
}

func TestDecodeValid(t *testing.T) {
	type in struct {
		Count int    `json:"count"`
		Mode  string `json:"mode"`
	}
	fields := []contract.FieldDefinition{field("count", "integer", required), field("mode", "select", options("a"), withDefault("a"))}
	req := &contract.ActionRequest{Action: "job.start", Input: json.RawMessage(`{"count":"4"}`)}
	var v in
	if err := req.DecodeValid(&v, fields); err != nil || v != (in{4, "a"}) {
		t.Errorf("DecodeValid = %+v, %v", v, err)
	}
	req.Input = json.RawMessage(`{}`)
	if err := req.DecodeValid(&v, fields); !strings.Contains(err.Error(), "count: Field required") {
		t.Errorf("DecodeValid of a missing field: %v", err)
	}
	// Awaiting fields without a type are booleans.
	aw := contract.Awaiting{Fields: []contract.FieldDefinition{{ID: "approved", Label: "Approved", Required: true}}}
	req.Input = json.RawMessage(`{"approved":"yes"}`)
	var ans struct{ Approved bool }
	if err := req.DecodeValid(&ans, aw.InputFields()); err != nil || !ans.Approved {
		t.Errorf("awaiting answer = %+v, %v", ans, err)
	}
}

// TestFieldDefinitionFileKeys: file keys are typed, allowed only on file fields, and keep their
// wire names.
func TestFieldDefinitionFileKeys(t *testing.T) {
	f := field("report_file", "file", required, file("studio", ".md,text/markdown", 1048576))
	b, _ := json.Marshal(f)
	want := `{"id":"report_file","label":"Report_file","type":"file","required":true,"accept":".md,text/markdown","max_bytes":1048576,"storage":"studio"}`
	if string(b) != want {
		t.Errorf("file field = %s\nwant %s", b, want)
	}
	var back contract.FieldDefinition
	if err := json.Unmarshal(b, &back); err != nil || back.MaxBytes != 1048576 || back.Storage != "studio" || back.Extra != nil {
		t.Errorf("decoded = %+v, %v", back, err)
	}
	for _, bad := range []contract.FieldDefinition{
		field("x", "string", file("", ".md", 0)),
		field("x", "file", file("s3", "", 0)),
		field("x", "string", rules(contract.FieldValidation{Pattern: "(unclosed"})),
	} {
		if bad.Validate() == nil {
			t.Errorf("%+v validated", bad)
		}
	}
	// One field type for resources and forms: the conversion keeps everything.
	rf := contract.ResourceFieldDefinition{ID: "email", Label: "Email", Type: "string", Required: true, ReadOnly: true,
		Validation: &contract.FieldValidation{Pattern: "@"}}
	if back := rf.Field().ResourceField(); back.ReadOnly != true || back.Validation.Pattern != "@" || back.Extra != nil {
		t.Errorf("round trip = %+v", back)
	}
}

// TestValidateInputBoundaries: every numeric rule accepts its bound and refuses one step past it
// (lengths count characters, not bytes), for integers, numbers, numeric strings, multi_select
// and list fields.
func TestValidateInputBoundaries(t *testing.T) {
	row := func(n int) string {
		return "[" + strings.TrimSuffix(strings.Repeat(`{"a":"x"},`, n), ",") + "]"
	}
	list := func(v contract.FieldValidation) contract.FieldDefinition {
		return field("l", "list", rules(v), func(f *contract.FieldDefinition) {
			f.ItemFields = []contract.FieldDefinition{field("a", "string")}
		})
	}
	abc := options("a", "b", "c", "d")
	for _, tc := range []struct {
		name     string
		f        contract.FieldDefinition
		ok, bad  string // the value at the bound, and one step past it
		code     string
		msg      string
		okCoerce string // the coerced value at the bound, when it differs from ok
	}{
		{"integer min", field("v", "integer", rules(contract.FieldValidation{Min: ptr(1.0)})), `1`, `0`, contract.InputMin, "Input should be greater than or equal to 1", ""},
		{"integer max", field("v", "integer", rules(contract.FieldValidation{Max: ptr(10.0)})), `10`, `11`, contract.InputMax, "Input should be less than or equal to 10", ""},
		{"integer min from a string", field("v", "integer", rules(contract.FieldValidation{Min: ptr(-3.0)})), `"-3"`, `"-4"`, contract.InputMin, "Input should be greater than or equal to -3", `-3`},
		{"integer max from a string", field("v", "integer", rules(contract.FieldValidation{Max: ptr(0.0)})), `"0"`, `"1"`, contract.InputMax, "Input should be less than or equal to 0", `0`},
		{"number min", field("v", "number", rules(contract.FieldValidation{Min: ptr(0.5)})), `0.5`, `0.49`, contract.InputMin, "Input should be greater than or equal to 0.5", ""},
		{"number max", field("v", "number", rules(contract.FieldValidation{Max: ptr(2.25)})), `2.25`, `2.2500001`, contract.InputMax, "Input should be less than or equal to 2.25", ""},
		{"number min from a string", field("v", "number", rules(contract.FieldValidation{Min: ptr(-1.5)})), `"-1.5"`, `"-1.51"`, contract.InputMin, "Input should be greater than or equal to -1.5", `-1.5`},
		{"number max with min", field("v", "number", rules(contract.FieldValidation{Min: ptr(1.0), Max: ptr(1.0)})), `1`, `1.01`, contract.InputMax, "Input should be less than or equal to 1", ""},
		{"number min with max", field("v", "number", rules(contract.FieldValidation{Min: ptr(1.0), Max: ptr(1.0)})), `1.0`, `0.99`, contract.InputMin, "Input should be greater than or equal to 1", ""},
		{"min_length in characters", field("v", "string", rules(contract.FieldValidation{MinLength: ptr(3)})), `"ééé"`, `"éé"`, contract.InputMinLength, "String should have at least 3 characters", ""},
		{"max_length in characters", field("v", "text", rules(contract.FieldValidation{MaxLength: ptr(2)})), `"éé"`, `"abc"`, contract.InputMaxLength, "String should have at most 2 characters", ""},
		{"max_length 1 singular", field("v", "string", rules(contract.FieldValidation{MaxLength: ptr(1)})), `"€"`, `"ab"`, contract.InputMaxLength, "String should have at most 1 character", ""},
		{"max_length 0", field("v", "string", rules(contract.FieldValidation{MaxLength: ptr(0)})), `""`, `"a"`, contract.InputMaxLength, "String should have at most 0 characters", ""},
		{"integer range", field("v", "integer"), `9223372036854775807`, `9223372036854775808`, contract.InputType, "Input should be a valid integer", ""},
		{"integer range, negative", field("v", "integer"), `-9223372036854775808`, `-1e19`, contract.InputType, "Input should be a valid integer", ""},
		{"multi_select min_items", field("v", "multi_select", abc, rules(contract.FieldValidation{MinItems: ptr(2)})), `["a","b"]`, `["a"]`, contract.InputMinItems, "List should have at least 2 items after validation, not 1", ""},
		{"multi_select max_items", field("v", "multi_select", abc, rules(contract.FieldValidation{MaxItems: ptr(3)})), `["a","b","c"]`, `["a","b","c","d"]`, contract.InputMaxItems, "List should have at most 3 items after validation, not 4", ""},
		{"list min_items", list(contract.FieldValidation{MinItems: ptr(2)}), row(2), row(1), contract.InputMinItems, "List should have at least 2 items after validation, not 1", ""},
		{"list max_items", list(contract.FieldValidation{MaxItems: ptr(1)}), row(1), row(2), contract.InputMaxItems, "List should have at most 1 item after validation, not 2", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.f.ID = "v"
			if tc.f.Type == "list" {
				tc.f.ID = "l"
			}
			if err := tc.f.Validate(); err != nil {
				t.Fatalf("the test's field is invalid: %v", err)
			}
			fields := []contract.FieldDefinition{tc.f}
			for _, mode := range []contract.InputMode{contract.Submit, contract.Draft} {
				got, err := contract.ValidateInput(fields, json.RawMessage(`{"`+tc.f.ID+`":`+tc.ok+`}`), mode)
				want := tc.ok
				if tc.okCoerce != "" {
					want = tc.okCoerce
				}
				if err != nil || string(got) != `{"`+tc.f.ID+`":`+want+`}` {
					t.Errorf("mode %d: the bound %s gave %s, %v; want it accepted", mode, tc.ok, got, err)
				}
				_, err = contract.ValidateInput(fields, json.RawMessage(`{"`+tc.f.ID+`":`+tc.bad+`}`), mode)
				var ie contract.InputErrors
				if !errors.As(err, &ie) || len(ie) != 1 || ie[0].Code != tc.code || ie[0].Field != tc.f.ID || ie[0].Message != tc.msg {
					t.Errorf("mode %d: one step past the bound (%s) gave %v; want %s %q", mode, tc.bad, err, tc.code, tc.msg)
				}
			}
		})
	}
}

// TestDependsOnDeclaredChildFirst: depends_on follows the chain whatever the declaration order:
// a field declared before its parent, whose parent is inactive, is inactive too (not required,
// not checked, its value dropped), and active when the whole chain is.
func TestDependsOnDeclaredChildFirst(t *testing.T) {
	fields := []contract.FieldDefinition{
		field("cap", "integer", required, rules(contract.FieldValidation{Max: ptr(5.0)}), dependsOn("level", "high")),
		field("level", "select", options("high", "low"), dependsOn("mode", "custom")),
		field("mode", "select", options("fast", "custom")),
	}
	for _, tc := range []struct {
		name, input, want string
		errs              []fieldErr
	}{
		{"the grandparent deactivates the chain", `{"mode":"fast","level":"high"}`, `{"mode":"fast"}`, nil},
		{"an inactive child's value is dropped unchecked", `{"mode":"fast","level":"high","cap":"junk"}`, `{"mode":"fast"}`, nil},
		{"no grandparent value", `{"level":"high","cap":99}`, `{}`, nil},
		{"the whole chain active: the child is required", `{"mode":"custom","level":"high"}`, "",
			[]fieldErr{e(contract.InputRequired, "cap", "Field required")}},
		{"the whole chain active: the child is checked", `{"mode":"custom","level":"high","cap":6}`, "",
			[]fieldErr{e(contract.InputMax, "cap", "Input should be less than or equal to 5")}},
		{"the whole chain active: the child is kept", `{"mode":"custom","level":"high","cap":"5"}`, `{"cap":5,"level":"high","mode":"custom"}`, nil},
		{"the parent inactive by its own value", `{"mode":"custom","level":"low","cap":"junk"}`, `{"level":"low","mode":"custom"}`, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := contract.ValidateInput(fields, json.RawMessage(tc.input), contract.Submit)
			if tc.errs == nil {
				if err != nil || string(got) != tc.want {
					t.Errorf("= %s, %v; want %s", got, err, tc.want)
				}
				return
			}
			var ie contract.InputErrors
			if !errors.As(err, &ie) || len(ie) != len(tc.errs) {
				t.Fatalf("= %s, %v; want %d errors", got, err, len(tc.errs))
			}
			for i, w := range tc.errs {
				if ie[i].Code != w.code || ie[i].Field != w.field || ie[i].Message != w.msg {
					t.Errorf("errors[%d] = %+v, want %+v", i, ie[i], w)
				}
			}
		})
	}
}
