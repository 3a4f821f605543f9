package cloudrun_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/registry"

	"github.com/supervaize/svz/deploy"
	"github.com/supervaize/svz/deploy/cloudrun"
	"github.com/supervaize/svz/deploy/health"
	"github.com/supervaize/svz/deploy/internal/fleet"
	"github.com/supervaize/svz/deploy/internal/gcpfake"
	"github.com/supervaize/svz/examples/helloworld/hello"
	"github.com/supervaize/svz/internal/devstudio"
)

// TestCloudRunStudioRegistration: on Cloud Run the Studio outcome is a new revision, gated on
// health; a revision with the outcome that does not serve sends traffic back to the one before,
// and a refused handshake creates no revision.
func TestCloudRunStudioRegistration(t *testing.T) {
	ctx := context.Background()
	s, err := devstudio.Start(ctx, devstudio.Config{Parameters: map[string]map[string]string{hello.Slug: {"HELLO_GREETING": "Hola"}}}, "")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	fake := gcpfake.Start(t, project, number, region)
	var outcomeDown atomic.Bool // revisions carrying the Studio outcome crash
	fl := &fleet.Fleet{Serving: func() (fleet.Revision, bool) {
		rev, vars, ok := fake.ServingRevision(svcName)
		return fleet.Revision{Key: rev, Env: vars, Down: outcomeDown.Load() && vars["SUPERVAIZER_STUDIO_AGENT_IDS"] != ""}, ok
	}}
	inst := httptest.NewTLSServer(fl)
	defer inst.Close()
	fake.URL = inst.URL
	gate := &health.Gate{Client: inst.Client(), Timeout: 5 * time.Second, Interval: 20 * time.Millisecond}
	reg := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer reg.Close()
	clients, err := cloudrun.NewClients(ctx, fake.ClientOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	clients.Tasks.Endpoint = fake.TasksURL
	defer clients.Close()
	host := s.Env("", "")
	delete(host, "SUPERVAIZER_PUBLIC_URL")
	deployer := func() *deploy.Deployer {
		return &deploy.Deployer{
			Config: deploy.Config{Platform: deploy.PlatformCloudRun, Name: "hello", Env: "dev", Region: region, ProjectID: project,
				ImageRepo: strings.TrimPrefix(reg.URL, "http://") + "/team", MinInstances: 1, GenerateAPIKey: true, GeneratePrivateKey: true},
			Platform: clients.Platform(project, region, func(context.Context) (string, error) { return "token", nil }),
			Getenv:   func(k string) string { return host[k] }, Gate: gate, Image: testImage("v1"), Keychain: authn.NewMultiKeychain(),
		}
	}

	// A revision with the outcome that never serves: traffic goes back, up fails at step studio.
	outcomeDown.Store(true)
	res, err := deployer().Up(ctx)
	if deploy.FailedStep(err) != deploy.StepStudio || !res.RolledBack {
		t.Fatalf("step %q rolled back %v: %v", deploy.FailedStep(err), res.RolledBack, err)
	}
	if _, vars, _ := fake.ServingRevision(svcName); vars["SUPERVAIZER_STUDIO_AGENT_IDS"] != "" || vars["SUPERVAIZER_STUDIO_REGISTER"] != "off" {
		t.Fatalf("serving after the rollback: agent ids %q, register %q", vars["SUPERVAIZER_STUDIO_AGENT_IDS"], vars["SUPERVAIZER_STUDIO_REGISTER"])
	}
	outcomeDown.Store(false)
	apiKey := res.NewAPIKey
	if apiKey.IsZero() {
		t.Fatal("the generated API key was not reported")
	}

	res, err = deployer().Up(ctx)
	if err != nil {
		t.Fatal(err)
	}
	regs := s.Registrations()
	rev, vars, _ := fake.ServingRevision(svcName)
	// (The rolled-back revision stays the service's template on Cloud Run: this up deploys it again
	// and finds the outcome already in place.)
	if res.Studio == nil || vars["SUPERVAIZER_WORKSPACE_AUTH_AUDIENCE"] != regs[0].Audience ||
		vars["SUPERVAIZER_STUDIO_AGENT_IDS"] != hello.Slug+"="+regs[0].AgentIDs[hello.Slug] || vars["SUPERVAIZE_API_KEY"] != s.APIKey() {
		t.Fatalf("studio %+v, revision %s: audience %q, agent ids %q", res.Studio, rev, vars["SUPERVAIZER_WORKSPACE_AUTH_AUDIENCE"], vars["SUPERVAIZER_STUDIO_AGENT_IDS"])
	}
	// The revision's instance accepts Studio's tokens and reads the parameter.
	tok, err := s.MintToken(devstudio.TokenRequest{Workspace: devstudio.DefaultWorkspace, Agent: hello.Slug, Scopes: []string{"supervaizer/action.invoke", "job.start"}})
	if err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "supervaizer/action.invoke", "params": map[string]any{
		"request_id": "r1", "actor": map[string]any{"user_id": "u"}, "workspace": map[string]any{"id": s.WorkspaceID(devstudio.DefaultWorkspace)},
		"mission_id": "m1", "agent_slug": hello.Slug, "surface": "job.start", "action": "job.start", "input": map[string]any{}, "job_id": "j"}})
	req, _ := http.NewRequest(http.MethodPost, res.URL+"/a2a", bytes.NewReader(body))
	req.Header.Set("X-API-Key", apiKey.Reveal())
	req.Header.Set("X-Supervaize-Workspace-Authorization", "Bearer "+tok.Token)
	resp, err := gate.Client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(b), `"greeting":"Hola"`) {
		t.Fatalf("job.start %s", b)
	}

	// A refused handshake: no new revision, the serving one stays.
	if err := s.SetHandshake(devstudio.HandshakeNoAgents); err != nil {
		t.Fatal(err)
	}
	host["SUPERVAIZER_LOG_LEVEL"] = "DEBUG" // a configuration change, so up deploys a revision first
	res, err = deployer().Up(ctx)
	if deploy.FailedStep(err) != deploy.StepStudio || !strings.Contains(err.Error(), "supervaizer_handshake.workspace_authorization.agents is missing") {
		t.Fatalf("step %q: %v", deploy.FailedStep(err), err)
	}
	_, after, _ := fake.ServingRevision(svcName)
	if after["SUPERVAIZER_STUDIO_AGENT_IDS"] != vars["SUPERVAIZER_STUDIO_AGENT_IDS"] || after["SUPERVAIZER_WORKSPACE_AUTH_AUDIENCE"] != vars["SUPERVAIZER_WORKSPACE_AUTH_AUDIENCE"] {
		t.Fatalf("the outcome changed: %q %q", after["SUPERVAIZER_STUDIO_AGENT_IDS"], after["SUPERVAIZER_WORKSPACE_AUTH_AUDIENCE"])
	}
}

// TestCloudRunStudioPrecheck: a Studio connection up could not complete is refused before any
// secret or service is written.
func TestCloudRunStudioPrecheck(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		host map[string]string
		gen  bool
		want string
	}{
		{"no workspace", map[string]string{"SUPERVAIZE_API_KEY": "k", "SUPERVAIZER_WORKSPACE_AUTH_REQUIRED": "true",
			"SUPERVAIZER_WORKSPACE_AUTH_ISSUER": "https://studio.example", "SUPERVAIZER_WORKSPACE_AUTH_JWKS_URL": "https://studio.example/jwks"}, true,
			"SUPERVAIZE_WORKSPACE_ID is required"},
		{"no verification", map[string]string{"SUPERVAIZE_API_KEY": "k", "SUPERVAIZE_WORKSPACE_ID": "team"}, true,
			"Studio-registered Supervaizer v2 A2A requires workspace authorization"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := e.deployer("v1", func(c *deploy.Config) { c.GenerateAPIKey, c.GeneratePrivateKey = true, tc.gen })
			d.Getenv = func(k string) string { return tc.host[k] }
			for _, run := range []func(context.Context) (deploy.Result, error){d.Plan, d.Up} {
				_, err := run(ctx)
				if deploy.FailedStep(err) != deploy.StepStudio || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("step %q: %v, want %q", deploy.FailedStep(err), err, tc.want)
				}
			}
			if e.fake.Serving(svcName) != "" {
				t.Fatal("a service was deployed")
			}
			if _, err := d.Platform.Secrets.Get(ctx, "hello-dev-api-key"); !errors.Is(err, deploy.ErrNotFound) {
				t.Fatalf("a secret was written: %v", err)
			}
		})
	}
}
