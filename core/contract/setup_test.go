package contract

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestSetupPlanJSON(t *testing.T) {
	plan := &SetupPlan{Steps: []SetupStep{{ID: "scope", Title: "Scope"}}}
	const want = `{"confirmation_required":true,"steps":[{"id":"scope","title":"Scope","status":"pending","fields":[],"help_actions":[]}]}`
	if got := string(mustMarshal(t, plan)); got != want {
		t.Errorf("got %s\nwant %s", got, want)
	}
	plan.ConfirmationRequired = ptr(false)
	plan.CostEstimate = &CostEstimate{Status: CostUnknown, Basis: "depends on the sources"}
	const want2 = `{"confirmation_required":false,"steps":[{"id":"scope","title":"Scope","status":"pending","fields":[],"help_actions":[]}],` +
		`"cost_estimate":{"status":"unknown","basis":"depends on the sources"}}`
	if got := string(mustMarshal(t, plan)); got != want2 {
		t.Errorf("got %s\nwant %s", got, want2)
	}
	if err := plan.Validate(); err != nil {
		t.Errorf("Validate: %v", err)
	}

	// In an action result, a typed plan has the same shape.
	res := ActionResult{Status: StatusOK, SetupPlan: plan}
	if err := res.Validate(); err != nil {
		t.Errorf("ActionResult.Validate: %v", err)
	}
	if got := string(mustMarshal(t, res)); got != `{"status":"ok","effects":[],"setup_plan":`+want2+`}` {
		t.Errorf("result: %s", got)
	}
}

// A plain-object plan passes as is, byte for byte (key order and unknown keys included), and
// TypedPlan reads it.
func TestSetupPolicyPlainPlan(t *testing.T) {
	in := `{"preview_action":"job.start.preview","start_action":"job.start","submit_action":"step.awaiting.submit","action_scopes":["job","step"],` +
		`"plan":{"title":"Legacy plan","steps":[{"id":"s1","title":"One","help_actions":["x"]}],"z":1,"a":2}}`
	var s JobSetupPolicy
	if err := json.Unmarshal([]byte(in), &s); err != nil {
		t.Fatal(err)
	}
	if got := string(mustMarshal(t, s)); got != in {
		t.Errorf("got %s\nwant %s", got, in)
	}
	p, err := s.TypedPlan()
	if err != nil || len(p.Steps) != 1 || p.Steps[0].HelpActions[0] != "x" || string(p.Extra["title"]) != `"Legacy plan"` {
		t.Errorf("TypedPlan = %+v, %v", p, err)
	}
	// Defaults for absent ids; null plan.
	if err := json.Unmarshal([]byte(`{"plan":null}`), &s); err != nil {
		t.Fatal(err)
	}
	const want = `{"preview_action":"job.start.preview","start_action":"job.start","submit_action":"step.awaiting.submit","action_scopes":[],"plan":null}`
	if got := string(mustMarshal(t, s)); got != want {
		t.Errorf("got %s\nwant %s", got, want)
	}
	if p, err := s.TypedPlan(); p != nil || err != nil {
		t.Errorf("TypedPlan of no plan = %v, %v", p, err)
	}
	// A Go value that is not an object cannot be written.
	if _, err := json.Marshal(JobSetupPolicy{Plan: "steps"}); err == nil || !strings.Contains(err.Error(), "must be a JSON object") {
		t.Errorf("err = %v", err)
	}
	if _, err := (&JobSetupPolicy{Plan: json.RawMessage(`{"steps":"x"}`)}).TypedPlan(); err == nil {
		t.Error("TypedPlan accepted steps as a string")
	}
}

func TestSetupPlanValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		plan SetupPlan
		want []string
	}{
		{"empty plan", SetupPlan{}, nil},
		{"chained dependencies", SetupPlan{Steps: []SetupStep{
			{ID: "a", Title: "A", Fields: []FieldDefinition{{ID: "x", Label: "X"}}},
			{ID: "b", Title: "B", Status: SetupDone, Fields: []FieldDefinition{
				{ID: "y", Label: "Y", DependsOn: &DependsOn{Field: "x", In: []string{"1"}}},
				{ID: "z", Label: "Z", DependsOn: &DependsOn{Field: "y", In: []string{"true"}}},
			}},
		}}, nil},
		{"step problems", SetupPlan{Steps: []SetupStep{
			{Title: "T", HelpActions: []string{""}},
			{ID: "é", Title: strings.Repeat("é", 120), Description: strings.Repeat("é", 300), Status: SetupSkipped},
			{ID: "self", Title: "S", Fields: []FieldDefinition{{ID: "f", Label: "F", DependsOn: &DependsOn{Field: "f", In: []string{"x"}}}}},
		}}, []string{
			"steps[0].id: setup steps must have a non-empty id",
			"steps[0].help_actions[0]: help action ids must be non-empty",
			`steps[2].fields[0]: field "f": depends_on cannot name the field itself`,
		}},
		{"cost estimate", SetupPlan{CostEstimate: &CostEstimate{Status: CostEstimated, Min: ptr(3.0), Max: ptr(1.0)}}, []string{
			"cost_estimate: cost max (1) must be at least min (3)",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.plan.Validate()
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
