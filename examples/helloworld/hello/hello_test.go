package hello

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/supervaize/svz/core/config"
	"github.com/supervaize/svz/internal/golden"
)

const key = "local-dev"

// localController is Hello World as `go run ./cmd/local` serves it, on an in-memory store.
func localController(t testing.TB, extra map[string]string) http.Handler {
	t.Helper()
	env := map[string]string{
		"SUPERVAIZER_LOCAL_MODE": "true",
		"SUPERVAIZER_PUBLIC_URL": "http://127.0.0.1:8000",
		"SUPERVAIZER_SERVER_ID":  "local-server-1",
		"SUPERVAIZER_STORE":      "memory",
	}
	for k, v := range extra {
		env[k] = v
	}
	a, err := NewAgent()
	if err != nil {
		t.Fatal(err)
	}
	c, err := config.NewController(context.Background(), func(k string) string { return env[k] }, slog.New(slog.NewTextHandler(io.Discard, nil)), a)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func call(t testing.TB, h http.Handler, method string, params map[string]any) []byte {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
	req := httptest.NewRequest(http.MethodPost, "/a2a", bytes.NewReader(body))
	req.Header.Set("X-API-Key", key)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	return rec.Body.Bytes()
}

func request(over map[string]any) map[string]any {
	p := map[string]any{
		"request_id": "r1", "actor": map[string]any{"user_id": "me"}, "workspace": map[string]any{"id": "local"},
		"mission_id": "m1", "agent_slug": Slug, "surface": "job.start", "action": "job.start",
	}
	for k, v := range over {
		p[k] = v
	}
	return p
}

// result returns the "result" member of a JSON-RPC answer, failing on an error answer.
func result(t testing.TB, body []byte) []byte {
	t.Helper()
	var resp struct {
		Result json.RawMessage `json:"result"`
		Error  json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal(body, &resp); err != nil || resp.Error != nil {
		t.Fatalf("not a result: %s", body)
	}
	return resp.Result
}

// TestJobStartExample is the exact example of spec §10.
func TestJobStartExample(t *testing.T) {
	h := localController(t, nil)
	got := result(t, call(t, h, "supervaizer/action.invoke", request(map[string]any{"input": map[string]any{"count": 2}, "job_id": "job-1"})))
	want := `{"status":"ok","effects":[{"type":"job.started","job_id":"job-1","status":"completed","message":"Completed 2 cases"}],` +
		`"job_state":{"job":{"id":"job-1","agent_slug":"hello-world-ai-agent","mission_id":"m1","status":"completed","source":{"type":"fresh_start"}},"cases":[` +
		`{"id":"hello-case-1","lane":"work","title":"Hello case 1","status":"completed","metadata":{},"steps":[{"id":"hello-case-1-complete","activity":"operation","status":"completed","title":"Say hello","outputs":[{"id":"hello-case-1-message","type":"message","title":"Hello case 1"}]}]},` +
		`{"id":"hello-case-2","lane":"work","title":"Hello case 2","status":"completed","metadata":{},"steps":[{"id":"hello-case-2-complete","activity":"operation","status":"completed","title":"Say hello","outputs":[{"id":"hello-case-2-message","type":"message","title":"Hello case 2"}]}]}]}}`
	if string(got) != want {
		t.Errorf("job.start\n got: %s\nwant: %s", got, want)
	}
}

// TestPayloads pins every surface and action of Hello World (spec §10, §12.2 case 20).
func TestPayloads(t *testing.T) {
	h := localController(t, nil)
	for _, tc := range []struct {
		golden, method string
		params         map[string]any
	}{
		{"surface_job_start.json", "supervaizer/surface.load", request(map[string]any{"draft_session_id": "draft-7"})},
		{"surface_job_start_no_draft.json", "supervaizer/surface.load", request(nil)},
		{"surface_awaiting.json", "supervaizer/surface.load", request(map[string]any{"surface": "case.step.awaiting", "job_id": "job-1", "case_id": "hello-review-1", "step_id": "human-review"})},
		{"action_preview.json", "supervaizer/action.invoke", request(map[string]any{"action": "job.start.preview", "request_id": "preview-1"})},
		{"action_job_start_default.json", "supervaizer/action.invoke", request(nil)},
		{"action_job_start_review.json", "supervaizer/action.invoke", request(map[string]any{"job_id": "job-2", "input": map[string]any{"count": 3, "enable_human_review": "on"}})},
		{"action_job_sync_completed.json", "supervaizer/action.invoke", request(map[string]any{"action": "job.sync", "job_id": "job-1", "input": map[string]any{"count": "2"}})},
		{"action_job_sync_awaiting.json", "supervaizer/action.invoke", request(map[string]any{"action": "job.sync", "input": map[string]any{"enable_human_review": true}})},
		{"action_submit.json", "supervaizer/action.invoke", request(map[string]any{"action": "step.awaiting.submit", "surface": "case.step.awaiting", "job_id": "job-2", "input": map[string]any{"approved": false}})},
		{"action_submit_defaults.json", "supervaizer/action.invoke", request(map[string]any{"action": "step.awaiting.submit"})},
		{"action_messages_list.json", "supervaizer/action.invoke", request(map[string]any{"action": "resource.hello_messages.list"})},
	} {
		t.Run(tc.golden, func(t *testing.T) {
			golden.JSON(t, tc.golden, result(t, call(t, h, tc.method, tc.params)))
		})
	}
}

// TestDiscoveryDocuments pins the registration, card, list and health of Hello World.
func TestDiscoveryDocuments(t *testing.T) {
	h := localController(t, nil)
	for path, name := range map[string]string{
		"/.well-known/agents.json":                                 "agents.json",
		"/.well-known/agents/v1.0/hello-world-ai-agent_agent.json": "card.json",
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		if rec.Code != 200 {
			t.Fatalf("%s: %d", path, rec.Code)
		}
		golden.JSON(t, name, rec.Body.Bytes())
	}
	reg, err := Registration()
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(reg)
	if err != nil {
		t.Fatal(err)
	}
	golden.JSON(t, "registration.json", b)

	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/.well-known/health", nil))
	var health struct {
		Status string `json:"status"`
		Agents map[string]struct {
			AgentID string `json:"agent_id"`
			Status  string `json:"status"`
		} `json:"agents"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &health); err != nil {
		t.Fatal(err)
	}
	if a := health.Agents["ZbdXaxVurYBVbDcr9cDhXS"]; health.Status != "operational" || a.Status != "available" || a.AgentID != "ZbdXaxVurYBVbDcr9cDhXS" {
		t.Errorf("health %s", rec.Body)
	}
}

// TestLocalMode is spec §12.2 case 18.
func TestLocalMode(t *testing.T) {
	h := localController(t, nil)
	got := result(t, call(t, h, "supervaizer/action.invoke", request(map[string]any{"input": map[string]any{"count": 1}, "job_id": "job-1"})))
	var res struct {
		Status   string `json:"status"`
		JobState struct {
			Job struct {
				ID string `json:"id"`
			} `json:"job"`
		} `json:"job_state"`
	}
	if err := json.Unmarshal(got, &res); err != nil || res.Status != "ok" || res.JobState.Job.ID != "job-1" {
		t.Errorf("job.start: %s", got)
	}
	surf := result(t, call(t, h, "supervaizer/surface.load", request(nil)))
	var s struct {
		Document struct {
			Submit struct {
				Action string `json:"action"`
			} `json:"submit"`
		} `json:"document"`
	}
	if err := json.Unmarshal(surf, &s); err != nil || s.Document.Submit.Action != "job.start" {
		t.Errorf("surface: %s", surf)
	}
	for _, tc := range []struct {
		name   string
		env    map[string]string
		params map[string]any
		want   string
	}{
		{"unknown agent", nil, request(map[string]any{"agent_slug": "nope"}),
			`{"jsonrpc":"2.0","id":1,"error":{"code":-32030,"message":"Unknown agent_slug for workspace authorization: nope","data":{"code":"workspace_authorization_unknown_agent"}}}`},
		{"REQUIRED=false keeps the bypass", map[string]string{"SUPERVAIZER_WORKSPACE_AUTH_REQUIRED": "false", "SUPERVAIZER_WORKSPACE_AUTH_LEEWAY_SECONDS": "10"},
			request(map[string]any{"action": "resource.hello_messages.list"}),
			`{"jsonrpc":"2.0","id":1,"result":{"status":"ok","effects":[{"type":"resource.listed","resource":"hello_messages","items":[{"id":"hello-1","message":"Hello from Supervaizer v2"}]}]}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := call(t, localController(t, tc.env), "supervaizer/action.invoke", tc.params); string(got) != tc.want {
				t.Errorf("\n got: %s\nwant: %s", got, tc.want)
			}
		})
	}
	// A lone issuer switches the bypass off (spec §4.7): the grant package then answers
	// workspace_authorization_not_configured to every call (core/grant tests it); a controller
	// configured from the environment refuses to start that way instead, naming the fix.
	a, err := NewAgent()
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"SUPERVAIZER_LOCAL_MODE": "true", "SUPERVAIZER_STORE": "memory", "SUPERVAIZER_WORKSPACE_AUTH_ISSUER": "https://studio.supervaize.com"}
	if _, err := config.NewController(context.Background(), func(k string) string { return env[k] }, slog.New(slog.DiscardHandler), a); err == nil ||
		!strings.Contains(err.Error(), "SUPERVAIZER_WORKSPACE_AUTH_ISSUER is set but SUPERVAIZER_WORKSPACE_AUTH_REQUIRED is not true") {
		t.Errorf("a lone issuer: %v", err)
	}
}

func TestInputCoercion(t *testing.T) {
	for _, tc := range []struct {
		input  string
		count  int
		review bool
	}{
		{`{}`, 1, false},
		{`{"count":2}`, 2, false},
		{`{"count":2.9}`, 2, false},
		{`{"count":-3}`, 0, false},
		{`{"count":1000}`, 100, false},
		{`{"count":1e2}`, 100, false},
		{`{"count":" 7 "}`, 7, false},
		{`{"count":"+1_0"}`, 10, false},
		{`{"count":"1__0"}`, 1, false},
		{`{"count":"2.5"}`, 1, false},
		{`{"count":"abc"}`, 1, false},
		{`{"count":null}`, 1, false},
		{`{"count":[3]}`, 1, false},
		{`{"count":true}`, 1, false},
		{`{"count":false}`, 0, false},
		{`{"enable_human_review":true}`, 1, true},
		{`{"enable_human_review":"YES"}`, 1, true},
		{`{"enable_human_review":"on"}`, 1, true},
		{`{"enable_human_review":1}`, 1, true},
		{`{"enable_human_review":1.0}`, 1, false},
		{`{"enable_human_review":" yes"}`, 1, false},
		{`{"enable_human_review":false}`, 1, false},
		{`{"enable_human_review":null}`, 1, false},
	} {
		in := inputMembers(json.RawMessage(tc.input))
		if got := boundedCount(in); got != tc.count {
			t.Errorf("count of %s = %d, want %d", tc.input, got, tc.count)
		}
		if got := reviewEnabled(in); got != tc.review {
			t.Errorf("review of %s = %v, want %v", tc.input, got, tc.review)
		}
	}
}

// TestEmptyIDsKept: ids sent empty come back empty in the effect, as the reference copies them
// (request.job_id...), while the job state falls back to its defaults ("" is falsy there too).
func TestEmptyIDsKept(t *testing.T) {
	h := localController(t, nil)
	for _, tc := range []struct {
		params map[string]any
		want   string
	}{
		{request(map[string]any{"action": "step.awaiting.submit", "job_id": "", "case_id": "", "step_id": ""}),
			`{"type":"step.awaiting.submitted","job_id":"","case_id":"","step_id":"","status":"completed"}`},
		{request(map[string]any{"action": "step.awaiting.submit", "job_id": "j", "step_id": ""}),
			`{"type":"step.awaiting.submitted","job_id":"j","step_id":"","status":"completed"}`},
		{request(map[string]any{"action": "job.sync", "job_id": ""}),
			`{"type":"job.synced","job_id":"","status":"completed","message":"Completed"}`},
		{request(map[string]any{"action": "job.sync"}),
			`{"type":"job.synced","status":"completed","message":"Completed"}`},
	} {
		var res struct {
			Effects  []json.RawMessage `json:"effects"`
			JobState struct {
				Job struct {
					ID string `json:"id"`
				} `json:"job"`
			} `json:"job_state"`
		}
		if err := json.Unmarshal(result(t, call(t, h, "supervaizer/action.invoke", tc.params)), &res); err != nil || len(res.Effects) != 1 {
			t.Fatalf("%v: %v", tc.params, err)
		}
		if string(res.Effects[0]) != tc.want {
			t.Errorf("%v\n got %s\nwant %s", tc.params, res.Effects[0], tc.want)
		}
		if res.JobState.Job.ID != "local-v2-job" && tc.params["job_id"] != "j" {
			t.Errorf("job id %q, want the default", res.JobState.Job.ID)
		}
	}
}
