package studio_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/supervaize/svz/core/contract"
	"github.com/supervaize/svz/core/studio"
	"github.com/supervaize/svz/internal/devstudio"
	"github.com/supervaize/svz/internal/fingerprint"
)

func TestRegisterWithStandIn(t *testing.T) {
	s := standIn(t, devstudio.Config{})
	var l logs
	c := newClient(t, s, &l, nil)
	reg := newRegistration(t, testKey(t))
	out, err := c.Register(context.Background(), reg, studio.Expect{})
	if err != nil {
		t.Fatal(err)
	}
	regs := s.Registrations()
	if len(regs) != 1 {
		t.Fatalf("registrations %+v", regs)
	}
	want := &studio.Outcome{ServerID: serverID, Audience: regs[0].Audience, StudioServerID: regs[0].StudioServerID,
		AgentIDs: regs[0].AgentIDs, StoredKeyFingerprint: fingerprint.Of(controllerKey)}
	if !reflect.DeepEqual(out, want) {
		t.Fatalf("outcome %+v, want %+v", out, want)
	}
	env := out.Env()
	if env["SUPERVAIZER_WORKSPACE_AUTH_AUDIENCE"] != regs[0].Audience ||
		env["SUPERVAIZER_STUDIO_AGENT_IDS"] != "hello-world-ai-agent="+regs[0].AgentIDs["hello-world-ai-agent"] {
		t.Errorf("env %v", env)
	}
	// What Studio received: the §7.1 envelope with the §7.2 details.
	ev := s.Events()
	if len(ev) != 1 || ev[0].EventType != "server.register" || ev[0].ObjectType != "server" || ev[0].Workspace != devstudio.DefaultWorkspace ||
		string(ev[0].Source) != `{"server":"`+reg.URI+`"}` {
		t.Fatalf("events %+v", ev)
	}
	var details map[string]any
	if err := json.Unmarshal(ev[0].Details, &details); err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]any{"server_id": serverID, "url": "http://127.0.0.1:8000", "api_version": "v1",
		"controller_contract_version": "1.0", "api_base_path": "/api", "environment": "dev",
		"api_key": "fingerprint:" + fingerprint.Of(controllerKey)} {
		if details[k] != v {
			t.Errorf("details.%s = %v, want %v", k, details[k], v)
		}
	}
	if !strings.HasPrefix(details["public_key"].(string), "-----BEGIN PUBLIC KEY-----") || !strings.HasPrefix(reg.URI, "server:") {
		t.Errorf("public key or uri: %v %s", details["public_key"], reg.URI)
	}
	agents := details["agents"].([]any)
	agent := agents[0].(map[string]any)
	if agent["slug"] != "hello-world-ai-agent" || agent["server_agent_id"] != "None" ||
		!reflect.DeepEqual(agent["parameters_setup"], []any{map[string]any{"name": "HELLO_GREETING",
			"description": "Greeting reported by job.start (set in Studio)", "is_environment": false, "is_secret": false, "is_required": false}}) {
		t.Errorf("agent payload %v", agent)
	}
	noSecret(t, "log", l.String())

	// A second registration with the outcome as configuration agrees with it.
	if _, err := c.Register(context.Background(), reg, studio.Expect{Audience: out.Audience, AgentIDs: out.AgentIDs}); err != nil {
		t.Fatalf("re-register: %v", err)
	}
}

// TestRegisterHandshakeFailures answers every §7.3 failure and checks the reference's message.
func TestRegisterHandshakeFailures(t *testing.T) {
	key := testKey(t)
	s := standIn(t, devstudio.Config{})
	c := newClient(t, s, nil, nil)
	reg := newRegistration(t, key)
	valid, err := c.Register(context.Background(), reg, studio.Expect{})
	if err != nil {
		t.Fatal(err)
	}
	const prefix = "studio: server.register (POST http://"
	fail := "Studio registration handshake failed: "
	for _, tc := range []struct {
		answer string
		expect studio.Expect
		want   string
	}{
		{devstudio.HandshakeNoObject, studio.Expect{}, fail + "server.register response did not include a response object. Studio-to-agent API key persistence could not be verified."},
		{devstudio.HandshakeNoHandshake, studio.Expect{}, fail + "server.register response did not include supervaizer_handshake. Studio-to-agent API key persistence could not be verified. Check that SUPERVAIZE_API_URL points to a Studio instance that supports the Supervaizer v2 registration handshake. response_keys=['id', 'name']"},
		{devstudio.HandshakeKeyMismatch, studio.Expect{}, fail + "Studio did not persist the controller API key for server_id=" + serverID + ". controller_key_fingerprint=" + fingerprint.Of(controllerKey) + " studio_fingerprint=" + fingerprint.Of("another key") + " reason=stored key differs"},
		{devstudio.HandshakeNoWorkspaceAuthorization, studio.Expect{}, fail + "workspace authorization is enabled but supervaizer_handshake.workspace_authorization is missing."},
		{devstudio.HandshakeNoAudience, studio.Expect{}, fail + "workspace authorization is enabled but supervaizer_handshake.workspace_authorization.audience is missing."},
		{devstudio.HandshakeWrongAudience, studio.Expect{Audience: valid.Audience}, fail + "configured workspace authorization audience does not match Studio's server audience."},
		{devstudio.HandshakeNoAgents, studio.Expect{}, fail + "workspace authorization is enabled but supervaizer_handshake.workspace_authorization.agents is missing."},
		{devstudio.HandshakeBindingNotObject, studio.Expect{}, fail + "workspace authorization agent binding must be an object."},
		{devstudio.HandshakeBindingNoID, studio.Expect{}, fail + "workspace authorization agent binding is missing id."},
		{devstudio.HandshakeBindingNoSlug, studio.Expect{}, fail + "workspace authorization agent binding is missing slug."},
		{devstudio.HandshakeMissingAgent, studio.Expect{}, fail + "workspace authorization did not return Studio agent id(s) for slug(s): hello-world-ai-agent"},
		{devstudio.HandshakeWrongAgentID, studio.Expect{AgentIDs: valid.AgentIDs}, fail + "workspace authorization agent id mismatch for slug=hello-world-ai-agent."},
	} {
		t.Run(tc.answer, func(t *testing.T) {
			if err := s.SetHandshake(tc.answer); err != nil {
				t.Fatal(err)
			}
			out, err := c.Register(context.Background(), reg, tc.expect)
			if err == nil {
				t.Fatalf("no error, outcome %+v", out)
			}
			var se *studio.Error
			var he *studio.HandshakeError
			if !errors.As(err, &se) || se.Step != studio.StepRegister || !errors.As(err, &he) || he.Msg != tc.want {
				t.Fatalf("error %q\nwant handshake message %q", err, tc.want)
			}
			if !strings.HasPrefix(err.Error(), prefix) || !strings.HasSuffix(err.Error(), tc.want) {
				t.Errorf("error %q", err)
			}
			noSecret(t, "error", err.Error())
		})
	}
}

// TestRegisterTransportFailures: a Studio that is down, slow, refuses or answers something else
// fails with the step, the status and a hint, never a key.
func TestRegisterTransportFailures(t *testing.T) {
	key := testKey(t)
	s := standIn(t, devstudio.Config{})
	reg := newRegistration(t, key)
	for _, tc := range []struct {
		answer string
		status int
		want   []string
	}{
		{devstudio.HandshakeHTTP401, 401, []string{"HTTP 401 Unauthorized", "Studio rejected SUPERVAIZE_API_KEY"}},
		{devstudio.HandshakeHTTP403, 403, []string{"HTTP 403 Forbidden", `the answer says "You do not have Developer access to this workspace."`,
			"SUPERVAIZE_WORKSPACE_ID must be the workspace slug shown in Studio under Developer → Environment variables",
			"must belong to that workspace and keep Developer access"}},
		{devstudio.HandshakeHTTP500, 500, []string{"HTTP 500 Internal Server Error"}},
		{devstudio.HandshakeNonJSON, 200, []string{"HTTP 200 OK: the answer is not valid JSON", "check that SUPERVAIZE_API_URL points to Studio's API"}},
		{devstudio.HandshakeHang, 0, []string{"no answer within 300ms (SUPERVAIZER_STUDIO_TIMEOUT)"}},
	} {
		t.Run(tc.answer, func(t *testing.T) {
			if err := s.SetHandshake(tc.answer); err != nil {
				t.Fatal(err)
			}
			var l logs
			// A timeout that a hanging Studio always exceeds: the stand-in never answers.
			c := newClient(t, s, &l, func(st *studio.Settings) { st.Timeout = 300 * time.Millisecond })
			before := len(s.Events())
			_, err := c.Register(context.Background(), reg, studio.Expect{})
			var se *studio.Error
			if !errors.As(err, &se) || se.Step != studio.StepRegister || se.Status != tc.status {
				t.Fatalf("error %v (%#v)", err, se)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\nlacks %q", err, w)
				}
			}
			// Retries are for connections that could not be made, never for an answer or a timeout.
			if n := len(s.Events()) - before; n != 1 {
				t.Errorf("%d attempts, want 1", n)
			}
			noSecret(t, "error", err.Error())
			noSecret(t, "log", l.String())
		})
	}

	t.Run("down", func(t *testing.T) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close()
		var dials atomic.Int32
		hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, a string) (net.Conn, error) {
			dials.Add(1)
			return (&net.Dialer{}).DialContext(ctx, network, a)
		}}}
		c, err := studio.New(studio.Settings{APIURL: "http://" + addr, WorkspaceID: "ws", APIKey: "studio-key-0a1b2c3d", Timeout: 30 * time.Second, MaxRetries: 2},
			studio.WithHTTPClient(hc))
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.Register(context.Background(), reg, studio.Expect{})
		var se *studio.Error
		if !errors.As(err, &se) || se.Step != studio.StepRegister || se.Status != 0 || !strings.Contains(err.Error(), "connection refused") {
			t.Fatalf("error %v", err)
		}
		if n := dials.Load(); n != 3 {
			t.Errorf("%d connection attempts, want 1 + 2 retries", n)
		}
		noSecret(t, "error", err.Error(), "studio-key-0a1b2c3d")
	})
}

// TestEventEnvelope checks the headers, URL and body of a controller event against spec §7.1.
func TestEventEnvelope(t *testing.T) {
	var got *http.Request
	var body []byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Clone(context.Background())
		body, _ = io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"id": 7}`))
	}))
	defer srv.Close()
	c, err := studio.New(studio.Settings{APIURL: srv.URL, WorkspaceID: "team-slug", APIKey: "studio-key-9f8e7d6c", Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := c.SendEvent(context.Background(), studio.Event{Source: map[string]string{"agent": "a"}, EventType: "agent.ping", ObjectType: "agent", Details: map[string]int{"n": 1}})
	if err != nil || string(raw) != `{"id": 7}` {
		t.Fatalf("%s %v", raw, err)
	}
	if got.Method != http.MethodPost || got.URL.Path != "/w/team-slug/api/v1/ctrl-events/" ||
		got.Header.Get("Authorization") != "Api-Key studio-key-9f8e7d6c" || got.Header.Get("accept") != "application/json" ||
		got.Header.Get("workspace") != "team-slug" || got.Header.Get("Content-Type") != "application/json" {
		t.Errorf("request %s %s %v", got.Method, got.URL, got.Header)
	}
	if string(body) != `{"source":{"agent":"a"},"workspace":"team-slug","event_type":"agent.ping","object_type":"agent","details":{"n":1}}` {
		t.Errorf("body %s", body)
	}
}

func TestSettingsFromEnv(t *testing.T) {
	env := func(kv ...string) func(string) string {
		m := map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return func(k string) string { return m[k] }
	}
	if _, connected, err := studio.SettingsFromEnv(env()); connected || err != nil {
		t.Fatalf("no key: connected %v, %v", connected, err)
	}
	s, connected, err := studio.SettingsFromEnv(env("SUPERVAIZE_API_KEY", " key-1234\n", "SUPERVAIZE_WORKSPACE_ID", " team \t", "SUPERVAIZE_API_URL", " https://studio.example.com/ "))
	if err != nil || !connected || s.APIKey != "key-1234" || s.WorkspaceID != "team" || s.APIURL != "https://studio.example.com" ||
		s.Timeout != studio.DefaultTimeout || s.MaxRetries != studio.DefaultMaxRetries {
		t.Fatalf("%+v %v %v", s, connected, err)
	}
	s, _, err = studio.SettingsFromEnv(env("SUPERVAIZE_API_KEY", "k", "SUPERVAIZE_WORKSPACE_ID", "team"))
	if err != nil || s.APIURL != studio.DefaultAPIURL {
		t.Fatalf("default URL: %+v %v", s, err)
	}
	for _, tc := range []struct {
		env  []string
		want string
	}{
		{[]string{"SUPERVAIZE_API_KEY", "k"}, "SUPERVAIZE_WORKSPACE_ID is required"},
		{[]string{"SUPERVAIZE_API_KEY", "k", "SUPERVAIZE_WORKSPACE_ID", "a/b"}, "must be the workspace slug"},
		{[]string{"SUPERVAIZE_API_KEY", "k", "SUPERVAIZE_WORKSPACE_ID", "w", "SUPERVAIZE_API_URL", "http://studio.example.com"}, "must use https"},
		{[]string{"SUPERVAIZE_API_KEY", "k", "SUPERVAIZE_WORKSPACE_ID", "w", "SUPERVAIZE_API_URL", "https://u:p@studio.example.com"}, "must be Studio's origin"},
		{[]string{"SUPERVAIZE_API_KEY", "k", "SUPERVAIZE_WORKSPACE_ID", "w", "SUPERVAIZE_API_URL", "https://studio.example.com/api"}, "no path"},
		{[]string{"SUPERVAIZE_API_KEY", "k", "SUPERVAIZE_WORKSPACE_ID", "w", "SUPERVAIZE_HTTP_MAX_RETRIES", "11"}, "SUPERVAIZE_HTTP_MAX_RETRIES=\"11\""},
		{[]string{"SUPERVAIZE_API_KEY", "k", "SUPERVAIZE_WORKSPACE_ID", "w", "SUPERVAIZER_STUDIO_TIMEOUT", "soon"}, "SUPERVAIZER_STUDIO_TIMEOUT=\"soon\""},
	} {
		_, _, err := studio.SettingsFromEnv(env(tc.env...))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want %q", tc.env, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "u:p") {
			t.Errorf("credentials in %v", err)
		}
	}
	if _, _, err := studio.SettingsFromEnv(env("SUPERVAIZE_API_KEY", "k", "SUPERVAIZE_WORKSPACE_ID", "w", "SUPERVAIZE_API_URL", "http://127.0.0.1:9")); err != nil {
		t.Errorf("loopback http: %v", err)
	}
}

func TestNewServerRegistrationRefusesIncompleteServers(t *testing.T) {
	_, err := studio.NewServerRegistration(studio.Server{ServerID: "short", URL: "ftp://x"})
	for _, w := range []string{"SUPERVAIZER_SERVER_ID must be set and longer than 5", "absolute http(s) URL", "SUPERVAIZER_PRIVATE_KEY is required",
		"SUPERVAIZER_API_KEY is required", "no agent"} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("%v lacks %q", err, w)
		}
	}
	reg := newRegistration(t, testKey(t))
	for _, s := range []string{reg.String(), reg.GoString()} {
		noSecret(t, "String", s)
	}
	if studio.ServerURI(serverID) != reg.URI || studio.ServerURI("other-server") == reg.URI || len(reg.URI) != len("server:")+17 {
		t.Errorf("uri %s", reg.URI)
	}
}

// TestValidateHandshakeEdges covers what the stand-in does not answer: a true that is not a JSON
// boolean, bindings for other slugs, ids the settings cannot carry.
func TestValidateHandshakeEdges(t *testing.T) {
	agents := []contract.AgentRegistrationContract{{Slug: "a"}, {Slug: "b"}}
	hs := func(match, agentsJSON string) []byte {
		return []byte(`{"supervaizer_handshake":{"server_id":"s","controller_api_key_match":` + match +
			`,"workspace_authorization":{"audience":"supervaizer-server:x","agents":` + agentsJSON + `}}}`)
	}
	out, err := studio.ValidateHandshake(hs("true", `[{"id":"1","slug":"a"},{"id":"2","slug":"b"},{"id":"3","slug":"other"}]`), "k", agents, studio.Expect{})
	if err != nil || !reflect.DeepEqual(out.AgentIDs, map[string]string{"a": "1", "b": "2"}) || out.AgentIDsValue() != "a=1,b=2" {
		t.Fatalf("%+v %v", out, err)
	}
	for _, tc := range []struct {
		body []byte
		want string
	}{
		{hs(`"true"`, `[]`), "Studio did not persist the controller API key for server_id=s"},
		{hs(`1`, `[]`), "controller_key_fingerprint=" + fingerprint.Of("k") + " studio_fingerprint=None reason=None"},
		{hs("true", `[{"id":"1","slug":"a"}]`), "for slug(s): b"},
		{hs("true", `[{"id":"1","slug":"a"},{"id":"1","slug":"b"}]`), "cannot be kept by this controller"},
		{hs("true", `[{"id":"has space","slug":"a"},{"id":"2","slug":"b"}]`), "cannot be kept by this controller"},
		{[]byte(`not json`), "did not include a response object"},
		{[]byte(`{"supervaizer_handshake": []}`), "response_keys=['supervaizer_handshake']"},
	} {
		_, err := studio.ValidateHandshake(tc.body, "k", agents, studio.Expect{})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.body, err, tc.want)
		}
	}
}

func FuzzValidateHandshake(f *testing.F) {
	f.Add([]byte(`{"supervaizer_handshake":{"controller_api_key_match":true,"workspace_authorization":{"audience":"a","agents":[{"id":"1","slug":"s"}]}}}`))
	f.Add([]byte(`{"supervaizer_handshake":{"controller_api_key_match":false,"reason":"\u0000\n"}}`))
	f.Add([]byte(`[]`))
	agents := []contract.AgentRegistrationContract{{Slug: "s"}}
	f.Fuzz(func(t *testing.T, body []byte) {
		out, err := studio.ValidateHandshake(body, "fuzz-api-key-123", agents, studio.Expect{})
		if err == nil {
			if out.Audience == "" || out.AgentIDs["s"] == "" {
				t.Fatalf("accepted without audience or agent id: %+v", out)
			}
			return
		}
		if strings.Contains(err.Error(), "fuzz-api-key-123") || strings.ContainsAny(err.Error(), "\n\r") {
			t.Fatalf("error leaks the key or breaks lines: %q", err)
		}
	})
}
