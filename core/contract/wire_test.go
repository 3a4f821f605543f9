package contract

import (
	"bytes"
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/supervaize/svz/internal/golden"
	"unicode/utf8"
)

// userRow is a handler's own type inside a free-form member.
type userRow struct {
	Name  string  `json:"name"`
	Score float64 `json:"score,omitempty"`
	Notes []byte  `json:"notes"`
}

// wireSamples are results and requests using every type, member and default of the hot path,
// with text that needs escaping and numbers at the formatting edges. Their encoding is pinned by
// goldens recorded before the one-pass encoder existed (by encoding/json over MarshalJSON).
func wireSamples() map[string]any {
	html := "<b>Tom & Jerry</b>\u2028\u2029 \"q\" \\ \t\x01 é😀"
	count := 3
	min, max := 0.5, 1e21
	return map[string]any{
		"wire_action_result_full.json": &ActionResult{
			Status: StatusOK,
			Effects: []Effect{
				{Type: "job.started", JobID: "j<1>", CaseID: "c", StepID: "s", Resource: "r", Dataset: "d", ArtifactID: "a",
					Status: "ok", Message: html, Count: &count,
					Item:    map[string]any{"b": 1.5, "a": json.Number("12345678901234567890"), "z": nil, "nested": map[string]any{"x": []any{true, false, "&"}}},
					Items:   []map[string]any{{"id": "1"}, {}},
					Rows:    []map[string]any{{"n": 1e-7, "big": 1e21, "neg": 0.0, "int": 42}},
					Errors:  []map[string]any{{"code": "x"}},
					Gaps:    []map[string]any{},
					Summary: map[string]any{"row": userRow{Name: html, Notes: []byte("hi")}},
					Case:    map[string]any{"raw": json.RawMessage(` { "k" : [1, 2] , "h":"<&>" } `)},
					Data:    map[string]any{"f32": float32(0.1), "u": uint8(7), "i64": int64(-9), "strs": []string{"a", "<"}},
					Extra:   Extra{"request_id": json.RawMessage(`"r1"`), "type": json.RawMessage(`"shadowed"`), "aa": json.RawMessage(` {"b": "<x>"} `)}},
				{Type: "minimal"},
			},
			JobState: &JobState{
				Job: Job{ID: "j", AgentSlug: "s", MissionID: "m", Status: "awaiting",
					Source:  JobSource{Type: SourceExternal, ExternalRef: "e", PreviousJobID: "p", TargetType: "t", Extra: Extra{"x": json.RawMessage(`1`)}},
					Display: &JobDisplay{EntityLabel: "Lead", StateLabel: "Scoring", PrimaryActionLabel: "Open", Extra: Extra{"y": json.RawMessage(`null`)}},
					Information: &JobInformation{Cost: &JobCost{TotalCost: 1.25, Extra: Extra{"currency": json.RawMessage(`"EUR"`)}},
						Extra: Extra{"owner": json.RawMessage(`"ops"`)}}},
				Cases: []Case{
					{ID: "c1", Title: "T", Status: "awaiting", ExternalID: "x", Metadata: map[string]any{"k": "v"},
						Steps: []Step{{ID: "s1", Activity: ActivityOperation, Status: "awaiting", Title: "Review", ExternalID: "e",
							Awaiting: &Awaiting{Reason: "human_input", Surface: "case.step.awaiting", Action: "step.awaiting.submit", Reopenable: true,
								Fields: []FieldDefinition{
									{ID: "approved", Label: "Approve"},
									{ID: "mode", Label: "Mode", Type: FieldSelect, Required: true, Default: "fast", Placeholder: "pick", Description: html,
										Options:    []FieldOption{{Value: "fast", Label: "Fast", Extra: Extra{"hint": json.RawMessage(`"h"`)}}},
										DependsOn:  &DependsOn{Field: "approved", In: []string{"true"}},
										Validation: &FieldValidation{Message: "m", Extra: Extra{"x": json.RawMessage(`[]`)}}},
									{ID: "notes", Label: "Notes", Type: FieldText, Multiline: true, MinRows: &count,
										Validation: &FieldValidation{MinLength: &count, MaxLength: &count, Pattern: "^a$"}},
									{ID: "rows", Label: "Rows", Type: FieldList, ItemFields: []FieldDefinition{{ID: "a", Label: "A"}},
										Default: []map[string]any{{"a": "x"}}},
									{ID: "ref", Label: "Ref", Type: FieldResourceRef, OptionsSource: &OptionsSource{Resource: "contacts"}},
									{ID: "dep", Label: "Dep", DependsOn: &DependsOn{Field: "mode"}},
								},
								Extra: Extra{"note": json.RawMessage(`"n"`)}},
							Outputs: []ArtifactRef{{ID: "o", Type: "file", Title: "F", ExternalID: "x", MediaType: "text/plain", Extra: Extra{"storage": json.RawMessage(`"studio"`)}}},
							Extra:   Extra{"z": json.RawMessage(`false`)}}},
						Extra: Extra{"lane_hint": json.RawMessage(`"x"`)}},
					{ID: "c2"},
				},
				Extra: Extra{"observed_at": json.RawMessage(`"2026-01-01T00:00:00Z"`)},
			},
			ReplaySafety: &ReplaySafety{DedupeKeys: []string{"k"}, Extra: Extra{"w": json.RawMessage(`1`)}},
			SetupPlan: &SetupPlan{Steps: []SetupStep{{ID: "scope", Title: "Scope", Fields: []FieldDefinition{{ID: "goal", Label: "Goal"}}}},
				CostEstimate: &CostEstimate{Status: CostEstimated, Unit: "credits", Min: &min, Max: &max, Basis: "b"}},
			Draft: &FieldDraft{Field: "goal", Value: map[string]any{"text": html},
				Suggestions: []Suggestion{{Message: "m", Severity: SeverityWarning, Field: "goal", ProposedValue: []any{1.0, "x"}, Extra: Extra{"e": json.RawMessage(`{}`)}}},
				Extra:       Extra{"d": json.RawMessage(`"<"`)}},
			DryRun: &DryRunOutcome{ExpiresAt: "2026-01-01T00:00:00Z", Deletable: true,
				CostIncurred: &CostEstimate{Status: CostUnknown, Basis: "n/a"}, Extra: Extra{"x": json.RawMessage(`2`)}},
			Errors: []ResultError{{Code: "idempotency_conflict", Message: html, Extra: Extra{"retry_after_seconds": json.RawMessage(`2`)}}, {Code: "c"}},
			Extra:  Extra{"external_ref": json.RawMessage(`"ext"`), "status": json.RawMessage(`"ignored"`)},
		},
		"wire_action_result_defaults.json": &ActionResult{
			Status:       StatusError,
			JobState:     &JobState{Job: Job{ID: "j", AgentSlug: "s", MissionID: "m", Status: "failed", Source: JobSource{Type: SourceFreshStart}}},
			ReplaySafety: &ReplaySafety{},
			SetupPlan:    map[string]any{"steps": []any{}},
			Draft:        &FieldDraft{Field: "goal"},
			DryRun:       &DryRunOutcome{},
		},
		"wire_surface_result.json": &SurfaceResult{Surface: "job.start", A2UIVersion: ptr("v0.8"),
			Document: json.RawMessage("{ \"type\" : \"Form\", \"title\": \"<Start & go>\",\n \"fields\": [ ] }"),
			Extra:    Extra{"z": json.RawMessage(`[1, 2]`)}},
		"wire_surface_result_defaults.json": &SurfaceResult{Surface: "job.start"},
		"wire_action_request.json": &ActionRequest{RequestID: "r", Actor: Actor{UserID: "u", Extra: Extra{"email": json.RawMessage(`"a@b"`)}},
			Workspace: WorkspaceRef{ID: "w", Slug: ptr("ws"), Extra: Extra{"n": json.RawMessage(`1`)}}, MissionID: "m", AgentSlug: "s",
			Surface: "job.start", Action: "job.start", Input: json.RawMessage(`{"count":2,"q":"<"}`), IdempotencyKey: ptr("k"),
			DraftSessionID: ptr(""), JobID: ptr("j"), CaseID: ptr("c"), StepID: ptr("s"),
			Mission: &MissionContext{ID: "m", Name: ptr("M"), Metadata: json.RawMessage(`{"a":1}`), Extra: Extra{"x": json.RawMessage(`true`)}},
			WorkspaceAuthorization: &VerifiedWorkspaceContext{GrantID: "g", WorkspaceID: "w", AgentID: "a", AgentSlug: "s", ServerID: "srv",
				Scopes: []string{"supervaizer/action.invoke", "job.start"}},
			Extra: Extra{"trace": json.RawMessage(`{"id":"t"}`)}},
		"wire_surface_request.json": &SurfaceRequest{RequestID: "r", Actor: Actor{UserID: "u"}, Workspace: WorkspaceRef{ID: "w"},
			MissionID: "m", AgentSlug: "s", Surface: "job.start",
			WorkspaceAuthorization: &VerifiedWorkspaceContext{GrantID: LocalModeGrantID}},
	}
}

// TestWireGoldens pins the encoding of every hot-path type: AppendJSON writes the recorded bytes,
// and json.Marshal (through MarshalJSON) the same.
func TestWireGoldens(t *testing.T) {
	for name, v := range wireSamples() {
		t.Run(name, func(t *testing.T) {
			got, err := AppendJSON(nil, v)
			if err != nil {
				t.Fatal(err)
			}
			golden.JSON(t, name, got)
			viaJSON, err := json.Marshal(v)
			if err != nil {
				t.Fatal(err)
			}
			if string(viaJSON) != string(got) {
				t.Errorf("json.Marshal and AppendJSON differ\njson.Marshal: %s\nAppendJSON:   %s", viaJSON, got)
			}
		})
	}
}

// TestAppendJSONFreeForm compares AppendJSON with json.Marshal on the values handlers put in
// free-form members.
func TestAppendJSONFreeForm(t *testing.T) {
	type private struct{ A int }
	for _, v := range []any{
		nil, "s", "<&>\u2028", 1.0, math.Copysign(0, -1), 1e21, 1e-7, 123456789.0, float32(3.4e38), int8(-3), uint64(1 << 63), true,
		json.Number("1e400"), json.Number(""), json.RawMessage(`[ 1 , "<" ]`), json.RawMessage(nil),
		map[string]any{"b": map[string]any{}, "a": []any{}, "": nil}, []any{nil, map[string]any(nil), []any(nil)},
		map[string]string{"z": "1", "a": "<"}, map[int]string{2: "b", 1: "a"}, []byte("bytes"), [2]int{1, 2},
		userRow{Name: "n"}, &userRow{}, (*userRow)(nil), private{A: 1}, []Effect{{Type: "t"}}, Effect{Type: "v"},
		(*ActionResult)(nil), map[string]Effect{"e": {Type: "t", Extra: Extra{"x": json.RawMessage(`1`)}}},
		struct {
			P *int `json:"p,omitempty"`
		}{},
	} {
		want, wantErr := json.Marshal(v)
		got, err := AppendJSON([]byte("x"), v)
		if (err != nil) != (wantErr != nil) || err == nil && string(got) != "x"+string(want) {
			t.Errorf("AppendJSON(%#v) = %s, %v; json.Marshal: %s, %v", v, got, err, want, wantErr)
		}
	}
	for _, bad := range []any{map[string]any{"nan": math.NaN()}, []any{math.Inf(1)}, json.Number("12a"),
		json.RawMessage(`{`), Effect{Type: "t", Extra: Extra{"x": json.RawMessage(`nope`)}}, make(chan int)} {
		if got, err := AppendJSON([]byte("x"), bad); err == nil || string(got) != "x" {
			t.Errorf("AppendJSON(%#v) = %s, %v; want an error and dst unchanged", bad, got, err)
		}
	}
	cyclic := map[string]any{}
	cyclic["self"] = cyclic
	if _, err := AppendJSON(nil, Effect{Type: "t", Item: cyclic}); err == nil {
		t.Error("a cyclic value encoded")
	}
}

// FuzzAppendJSON puts arbitrary JSON values in free-form members and extra members of an effect
// and compares the one-pass encoding with encoding/json's (over the former MarshalJSON).
func FuzzAppendJSON(f *testing.F) {
	for _, s := range []string{`{"a":[1,2.5,"<x>",null,true],"b":{"c":1e21}}`, `{"n":12345678901234567890123}`, `{}`,
		`{"s":"\u2028\ud800 \\\"é"}`, `{"f":-0.0000001}`} {
		f.Add([]byte(s), "type")
	}
	f.Fuzz(func(t *testing.T, data []byte, typ string) {
		var item map[string]any
		if !utf8.Valid(data) || json.Unmarshal(data, &item) != nil {
			return // raw members must be valid UTF-8 here (encoding/json would copy invalid bytes out)
		}
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		var exact map[string]any
		if dec.Decode(&exact) != nil {
			return
		}
		e := Effect{Type: typ, Item: item, Summary: exact, Extra: Extra{"raw": json.RawMessage(data), "type": json.RawMessage(`1`)}}
		type plain Effect
		legacy, err := encodeObject(plain(e), e.Extra) // encoding/json, then the extra members
		if err != nil {
			t.Fatal(err)
		}
		want, err := json.Marshal(json.RawMessage(legacy)) // the final compaction and escaping of json.Marshal
		if err != nil {
			t.Fatal(err)
		}
		got, err := AppendJSON(nil, &e)
		if err != nil {
			t.Fatalf("AppendJSON: %v", err)
		}
		if string(got) != string(want) {
			t.Fatalf("\n got: %s\nwant: %s", got, want)
		}
	})
}

// TestEmptyIDsInEffects: an explicitly empty id survives (the reference keeps "" and drops only
// None): set from a request with SetIDs, decoded from JSON, written back.
func TestEmptyIDsInEffects(t *testing.T) {
	empty, id := "", "job-1"
	e := Effect{Type: "step.awaiting.submitted", Status: "completed"}
	e.SetIDs(&empty, nil, &id)
	got, err := AppendJSON(nil, &e)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"type":"step.awaiting.submitted","job_id":"","step_id":"job-1","status":"completed"}`; string(got) != want {
		t.Fatalf("SetIDs\n got %s\nwant %s", got, want)
	}
	for _, in := range []string{
		`{"type":"t","job_id":"","case_id":"","message":"","count":0}`,
		`{"type":"t","job_id":"j"}`,
		`{"type":"t","step_id":"","x":""}`,
	} {
		var back Effect
		if err := json.Unmarshal([]byte(in), &back); err != nil {
			t.Fatal(err)
		}
		out, err := json.Marshal(back)
		if err != nil || string(out) != in {
			t.Errorf("round trip of %s gave %s (%v)", in, out, err)
		}
	}
	// A declared field that is written is never overridden by Extra.
	over := Effect{Type: "t", JobID: "real", Extra: Extra{"job_id": json.RawMessage(`"forged"`), "type": json.RawMessage(`"x"`)}}
	if out, _ := AppendJSON(nil, &over); string(out) != `{"type":"t","job_id":"real"}` {
		t.Errorf("Extra overrode a field: %s", out)
	}
}

// TestPlansCoverWireTypes: every type that writes itself (a wire method) has its plan built at
// start-up, so that no call builds one (a type the roots of plans do not reach would be planned
// on every call: add it to the roots in encode.go).
func TestPlansCoverWireTypes(t *testing.T) {
	planned := map[string]bool{}
	for typ := range plans() {
		planned[typ.Name()] = true
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var parsed []*ast.File
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		parsed = append(parsed, f)
	}
	found := 0
	for _, f := range parsed {
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv == nil || fn.Name.Name != "wire" {
				continue
			}
			star, ok := fn.Recv.List[0].Type.(*ast.StarExpr)
			if !ok {
				t.Errorf("%s: wire must have a pointer receiver", fset.Position(fn.Pos()))
				continue
			}
			found++
			if typ := star.X.(*ast.Ident).Name; !planned[typ] {
				t.Errorf("%s has a wire method but no plan built at start-up: add it to the roots of plans", typ)
			}
		}
	}
	if found < 25 {
		t.Fatalf("found %d wire methods: the test does not see the package", found)
	}
}

// TestInputMember reads one member of a decoded request's input, the last one of a repeated name.
func TestInputMember(t *testing.T) {
	params := []byte(`{"request_id":"r","actor":{"user_id":"u"},"workspace":{"id":"w"},"mission_id":"m","agent_slug":"a",` +
		`"surface":"s","action":"x","input":{ "count" : 2, "n\u0061me":"<x>", "count":[3] }}`)
	req, err := DecodeActionRequest(params)
	if err != nil {
		t.Fatal(err)
	}
	sreq, err := DecodeSurfaceRequest(params)
	if err != nil {
		t.Fatal(err)
	}
	for _, get := range []func(string) (json.RawMessage, bool){req.InputMember, sreq.InputMember} {
		if v, ok := get("count"); !ok || string(v) != `[3]` {
			t.Errorf("count = %s, %v", v, ok)
		}
		if v, ok := get("name"); !ok || string(v) != `"<x>"` {
			t.Errorf("name = %s, %v", v, ok)
		}
		if v, ok := get("missing"); ok {
			t.Errorf("missing = %s", v)
		}
	}
}
