package devstudio_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/supervaize/svz/internal/devstudio"
)

func TestStartRefusals(t *testing.T) {
	for _, tc := range []struct {
		addr string
		cfg  devstudio.Config
		want string
	}{
		{"0.0.0.0:0", devstudio.Config{}, "loopback IP only"},
		{"example.com:80", devstudio.Config{}, "loopback IP only"},
		{"", devstudio.Config{Handshake: "maybe"}, `handshake answer "maybe"`},
		{"", devstudio.Config{Checkpoints: map[string]string{"during": "allow"}}, `checkpoint phase "during"`},
		{"", devstudio.Config{Checkpoints: map[string]string{"before": "later"}}, `checkpoint decision "later"`},
		{"", devstudio.Config{Workspaces: []string{"a", "a"}}, `workspace "a" given twice`},
		{"", devstudio.Config{Workspaces: []string{"a/b"}}, `workspace slug "a/b"`},
	} {
		s, err := devstudio.Start(context.Background(), tc.cfg, tc.addr)
		if err == nil {
			s.Close()
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s %+v: %v, want %q", tc.addr, tc.cfg, err, tc.want)
		}
	}
}

func TestRoutesRefuseWrongAccount(t *testing.T) {
	s, err := devstudio.Start(context.Background(), devstudio.Config{Workspaces: []string{"one", "two"}}, "")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	post := func(path, key, ws, body string) int {
		req, _ := http.NewRequest(http.MethodPost, s.URL()+path, bytes.NewReader([]byte(body)))
		if key != "" {
			req.Header.Set("Authorization", "Api-Key "+key)
		}
		req.Header.Set("workspace", ws)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	ev := `{"workspace":"one","event_type":"agent.ping","object_type":"agent","source":{},"details":{}}`
	for _, tc := range []struct {
		path, key, ws, body string
		want                int
	}{
		{"/w/one/api/v1/ctrl-events/", devstudio.DefaultAPIKey, "one", ev, 200},
		{"/w/one/api/v1/ctrl-events/", "", "one", ev, 401},
		{"/w/one/api/v1/ctrl-events/", "wrong", "one", ev, 401},
		{"/w/three/api/v1/ctrl-events/", devstudio.DefaultAPIKey, "three", ev, 403},
		{"/w/one/api/v1/ctrl-events/", devstudio.DefaultAPIKey, "two", ev, 403},
		{"/w/two/api/v1/ctrl-events/", devstudio.DefaultAPIKey, "two", ev, 400}, // the envelope names another workspace
		{"/w/one/api/v1/ctrl-events/", devstudio.DefaultAPIKey, "one", `{"workspace":"one","event_type":"server.register","details":{}}`, 400},
		{"/api/v1/rule-checkpoints/", devstudio.DefaultAPIKey, "one", `{"phase":"before"}`, 400}, // no checkpoint token
	} {
		if got := post(tc.path, tc.key, tc.ws, tc.body); got != tc.want {
			t.Errorf("%s key %q workspace %q: %d, want %d", tc.path, tc.key, tc.ws, got, tc.want)
		}
	}
	// Every event the account could send is recorded, an invalid server.register included.
	if ev := s.Events(); len(ev) != 2 || ev[0].EventType != "agent.ping" || ev[1].EventType != "server.register" {
		t.Errorf("recorded %+v", ev)
	}
	// Each workspace signs with its own key.
	var one, two struct{ Keys []map[string]string }
	for ws, dst := range map[string]any{"one": &one, "two": &two} {
		resp, err := http.Get(s.JWKSURL(ws))
		if err != nil {
			t.Fatal(err)
		}
		_ = json.NewDecoder(resp.Body).Decode(dst)
		resp.Body.Close()
	}
	if len(one.Keys) != 1 || len(two.Keys) != 1 || one.Keys[0]["x"] == two.Keys[0]["x"] {
		t.Errorf("JWKS %v %v", one, two)
	}
	if _, err := s.MintToken(devstudio.TokenRequest{Workspace: "one", Agent: "nobody", Scopes: []string{"s"}}); err == nil ||
		!strings.Contains(err.Error(), `no controller serving agent "nobody" has registered in workspace "one"`) {
		t.Errorf("token for an unregistered agent: %v", err)
	}
}

func TestFilesAndEnvBlock(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	if p, err := devstudio.LoadParameters(write("p.json", `{"a": {"X": "1"}}`)); err != nil || p["a"]["X"] != "1" {
		t.Errorf("%v %v", p, err)
	}
	if _, err := devstudio.LoadParameters(write("bad.json", `{"a": ["x"]}`)); err == nil {
		t.Error("bad parameters accepted")
	}
	for _, body := range []string{`[{"ref":"r","version":1,"content":"c"}]`, `{"items":[{"ref":"r","version":1,"content":"c"}]}`} {
		if items, err := devstudio.LoadContext(write("c.json", body)); err != nil || len(items) != 1 {
			t.Errorf("%s: %v %v", body, items, err)
		}
	}
	if _, err := devstudio.LoadContext(write("c.json", `[{"ref":"r"}]`)); err == nil || !strings.Contains(err.Error(), "version from 1") {
		t.Errorf("item without version: %v", err)
	}
	s, err := devstudio.Start(context.Background(), devstudio.Config{}, "")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	block := s.EnvBlock("", "http://127.0.0.1:9000", "my key.pem")
	for _, want := range []string{"export SUPERVAIZE_API_URL=" + s.URL() + "\n", "export SUPERVAIZE_WORKSPACE_ID=dev-workspace\n",
		"export SUPERVAIZER_WORKSPACE_AUTH_JWKS_URL=" + s.JWKSURL("dev-workspace") + "\n", "export SUPERVAIZER_PUBLIC_URL=http://127.0.0.1:9000\n",
		`export SUPERVAIZER_PRIVATE_KEY="$(cat 'my key.pem')"`} {
		if !strings.Contains(block, want) {
			t.Errorf("block lacks %q:\n%s", want, block)
		}
	}
}
