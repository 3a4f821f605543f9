package core_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/supervaize/svz/core"
	"github.com/supervaize/svz/core/contract"
	"github.com/supervaize/svz/core/state"
	"github.com/supervaize/svz/core/svztest"
)

// FuzzServedInputs: the inputs of the actions svz serves for an agent (resource.<id>.list,
// artifact.get) come from Studio as any JSON object. Each answers a result, never a JSON-RPC
// error: a success, a refusal with input_* codes, or artifact_not_found; a listing succeeds only
// when every member is one list reads.
func FuzzServedInputs(f *testing.F) {
	a := specAgent(f, contract.RegistrationSpec{
		AgentSlug: "crm", DisplayName: "CRM", A2UICatalogVersion: "crm.1",
		Actions: []contract.ActionSpec{contract.ActionDefinition{ID: contract.ArtifactGetAction, ReadOnly: true}},
		Resources: []contract.ResourceDefinition{{ID: "contacts", Label: "Contacts", Operations: []string{"list"},
			Fields: []contract.ResourceFieldDefinition{{ID: "email", Label: "Email", Required: true}}}},
	})
	core.ServeResource[contact](a, "contacts", "email")
	core.ServeArtifacts(a, func(ctx context.Context, id string) (core.Artifact, error) {
		body, err := state.Of[string](ctx, "reports").Get(ctx, id)
		return core.Artifact{MediaType: "text/plain", Content: body}, err
	})
	h := svztest.New(f, a)
	if err := state.Of[string](h.Context(), "reports").Create(h.Context(), "r1", "report"); err != nil {
		f.Fatal(err)
	}
	for _, s := range []string{`{}`, `{"limit":2,"after":"a","prefix":"b","search":"x"}`, `{"query":"x"}`, `{"Search":"x"}`, `{"limit":-1}`,
		`{"limit":"2"}`, `{"artifact_id":"r1"}`, `{"artifact_id":""}`, `{"artifact_id":7}`, `{"artifact_id":"` + strings.Repeat("é", 600) + `"}`,
		`{"artifact_id":"a/../b","x":null}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, input string) {
		var members map[string]json.RawMessage
		if !utf8.ValidString(input) || json.Unmarshal([]byte(input), &members) != nil || members == nil {
			return // not an object in UTF-8: the envelope's check (-32602), not the action's
		}
		for _, action := range []string{"resource.contacts.list", contract.ArtifactGetAction} {
			resp := h.Call(t, "supervaizer/action.invoke", h.Request(t, action, json.RawMessage(input)))
			var res contract.ActionResult
			if resp.Error != nil || json.Unmarshal(resp.Result, &res) != nil {
				t.Fatalf("%s %s answered %s; want a result", action, input, resp.Body)
			}
			for _, e := range res.Errors {
				if !contract.IsInputError(e.Code) && e.Code != "artifact_not_found" {
					t.Fatalf("%s %s answered %s", action, input, resp.Result)
				}
			}
			if action != contract.ArtifactGetAction && res.Status == contract.StatusOK {
				for m := range members {
					if !slices.Contains([]string{"prefix", "after", "limit", "search"}, m) {
						t.Fatalf("list %s read past member %q: %s", input, m, resp.Result)
					}
				}
			}
		}
	})
}
