package core_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/supervaize/svz/core"
	"github.com/supervaize/svz/core/contract"
	"github.com/supervaize/svz/core/grant"
	"github.com/supervaize/svz/core/grant/granttest"
	"github.com/supervaize/svz/core/store/memory"
)

// fakeParams counts lookups and answers values or err.
type fakeParams struct {
	calls  atomic.Int32
	slug   string // the agent it serves, p when empty
	values map[string]string
	err    error
}

func (f *fakeParams) AgentParameters(_ context.Context, slug string) (map[string]string, error) {
	f.calls.Add(1)
	if want := f.slug; slug != want && (want != "" || slug != "p") {
		return nil, errors.New("wrong agent " + slug)
	}
	return f.values, f.err
}

// paramAgent is an agent declaring two parameters; its job.start reports what Parameter gives.
func paramAgent(t *testing.T, read string) *core.Agent {
	t.Helper()
	reg, err := contract.BuildRegistration(contract.RegistrationSpec{AgentSlug: "p", DisplayName: "P", A2UICatalogVersion: "p.1",
		Surfaces: []contract.SurfaceSpec{contract.SurfaceID("job.start")},
		Actions:  []contract.ActionSpec{contract.ActionID("job.start"), contract.ActionDefinition{ID: "job.sync", ReadOnly: true, Scope: "job"}}})
	if err != nil {
		t.Fatal(err)
	}
	a, err := core.NewAgent(core.AgentConfig{Name: "P", Registration: reg, Parameters: []contract.Parameter{
		{Name: "GREETING", Description: "shown"}, {Name: "TOKEN", IsSecret: true, IsEnvironment: true},
	}})
	if err != nil {
		t.Fatal(err)
	}
	a.HandleAction("job.start", core.ActionFunc(func(ctx context.Context, req *contract.ActionRequest) (*contract.ActionResult, error) {
		v, ok, err := core.Parameter(ctx, read)
		if err != nil {
			return nil, err
		}
		b, _ := json.Marshal(map[string]any{"value": v, "ok": ok})
		return &contract.ActionResult{Status: contract.StatusOK, Effects: []contract.Effect{{Type: "read", Extra: contract.Extra{"param": b}}}}, nil
	}))
	a.HandleAction("job.sync", core.ActionFunc(func(context.Context, *contract.ActionRequest) (*contract.ActionResult, error) {
		return &contract.ActionResult{Status: contract.StatusOK}, nil
	}))
	return a
}

func paramController(t *testing.T, src core.ParameterSource, read string, logs io.Writer) *core.Controller {
	t.Helper()
	if logs == nil {
		logs = io.Discard
	}
	c, err := core.New(core.Config{APIKey: testKey, ServerID: "SRV-test", Authorizer: grant.LocalBypass{ServerID: "SRV-test"},
		Parameters: src, Logger: slog.New(slog.NewTextHandler(logs, nil))}, paramAgent(t, read))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func TestParameter(t *testing.T) {
	call := func(c *core.Controller, action string) []byte {
		_, body := post(t, c, rpcBody(t, 1, "supervaizer/action.invoke", params(map[string]any{"agent_slug": "p", "action": action})), nil)
		return body
	}
	src := &fakeParams{values: map[string]string{"GREETING": "Bonjour"}}
	c := paramController(t, src, "GREETING", nil)
	// A call that reads no parameter never asks the source.
	call(c, "job.sync")
	if n := src.calls.Load(); n != 0 {
		t.Fatalf("job.sync asked the source %d times", n)
	}
	jsonEq(t, call(c, "job.start"), `{"jsonrpc":"2.0","id":1,"result":{"status":"ok","effects":[{"type":"read","param":{"ok":true,"value":"Bonjour"}}]}}`)

	// Declared without a value.
	jsonEq(t, call(paramController(t, src, "TOKEN", nil), "job.start"),
		`{"jsonrpc":"2.0","id":1,"result":{"status":"ok","effects":[{"type":"read","param":{"ok":false,"value":""}}]}}`)
	// No Studio connection: declared parameters have no value.
	jsonEq(t, call(paramController(t, nil, "GREETING", nil), "job.start"),
		`{"jsonrpc":"2.0","id":1,"result":{"status":"ok","effects":[{"type":"read","param":{"ok":false,"value":""}}]}}`)

	// Undeclared: the handler fails, the log names the parameter, the caller learns nothing.
	var logs strings.Builder
	body := call(paramController(t, src, "NOPE", &logs), "job.start")
	if !strings.Contains(string(body), `"code":-32603`) || !strings.Contains(logs.String(), `agent \"p\" declares no parameter \"NOPE\": add it to AgentConfig.Parameters`) {
		t.Errorf("undeclared: %s\n%s", body, logs.String())
	}
	// A failed lookup fails the call, naming the agent.
	logs.Reset()
	body = call(paramController(t, &fakeParams{err: errors.New("studio: agent lookup: HTTP 503")}, "GREETING", &logs), "job.start")
	if !strings.Contains(string(body), `"code":-32603`) || !strings.Contains(logs.String(), `parameters of agent \"p\": studio: agent lookup: HTTP 503`) {
		t.Errorf("lookup failure: %s\n%s", body, logs.String())
	}
	if _, _, err := core.Parameter(context.Background(), "GREETING"); !errors.Is(err, core.ErrNoCall) {
		t.Errorf("outside a call: %v", err)
	}
}

func TestParametersDeclaration(t *testing.T) {
	reg, _ := contract.BuildRegistration(contract.RegistrationSpec{AgentSlug: "p", DisplayName: "P", A2UICatalogVersion: "p.1"})
	_, err := core.NewAgent(core.AgentConfig{Name: "P", Registration: reg, Parameters: []contract.Parameter{
		{Name: " "}, {Name: "A"}, {Name: "A"}, {Name: "1BAD", IsEnvironment: true}, {Name: "with space", IsEnvironment: true},
	}})
	for _, w := range []string{"parameters: [0].name", "parameter 'A' is declared twice", "environment parameter '1BAD'", "environment parameter 'with space'"} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("%v lacks %q", err, w)
		}
	}
	a := paramAgent(t, "GREETING")
	b, err := json.Marshal(a.RegistrationPayload("studio-1"))
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	_ = json.Unmarshal(b, &got)
	want := `[{"description":"shown","is_environment":false,"is_required":false,"is_secret":false,"name":"GREETING"},{"description":null,"is_environment":true,"is_required":false,"is_secret":true,"name":"TOKEN"}]`
	if ps, _ := json.Marshal(got["parameters_setup"]); string(ps) != want || got["server_agent_id"] != "studio-1" {
		t.Errorf("parameters_setup %s server_agent_id %v", ps, got["server_agent_id"])
	}
}

// TestParameterInDataResource: DataResource callbacks read the agent's parameters like handlers.
func TestParameterInDataResource(t *testing.T) {
	studio := granttest.NewIssuer("k1")
	authz, err := grant.New(context.Background(), grant.Config{ServerID: "SRV",
		Settings: grant.Settings{Required: true, Issuer: dataIssuer, PublicKeyPEM: studio.PublicKeyPEM(), Leeway: grant.DefaultLeeway},
		Options:  []grant.Option{grant.WithClock(func() time.Time { return dataNow })}})
	if err != nil {
		t.Fatal(err)
	}
	a, err := core.NewAgent(core.AgentConfig{Name: agentName, Registration: testRegistration(t), Parameters: []contract.Parameter{{Name: "GREETING"}}})
	if err != nil {
		t.Fatal(err)
	}
	a.AddDataResource(core.DataResource[map[string]any]{Name: "things", List: func(ctx context.Context, _ *core.DataContext) ([]map[string]any, error) {
		v, ok, err := core.Parameter(ctx, "GREETING")
		return []map[string]any{{"id": "1", "greeting": v, "ok": ok}}, err
	}})
	c, err := core.New(core.Config{APIKey: testKey, ServerID: "SRV", Authorizer: authz, StudioAgentIDs: map[string]string{"s": studioAgent},
		Parameters: &fakeParams{slug: "s", values: map[string]string{"GREETING": "Hi"}}, Logger: slog.New(slog.DiscardHandler), Store: memory.New()}, a)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	rec := dreq{method: http.MethodGet, path: "/api/agents/s/data/things/"}.do(t, c, studio.Token(granttest.Valid(dataNow, dataIssuer, "resource.things.list")))
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `"greeting":"Hi","id":"1","ok":true`) {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
}
