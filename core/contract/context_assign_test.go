package contract

import (
	"encoding/json"
	"reflect"
	"testing"
)

func TestDecodeContextAssignment(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     *ContextAssignment
		errs     FieldErrors
	}{
		{"no context", `{"items":[],"job_id":"job-1","assigned_at":"2026-07-01T10:00:00Z"}`,
			&ContextAssignment{Items: []ContextAssignmentItem{}, JobID: "job-1", AssignedAt: "2026-07-01T10:00:00Z"}, nil},
		{"mission items", `{"items":[{"ref":"supervaize.context.mission.january-brief","version":"3","scope":"mission","title":"January brief","etag":"x"},` +
			`{"ref":"w","version":2.0,"scope":"workspace","title":"W"}],"mission_id":"m1","job_id":"j","assigned_at":"t","source":"studio"}`,
			&ContextAssignment{
				Items: []ContextAssignmentItem{
					{Ref: "supervaize.context.mission.january-brief", Version: 3, Scope: "mission", Title: "January brief", Extra: Extra{"etag": json.RawMessage(`"x"`)}},
					{Ref: "w", Version: 2, Scope: "workspace", Title: "W"},
				},
				MissionID: ptr("m1"), JobID: "j", AssignedAt: "t", Extra: Extra{"source": json.RawMessage(`"studio"`)},
			}, nil},
		{"workspace items need no mission", `{"items":[{"ref":"r","version":true,"scope":"workspace","title":"T"}],"mission_id":null,"job_id":"j","assigned_at":"t"}`,
			&ContextAssignment{Items: []ContextAssignmentItem{{Ref: "r", Version: 1, Scope: "workspace", Title: "T"}}, JobID: "j", AssignedAt: "t"}, nil},
		{"mission item without mission_id", `{"items":[{"ref":"r","version":1,"scope":"mission","title":"T"}],"mission_id":"  ","job_id":"j","assigned_at":"t"}`,
			nil, FieldErrors{{Type: "value_error", Loc: []any{}, Msg: "Value error, mission_id is required when the assignment contains mission-scoped items"}}},
		{"missing members", `{}`, nil, FieldErrors{
			{Type: "missing", Loc: []any{"items"}, Msg: "Field required"},
			{Type: "missing", Loc: []any{"job_id"}, Msg: "Field required"},
			{Type: "missing", Loc: []any{"assigned_at"}, Msg: "Field required"},
		}},
		{"wrong types", `{"items":[{"ref":12,"version":1.5,"scope":"team","title":"T"},"x",{"ref":"r","version":"v2","scope":"mission"}],"job_id":7,"assigned_at":"t","mission_id":false}`,
			nil, FieldErrors{
				{Type: "string_type", Loc: []any{"items", 0, "ref"}, Msg: "Input should be a valid string"},
				{Type: "int_from_float", Loc: []any{"items", 0, "version"}, Msg: "Input should be a valid integer, got a number with a fractional part"},
				{Type: "literal_error", Loc: []any{"items", 0, "scope"}, Msg: "Input should be 'workspace' or 'mission'"},
				{Type: "model_type", Loc: []any{"items", 1}, Msg: "Input should be a valid dictionary or instance of V2ContextAssignmentItem"},
				{Type: "int_parsing", Loc: []any{"items", 2, "version"}, Msg: "Input should be a valid integer, unable to parse string as an integer"},
				{Type: "missing", Loc: []any{"items", 2, "title"}, Msg: "Field required"},
				{Type: "string_type", Loc: []any{"mission_id"}, Msg: "Input should be a valid string"},
				{Type: "string_type", Loc: []any{"job_id"}, Msg: "Input should be a valid string"},
			}},
		{"lax versions as pydantic reads them", `{"items":[{"ref":"a","version":"3.0","scope":"workspace","title":"A"},{"ref":"b","version":" 1_0 ","scope":"workspace","title":"B"}],"job_id":"j","assigned_at":"t"}`,
			&ContextAssignment{Items: []ContextAssignmentItem{{Ref: "a", Version: 3, Scope: "workspace", Title: "A"}, {Ref: "b", Version: 10, Scope: "workspace", Title: "B"}}, JobID: "j", AssignedAt: "t"}, nil},
		{"scope is a literal, version too large", `{"items":[{"ref":"r","version":1e30,"scope":null,"title":"T"},{"ref":"r","version":1,"scope":5,"title":"T"}],"job_id":"j","assigned_at":"t"}`,
			nil, FieldErrors{
				{Type: "int_parsing_size", Loc: []any{"items", 0, "version"}, Msg: "Unable to parse input string as an integer, exceeded maximum size"},
				{Type: "literal_error", Loc: []any{"items", 0, "scope"}, Msg: "Input should be 'workspace' or 'mission'"},
				{Type: "literal_error", Loc: []any{"items", 1, "scope"}, Msg: "Input should be 'workspace' or 'mission'"},
			}},
		{"items not a list", `{"items":{},"job_id":"j","assigned_at":"t"}`, nil, FieldErrors{{Type: "list_type", Loc: []any{"items"}, Msg: "Input should be a valid list"}}},
		{"not an object", `[1]`, nil, FieldErrors{{Type: "model_type", Loc: []any{}, Msg: "Input should be a valid dictionary or instance of V2ContextAssignment"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := DecodeContextAssignment(json.RawMessage(tc.in))
			if tc.errs != nil {
				if !reflect.DeepEqual(err, tc.errs) {
					t.Fatalf("err:\n%#v\nwant:\n%#v", err, tc.errs)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestContextAssignmentJSON(t *testing.T) {
	a := ContextAssignment{JobID: "j", AssignedAt: "t"}
	if got := string(mustMarshal(t, a)); got != `{"items":[],"mission_id":null,"job_id":"j","assigned_at":"t"}` {
		t.Errorf("got %s", got)
	}
	in := `{"items":[{"ref":"r","version":4,"scope":"mission","title":"T","x":[1]}],"mission_id":"m","job_id":"j","assigned_at":"t","y":{}}`
	got, err := DecodeContextAssignment(json.RawMessage(in))
	if err != nil {
		t.Fatal(err)
	}
	if out := string(mustMarshal(t, got)); out != in {
		t.Errorf("round trip:\n got %s\nwant %s", out, in)
	}
}

func FuzzDecodeContextAssignment(f *testing.F) {
	for _, s := range []string{
		`{"items":[],"job_id":"j","assigned_at":"t"}`,
		`{"items":[{"ref":"r","version":"3","scope":"mission","title":"T"}],"mission_id":"m","job_id":"j","assigned_at":"t"}`,
		`{"items":[{"version":1e300},{"version":-0.0},{"version":" 7 "}]}`,
		`[]`, `null`, `{"items":null}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		a, err := DecodeContextAssignment(data)
		if err != nil {
			if _, ok := err.(FieldErrors); !ok {
				t.Fatalf("error is %T, not FieldErrors", err)
			}
			return
		}
		if err := a.Validate(); err != nil {
			t.Fatalf("decoded assignment does not validate: %v", err)
		}
		out, err := json.Marshal(a)
		if err != nil {
			t.Fatal(err)
		}
		b, err := DecodeContextAssignment(out)
		if err != nil {
			t.Fatalf("re-decoding %s: %v", out, err)
		}
		if again, _ := json.Marshal(b); string(again) != string(out) {
			t.Fatalf("not stable:\n%s\n%s", out, again)
		}
	})
}

// The plain decoder keeps everything and checks nothing; Validate checks the model rule.
func TestContextAssignmentUnmarshal(t *testing.T) {
	var a ContextAssignment
	if err := json.Unmarshal([]byte(`{"items":[{"ref":"r","version":1,"scope":"mission","title":"T","k":true}],"job_id":"j","assigned_at":"t"}`), &a); err != nil {
		t.Fatal(err)
	}
	if string(a.Items[0].Extra["k"]) != "true" {
		t.Errorf("extra lost: %+v", a.Items[0])
	}
	checkErrors(t, a.Validate(), []string{"mission_id is required when the assignment contains mission-scoped items"})
	a.Items[0].Scope = "team"
	checkErrors(t, a.Validate(), []string{"items[0].scope: Input should be 'workspace' or 'mission'"})
}
