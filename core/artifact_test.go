package core_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/supervaize/svz/core"
	"github.com/supervaize/svz/core/contract"
	"github.com/supervaize/svz/core/grant"
	"github.com/supervaize/svz/core/state"
	"github.com/supervaize/svz/core/svztest"
	"github.com/supervaize/svz/internal/golden"
)

// reportsAgent declares artifact.get; ServeArtifacts serves it from the workspace's "reports".
func reportsAgent(t *testing.T, serve bool) *core.Agent {
	t.Helper()
	a := specAgent(t, contract.RegistrationSpec{AgentSlug: "reports", DisplayName: "Reports", A2UICatalogVersion: "reports.1",
		Actions: []contract.ActionSpec{contract.ActionDefinition{ID: contract.ArtifactGetAction, ReadOnly: true}}})
	if serve {
		core.ServeArtifacts(a, func(ctx context.Context, id string) (core.Artifact, error) {
			if id == "report:broken" {
				return core.Artifact{}, errors.New("the report store is down")
			}
			body, err := state.Of[string](ctx, "reports").Get(ctx, strings.TrimPrefix(id, "report:"))
			art := core.Artifact{Title: "Lead report", MediaType: "text/markdown", Content: body}
			if id == "report:chart" {
				art = core.Artifact{MediaType: "image/png", Content: "iVBORw0KGgo=", Encoding: "base64"}
			}
			return art, err
		})
	}
	return a
}

// TestServeArtifacts pins artifact.get as ServeArtifacts serves it: the content of an artifact
// (artifact.loaded), the missing id, an id the workspace has no artifact for (missing, invalid
// or another workspace's), and a lookup that fails.
func TestServeArtifacts(t *testing.T) {
	h := svztest.New(t, reportsAgent(t, true))
	if err := state.Of[string](h.Context(), "reports").Create(h.Context(), "job-1", "# 3 leads"); err != nil {
		t.Fatal(err)
	}
	if err := state.Of[string](h.Context(), "reports").Create(h.Context(), "chart", ""); err != nil {
		t.Fatal(err)
	}
	res := h.Invoke(t, contract.ArtifactGetAction, map[string]any{"artifact_id": "report:job-1"})
	golden.JSON(t, "artifact_loaded.json", res.JSON)
	res = h.Invoke(t, contract.ArtifactGetAction, map[string]any{"artifact_id": "report:chart"})
	if d := res.Effects[0].Data; len(d) != 3 || d["encoding"] != "base64" || d["media_type"] != "image/png" || d["title"] != nil {
		t.Errorf("binary artifact = %s", res.JSON)
	}
	res = h.Invoke(t, contract.ArtifactGetAction, map[string]any{"artifact_id": "report:job-404"})
	golden.JSON(t, "artifact_not_found.json", res.JSON)
	for _, tc := range []struct {
		id   string
		opts []svztest.Option
	}{
		{"report:" + strings.Repeat("x", 2000), nil},                   // state.ErrInvalid: no record can have it
		{"report:job-1", []svztest.Option{svztest.Workspace("other")}}, // another workspace's
	} {
		res := h.Invoke(t, contract.ArtifactGetAction, map[string]any{"artifact_id": tc.id}, tc.opts...)
		if len(res.Errors) != 1 || res.Errors[0].Code != "artifact_not_found" || res.Errors[0].Field != "artifact_id" || len(res.Effects) != 0 {
			t.Errorf("artifact %.20s = %s", tc.id, res.JSON)
		}
	}
	res = h.Invoke(t, contract.ArtifactGetAction, map[string]any{})
	if b := string(res.JSON); b != `{"status":"error","effects":[],"errors":[{"code":"input_required","message":"Field required","field":"artifact_id"}]}` {
		t.Errorf("no artifact_id = %s", b)
	}
	// A lookup that fails is the agent's failure, not a missing artifact.
	resp := h.Call(t, "supervaizer/action.invoke", h.Request(t, contract.ArtifactGetAction, map[string]any{"artifact_id": "report:broken"}))
	if resp.Error == nil || resp.Error.Code != -32603 || strings.Contains(string(resp.Body), "store is down") {
		t.Errorf("failing lookup = %s", resp.Body)
	}
}

func TestServeArtifactsMistakes(t *testing.T) {
	undeclared := specAgent(t, contract.RegistrationSpec{AgentSlug: "plain", DisplayName: "Plain", A2UICatalogVersion: "p.1"})
	core.ServeArtifacts(undeclared, func(context.Context, string) (core.Artifact, error) { return core.Artifact{}, nil })
	noFunc := reportsAgent(t, false)
	core.ServeArtifacts(noFunc, nil)
	for _, a := range []*core.Agent{undeclared, noFunc} {
		_, err := core.New(core.Config{APIKey: testKey, Authorizer: grant.LocalBypass{}}, a)
		want := `ServeArtifacts needs a lookup function and artifact.get declared in the registration's actions (contract.ActionDefinition{ID: contract.ArtifactGetAction, ReadOnly: true})`
		if err == nil || !strings.Contains(err.Error(), want) || strings.Count(err.Error(), "artifact.get") != 1 {
			t.Errorf("New(%s) = %v\nwant one error: %s", a.Slug(), err, want)
		}
	}
}
