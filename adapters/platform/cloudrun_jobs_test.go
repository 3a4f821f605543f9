//go:build !svz_nocloudrun

package platform

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/supervaize/svz/adapters/cloudrun"
	"github.com/supervaize/svz/adapters/internal/testkit"
	"github.com/supervaize/svz/core"
	"github.com/supervaize/svz/core/config"
	"github.com/supervaize/svz/core/contract"
	"github.com/supervaize/svz/core/grant/granttest"
	"github.com/supervaize/svz/core/jobs"
	"github.com/supervaize/svz/internal/cloudtasks"
	"github.com/supervaize/svz/internal/cloudtasks/cloudtasksfake"
)

const (
	jobsAgent   = "counter"
	jobsQueue   = "projects/proj-test/locations/us-central1/queues/svz-counter-jobs"
	jobsInvoker = "svz-counter-tasks@proj-test.iam.gserviceaccount.com"
	jobsURL     = "https://svz-counter-abc123-uc.a.run.app"
	jobsKey     = "jobs-test-key"
)

// jobsBuild builds a controller whose agent counts in two background steps; runs counts the
// steps that ran.
func jobsBuild(runs *atomic.Int32) BuildFunc { return counterBuild(runs, true) }

// counterBuild is jobsBuild, with or without the background work (its job.start then answers
// at once).
func counterBuild(runs *atomic.Int32, work bool) BuildFunc {
	return func(ctx context.Context, getenv func(string) string, log *slog.Logger) (http.Handler, error) {
		reg, err := contract.BuildRegistration(contract.RegistrationSpec{
			AgentID: jobsAgent, AgentSlug: jobsAgent, DisplayName: "Counter", AgentCardURL: "/.well-known/agents/v1/counter_agent.json",
			ControllerURL: "/a2a", A2UICatalogVersion: "supervaizer-v2-local.0",
			Actions:   []contract.ActionSpec{contract.ActionID("job.start"), contract.ActionID("job.sync")},
			CaseLanes: []contract.CaseLane{{ID: "work", Label: "Work", Default: true}},
			JobPolicy: &contract.JobPolicy{Sync: &contract.JobSyncPolicy{Action: "job.sync"}},
		})
		if err != nil {
			return nil, err
		}
		a, err := core.NewAgent(core.AgentConfig{Name: "Counter", Version: "1", Registration: reg})
		if err != nil {
			return nil, err
		}
		if !work {
			a.HandleAction("job.start", core.ActionFunc(func(ctx context.Context, req *contract.ActionRequest) (*contract.ActionResult, error) {
				return contract.OK(), nil
			}))
			return config.NewController(ctx, getenv, log, a)
		}
		count := jobs.Define(a, "count", func(ctx context.Context, n int) error {
			for _, step := range []string{"one", "two"} {
				if _, err := jobs.Step(ctx, step, func(context.Context) (int, error) { runs.Add(1); return n, nil }); err != nil {
					return err
				}
			}
			return nil
		})
		a.HandleAction("job.start", core.ActionFunc(func(ctx context.Context, req *contract.ActionRequest) (*contract.ActionResult, error) {
			return count.Started(ctx, req, 2)
		}))
		return config.NewController(ctx, getenv, log, a)
	}
}

// metadataServer stands in for Cloud Run's metadata server: the runtime account's access token.
func metadataServer(t *testing.T) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Metadata-Flavor") != "Google" || r.URL.Path != "/computeMetadata/v1/instance/service-accounts/default/token" {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		_, _ = io.WriteString(w, `{"access_token":"runtime-token","expires_in":3599,"token_type":"Bearer"}`)
	}))
	t.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL)
	return u.Host
}

func startJobsController(t *testing.T, env map[string]string, runs *atomic.Int32) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var stderr testkit.LogBuffer
	errc := make(chan error, 1)
	go func() { errc <- Run(ctx, jobsBuild(runs), WithEnv(envOf(env)), WithOutput(io.Discard, &stderr)) }()
	t.Cleanup(func() {
		cancel()
		if err := <-errc; err != nil {
			t.Errorf("run: %v\n%s", err, stderr.String())
		}
		if t.Failed() {
			t.Log(stderr.String())
		}
	})
	base := "http://" + testkit.ServingAddr(t, &stderr)
	waitHTTP(t, base+"/health").Body.Close()
	return base
}

func a2a(t *testing.T, base, action string, input any) string {
	t.Helper()
	params := map[string]any{"request_id": "r-" + action, "actor": map[string]any{"user_id": "me"}, "workspace": map[string]any{"id": "ws-1"},
		"mission_id": "m1", "agent_slug": jobsAgent, "surface": "job.start", "action": action, "job_id": "job-1", "input": input}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "supervaizer/action.invoke", "params": params})
	req, _ := http.NewRequest(http.MethodPost, base+"/a2a", bytes.NewReader(body))
	req.Header.Set("X-API-Key", jobsKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var out struct {
		Result json.RawMessage `json:"result"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(b, &out) != nil || out.Result == nil {
		t.Fatalf("%s: %d %s", action, resp.StatusCode, b)
	}
	return string(out.Result)
}

// deliver posts a task's body to the controller as Cloud Tasks would, with authorization (""
// for none), and returns the status and body of the answer.
func deliver(t *testing.T, base string, task cloudtasksfake.Task, authorization string, retry int) (int, string) {
	t.Helper()
	u, err := url.Parse(task.URL)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(task.Method, base+u.Path, bytes.NewReader(task.Body))
	for k, v := range task.Headers {
		req.Header.Set(k, v)
	}
	req.Header.Set("X-CloudTasks-QueueName", "svz-counter-jobs")
	req.Header.Set("X-CloudTasks-TaskRetryCount", string(rune('0'+retry)))
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(b))
}

// TestCloudRunJobs: on Cloud Run, job.start answers with the job running and creates a Cloud
// Tasks task (exact target, body, headers, OIDC token); the task's delivery is served only with a
// valid OIDC token of the invoker for the service's URL, and runs the job to its end.
func TestCloudRunJobs(t *testing.T) {
	fake, endpoint := cloudtasksfake.Start(t)
	fake.AddQueue(cloudtasks.Queue{Name: jobsQueue})
	google := granttest.NewGoogle("g1")
	jwks := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "public, max-age=3600")
		_, _ = w.Write(google.JWKS())
	}))
	defer jwks.Close()
	env := map[string]string{
		"K_SERVICE": "svz-counter", "PORT": "0", "SUPERVAIZER_API_KEY": jobsKey,
		"SUPERVAIZER_LOCAL_MODE": "true", "SUPERVAIZER_LOCAL_EMULATOR": "true", "SUPERVAIZER_STORE": "memory",
		"SUPERVAIZER_PUBLIC_URL": jobsURL, cloudrun.EnvJobsQueue: jobsQueue, cloudrun.EnvJobsInvoker: jobsInvoker,
		cloudrun.EnvTasksEndpoint: endpoint, cloudrun.EnvOIDCJWKSURL: jwks.URL, cloudrun.EnvMetadataHost: metadataServer(t),
	}
	var runs atomic.Int32
	base := startJobsController(t, env, &runs)

	started := a2a(t, base, "job.start", map[string]any{})
	if !strings.Contains(started, `"effects":[{"type":"job.started","job_id":"job-1","status":"active"}]`) {
		t.Fatalf("job.start: %s", started)
	}
	tasks := fake.Tasks()
	want := cloudtasksfake.Task{Queue: jobsQueue, URL: jobsURL + "/.svz/tasks", Method: "POST",
		Headers: map[string]string{"Content-Type": "application/json"},
		Body:    []byte(`{"agent":"counter","workspace":"ws-1","job":"job-1","work":"count","attempt":0}`),
		OIDC:    &cloudtasks.OIDCToken{ServiceAccountEmail: jobsInvoker, Audience: jobsURL}, DispatchDeadline: "1800s",
		Authorization: "Bearer runtime-token"}
	if len(tasks) != 1 || !reflect.DeepEqual(tasks[0], want) {
		t.Fatalf("tasks %+v\nwant %+v", tasks, want)
	}
	task := tasks[0]

	now := time.Now()
	good := granttest.IDClaims(now, jobsURL, jobsInvoker)
	other := granttest.NewGoogle("g1")
	for _, tc := range []struct{ name, auth string }{
		{"no token", ""},
		{"not bearer", "Basic " + google.Token(good)},
		{"expired", "Bearer " + google.Token(good.With("iat", now.Add(-2*time.Hour).Unix(), "exp", now.Add(-time.Hour).Unix()))},
		{"foreign audience", "Bearer " + google.Token(good.With("aud", "https://other-service.a.run.app"))},
		{"foreign issuer", "Bearer " + google.Token(good.With("iss", "https://issuer.example.com"))},
		{"another account", "Bearer " + google.Token(good.With("email", "someone@proj-test.iam.gserviceaccount.com"))},
		{"unsigned", "Bearer " + granttest.Unsigned(good)},
		{"HS256", "Bearer " + granttest.SignHS256(google.JWKS(), map[string]any{"alg": "HS256", "kid": "g1"}, good)},
		{"another key", "Bearer " + other.Token(good)},
	} {
		code, body := deliver(t, base, task, tc.auth, 0)
		if code != http.StatusUnauthorized || body != `{"status":"unauthorized"}` {
			t.Fatalf("%s: %d %s", tc.name, code, body)
		}
	}
	if n := runs.Load(); n != 0 {
		t.Fatalf("%d steps ran on refused deliveries", n)
	}
	if s := a2a(t, base, "job.sync", map[string]any{}); !strings.Contains(s, `"job":{"id":"job-1","agent_slug":"counter","mission_id":"m1","status":"active"`) {
		t.Fatalf("job.sync after refusals: %s", s)
	}

	code, body := deliver(t, base, task, "Bearer "+google.Token(good), 0)
	if code != http.StatusOK || body != `{"status":"ok"}` {
		t.Fatalf("delivery: %d %s", code, body)
	}
	if n := runs.Load(); n != 2 {
		t.Fatalf("%d steps ran, want 2", n)
	}
	if s := a2a(t, base, "job.sync", map[string]any{}); !strings.Contains(s, `"job":{"id":"job-1","agent_slug":"counter","mission_id":"m1","status":"completed"`) {
		t.Fatalf("job.sync after the delivery: %s", s)
	}
	// A duplicate delivery does nothing.
	if code, body := deliver(t, base, task, "Bearer "+google.Token(good), 1); code != http.StatusOK || body != `{"status":"ok"}` || runs.Load() != 2 {
		t.Fatalf("duplicate: %d %s, %d runs", code, body, runs.Load())
	}
	if len(fake.Tasks()) != 1 {
		t.Fatalf("tasks %+v", fake.Tasks())
	}
}

// TestTaskRouteOnlyOnCloudRun: a plain HTTP server has no task route (its work runs in process).
func TestTaskRouteOnlyOnCloudRun(t *testing.T) {
	google := granttest.NewGoogle("g1")
	env := map[string]string{"PORT": "0", "SUPERVAIZER_HOST": "127.0.0.1", "SUPERVAIZER_API_KEY": jobsKey, "SUPERVAIZER_STORE": "memory",
		"SUPERVAIZER_SERVER_ID": "server-test-1"}
	var runs atomic.Int32
	base := startJobsController(t, env, &runs)
	task := cloudtasksfake.Task{URL: jobsURL + "/.svz/tasks", Method: "POST", Headers: map[string]string{"Content-Type": "application/json"},
		Body: []byte(`{"agent":"counter","workspace":"ws-1","job":"job-1","work":"count","attempt":0}`)}
	code, _ := deliver(t, base, task, "Bearer "+google.Token(granttest.IDClaims(time.Now(), jobsURL, jobsInvoker)), 0)
	if code != http.StatusNotFound {
		t.Fatalf("status %d, want 404", code)
	}
}

// TestJobsSettingsOnCloudRun: an agent with background work does not start on Cloud Run without
// its queue settings, and the error names them.
func TestJobsSettingsOnCloudRun(t *testing.T) {
	env := map[string]string{"K_SERVICE": "svz-counter", "PORT": "0", "SUPERVAIZER_API_KEY": jobsKey, "SUPERVAIZER_STORE": "memory",
		"SUPERVAIZER_SERVER_ID": "server-test-1", cloudrun.EnvJobsInvoker: "not an email"}
	var runs atomic.Int32
	err := Run(context.Background(), jobsBuild(&runs), WithEnv(envOf(env)), WithOutput(io.Discard, io.Discard))
	want := "platform: build the controller: cloud run: SUPERVAIZER_JOBS_QUEUE is not set: background work on Cloud Run needs its Cloud Tasks queue, " +
		"projects/PROJECT/locations/LOCATION/queues/QUEUE (svz deploy creates it and sets this)\n" +
		"SUPERVAIZER_JOBS_INVOKER must be the email of the service account whose OIDC token Cloud Tasks sends, such as svz-agent-tasks@PROJECT.iam.gserviceaccount.com " +
		`(svz deploy creates it and sets this), got "not an email"`
	if err == nil || err.Error() != want {
		t.Fatalf("run: %v\nwant %s", err, want)
	}
}

// TestAppRunnerRefusesJobs: on App Runner (SUPERVAIZER_PLATFORM=app-runner, set by svz deploy) a
// controller with background work does not start, naming the platforms that run it; one without
// starts as usual.
func TestAppRunnerRefusesJobs(t *testing.T) {
	env := map[string]string{"PORT": "0", "SUPERVAIZER_HOST": "127.0.0.1", "SUPERVAIZER_API_KEY": jobsKey, "SUPERVAIZER_STORE": "memory",
		"SUPERVAIZER_SERVER_ID": "server-test-1", EnvPlatform: "app-runner"}
	var runs atomic.Int32
	err := Run(context.Background(), jobsBuild(&runs), WithEnv(envOf(env)), WithOutput(io.Discard, io.Discard))
	want := "platform: build the controller: background work needs a queue that pushes to the service: App Runner has none svz supports; " +
		"deploy with --platform lambda or --platform cloud-run"
	if err == nil || err.Error() != want {
		t.Fatalf("run: %v", err)
	}
	env[EnvPlatform] = "fargate"
	err = Run(context.Background(), jobsBuild(&runs), WithEnv(envOf(env)), WithOutput(io.Discard, io.Discard))
	if want := `platform: SUPERVAIZER_PLATFORM="fargate": must be one of app-runner (set by svz deploy; leave it unset elsewhere)`; err == nil || err.Error() != want {
		t.Fatalf("run: %v", err)
	}
	env[EnvPlatform] = "app-runner"
	ctx, cancel := context.WithCancel(context.Background())
	var stderr testkit.LogBuffer
	errc := make(chan error, 1)
	go func() {
		errc <- Run(ctx, counterBuild(&runs, false), WithEnv(envOf(env)), WithOutput(io.Discard, &stderr))
	}()
	waitHTTP(t, "http://"+testkit.ServingAddr(t, &stderr)+"/health").Body.Close()
	cancel()
	if err := <-errc; err != nil {
		t.Fatalf("run without background work: %v", err)
	}
}

// TestCloudRunEmulatedJobs: a local emulation of Cloud Run without a queue (svz deploy local) runs
// background work in process and serves no task route.
func TestCloudRunEmulatedJobs(t *testing.T) {
	env := map[string]string{"K_SERVICE": "svz-counter", "PORT": "0", "SUPERVAIZER_API_KEY": jobsKey, "SUPERVAIZER_STORE": "memory",
		"SUPERVAIZER_LOCAL_MODE": "true", "SUPERVAIZER_LOCAL_EMULATOR": "true"}
	var runs atomic.Int32
	base := startJobsController(t, env, &runs)
	if s := a2a(t, base, "job.start", map[string]any{}); !strings.Contains(s, `"status":"active"`) {
		t.Fatalf("job.start: %s", s)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		s := a2a(t, base, "job.sync", map[string]any{})
		if strings.Contains(s, `"job":{"id":"job-1","agent_slug":"counter","mission_id":"m1","status":"completed"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the job did not complete in process: %s", s)
		}
	}
	if n := runs.Load(); n != 2 {
		t.Fatalf("%d steps ran, want 2", n)
	}
	task := cloudtasksfake.Task{URL: jobsURL + "/.svz/tasks", Method: "POST", Body: []byte(`{}`)}
	if code, _ := deliver(t, base, task, "", 0); code != http.StatusNotFound {
		t.Fatalf("task route: %d, want 404", code)
	}
}

// TestLambdaBuildLinksNoCloudTasks: the Lambda bootstrap (mk/lambda.mk's LAMBDA_TAGS) links
// neither the Cloud Run adapter nor the Cloud Tasks client; a default build links both.
func TestLambdaBuildLinksNoCloudTasks(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	mk, err := os.ReadFile("../../mk/lambda.mk")
	if err != nil {
		t.Fatal(err)
	}
	var tags string
	for _, line := range strings.Split(string(mk), "\n") {
		if v, ok := strings.CutPrefix(line, "LAMBDA_TAGS ?= "); ok {
			tags = strings.TrimSpace(v)
		}
	}
	if !strings.Contains(tags, "svz_nocloudrun") {
		t.Fatalf("LAMBDA_TAGS %q lack svz_nocloudrun", tags)
	}
	deps := func(tags string) string {
		out, err := exec.Command("go", "list", "-deps", "-tags", tags, "../../examples/helloworld").Output()
		if err != nil {
			t.Fatalf("go list -tags %q: %v", tags, err)
		}
		return string(out)
	}
	lambda, all := deps(tags), deps("")
	for _, pkg := range []string{"github.com/supervaize/svz/adapters/cloudrun", "github.com/supervaize/svz/internal/cloudtasks"} {
		if strings.Contains(lambda, pkg+"\n") || !strings.Contains(all, pkg+"\n") {
			t.Errorf("%s: in the Lambda build %v, in the default build %v", pkg, strings.Contains(lambda, pkg+"\n"), strings.Contains(all, pkg+"\n"))
		}
	}
}
