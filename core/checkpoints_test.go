//go:build !svz_nostudio

package core_test

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/supervaize/svz/core"
	"github.com/supervaize/svz/core/contract"
	"github.com/supervaize/svz/core/grant"
	"github.com/supervaize/svz/core/store/memory"
	"github.com/supervaize/svz/internal/syncbuf"
)

// TestRuleCheckpointWiring: rule.checkpoint.resume is served for agents that declare rule
// checkpoints (a resume is a normal action: here, with its bad input, an input error),
// never for others (-32010); defining steps without declaring them, or serving the resume
// yourself, stops New.
func TestRuleCheckpointWiring(t *testing.T) {
	var logs syncbuf.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	a, _ := governedAgent(t, true, false)
	s := memory.New()
	t.Cleanup(func() { _ = s.Close() })
	c, err := core.New(core.Config{APIKey: testKey, Authorizer: grant.LocalBypass{ServerID: "srv"}, Store: s, Logger: log}, a)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if !strings.Contains(logs.String(), "agent declares rule checkpoints but the controller has no Studio connection") {
		t.Errorf("no warning at start:\n%s", logs.String())
	}
	call := func(action string, input string, _ string) map[string]any { return invokeGov(t, c, action, input) }
	out := call(contract.RuleCheckpointResumeAction, `{"checkpoint_id":"chk-1","occurrence_id":"o","phase":"before","status":"pause",`+
		`"snapshot_hash":"h","input_hash":"i","decision_id":"d"}`, "j1")
	got, _ := json.Marshal(out)
	jsonEq(t, got, `{"jsonrpc":"2.0","id":1,"result":{"status":"error","effects":[],"errors":[{"code":"input_option","field":"status",`+
		`"message":"rule.checkpoint.resume: input.status must be allow or stop: a pause is not a decision (the checkpoint keeps waiting)"}]}}`)
	// A resume without its members is the caller's mistake, said member by member: an input
	// error, not the -32603 of a failed handler.
	out = call(contract.RuleCheckpointResumeAction, `{"phase":"during","decision_id":"d","status":7}`, "j1")
	got, _ = json.Marshal(out)
	jsonEq(t, got, `{"jsonrpc":"2.0","id":1,"result":{"status":"error","effects":[],"errors":[`+
		`{"code":"input_required","field":"checkpoint_id","message":"rule.checkpoint.resume: input.checkpoint_id is required"},`+
		`{"code":"input_required","field":"occurrence_id","message":"rule.checkpoint.resume: input.occurrence_id is required"},`+
		`{"code":"input_type","field":"status","message":"rule.checkpoint.resume: input.status must be a string"},`+
		`{"code":"input_required","field":"snapshot_hash","message":"rule.checkpoint.resume: input.snapshot_hash is required"},`+
		`{"code":"input_required","field":"input_hash","message":"rule.checkpoint.resume: input.input_hash is required"},`+
		`{"code":"input_option","field":"phase","message":"rule.checkpoint.resume: input.phase must be before or after"}]}}`)
	// A governed job without a Studio connection is refused, naming the fix; the token stays out.
	out = call("job.start", `{"rule_snapshot":{"hash":"h","checkpoint_url":"u","version":1,"checkpoint_token":"tok-SECRET-1"}}`, "j1")
	got, _ = json.Marshal(out)
	jsonEq(t, got, `{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"Action handler failed","data":{"agent_slug":"gov","action":"job.start"}}}`)
	if !strings.Contains(logs.String(), "local mode never calls Studio") || strings.Contains(logs.String(), "tok-SECRET-1") {
		t.Errorf("logs:\n%s", logs.String())
	}

	plain, _ := governedAgent(t, false, false)
	if _, err := core.New(core.Config{APIKey: testKey, Authorizer: grant.LocalBypass{ServerID: "srv"}}, plain); err == nil ||
		!strings.Contains(err.Error(), `guarded step "send": the agent's registration declares no rule_checkpoints`) {
		t.Errorf("steps without rule checkpoints: %v", err)
	}
	own, _ := governedAgent(t, true, true)
	if _, err := core.New(core.Config{APIKey: testKey, Authorizer: grant.LocalBypass{ServerID: "srv"}}, own); err == nil ||
		!strings.Contains(err.Error(), "svz serves rule.checkpoint.resume for agents that declare rule_checkpoints: remove its handler") {
		t.Errorf("a handler of its own: %v", err)
	}
}

// TestNoResumeWithoutRuleCheckpoints: an agent that declares none neither announces nor serves
// the resume action.
func TestNoResumeWithoutRuleCheckpoints(t *testing.T) {
	c := newController(t, core.Config{}, handlers{})
	body := `{"jsonrpc":"2.0","id":1,"method":"supervaizer/action.invoke","params":{"request_id":"r","actor":{"user_id":"u"},` +
		`"workspace":{"id":"w"},"mission_id":"m","agent_slug":"s","surface":"job.start","action":"rule.checkpoint.resume","input":{}}}`
	r := httptest.NewRequest(http.MethodPost, "/a2a", strings.NewReader(body))
	r.Header.Set("X-API-Key", testKey)
	w := httptest.NewRecorder()
	c.ServeHTTP(w, r)
	want := `{"jsonrpc":"2.0","id":1,"error":{"code":-32010,"message":"Action handler not registered: rule.checkpoint.resume","data":{"action":"rule.checkpoint.resume","agent_slug":"s"}}}`
	if w.Body.String() != want {
		t.Errorf("got  %s\nwant %s", w.Body, want)
	}
}
