package grant_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/supervaize/svz/core/grant"
)

// TestDataResourceCalls: a DataResource call requires exactly its resource scope, and the
// local-mode bypass refuses it as not configured (spec §4.7: data routes never bypass).
func TestDataResourceCalls(t *testing.T) {
	call := grant.Call{Method: grant.MethodDataResource, Target: "resource.notes.list", AgentSlug: "s",
		Agent: &grant.Agent{Slug: "s", ID: "id-s"}}
	if got := call.RequiredScopes(); !slices.Equal(got, []string{"resource.notes.list"}) {
		t.Errorf("scopes %v", got)
	}
	a2a := grant.Call{Method: grant.MethodActionInvoke, Target: "job.start"}
	if got := a2a.RequiredScopes(); !slices.Equal(got, []string{grant.MethodActionInvoke, "job.start"}) {
		t.Errorf("a2a scopes %v", got)
	}
	// A stream's token needs the events scope alone, whatever the target.
	events := grant.Call{Method: grant.MethodEvents, Target: "ignored"}
	if got := events.RequiredScopes(); !slices.Equal(got, []string{"supervaizer/events"}) {
		t.Errorf("events scopes %v", got)
	}
	vctx, err := grant.LocalBypass{ServerID: "SRV"}.Authorize(context.Background(), call)
	ge, ok := errors.AsType[*grant.Error](err)
	if vctx != nil || !ok || ge.Code != grant.CodeNotConfigured || ge.Message != grant.MsgNotConfigured {
		t.Fatalf("local bypass: %v %v", vctx, err)
	}
}
