package core_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/supervaize/svz/core"
	"github.com/supervaize/svz/core/contract"
	"github.com/supervaize/svz/core/grant"
)

// TestIDsEchoedExactly: the reference reads id as str | int | None with Python integers, which
// have no size limit, with pydantic's float rule (an integral float strictly between -2^63 and
// 2^63) and its lax bool rule (true is 1, false 0). Answers are compared byte for byte: a float conversion would show.
func TestIDsEchoedExactly(t *testing.T) {
	c := newController(t, core.Config{}, handlers{})
	for _, tc := range []struct{ id, want string }{
		{`9223372036854775807`, `9223372036854775807`},
		{`9223372036854775808`, `9223372036854775808`}, // 2^63
		{`18446744073709551616`, `18446744073709551616`},
		{`1000000000000000000000000000000`, `1000000000000000000000000000000`}, // 10^30
		{`-9223372036854775809`, `-9223372036854775809`},
		{`-0`, `0`},
		{`0`, `0`},
		{`"9223372036854775808"`, `"9223372036854775808"`},
		{`"\u00e9t\u00e9"`, `"\u00e9t\u00e9"`}, // a string as sent
		{`7.0`, `7`},
		{`1e2`, `100`},
		{`-0.0`, `0`},
		{`4.5E1`, `45`},
		{`9.2233720368547748e18`, `9223372036854774784`}, // the largest double below 2^63
		{`-9.2233720368547748e18`, `-9223372036854774784`},
		{`true`, `1`}, // pydantic's lax int takes a bool
		{`false`, `0`},
	} {
		t.Run(tc.id, func(t *testing.T) {
			_, body := post(t, c, []byte(`{"jsonrpc":"2.0","id":`+tc.id+`,"method":"missing.method"}`), nil)
			want := `{"jsonrpc":"2.0","id":` + tc.want + `,"error":{"code":-32601,"message":"Method not found: missing.method"}}`
			if string(body) != want {
				t.Errorf("\n got: %s\nwant: %s", body, want)
			}
		})
	}
	// Numbers pydantic refuses as an int: the id is not echoed, the envelope is invalid.
	for _, id := range []string{`9223372036854775807.0`, `9.223372036854775808e18`, `1e19`, `-9.223372036854775808e18`, `1e30`, `1e400`, `1.5`, `1e-400`} {
		t.Run(id, func(t *testing.T) {
			_, body := post(t, c, []byte(`{"jsonrpc":"2.0","id":`+id+`,"method":"missing.method"}`), nil)
			want := `{"jsonrpc":"2.0","error":{"code":-32602,"message":"Invalid JSON-RPC request","data":{"errors":[{"type":"id_type","loc":["id"],"msg":"Input should be a valid string or integer"}]}}}`
			if id == `1e-400` { // underflows to 0.0: an integral float
				want = `{"jsonrpc":"2.0","id":0,"error":{"code":-32601,"message":"Method not found: missing.method"}}`
			}
			if string(body) != want {
				t.Errorf("\n got: %s\nwant: %s", body, want)
			}
		})
	}
}

// TestInvalidUTF8IsAParseError: bytes that are not UTF-8, anywhere in the body, are refused as
// a parse error; they are never read as U+FFFD (two different bodies would then look the same to
// the idempotency fingerprint).
func TestInvalidUTF8IsAParseError(t *testing.T) {
	ran := 0
	c := newController(t, core.Config{}, handlers{actions: map[string]core.ActionFunc{
		"job.start": func(context.Context, *contract.ActionRequest) (*contract.ActionResult, error) {
			ran++
			return &contract.ActionResult{Status: contract.StatusOK}, nil
		},
	}})
	good := string(rpcBody(t, 1, actionInvoke, params(map[string]any{"input": map[string]any{"name": "é"}})))
	if _, body := post(t, c, []byte(good), nil); !strings.Contains(string(body), `"result"`) || ran != 1 {
		t.Fatalf("the valid body was not served: %s", body)
	}
	parseError := `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}`
	for name, body := range map[string]string{
		"in the input":         strings.Replace(good, "é", "\xe9", 1),
		"in the method":        `{"jsonrpc":"2.0","id":1,"method":"supervaizer/action.invoke\xff"}`,
		"in an unknown member": strings.Replace(good, `{"action"`, `{"x":"\xc3\x28","action"`, 1),
		"a surrogate half":     strings.Replace(good, "é", "\xed\xa0\x80", 1),
		"truncated sequence":   strings.Replace(good, "é", "\xc3", 1),
		"overlong encoding":    strings.Replace(good, "é", "\xc0\xaf", 1),
		"in a member name":     strings.Replace(good, `"input"`, "\"inp\xffut\"", 1),
		// Python's json.loads takes these; they are not JSON (RFC 8259).
		"a byte order mark": "\xef\xbb\xbf" + good,
		"NaN":               strings.Replace(good, `"é"`, `NaN`, 1),
		"Infinity":          strings.Replace(good, `"é"`, `-Infinity`, 1),
	} {
		t.Run(name, func(t *testing.T) {
			status, got := post(t, c, []byte(body), nil)
			if status != http.StatusOK || string(got) != parseError {
				t.Errorf("%d %s, want %s", status, got, parseError)
			}
		})
	}
	if ran != 1 {
		t.Fatalf("the handler ran %d times", ran)
	}
}

// TestRequestMemberTypes: a member of a model type that is not an object gets pydantic's
// model_type error naming the model; a caller-sent workspace_authorization is validated like any
// typed member (then discarded).
func TestRequestMemberTypes(t *testing.T) {
	var seen *contract.ActionRequest
	c := newController(t, core.Config{}, handlers{actions: map[string]core.ActionFunc{
		"job.start": func(_ context.Context, r *contract.ActionRequest) (*contract.ActionResult, error) {
			seen = r
			return &contract.ActionResult{Status: contract.StatusOK}, nil
		},
	}})
	invalid := func(kind string, errs string) string {
		return `{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"Invalid Supervaizer v2 ` + kind + ` request","data":{"errors":[` + errs + `]}}}`
	}
	model := func(loc, model string) string {
		return `{"type":"model_type","loc":[` + loc + `],"msg":"Input should be a valid dictionary or instance of ` + model + `"}`
	}
	missing := func(loc string) string { return `{"type":"missing","loc":[` + loc + `],"msg":"Field required"}` }
	wa := `"workspace_authorization"`
	for _, tc := range []struct {
		name   string
		method string
		params any
		want   string
	}{
		{"actor a string", actionInvoke, params(map[string]any{"actor": "user-1"}), invalid("action", model(`"actor"`, "V2ActorContext"))},
		{"workspace a number", actionInvoke, params(map[string]any{"workspace": 5}), invalid("action", model(`"workspace"`, "V2WorkspaceContext"))},
		{"workspace null", surfaceLoad, params(map[string]any{"workspace": json.RawMessage("null")}), invalid("surface", model(`"workspace"`, "V2WorkspaceContext"))},
		{"mission a list", actionInvoke, params(map[string]any{"mission": []any{}}), invalid("action", model(`"mission"`, "V2MissionContext"))},
		{"wrapped request not an object", actionInvoke, map[string]any{"action_request": 5}, invalid("action", `{"type":"model_type","loc":[],"msg":"Input should be a valid dictionary or instance of V2ActionRequest"}`)},
		{"wrapped surface request not an object", surfaceLoad, map[string]any{"surface_request": "x"}, invalid("surface", `{"type":"model_type","loc":[],"msg":"Input should be a valid dictionary or instance of V2SurfaceRequest"}`)},
		{"workspace_authorization a string", actionInvoke, params(map[string]any{"workspace_authorization": "eyJhbGciOiJFZERTQSJ9.e30.AA"}),
			invalid("action", model(wa, "V2VerifiedWorkspaceContext"))},
		{"workspace_authorization a number", surfaceLoad, params(map[string]any{"workspace_authorization": 7}),
			invalid("surface", model(wa, "V2VerifiedWorkspaceContext"))},
		{"workspace_authorization incomplete", actionInvoke, params(map[string]any{"workspace_authorization": map[string]any{"grant_id": "g"}}),
			invalid("action", missing(wa+`,"workspace_id"`)+","+missing(wa+`,"agent_id"`)+","+missing(wa+`,"agent_slug"`)+","+missing(wa+`,"server_id"`))},
		{"workspace_authorization mistyped members", actionInvoke, params(map[string]any{"workspace_authorization": map[string]any{
			"grant_id": 1, "workspace_id": "w", "workspace_slug": 2, "agent_id": "a", "agent_slug": "s", "server_id": "SRV", "scopes": []any{"x", 3}}}),
			invalid("action", `{"type":"string_type","loc":[`+wa+`,"grant_id"],"msg":"Input should be a valid string"},`+
				`{"type":"string_type","loc":[`+wa+`,"workspace_slug"],"msg":"Input should be a valid string"},`+
				`{"type":"string_type","loc":[`+wa+`,"scopes",1],"msg":"Input should be a valid string"}`)},
		{"workspace_authorization scopes not a list", actionInvoke, params(map[string]any{"workspace_authorization": map[string]any{
			"grant_id": "g", "workspace_id": "w", "agent_id": "a", "agent_slug": "s", "server_id": "SRV", "scopes": "job.start"}}),
			invalid("action", `{"type":"list_type","loc":[`+wa+`,"scopes"],"msg":"Input should be a valid list"}`)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			seen = nil
			_, body := post(t, c, rpcBody(t, 1, tc.method, tc.params), nil)
			jsonEq(t, body, tc.want)
			if seen != nil {
				t.Fatal("the handler ran")
			}
		})
	}
	// A well-typed one (or null) is accepted and never reaches the handler.
	for _, v := range []any{json.RawMessage("null"), map[string]any{"grant_id": "forged", "workspace_id": "workspace-1", "agent_id": "x",
		"agent_slug": "s", "server_id": "SRV", "scopes": []string{"*"}}} {
		seen = nil
		_, body := post(t, c, rpcBody(t, 1, actionInvoke, params(map[string]any{"workspace_authorization": v})), nil)
		if seen == nil || seen.WorkspaceAuthorization == nil || seen.WorkspaceAuthorization.GrantID != contract.LocalModeGrantID {
			t.Fatalf("handler context %+v: %s", seen, body)
		}
	}
}

// TestSeedResultRules: seed 000's rules on results, each answered as an invalid result (-32603,
// nothing of the handler's value leaked).
func TestSeedResultRules(t *testing.T) {
	list := contract.FieldDefinition{ID: "rows", Label: "Rows", Type: contract.FieldList,
		ItemFields: []contract.FieldDefinition{{ID: "name", Label: "Name"}, {ID: "email", Label: "Email"}}}
	awaiting := func(f contract.FieldDefinition) *contract.ActionResult {
		return &contract.ActionResult{Status: contract.StatusOK, JobState: &contract.JobState{
			Job: contract.Job{ID: "j", AgentSlug: "s", MissionID: "mission-1", Status: "awaiting", Source: contract.JobSource{Type: contract.SourceFreshStart}},
			Cases: []contract.Case{{ID: "c", Steps: []contract.Step{{ID: "st", Activity: contract.ActivityOperation, Status: "awaiting",
				Awaiting: &contract.Awaiting{Reason: "review", Surface: "case.step.detail", Action: "job.stop", Fields: []contract.FieldDefinition{f}}}}}},
		}}
	}
	withDefault := func(v any) contract.FieldDefinition { f := list; f.Default = v; return f }
	draft := func(s ...contract.Suggestion) *contract.ActionResult {
		return &contract.ActionResult{Status: contract.StatusOK, Draft: &contract.FieldDraft{Field: "goal", Suggestions: s}}
	}
	for _, tc := range []struct {
		name string
		res  *contract.ActionResult
		ok   bool
	}{
		{"option with value and label", awaiting(contract.FieldDefinition{ID: "m", Label: "M", Type: contract.FieldSelect,
			Options: []contract.FieldOption{{Value: "fast", Label: "Fast"}}}), true},
		{"option without label", awaiting(contract.FieldDefinition{ID: "m", Label: "M", Type: contract.FieldSelect,
			Options: []contract.FieldOption{{Value: "fast"}}}), false},
		{"option without value", awaiting(contract.FieldDefinition{ID: "m", Label: "M", Type: contract.FieldSelect,
			Options: []contract.FieldOption{{Label: "Fast"}}}), false},
		{"list default keyed by item fields", awaiting(withDefault([]map[string]any{{"name": "Ann", "email": "a@x"}, {"name": "Bo"}})), true},
		{"list default empty", awaiting(withDefault([]any{})), true},
		{"list default free text", awaiting(withDefault("Ann, a@x")), false},
		{"list default a list of strings", awaiting(withDefault([]string{"Ann"})), false},
		{"list default with an unknown key", awaiting(withDefault([]map[string]any{{"name": "Ann", "phone": "1"}})), false},
		{"list default an object", awaiting(withDefault(map[string]any{"name": "Ann"})), false},
		{"suggestion with a message", draft(contract.Suggestion{Message: "Shorter?", Severity: contract.SeverityInfo}), true},
		{"suggestion without a message", draft(contract.Suggestion{Severity: contract.SeverityWarning}), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newController(t, core.Config{}, handlers{actions: map[string]core.ActionFunc{"job.start": okAction(tc.res)}})
			_, body := post(t, c, rpcBody(t, 1, actionInvoke, params(nil)), nil)
			if tc.ok {
				if !strings.Contains(string(body), `"result"`) {
					t.Fatalf("refused: %s", body)
				}
				return
			}
			jsonEq(t, body, `{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"Action handler failed","data":{"agent_slug":"s","action":"job.start"}}}`)
		})
	}

	// A surface result needs its document (the reference would default it to {}; the seed wins).
	for name, res := range map[string]*contract.SurfaceResult{
		"no document":   {Surface: "job.start"},
		"null document": {Surface: "job.start", Document: json.RawMessage("null")},
		"text document": {Surface: "job.start", Document: json.RawMessage(`"Form"`)},
	} {
		t.Run(name, func(t *testing.T) {
			c := newController(t, core.Config{}, handlers{surfaces: map[string]core.SurfaceFunc{
				"job.start": func(context.Context, *contract.SurfaceRequest) (*contract.SurfaceResult, error) { return res, nil },
			}})
			_, body := post(t, c, rpcBody(t, 1, surfaceLoad, params(nil)), nil)
			jsonEq(t, body, `{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"Surface handler failed","data":{"agent_slug":"s","surface":"job.start"}}}`)
		})
	}
}

// TestDraftForListField: a help action's draft value for a list field of the setup plan must be
// a list of objects keyed by the field's item fields (seed 000, "never free text").
func TestDraftForListField(t *testing.T) {
	reg, err := contract.BuildRegistration(contract.RegistrationSpec{
		AgentSlug: "s", DisplayName: "S", A2UICatalogVersion: "s.1",
		Surfaces: []contract.SurfaceSpec{contract.SurfaceID("job.start")},
		Actions: []contract.ActionSpec{contract.ActionID("job.start"),
			contract.ActionDefinition{ID: "rows.suggest", ReadOnly: true, Kind: contract.KindHelp, TargetField: "rows"}},
		JobPolicy: &contract.JobPolicy{Setup: &contract.JobSetupPolicy{Plan: &contract.SetupPlan{Steps: []contract.SetupStep{{
			ID: "scope", Title: "Scope", HelpActions: []string{"rows.suggest"},
			Fields: []contract.FieldDefinition{{ID: "rows", Label: "Rows", Type: contract.FieldList,
				ItemFields: []contract.FieldDefinition{{ID: "name", Label: "Name"}}}, {ID: "goal", Label: "Goal"}},
		}}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		draft contract.FieldDraft
		ok    bool
	}{
		{"list of objects", contract.FieldDraft{Field: "rows", Value: []any{map[string]any{"name": "Ann"}}}, true},
		{"a pure check (no value)", contract.FieldDraft{Field: "rows"}, true},
		{"free text", contract.FieldDraft{Field: "rows", Value: "Ann, Bo"}, false},
		{"unknown item key", contract.FieldDraft{Field: "rows", Value: []any{map[string]any{"nom": "Ann"}}}, false},
		{"text field takes text", contract.FieldDraft{Field: "goal", Value: "Grow"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, err := core.NewAgent(core.AgentConfig{Name: "S", Registration: reg})
			if err != nil {
				t.Fatal(err)
			}
			d := tc.draft
			a.HandleAction("rows.suggest", okAction(&contract.ActionResult{Status: contract.StatusOK, Draft: &d}))
			c, err := core.New(core.Config{APIKey: testKey, Authorizer: grant.LocalBypass{ServerID: "SRV-test"}, Logger: slog.New(slog.DiscardHandler)}, a)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = c.Close() })
			_, body := post(t, c, rpcBody(t, 1, actionInvoke, params(map[string]any{"action": "rows.suggest"})), nil)
			if tc.ok != strings.Contains(string(body), `"result"`) {
				t.Fatalf("ok=%v: %s", tc.ok, body)
			}
		})
	}
}
