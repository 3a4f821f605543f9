//go:build !svz_nolocal

package platform

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/supervaize/svz/adapters/internal/testkit"
	"github.com/supervaize/svz/core"
	"github.com/supervaize/svz/core/config"
	"github.com/supervaize/svz/core/contract"
	"github.com/supervaize/svz/examples/helloworld/hello"
	"github.com/supervaize/svz/internal/settingstest"
	"github.com/supervaize/svz/internal/testenv"
)

// TestBadSettings runs the shared table through platform.Run over Hello World: what
// examples/helloworld and every agent written by svz init run. cmd/local runs it too.
func TestBadSettings(t *testing.T) {
	for _, c := range append(settingstest.Bad(), settingstest.URLs()...) {
		t.Run(c.Name, func(t *testing.T) {
			env := map[string]string{"SUPERVAIZER_STORE": "memory", "SUPERVAIZER_PORT": "0"}
			for k, v := range c.Env {
				env[k] = v
			}
			for _, local := range []bool{false, true} {
				if _, set := c.Env["SUPERVAIZER_LOCAL_MODE"]; set && local {
					continue // WithLocalMode would override the case
				}
				opts := []Option{WithEnv(envOf(env)), WithOutput(io.Discard, io.Discard)}
				if local {
					opts = append(opts, WithLocalMode())
				}
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan error, 1)
				go func() { done <- Run(ctx, hello.Build, opts...) }()
				select {
				case err := <-done:
					settingstest.Check(t, c, err)
				case <-time.After(60 * time.Second):
					t.Errorf("%s (local mode %v): still serving after a minute", c.Name, local)
				}
				cancel()
			}
		})
	}
}

// startLocal runs build in local mode through Run on a port the kernel picks and returns the
// banner once printed.
func startLocal(t *testing.T, build BuildFunc, env map[string]string, opts ...Option) string {
	t.Helper()
	var stdout, stderr testkit.LogBuffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	env["SUPERVAIZER_LOCAL_MODE"], env["PORT"], env["SUPERVAIZER_STORE"] = "true", "0", "memory"
	go func() {
		done <- Run(ctx, build, append([]Option{WithEnv(envOf(env)), WithOutput(&stdout, &stderr)}, opts...)...)
	}()
	ended := false // Run returned: the cleanup must not wait for it again
	t.Cleanup(func() {
		cancel()
		if ended {
			return
		}
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if strings.Contains(stdout.String(), "Follow the effects") {
			return stdout.String()
		}
		select {
		case err := <-done:
			ended = true
			t.Fatalf("Run ended: %v\n%s", err, stderr.String())
		default:
		}
	}
	t.Fatalf("no banner:\n%s\n%s", stdout.String(), stderr.String())
	return ""
}

// intakeAgent is the controller of newIntake, built the long way.
func intakeAgent(ctx context.Context, getenv func(string) string, log *slog.Logger) (http.Handler, error) {
	a, err := newIntake()
	if err != nil {
		return nil, err
	}
	return config.NewController(ctx, getenv, log, a)
}

// newIntake is an agent that is not Hello World: no job.start, its own action and surface.
func newIntake() (*core.Agent, error) {
	reg, err := contract.BuildRegistration(contract.RegistrationSpec{
		AgentSlug: "intake", DisplayName: "Intake", A2UICatalogVersion: "intake.1",
		Surfaces: []contract.SurfaceSpec{contract.SurfaceID("lead.new")},
		Actions:  []contract.ActionSpec{contract.ActionID("lead.create")},
	})
	if err != nil {
		return nil, err
	}
	a, err := core.NewAgent(core.AgentConfig{Name: "Intake", Version: "2.1", Registration: reg})
	if err != nil {
		return nil, err
	}
	a.HandleSurface("lead.new", core.SurfaceFunc(func(_ context.Context, r *contract.SurfaceRequest) (*contract.SurfaceResult, error) {
		return &contract.SurfaceResult{Surface: r.Surface, Document: []byte(`{"type":"Form","fields":[]}`)}, nil
	}))
	a.HandleAction("lead.create", core.ActionFunc(func(_ context.Context, r *contract.ActionRequest) (*contract.ActionResult, error) {
		return &contract.ActionResult{Status: contract.StatusOK, Effects: []contract.Effect{{Type: "lead.created", Message: r.Action, Item: r.Input}}}, nil
	}))
	// Required fields: the banner's command must carry an input they accept.
	a.DeclareInput("lead.create", []contract.FieldDefinition{
		{ID: "email", Label: "Email", Required: true, Validation: &contract.FieldValidation{Pattern: `^[^@\s]+@[^@\s]+$`}},
		{ID: "count", Label: "Count", Type: contract.FieldInteger, Required: true, Default: 3},
		{ID: "company", Label: "Company", Required: true, Placeholder: "O'Hara & Co"},
	})
	return a, nil
}

var curlRE = regexp.MustCompile(`(?s)curl -s .*?\}\}'`)

// TestLocalModeAnyAgent: SUPERVAIZER_LOCAL_MODE=true on any agent prints the endpoints and curl
// commands for that agent's own action and surface, and they work as printed.
func TestLocalModeAnyAgent(t *testing.T) {
	for name, build := range map[string]BuildFunc{"long form": intakeAgent, "Agents": Agents(newIntake)} {
		t.Run(name, func(t *testing.T) { testLocalModeAnyAgent(t, build) })
	}
}

func testLocalModeAnyAgent(t *testing.T, build BuildFunc) {
	banner := startLocal(t, build, map[string]string{})
	for _, want := range []string{"(API key local-dev)", "workspace authorization is bypassed", "/.well-known/agents/v2.1/intake_agent.json",
		"Run the lead.create action:", "Load the lead.new surface:"} {
		if !strings.Contains(banner, want) {
			t.Fatalf("banner lacks %q:\n%s", want, banner)
		}
	}
	if _, err := exec.LookPath("curl"); err != nil {
		if testenv.InCI() {
			t.Fatal("curl is not installed")
		}
		t.Skip("curl is not installed")
	}
	cmds := curlRE.FindAllString(banner, -1)
	want := []string{
		`{"jsonrpc":"2.0","id":1,"result":{"status":"ok","effects":[{"type":"lead.created","message":"lead.create","item":{"company":"O'Hara & Co","count":3,"email":"ann@example.com"}}]}}`,
		`{"jsonrpc":"2.0","id":1,"result":{"surface":"lead.new","a2ui_version":null,"a2ui_catalog_version":null,"document":{"type":"Form","fields":[]}}}`,
	}
	if len(cmds) != len(want) {
		t.Fatalf("%d commands in:\n%s", len(cmds), banner)
	}
	for i, c := range cmds {
		out, err := exec.Command("sh", "-c", c).Output()
		var got, exp any
		if err != nil || json.Unmarshal(out, &got) != nil || json.Unmarshal([]byte(want[i]), &exp) != nil || !jsonEqual(got, exp) {
			t.Errorf("command %d: %v\n%s\ngot  %s\nwant %s", i, err, c, out, want[i])
		}
	}
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

// TestLocalHandler: a WithLocalHandler wrapper serves beside the controller in local mode, with
// what it needs to know, and is not applied outside local mode.
func TestLocalHandler(t *testing.T) {
	var got LocalInfo
	wrap := WithLocalHandler(func(next http.Handler, info LocalInfo) http.Handler {
		got = info
		mux := http.NewServeMux()
		mux.Handle("/", next)
		mux.HandleFunc("/manage", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "workbench") })
		return mux
	})
	banner := startLocal(t, hello.Build, map[string]string{}, wrap)
	base := regexp.MustCompile(`svz local mode: (\S+)`).FindStringSubmatch(banner)[1]
	if got.URL != base || got.APIKey != "local-dev" || got.Controller == nil || got.Log == nil || got.Controller.Agents()[0].Slug() != hello.Slug {
		t.Fatalf("LocalInfo %+v, banner base %s", got, base)
	}
	for path, want := range map[string]string{"/manage": "workbench", "/.well-known/health": `"status":"operational"`} {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(b), want) {
			t.Errorf("GET %s: %s", path, b)
		}
	}

	// Outside local mode the wrapper is never called.
	called := false
	wrapped := WithLocalHandler(func(next http.Handler, _ LocalInfo) http.Handler { called = true; return next })
	var stderr testkit.LogBuffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, hello.Build, WithEnv(envOf(map[string]string{"PORT": "0", "SUPERVAIZER_STORE": "memory"})), WithOutput(io.Discard, &stderr), wrapped)
	}()
	resp := waitHTTP(t, "http://"+testkit.ServingAddr(t, &stderr)+"/.well-known/health")
	resp.Body.Close()
	cancel()
	if err := <-done; err != nil || called {
		t.Fatalf("Run: %v, wrapper called %v", err, called)
	}
}

// TestAgentsFailures: Agents reports a missing or failing constructor, naming it.
func TestAgentsFailures(t *testing.T) {
	getenv := envOf(map[string]string{"SUPERVAIZER_LOCAL_MODE": "true", "SUPERVAIZER_STORE": "memory"})
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if _, err := Agents()(context.Background(), getenv, log); err == nil || err.Error() != "platform: Agents: no agent constructor" {
		t.Errorf("no constructor: %v", err)
	}
	bad := func() (*core.Agent, error) { return nil, errors.New("no registration") }
	if _, err := Agents(newIntake, bad)(context.Background(), getenv, log); err == nil || err.Error() != "build agent 2: no registration" {
		t.Errorf("failing constructor: %v", err)
	}
}

// TestLocalModeRefusesForeignHost: local mode's key is public knowledge, so a web page whose name
// was rebound to 127.0.0.1 (DNS rebinding) must not reach any route: a Host that is not loopback
// gets 403 everywhere, with the key, before the controller sees the request (no job starts); the
// loopback names are served.
func TestLocalModeRefusesForeignHost(t *testing.T) {
	var reached atomic.Int64 // refused requests that reached the handler served
	count := WithLocalHandler(func(next http.Handler, _ LocalInfo) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if strings.Contains(strings.ToLower(r.Host), "evil") {
				reached.Add(1)
			}
			next.ServeHTTP(w, r)
		})
	})
	banner := startLocal(t, hello.Build, map[string]string{}, count)
	base := regexp.MustCompile(`svz local mode: (\S+)`).FindStringSubmatch(banner)[1]
	port := base[strings.LastIndexByte(base, ':')+1:]
	job := `{"jsonrpc":"2.0","id":1,"method":"supervaizer/action.invoke","params":{"request_id":"r1","actor":{"user_id":"me"},` +
		`"workspace":{"id":"local"},"mission_id":"m1","agent_slug":"` + hello.Slug + `","surface":"job.start","action":"job.start",` +
		`"input":{"name":"rebound"},"job_id":"job-rebound"}}`
	routes := []struct{ method, path, body string }{
		{"POST", "/a2a", job},
		{"GET", "/a2a/events", ""},
		{"GET", "/api/supervaizer/agents/" + hello.Slug + "/", ""},
		{"GET", "/api/agents/" + hello.Slug + "/data/greetings/", ""},
		{"GET", "/.well-known/agents.json", ""},
		{"GET", "/.well-known/health", ""},
		{"GET", "/manage", ""},
		{"GET", "/nowhere", ""},
	}
	call := func(host, method, path, body string) (int, string) {
		t.Helper()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel() // ends the event stream once its header is read
		req, err := http.NewRequestWithContext(ctx, method, base+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		req.Header.Set("X-API-Key", "local-dev")
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s %s (Host %s): %v", method, path, host, err)
		}
		defer resp.Body.Close()
		if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
			return resp.StatusCode, ""
		}
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	const refused = `{"detail":"Local mode answers loopback only: the request names the host \"evil.example\"; open it as 127.0.0.1, [::1] or localhost"}`
	for _, host := range []string{"evil.example:" + port, "evil.example", "EVIL.example:" + port} {
		for _, r := range routes {
			code, body := call(host, r.method, r.path, r.body)
			if host == "EVIL.example:"+port {
				body = strings.Replace(body, "EVIL", "evil", 1)
			}
			if code != http.StatusForbidden || body != refused {
				t.Errorf("%s %s with Host %s: %d %s, want 403 %s", r.method, r.path, host, code, body, refused)
			}
		}
	}
	if n := reached.Load(); n != 0 {
		t.Errorf("%d refused requests reached the controller", n)
	}
	for i, host := range []string{"127.0.0.1:" + port, "localhost:" + port, "LOCALHOST:" + port, "[::1]:" + port, "127.0.0.1"} {
		for _, r := range routes {
			body := strings.Replace(r.body, "job-rebound", "job-"+strconv.Itoa(i), 1)
			code, got := call(host, r.method, r.path, body)
			// The data route refuses for its own reason (it needs a grant): what counts is that the
			// controller answered.
			if strings.Contains(got, "loopback only") || code >= 500 || r.path == "/a2a" && !strings.Contains(got, `"status":"ok"`) {
				t.Errorf("%s %s with Host %s: %d %s", r.method, r.path, host, code, got)
			}
		}
	}
}

// TestLocalCloudRunRefusesForeignHost: local mode under a Cloud Run emulation refuses a Host that
// is not loopback on every route too.
func TestLocalCloudRunRefusesForeignHost(t *testing.T) {
	if !withCloudRun {
		t.Skip("built with svz_nocloudrun")
	}
	env := map[string]string{"PORT": "0", "K_SERVICE": "svz", "SUPERVAIZER_LOCAL_MODE": "true", "SUPERVAIZER_LOCAL_EMULATOR": "true", "SUPERVAIZER_STORE": "memory"}
	ctx, cancel := context.WithCancel(context.Background())
	var stderr testkit.LogBuffer
	errc := make(chan error, 1)
	go func() { errc <- Run(ctx, hello.Build, WithEnv(envOf(env)), WithOutput(io.Discard, &stderr)) }()
	defer func() {
		cancel()
		if err := <-errc; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	addr := testkit.ServingAddr(t, &stderr)
	waitHTTP(t, "http://"+addr+"/.well-known/health").Body.Close()
	for host, want := range map[string]int{"evil.example:8110": http.StatusForbidden, addr: http.StatusOK, "localhost:8110": http.StatusOK} {
		req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/.well-known/health", nil)
		req.Host = host
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("Host %s: %d %s, want %d", host, resp.StatusCode, b, want)
		}
	}
}
