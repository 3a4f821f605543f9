package main

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/supervaize/svz/core/contract"
	"github.com/supervaize/svz/core/jobs"
	"github.com/supervaize/svz/core/store"
	"github.com/supervaize/svz/core/store/dynamodb/dynamodbtest"
	"github.com/supervaize/svz/core/store/storeenv/storeenvtest"
	"github.com/supervaize/svz/internal/awsapi"
	"github.com/supervaize/svz/internal/cloudtasks"
	"github.com/supervaize/svz/internal/cloudtasks/cloudtasksfake"
	"github.com/supervaize/svz/internal/golden"
	"github.com/supervaize/svz/internal/testenv"
)

// The jobs svz jobs is tested on: agent "reports", workspaces ws-1 and ws-2, started from
// 2100-01-01 00:00 UTC a minute apart (a fixed clock in the future, so the goldens are exact).
const (
	opAgent = "reports"
	opWS    = "ws-1"
)

var opStart = time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)

// opWorks are the agent's works: report (fetch, a fan-out of three items, write; item 1 fails
// while fail is set) and review (waits for an answer).
type opWorks struct {
	reg    *jobs.Registry
	fail   atomic.Bool
	report *jobs.Work[struct{}]
	review *jobs.Work[struct{}]
}

func (o *opWorks) Works() *jobs.Registry { return o.reg }

func newOpWorks() *opWorks {
	o := &opWorks{reg: jobs.NewRegistry()}
	o.report = jobs.Define(o, "report", func(ctx context.Context, _ struct{}) error {
		if _, err := jobs.Step(ctx, "fetch", func(context.Context) (int, error) { return 3, nil }, jobs.Title("Fetch the rows")); err != nil {
			return err
		}
		if _, err := jobs.Map(ctx, "score", []int{0, 1, 2}, func(_ context.Context, i int) (int, error) {
			if i == 1 && o.fail.Load() {
				return 0, errors.New("the model timed out")
			}
			return i * 10, nil
		}, jobs.Concurrency(1)); err != nil {
			return err
		}
		_, err := jobs.Step(ctx, "write", func(context.Context) (string, error) { return "ok", nil })
		return err
	}, jobs.MaxAttempts(2), jobs.Backoff(time.Second))
	o.review = jobs.Define(o, "review", func(ctx context.Context, _ struct{}) error {
		_, err := jobs.Await[map[string]any](ctx, "approve", contract.Awaiting{})
		return err
	})
	return o
}

// memQueue keeps the messages dispatched to it.
type memQueue struct {
	mu   sync.Mutex
	msgs []jobs.Message
	at   []time.Duration
}

func (q *memQueue) Dispatch(_ context.Context, m jobs.Message, d time.Duration) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.msgs, q.at = append(q.msgs, m), append(q.at, d)
	return nil
}

func (q *memQueue) take() ([]jobs.Message, []time.Duration) {
	q.mu.Lock()
	defer q.mu.Unlock()
	m, d := q.msgs, q.at
	q.msgs, q.at = nil, nil
	return m, d
}

// opService is the agent's job service on s with clock now (nil: time.Now).
func opService(t *testing.T, s store.Store, o *opWorks, d jobs.Dispatcher, now func() time.Time) *jobs.Service {
	svc := jobs.NewService(jobs.Config{Store: s, Dispatcher: d, Now: now, Logger: slog.New(slog.DiscardHandler),
		Works: func(slug string) (*jobs.Registry, time.Duration, bool) { return o.reg, 0, slug == opAgent }})
	t.Cleanup(svc.Close)
	return svc
}

// seedJobs writes the jobs of the tests into the store of env (then closed): job-done (completed),
// job-failed (its fan-out's item 1 failed twice), job-waiting (waits for an answer), job-twin in
// ws-1 and ws-2 (pending), job-other in ws-2 (completed).
func seedJobs(t *testing.T, env []string, o *opWorks) {
	t.Helper()
	s := storeenvtest.Open(t, env)
	defer s.Close()
	now := opStart
	q := &memQueue{}
	svc := opService(t, s, o, q, func() time.Time { return now })
	start := func(w *jobs.Work[struct{}], ws, job string, deliver bool) {
		t.Helper()
		ctx := jobs.NewContext(context.Background(), svc, o.reg, opAgent, &contract.VerifiedWorkspaceContext{GrantID: "g", WorkspaceID: ws, AgentSlug: opAgent})
		if _, err := w.Start(ctx, &contract.ActionRequest{AgentSlug: opAgent, Action: contract.JobStartAction, JobID: &job, MissionID: "m-1"}, struct{}{}); err != nil {
			t.Fatal(err)
		}
		for {
			msgs, delays := q.take()
			if len(msgs) == 0 || !deliver {
				break
			}
			for i, m := range msgs {
				now = now.Add(delays[i])
				if err := svc.Deliver(context.Background(), m, jobs.Delivery{}); err != nil {
					t.Fatal(err)
				}
			}
		}
		now = now.Add(time.Minute)
	}
	start(o.report, opWS, "job-done", true)
	o.fail.Store(true)
	start(o.report, opWS, "job-failed", true)
	o.fail.Store(false)
	start(o.review, opWS, "job-waiting", true)
	start(o.report, opWS, "job-twin", false)
	start(o.report, "ws-2", "job-twin", false)
	start(o.report, "ws-2", "job-other", true)
}

// jobsEnv sets env (KEY=value pairs) for svz and clears the queue settings.
func jobsEnv(t *testing.T, env []string) {
	for _, k := range []string{"SUPERVAIZER_JOBS_QUEUE_URL", "SUPERVAIZER_JOBS_QUEUE", "SUPERVAIZER_STORE_URL", "SUPERVAIZER_STORE_TABLE", "SUPERVAIZER_DATA_DIR"} {
		t.Setenv(k, "")
	}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
}

// svzJobs runs svz jobs with args; it fails the test when the command fails.
func svzJobs(t *testing.T, args ...string) string {
	t.Helper()
	out, stderr, err := runSvz(t, nil, append([]string{"jobs"}, args...)...)
	if err != nil {
		t.Fatalf("svz jobs %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr)
	}
	return out
}

// svzJobsFails runs svz jobs with args, which must fail, and returns the error's text.
func svzJobsFails(t *testing.T, args ...string) string {
	t.Helper()
	out, _, err := runSvz(t, nil, append([]string{"jobs"}, args...)...)
	if err == nil {
		t.Fatalf("svz jobs %s succeeded:\n%s", strings.Join(args, " "), out)
	}
	return err.Error()
}

// now hides the times svz jobs takes from the clock (a retry's), which the goldens cannot hold.
var nowStamp = regexp.MustCompile(`20[0-9]{2}-[0-9]{2}-[0-9]{2}[ T][0-9:.]+Z`)

func hideNow(s string) string {
	return nowStamp.ReplaceAllStringFunc(s, func(m string) string {
		if strings.HasPrefix(m, "2100-") {
			return m
		}
		return "<now>"
	})
}

func TestJobsBolt(t *testing.T) { jobsCommands(t, storeenvtest.Bolt(t)) }

func TestJobsPostgres(t *testing.T) { jobsCommands(t, storeenvtest.Postgres(t, "svz_cli_jobs_")) }

func TestJobsRedis(t *testing.T) {
	env := storeenvtest.Redis(t)
	s := storeenvtest.Open(t, env)
	flushJobs(t, s) // the suite's jobs from other runs share the server
	_ = s.Close()
	jobsCommands(t, env)
}

func TestJobsDynamoDB(t *testing.T) {
	endpoint := testenv.Need(t, testenv.AWSEndpoint)
	_, table := dynamodbtest.Table(t, endpoint, "svz-cli-jobs-", awsapi.WithHTTPClient(&testenv.MotoWrites{}))
	jobsCommands(t, dynamodbtest.Env(endpoint, table))
}

// flushJobs deletes the records of agent "reports" (a Redis server keeps other runs' records).
func flushJobs(t *testing.T, s store.Store) {
	for _, prefix := range []string{jobs.TaskKeyPrefix + opAgent + "/", "jobs/v1/p/" + opAgent + "/"} {
		for {
			page, err := s.(store.Lister).List(context.Background(), prefix, "", store.MaxListLimit)
			if err != nil {
				t.Fatal(err)
			}
			for _, it := range page.Items {
				_ = s.Delete(context.Background(), it.Key, it.Version)
			}
			if len(page.Items) == 0 {
				break
			}
		}
	}
}

// jobsCommands: list, show, retry and cancel on the store of env, as an operator runs them, and
// the agent's server (a pool on the store) running what they hand it. The outputs are the same
// goldens on every store.
func jobsCommands(t *testing.T, env []string) {
	o := newOpWorks()
	seedJobs(t, env, o)
	jobsEnv(t, env)
	dynamo := strings.Contains(strings.Join(env, " "), "SUPERVAIZER_STORE=dynamodb")

	golden.Bytes(t, "jobs-list.txt", []byte(svzJobs(t, "list", "--agent", opAgent, "--workspace", opWS)))
	golden.Bytes(t, "jobs-list-agent.txt", []byte(svzJobs(t, "list", "--agent", opAgent)))
	if !strings.Contains(strings.Join(env, " "), "SUPERVAIZER_STORE=redis") { // a Redis server is shared with other tests' agents
		golden.Bytes(t, "jobs-list-all.txt", []byte(svzJobs(t, "list")))
	}
	golden.JSON(t, "jobs-list.json", []byte(svzJobs(t, "list", "--agent", opAgent, "--workspace", opWS, "--json")))
	golden.Bytes(t, "jobs-show-failed.txt", []byte(svzJobs(t, "show", "job-failed")))
	golden.JSON(t, "jobs-show-failed.json", []byte(svzJobs(t, "show", "job-failed", "--json")))
	golden.Bytes(t, "jobs-show-waiting.txt", []byte(svzJobs(t, "show", "job-waiting", "--agent", opAgent, "--workspace", opWS)))
	if got := svzJobs(t, "list", "--agent", opAgent, "--workspace", "ws-none"); got != "No jobs of agent reports in workspace ws-none in this store ("+storeLabel(env)+").\n" {
		t.Errorf("an empty listing: %q", got)
	}

	// Refusals, each naming the fix.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"show", "job-twin"}, `2 jobs have the id "job-twin": say which with --agent reports --workspace ws-2, or --agent reports --workspace ws-1`},
		{[]string{"show", "nope", "--agent", opAgent}, `jobs: no background job with this id in this workspace: no job "nope" of agent reports in this store (` + storeLabel(env) + `): svz jobs list shows the jobs`},
		{[]string{"retry", "job-done", "--queue", "pool"}, `jobs: only a failed or stopped job can be retried: job "job-done" has completed`},
		{[]string{"retry", "job-waiting", "--queue", "pool"}, `jobs: only a failed or stopped job can be retried: job "job-waiting" is awaiting, it has not ended (cancel it first to run it again from its first unfinished step)`},
		{[]string{"cancel", "job-done", "--queue", "pool"}, `jobs: the job has ended: there is nothing to cancel: job "job-done" is completed`},
		{[]string{"retry", "job-failed", "--queue", "fifo"}, `--queue "fifo": want auto, sqs, cloud-tasks or pool`},
	} {
		if got := svzJobsFails(t, tc.args...); got != tc.want {
			t.Errorf("svz jobs %s:\n got %s\nwant %s", strings.Join(tc.args, " "), got, tc.want)
		}
	}
	queue := []string{}
	if dynamo {
		// A DynamoDB store is usually a Lambda's: without its queue, the pool is not guessed.
		want := `SUPERVAIZER_STORE=dynamodb and no queue is set: set SUPERVAIZER_JOBS_QUEUE_URL to the SQS queue of the Lambda function that runs the jobs (svz deploy status shows it), or give --queue pool for a plain server on this table`
		if got := svzJobsFails(t, "retry", "job-failed"); got != want {
			t.Errorf("retry on DynamoDB without a queue: %s", got)
		}
		queue = []string{"--queue", "pool"}
	}

	// Retry: handed to the pool's index; the agent's server (a pool on the store) runs it from
	// the failed fan-out, item 1 only.
	golden.Bytes(t, "jobs-retry.txt", []byte(hideNow(svzJobs(t, append([]string{"retry", "job-failed"}, queue...)...))))
	// Cancel a job that waits: asked, and handed on too.
	golden.Bytes(t, "jobs-cancel.txt", []byte(svzJobs(t, append([]string{"cancel", "job-waiting"}, queue...)...)))

	s := storeenvtest.Open(t, env)
	t.Cleanup(func() { _ = s.Close() })
	pool := jobs.NewPool(jobs.ScanEvery(0))
	server := opService(t, s, o, pool, nil)
	if err := pool.Scan(context.Background()); err != nil {
		t.Fatal(err)
	}
	for job, want := range map[string]string{"job-failed": "completed", "job-waiting": "stopped"} {
		waitStatus(t, server, jobs.Ref{Agent: opAgent, Workspace: opWS, Job: job}, want)
	}
	server.Close()
	_ = s.Close()
	golden.Bytes(t, "jobs-show-retried.txt", []byte(hideNow(svzJobs(t, "show", "job-failed"))))
}

// storeLabel is how svz jobs names the store of env.
func storeLabel(env []string) string {
	get := storeenvtest.Getenv(env)
	switch get("SUPERVAIZER_STORE") {
	case "bolt":
		return "bolt, " + get("SUPERVAIZER_DATA_DIR")
	case "redis":
		return "redis"
	}
	return get("SUPERVAIZER_STORE") + ", table " + get("SUPERVAIZER_STORE_TABLE")
}

// waitStatus waits (30 s at most) until the job has status want.
func waitStatus(t *testing.T, svc *jobs.Service, ref jobs.Ref, want string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		d, err := svc.Show(context.Background(), ref)
		if err != nil {
			t.Fatal(err)
		}
		if d.Status == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s is %s, want %s", ref.Job, d.Status, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestJobsRetrySQS: with SUPERVAIZER_JOBS_QUEUE_URL, a retry sends the job's reference to the SQS
// queue (moto_server); the function's delivery of that message runs it.
func TestJobsRetrySQS(t *testing.T) {
	endpoint := testenv.Need(t, testenv.AWSEndpoint)
	env := storeenvtest.Bolt(t)
	o := newOpWorks()
	seedJobs(t, env, o)
	aws := map[string]string{"AWS_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "moto-secret-not-printed", "AWS_ENDPOINT_URL": endpoint}
	sqs, err := awsapi.New(func(k string) string { return aws[k] }, awsapi.Service{ID: "sqs", Name: "SQS", Target: "AmazonSQS", JSONVersion: "1.0"})
	if err != nil {
		t.Fatal(err)
	}
	var created struct{ QueueUrl string }
	if err := sqs.Call(context.Background(), "CreateQueue", map[string]any{"QueueName": testenv.UniqueName("svz-cli-jobs-")}, &created); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = sqs.Call(context.Background(), "DeleteQueue", map[string]any{"QueueUrl": created.QueueUrl}, nil)
	})
	jobsEnv(t, env)
	for k, v := range aws {
		t.Setenv(k, v)
	}
	t.Setenv("SUPERVAIZER_JOBS_QUEUE_URL", created.QueueUrl)
	out, stderr, err := runSvz(t, nil, "jobs", "retry", "job-failed")
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	if first, _, _ := strings.Cut(out, "\n"); first != "Job job-failed is pending again (retry 1), handed to the SQS queue "+created.QueueUrl+": it runs from its first unfinished step." {
		t.Errorf("output %q", first)
	}
	if strings.Contains(out+stderr, aws["AWS_SECRET_ACCESS_KEY"]) {
		t.Error("the AWS secret key in the output")
	}
	var got struct{ Messages []struct{ Body string } }
	if err := sqs.Call(context.Background(), "ReceiveMessage", map[string]any{"QueueUrl": created.QueueUrl, "MaxNumberOfMessages": 10}, &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Messages) != 1 {
		t.Fatalf("the queue holds %d messages, want 1", len(got.Messages))
	}
	m, err := jobs.DecodeMessage([]byte(got.Messages[0].Body))
	if err != nil || m != (jobs.Message{Agent: opAgent, Workspace: opWS, Job: "job-failed", Work: "report"}) {
		t.Fatalf("message %q: %+v %v", got.Messages[0].Body, m, err)
	}
	// The function's delivery of the message (its event source mapping's, which moto cannot run).
	s := storeenvtest.Open(t, env)
	defer s.Close()
	svc := opService(t, s, o, &memQueue{}, nil)
	if err := svc.Deliver(context.Background(), m, jobs.Delivery{}); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, svc, jobs.Ref{Agent: opAgent, Workspace: opWS, Job: "job-failed"}, "completed")
}

// TestJobsRetryCloudTasks: with SUPERVAIZER_JOBS_QUEUE, a retry creates the job's Cloud Tasks task
// (an in-process fake of the API), aimed at the service with the invoker's OIDC token, and calls
// the API with an access token of Application Default Credentials (a service account key whose
// token endpoint is a local stand-in), which it never prints.
func TestJobsRetryCloudTasks(t *testing.T) {
	env := storeenvtest.Bolt(t)
	o := newOpWorks()
	seedJobs(t, env, o)
	fake, endpoint := cloudtasksfake.Start(t)
	const queue = "projects/ops-proj/locations/europe-west1/queues/reports-jobs"
	fake.AddQueue(cloudtasks.Queue{Name: queue})
	const access = "ya29.operator-token-never-printed"
	tokens := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"access_token":"`+access+`","token_type":"Bearer","expires_in":3600}`)
	}))
	defer tokens.Close()
	jobsEnv(t, env)
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", serviceAccountKey(t, tokens.URL))
	t.Setenv("SUPERVAIZER_JOBS_QUEUE", queue)
	t.Setenv("SUPERVAIZER_JOBS_INVOKER", "reports-tasks@ops-proj.iam.gserviceaccount.com")
	t.Setenv("SUPERVAIZER_PUBLIC_URL", "https://reports-abc.a.run.app")
	t.Setenv("SUPERVAIZER_CLOUD_TASKS_ENDPOINT", endpoint)
	out, stderr, err := runSvz(t, nil, "jobs", "retry", "job-failed")
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	if first, _, _ := strings.Cut(out, "\n"); first != "Job job-failed is pending again (retry 1), handed to the Cloud Tasks queue "+queue+": it runs from its first unfinished step." {
		t.Errorf("output %q", first)
	}
	tasks := fake.Tasks()
	if len(tasks) != 1 {
		t.Fatalf("tasks %+v", tasks)
	}
	task := tasks[0]
	if task.URL != "https://reports-abc.a.run.app/.svz/tasks" || task.Authorization != "Bearer "+access ||
		task.OIDC == nil || task.OIDC.ServiceAccountEmail != "reports-tasks@ops-proj.iam.gserviceaccount.com" || task.OIDC.Audience != "https://reports-abc.a.run.app" ||
		string(task.Body) != `{"agent":"reports","workspace":"ws-1","job":"job-failed","work":"report","attempt":0}` {
		t.Fatalf("task %+v, body %s", task, task.Body)
	}
	if strings.Contains(out+stderr, access) {
		t.Error("the access token in the output")
	}
}

// serviceAccountKey writes a service account key file whose token endpoint is tokenURL.
func serviceAccountKey(t *testing.T, tokenURL string) string {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(map[string]string{"type": "service_account", "project_id": "ops-proj", "private_key_id": "k1",
		"private_key": string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})), "client_email": "operator@ops-proj.iam.gserviceaccount.com",
		"client_id": "1", "token_uri": tokenURL})
	path := filepath.Join(t.TempDir(), "adc.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestJobsSettingsRefused: a store that cannot be opened, two queue settings, a bolt file a
// server holds: each refused naming the fix, no secret shown.
func TestJobsSettingsRefused(t *testing.T) {
	env := storeenvtest.Bolt(t)
	seedJobs(t, env, newOpWorks())
	jobsEnv(t, env)
	t.Setenv("SUPERVAIZER_JOBS_QUEUE_URL", "https://sqs.eu-west-3.amazonaws.com/123456789012/reports-jobs")
	t.Setenv("SUPERVAIZER_JOBS_QUEUE", "projects/p/locations/l/queues/q")
	if got := svzJobsFails(t, "retry", "job-failed"); got != "both SUPERVAIZER_JOBS_QUEUE_URL (Lambda) and SUPERVAIZER_JOBS_QUEUE (Cloud Run) are set: unset the one of the other platform, or choose with --queue sqs or --queue cloud-tasks" {
		t.Errorf("two queues: %s", got)
	}
	// Held by a server.
	s := storeenvtest.Open(t, env)
	got := svzJobsFails(t, "list")
	_ = s.Close()
	if !strings.Contains(got, "uses the data directory") || !strings.Contains(got, "use its workbench's jobs page (http://127.0.0.1:PORT/manage/#/jobs), or stop it first") {
		t.Errorf("a bolt file a server holds: %s", got)
	}
	// An unreachable PostgreSQL, its password never shown.
	t.Setenv("SUPERVAIZER_STORE", "postgres")
	t.Setenv("SUPERVAIZER_STORE_URL", "postgres://ops:pg-secret-never-shown@127.0.0.1:1/svz?connect_timeout=1")
	t.Setenv("SUPERVAIZER_STORE_TIMEOUT", "1s")
	if got := svzJobsFails(t, "list"); strings.Contains(got, "pg-secret-never-shown") || !strings.Contains(got, "SUPERVAIZER_STORE_URL") {
		t.Errorf("an unreachable store: %s", got)
	}
}

// TestJobsHelp: svz jobs --help says what the commands do (docs/jobs.md quotes it).
func TestJobsHelp(t *testing.T) {
	out, _, err := runSvz(t, nil, "jobs", "--help")
	if err != nil {
		t.Fatal(err)
	}
	golden.Bytes(t, "jobs-help.txt", []byte(out))
}
