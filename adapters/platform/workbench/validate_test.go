package workbench_test

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

	"github.com/supervaize/svz/adapters/platform/workbench"
	"github.com/supervaize/svz/examples/helloworld/hello"
)

// helloDocuments returns Hello World's agent info payload and Agent Card as its controller
// serves them.
func helloDocuments(t testing.TB) (info, card []byte) {
	t.Helper()
	env := map[string]string{"SUPERVAIZER_STORE": "memory", "SUPERVAIZER_API_KEY": "k", "SUPERVAIZER_PUBLIC_URL": "http://127.0.0.1:8000"}
	h, err := hello.Build(context.Background(), func(k string) string { return env[k] }, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if c, ok := h.(io.Closer); ok {
		t.Cleanup(func() { c.Close() })
	}
	get := func(path string) []byte {
		req := httptest.NewRequest("GET", path, nil)
		req.Header.Set("X-API-Key", "k")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != 200 {
			t.Fatalf("GET %s: %d %s", path, w.Code, w.Body)
		}
		return w.Body.Bytes()
	}
	return get("/api/supervaizer/agents/" + hello.Slug + "/"), get("/.well-known/agents/v" + hello.Version + "/" + hello.Slug + "_agent.json")
}

// edit decodes doc, applies change and encodes it again.
func edit(t testing.TB, doc []byte, change func(m map[string]any)) []byte {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(doc, &m); err != nil {
		t.Fatal(err)
	}
	change(m)
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestValidate(t *testing.T) {
	info, card := helloDocuments(t)
	v2 := func(m map[string]any) map[string]any { return m["supervaizer_v2"].(map[string]any) }
	cardV2 := func(m map[string]any) map[string]any { return m["supervaizer"].(map[string]any)["v2"].(map[string]any) }
	for _, c := range []struct {
		name       string
		info, card []byte
		want       string
	}{
		{"Hello World", info, card, `{"valid":true,"problems":[]}`},
		{"info only", info, nil, `{"valid":true,"problems":[]}`},
		{"nothing", nil, []byte("null"), `{"valid":true,"problems":[]}`},
		{"empty name, other slug", edit(t, info, func(m map[string]any) { m["name"] = " "; m["slug"] = "other" }), nil,
			`{"valid":false,"problems":[{"source":"info","path":"name","message":"String should have at least 1 character"},` +
				`{"source":"info","path":"supervaizer_v2.agent.slug","message":"Supervaizer v2 registration agent.slug must match Agent.slug: 'hello-world-ai-agent' != 'other'"}]}`},
		{"bad action scope in both", edit(t, info, func(m map[string]any) {
			v2(m)["capabilities"].(map[string]any)["actions"].([]any)[0].(map[string]any)["scope"] = "planet"
		}), edit(t, card, func(m map[string]any) {
			cardV2(m)["capabilities"].(map[string]any)["actions"].([]any)[0].(map[string]any)["scope"] = "planet"
		}),
			`{"valid":false,"problems":[{"source":"info","path":"supervaizer_v2.capabilities.actions[0].scope","message":"Input should be 'workspace', 'mission' or 'job'"},` +
				`{"source":"card","path":"supervaizer.v2.capabilities.actions[0].scope","message":"Input should be 'workspace', 'mission' or 'job'"}]}`},
		{"card differs", info, edit(t, card, func(m map[string]any) { cardV2(m)["versions"].(map[string]any)["a2ui_catalog_version"] = "other.1" }),
			`{"valid":false,"problems":[{"source":"card","path":"supervaizer.v2","message":"The Agent Card's registration differs from the agent info route's supervaizer_v2"}]}`},
		{"card without v2", info, edit(t, card, func(m map[string]any) { delete(m, "supervaizer") }),
			`{"valid":false,"problems":[{"source":"card","path":"supervaizer.v2","message":"The Agent Card carries no Supervaizer v2 registration"}]}`},
		{"v1 agent", edit(t, info, func(m map[string]any) { m["supervaizer_v2"] = nil }), nil,
			`{"valid":false,"problems":[{"source":"info","path":"supervaizer_v2","message":"The agent declares no Supervaizer v2 registration: Studio cannot drive it over /a2a"}]}`},
		{"info of the wrong shape", []byte(`{"name": 3}`), nil,
			`{"valid":false,"problems":[{"source":"info","path":"","message":"The agent info is not a registration payload: name must be a string, not number"}]}`},
		{"info not an object", []byte(`"info"`), nil,
			`{"valid":false,"problems":[{"source":"info","path":"","message":"The agent info is not a registration payload: decode agent registration: expected a JSON object"}]}`},
		{"card not an object", nil, []byte(`[1]`),
			`{"valid":false,"problems":[{"source":"card","path":"","message":"The Agent Card is not a JSON object"}]}`},
		{"card extension not an object", nil, []byte(`{"supervaizer":"v2"}`),
			`{"valid":false,"problems":[{"source":"card","path":"supervaizer","message":"The Agent Card's supervaizer member is not a JSON object"}]}`},
		{"card registration of the wrong shape", nil, []byte(`{"supervaizer":{"v2":{"capabilities":[]}}}`),
			`{"valid":false,"problems":[{"source":"card","path":"supervaizer.v2","message":"The registration is not a registration block: decode registration: decode capabilities: expected a JSON object"}]}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := json.Marshal(workbench.Validate(c.info, c.card))
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != c.want {
				t.Errorf("\n got %s\nwant %s", got, c.want)
			}
		})
	}
}

// TestValidateRoute: POST /manage/api/validate decodes {info, card}, and refuses anything else
// with a reason.
func TestValidateRoute(t *testing.T) {
	info, card := helloDocuments(t)
	h := workbench.New(controllerStub, workbench.Config{APIKey: "local-dev", Log: quiet})
	body, _ := json.Marshal(map[string]json.RawMessage{"info": info, "card": card})
	for _, c := range []struct {
		name, ctype string
		body        []byte
		status      int
		want        string
	}{
		{"valid", "application/json", body, 200, `{"valid":true,"problems":[]}`},
		{"charset", "application/json; charset=utf-8", []byte(`{}`), 200, `{"valid":true,"problems":[]}`},
		{"form post", "text/plain", body, 415, `{"detail":"Send the agent info and Agent Card as JSON (Content-Type: application/json)"}`},
		{"not JSON", "application/json", []byte(`{"info":`), 400, `{"detail":"The body must be {\"info\": \u003cagent info\u003e, \"card\": \u003cAgent Card\u003e}: unexpected end of JSON input"}`},
		{"not an object", "application/json", []byte(`"x"`), 400, `{"detail":"The body must be {\"info\": \u003cagent info\u003e, \"card\": \u003cAgent Card\u003e}: the document must be an object, not string"}`},
		{"info of the wrong type", "application/json", []byte(`{"info":{"name":5}}`), 200,
			`{"valid":false,"problems":[{"source":"info","path":"","message":"The agent info is not a registration payload: name must be a string, not number"}]}`},
		{"too large", "application/json", append(append([]byte(`{"info":"`), bytes.Repeat([]byte("a"), 4<<20)...), `"}`...), 413, `{"detail":"The body is larger than 4 MiB"}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			req := httptest.NewRequest("POST", "/manage/api/validate", bytes.NewReader(c.body))
			req.RemoteAddr, req.Host = "127.0.0.1:1", "127.0.0.1:8000"
			req.Header.Set("Content-Type", c.ctype)
			w := httptest.NewRecorder()
			h.ServeHTTP(w, req)
			if w.Code != c.status || strings.TrimSpace(w.Body.String()) != c.want {
				t.Errorf("%d %s, want %d %s", w.Code, w.Body, c.status, c.want)
			}
		})
	}
	// Refused from elsewhere like every workbench route.
	req := httptest.NewRequest("POST", "/manage/api/validate", bytes.NewReader(body))
	req.RemoteAddr, req.Host = "192.0.2.1:1", "127.0.0.1:8000"
	req.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	if w.Code != http.StatusForbidden {
		t.Errorf("remote validate: %d", w.Code)
	}
}

// FuzzValidate: any pair of documents gets a report, never a panic, and a report is valid
// exactly when it lists no problem, none of which speaks of Go types.
func FuzzValidate(f *testing.F) {
	info, card := helloDocuments(f)
	f.Add(info, card)
	f.Add([]byte(`{"supervaizer_v2":{"capabilities":{"actions":[{"id":""}]}}}`), []byte(`{"supervaizer":{"v2":{}}}`))
	f.Add([]byte(`null`), []byte(`{"supervaizer":null}`))
	f.Add([]byte(`{"name":3,"tags":"x"}`), []byte(`{"supervaizer":{"v2":{"versions":{"a2ui_catalog_version":1}}}}`))
	f.Fuzz(func(t *testing.T, info, card []byte) {
		r := workbench.Validate(info, card)
		if r.Valid != (len(r.Problems) == 0) {
			t.Fatalf("valid %v with %d problems", r.Valid, len(r.Problems))
		}
		for _, p := range r.Problems {
			if strings.Contains(p.Message, "Go value") || strings.Contains(p.Message, "Go struct") {
				t.Fatalf("a problem names Go types: %q", p.Message)
			}
		}
		if _, err := json.Marshal(r); err != nil {
			t.Fatal(err)
		}
	})
}
