package core

import (
	"context"
	"errors"
	"fmt"

	"github.com/supervaize/svz/core/contract"
	"github.com/supervaize/svz/core/state"
)

// Artifact is the content of one of the agent's artifacts, as artifact.get answers it.
type Artifact struct {
	// Title, when set, names the content.
	Title string
	// MediaType is the content's media type, e.g. "text/markdown", "text/csv".
	MediaType string
	// Content is the content itself: text, or base64 with Encoding "base64".
	Content  string
	Encoding string
}

// ServeArtifacts serves artifact.get, which the agent declares (contract.ActionDefinition{ID:
// contract.ArtifactGetAction, ReadOnly: true}), from get: the content of the artifact id its
// steps' outputs name (contract.ArtifactRef.ID), in the call's workspace (ctx is a handler's:
// package state reads that workspace's records).
//
//	{"artifact_id"} → artifact.loaded {artifact_id, data: {title, media_type, encoding, content}}
//
// artifact_id is required (input_required before get runs). get returns an error wrapping
// state.ErrNotFound (what a state lookup returns for a missing record) or state.ErrInvalid (an id
// no record can have) for an id the agent has no artifact for: the answer is then status "error",
// artifact_not_found naming artifact_id. Any other error fails the call (-32603, logged).
func ServeArtifacts(a *Agent, get func(ctx context.Context, id string) (Artifact, error)) {
	if !a.declaresAction(contract.ArtifactGetAction) || get == nil {
		a.errs = append(a.errs, fmt.Errorf("agent %q: ServeArtifacts needs a lookup function and artifact.get declared in the registration's actions (contract.ActionDefinition{ID: contract.ArtifactGetAction, ReadOnly: true})", a.slug))
		return
	}
	a.DeclareInput(contract.ArtifactGetAction, []contract.FieldDefinition{{ID: "artifact_id", Label: "Artifact", Type: contract.FieldResourceRef, Required: true}})
	a.HandleAction(contract.ArtifactGetAction, ActionFunc(func(ctx context.Context, req *contract.ActionRequest) (*contract.ActionResult, error) {
		var in struct {
			ArtifactID string `json:"artifact_id"`
		}
		if err := req.DecodeInput(&in); err != nil {
			return nil, err
		}
		art, err := get(ctx, in.ArtifactID)
		switch {
		case errors.Is(err, state.ErrNotFound) || errors.Is(err, state.ErrInvalid):
			return failedField("artifact_not_found", "artifact_id", fmt.Sprintf("No artifact %q in this workspace", in.ArtifactID)), nil
		case err != nil:
			return nil, fmt.Errorf("artifact.get %q: %w", in.ArtifactID, err)
		}
		data := map[string]any{"media_type": art.MediaType, "content": art.Content}
		for k, v := range map[string]string{"title": art.Title, "encoding": art.Encoding} {
			if v != "" {
				data[k] = v
			}
		}
		return contract.OK(contract.Effect{Type: contract.EffectArtifactLoaded, ArtifactID: in.ArtifactID, Data: data}), nil
	}))
}

// failedField is the business failure code of the request's field (recorded like any answer,
// unlike a refusal): artifact_not_found, step_not_found...
func failedField(code, field, msg string) *contract.ActionResult {
	res := contract.Fail(code, msg)
	res.Errors[0].Field = field
	return res
}
