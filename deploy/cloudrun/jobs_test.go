package cloudrun_test

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	adapter "github.com/supervaize/svz/adapters/cloudrun"
	"github.com/supervaize/svz/deploy"
	"github.com/supervaize/svz/deploy/cloudrun"
	"github.com/supervaize/svz/deploy/image"
	"github.com/supervaize/svz/internal/cloudtasks"
)

const (
	invoker = "svz-hello-dev-tasks@proj-1.iam.gserviceaccount.com"
	queue   = "projects/proj-1/locations/us-central1/queues/hello-dev-jobs"
)

// workImage is testImage for a controller that defines background work.
func workImage(version string) func(context.Context, string) (v1.Image, error) {
	return func(_ context.Context, arch string) (v1.Image, error) {
		bin := "controller " + version + "\x00github.com/supervaize/svz/core/jobs.Define[go.shape.int]\x00"
		return image.New(image.Spec{Binary: []byte(bin), Arch: arch, CACerts: []byte("ca"), Created: time.Unix(0, 0)})
	}
}

func (e *env) workDeployer(version string) *deploy.Deployer {
	d := e.deployer(version, func(c *deploy.Config) { c.GenerateAPIKey, c.GeneratePrivateKey = true, true })
	d.Image = workImage(version)
	return d
}

// TestCloudRunBackgroundWork: a controller with background work gets its Cloud Tasks queue, the
// invoker account and exactly the bindings it needs; plan shows them and changes nothing; a
// second up changes nothing; down deletes them.
func TestCloudRunBackgroundWork(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	res, err := e.workDeployer("v1").Plan(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"no-op image-repository " + e.repo + "/hello-dev",
		"create secret hello-dev-api-key",
		"create secret hello-dev-private-key",
		"create service-account " + account,
		"create service-account " + invoker,
		"create cloud-tasks-queue hello-dev-jobs",
		"create iam-binding roles/cloudtasks.enqueuer → " + account + " on queue hello-dev-jobs",
		"create iam-binding roles/iam.serviceAccountUser → " + account + " on service account " + invoker,
		"create iam-binding roles/run.invoker → " + invoker + " on cloud run service hello-dev",
		"create secret-access hello-dev-api-key → " + account,
		"create secret-access hello-dev-private-key → " + account,
		"create cloud-run-service hello-dev",
	}
	if got := actions(res.Changes); !reflect.DeepEqual(got, want) {
		t.Fatalf("plan:\n got %q\nwant %q", got, want)
	}
	if calls := e.fake.Tasks.Calls(); !reflect.DeepEqual(calls, []string{"queues.get"}) {
		t.Fatalf("plan called Cloud Tasks: %v", calls)
	}
	if calls := e.fake.Calls(); slices.ContainsFunc(calls, func(c string) bool { return strings.HasSuffix(c, "SetIamPolicy") || strings.HasPrefix(c, "Create") }) {
		t.Fatalf("plan changed something: %v", calls)
	}

	if res, err = e.workDeployer("v1").Up(ctx); err != nil {
		t.Fatalf("up: %v", err)
	}
	q := e.fake.Tasks.Queue(queue)
	got, _ := json.Marshal(q)
	wantQueue := `{"name":"` + queue + `","retryConfig":{"maxAttempts":10,"minBackoff":"10s","maxBackoff":"300s","maxDoublings":5},` +
		`"httpTarget":{"headerOverrides":[{"header":{"key":"X-Supervaizer-Managed-By","value":"svz"}}]},"state":"RUNNING"}`
	if string(got) != wantQueue {
		t.Fatalf("queue\n got %s\nwant %s", got, wantQueue)
	}
	if p := e.fake.Tasks.Policy(queue).Bindings; !reflect.DeepEqual(p, []cloudtasks.Binding{{Role: cloudrun.TasksEnqueuer, Members: []string{"serviceAccount:" + account}}}) {
		t.Errorf("queue policy %+v", p)
	}
	if p := e.fake.Policy("projects/proj-1/serviceAccounts/" + invoker); !reflect.DeepEqual(p, map[string][]string{cloudrun.AccountUser: {"serviceAccount:" + account}}) {
		t.Errorf("invoker account policy %v", p)
	}
	if p := e.fake.Policy(e.fake.ServiceName(svcName)); !reflect.DeepEqual(p, map[string][]string{cloudrun.RunInvoker: {"serviceAccount:" + invoker}}) {
		t.Errorf("service policy %v", p)
	}
	if sa := e.fake.ServiceAccount(invoker); sa == nil || !strings.Contains(sa.Description, deploy.ManagedBy) {
		t.Errorf("invoker account %+v", sa)
	}
	_, vars, _ := e.fake.ServingRevision(svcName)
	if vars[cloudrun.EnvJobsQueue] != queue || vars[cloudrun.EnvJobsInvoker] != invoker || vars["SUPERVAIZER_PUBLIC_URL"] != e.fake.URL {
		t.Errorf("service env %v", vars)
	}
	// The runtime account may create tasks naming the invoker (the fake checks the account).
	tasks := cloudtasks.Client{Endpoint: e.fake.TasksURL}
	if err := tasks.CreateTask(ctx, queue, cloudtasks.Task{URL: e.fake.URL + adapter.TaskPath, OIDCAccount: invoker, Audience: e.fake.URL}); err != nil {
		t.Fatal(err)
	}

	before, beforeTasks := len(e.fake.Calls()), len(e.fake.Tasks.Calls())
	if res, err = e.workDeployer("v1").Up(ctx); err != nil {
		t.Fatal(err)
	}
	if deploy.Changed(res.Changes) {
		t.Fatalf("second up changed: %q", actions(res.Changes))
	}
	calls := append(e.fake.Calls()[before:], e.fake.Tasks.Calls()[beforeTasks:]...)
	if slices.ContainsFunc(calls, func(c string) bool {
		return strings.HasSuffix(strings.ToLower(c), "setiampolicy") || strings.HasPrefix(c, "Create") || c == "queues.create" || c == "queues.patch"
	}) {
		t.Fatalf("second up wrote: %v", calls)
	}

	res, err = e.deployer("v1", nil).Down(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want = []string{"delete cloud-run-service hello-dev", "delete service-account " + account, "delete cloud-tasks-queue hello-dev-jobs", "delete service-account " + invoker}
	if got := actions(res.Changes); !reflect.DeepEqual(got, want) {
		t.Fatalf("down:\n got %q\nwant %q", got, want)
	}
	if e.fake.Tasks.Queue(queue) != nil || e.fake.ServiceAccount(invoker) != nil {
		t.Fatal("down kept the queue or the invoker account")
	}
}

// TestCloudRunQueueNotOurs: a queue of that name that svz did not create is neither used nor
// deleted.
func TestCloudRunQueueNotOurs(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.fake.Tasks.AddQueue(cloudtasks.Queue{Name: queue})
	_, err := e.workDeployer("v1").Plan(ctx)
	if !errors.Is(err, deploy.ErrNotManaged) || !strings.Contains(err.Error(), "hello-dev-jobs") {
		t.Fatalf("plan: %v", err)
	}
	res, err := e.deployer("v1", nil).Down(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := actions(res.Changes); !slices.Contains(got, "no-op cloud-tasks-queue hello-dev-jobs") || e.fake.Tasks.Queue(queue) == nil {
		t.Fatalf("down: %q", got)
	}
}

// TestRuntimeSettingsAgree: what svz deploy sets is what the controller reads.
func TestRuntimeSettingsAgree(t *testing.T) {
	if cloudrun.EnvJobsQueue != adapter.EnvJobsQueue || cloudrun.EnvJobsInvoker != adapter.EnvJobsInvoker || cloudrun.QueueMaxAttempts != adapter.DefaultMaxAttempts {
		t.Fatal("deploy/cloudrun and adapters/cloudrun disagree")
	}
	if _, _, _, err := cloudtasks.ParseQueue(cloudrun.QueueName("proj-1", "us-central1", strings.Repeat("a", 49))); err != nil {
		t.Fatal(err)
	}
	for _, svc := range []string{"hello-dev", strings.Repeat("long-name-", 5)} {
		id := cloudrun.InvokerAccountID(svc)
		if len(id) > 30 || id == cloudrun.ServiceAccountID(svc) {
			t.Errorf("%s: invoker id %q", svc, id)
		}
	}
}

// TestLocalRunWithWork: svz deploy local has no Cloud Tasks: a controller with background work
// runs it in process, as a local emulation of Cloud Run.
func TestLocalRunWithWork(t *testing.T) {
	for _, work := range []bool{false, true} {
		env := cloudrun.Local{}.Env(deploy.Service{Name: "hello-dev", Env: map[string]string{}, BackgroundWork: work}, nil, 8123)
		if got := env["SUPERVAIZER_LOCAL_EMULATOR"] == "true"; got != work || env[cloudrun.EnvJobsQueue] != "" {
			t.Fatalf("work %v: env %v", work, env)
		}
	}
}
