package core_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"

	"github.com/supervaize/svz/core"
	"github.com/supervaize/svz/core/contract"
	"github.com/supervaize/svz/core/grant"
)

// The agent of README.md's "Writing an agent", served in local mode and called once.
func Example() {
	reg, err := contract.BuildRegistration(contract.RegistrationSpec{
		AgentSlug:          "my-agent", // must be the slug of the agent's name
		DisplayName:        "My Agent",
		A2UICatalogVersion: "my-agent-ui.1", // bump when your surface documents change
		Surfaces:           []contract.SurfaceSpec{contract.SurfaceID("job.start")},
		Actions:            []contract.ActionSpec{contract.ActionID("job.start")},
	})
	if err != nil {
		panic(err)
	}
	a, err := core.NewAgent(core.AgentConfig{Name: "My Agent", Version: "0.1.0", Registration: reg})
	if err != nil {
		panic(err)
	}
	a.HandleSurface("job.start", core.SurfaceFunc(func(ctx context.Context, r *contract.SurfaceRequest) (*contract.SurfaceResult, error) {
		return &contract.SurfaceResult{Surface: r.Surface, Document: []byte(`{"type":"Form","fields":[{"id":"goal","label":"Goal","type":"string","required":true}],"submit":{"action":"job.start","label":"Start"}}`)}, nil
	}))
	a.HandleAction("job.start", core.ActionFunc(func(ctx context.Context, r *contract.ActionRequest) (*contract.ActionResult, error) {
		var in struct {
			Goal string `json:"goal"`
		}
		if err := r.DecodeInput(&in); err != nil {
			return &contract.ActionResult{Status: contract.StatusError, Errors: []contract.ResultError{{Code: "invalid_input", Message: err.Error()}}}, nil
		}
		// r.WorkspaceAuthorization is the VERIFIED workspace: key your data on its WorkspaceID / GrantID.
		jobID := "new-job"
		if r.JobID != nil {
			jobID = *r.JobID // Studio assigns it before the confirm and resends it on every retry
		}
		return &contract.ActionResult{Status: contract.StatusOK, Effects: []contract.Effect{{Type: "job.started", JobID: jobID, Message: in.Goal}}}, nil
	}))

	ctrl, err := core.New(core.Config{APIKey: "local-dev", Authorizer: grant.LocalBypass{ServerID: "example-server"},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, a)
	if err != nil {
		panic(err)
	}
	defer ctrl.Close()
	req := httptest.NewRequest("POST", "/a2a", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"supervaizer/action.invoke",
		"params":{"request_id":"r1","actor":{"user_id":"me"},"workspace":{"id":"local"},"mission_id":"m1",
		"agent_slug":"my-agent","surface":"job.start","action":"job.start","job_id":"job-1","input":{"goal":"Say hi"}}}`))
	req.Header.Set("X-API-Key", "local-dev")
	rec := httptest.NewRecorder()
	ctrl.ServeHTTP(rec, req)
	fmt.Println(rec.Code, rec.Body.String())
	// Output: 200 {"jsonrpc":"2.0","id":1,"result":{"status":"ok","effects":[{"type":"job.started","job_id":"job-1","message":"Say hi"}]}}
}
