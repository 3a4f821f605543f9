package core

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"

	"github.com/supervaize/svz/core/contract"
	"github.com/supervaize/svz/core/grant"
)

// FuzzHandleRPC feeds arbitrary bodies to the JSON-RPC layer (envelope, wrappers, v2 request
// decoding, dispatch). Every input must give one well-formed JSON-RPC answer with a known code,
// and the handler must only ever see a request the decoder accepted.
func FuzzHandleRPC(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"supervaizer/action.invoke","params":{"request_id":"r","actor":{"user_id":"u"},"workspace":{"id":"w"},"mission_id":"m","agent_slug":"s","surface":"job.start","action":"job.start","input":{"count":2}}}`,
		`{"id":"x","method":"supervaizer/surface.load","params":{"surface_request":{"request_id":"r","actor":{"user_id":"u"},"workspace":{"id":"w","slug":null},"mission_id":"m","agent_slug":"s","surface":"job.start","mission":{"id":"m","metadata":{}}}}}`,
		`{"jsonrpc":"1.0","id":5,"method":"supervaizer/action.invoke","params":[1,2]}`,
		`[{"method":"x"}]`, `42`, `"str"`, `{`, ``, `{"id":7.0,"method":"m"}`, `{"id":1e400,"method":null}`,
		`{"id":9223372036854775808,"method":"m"}`, `{"id":-0,"method":"m"}`, `{"id":9.2233720368547748e18,"method":"m"}`,
		"{\"id\":\"\xff\",\"method\":\"m\"}", `{"id":1,"id":"two","method":"m","params":{"action_request":5}}`, `{"id":true,"method":"m"}`, `{"id":false,"jsonrpc":"1"}`,
	} {
		f.Add([]byte(s))
	}
	reg, err := contract.BuildRegistration(contract.RegistrationSpec{AgentSlug: "s", DisplayName: "S", A2UICatalogVersion: "1",
		Surfaces: []contract.SurfaceSpec{contract.SurfaceID("job.start")}, Actions: []contract.ActionSpec{contract.ActionID("job.start")}})
	if err != nil {
		f.Fatal(err)
	}
	a, err := NewAgent(AgentConfig{Name: "S", Registration: reg})
	if err != nil {
		f.Fatal(err)
	}
	// A panic would be recovered into -32603: a bad request reaching the handler is recorded.
	var unchecked atomic.Pointer[contract.ActionRequest]
	a.HandleAction("job.start", ActionFunc(func(_ context.Context, r *contract.ActionRequest) (*contract.ActionResult, error) {
		if r.AgentSlug != "s" || r.Action != "job.start" || r.WorkspaceAuthorization == nil || r.WorkspaceAuthorization.GrantID != contract.LocalModeGrantID || !json.Valid(r.Input) {
			unchecked.Store(r)
		}
		return &contract.ActionResult{Status: contract.StatusOK}, nil
	}))
	a.HandleSurface("job.start", SurfaceFunc(func(_ context.Context, r *contract.SurfaceRequest) (*contract.SurfaceResult, error) {
		return &contract.SurfaceResult{Surface: r.Surface}, nil
	}))
	c, err := New(Config{APIKey: "k", Authorizer: grant.LocalBypass{ServerID: "SRV"}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, a)
	if err != nil {
		f.Fatal(err)
	}
	codes := map[int]bool{CodeParseError: true, CodeInvalidRequest: true, CodeMethodNotFound: true, CodeInvalidParams: true,
		CodeInternalError: true, CodeActionNotRegistered: true, CodeSurfaceNotRegistered: true, CodeWorkspaceAuthorizationFailed: true}
	f.Fuzz(func(t *testing.T, body []byte) {
		resp := c.handleRPC(context.Background(), body, "", nil)
		if r := unchecked.Swap(nil); r != nil {
			t.Fatalf("the handler received an unchecked request %+v", r)
		}
		out, err := resp.encode()
		if err != nil {
			t.Fatalf("answer does not encode: %v", err)
		}
		var back map[string]json.RawMessage
		if err := json.Unmarshal(out, &back); err != nil || string(back["jsonrpc"]) != `"2.0"` {
			t.Fatalf("malformed answer %s", out)
		}
		if (resp.Result == nil) == (resp.Error == nil) {
			t.Fatalf("answer must hold exactly one of result and error: %s", out)
		}
		if resp.Error != nil && !codes[resp.Error.Code] {
			t.Fatalf("unknown error code %d", resp.Error.Code)
		}
		if id, ok := back["id"]; ok {
			unreadable := resp.Error != nil && (resp.Error.Code == CodeParseError || resp.Error.Code == CodeInvalidRequest)
			switch {
			case string(id) == "null" && !unreadable:
				t.Fatalf("null id on an answer to a readable request: %s", out)
			case string(id) != "null" && (len(id) == 0 || (id[0] != '"' && (id[0] < '0' || id[0] > '9') && id[0] != '-')):
				t.Fatalf("echoed id %s is neither a string nor an integer", id)
			}
		}
	})
}
