package cloudrun

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/supervaize/svz/core/grant/granttest"
	"github.com/supervaize/svz/core/jobs"
	"github.com/supervaize/svz/internal/cloudtasks"
	"github.com/supervaize/svz/internal/cloudtasks/cloudtasksfake"
)

// TestLoopbackOrHTTPS: the Cloud Tasks endpoint and the OIDC key set URL are https, or plain
// http to a loopback address only (the tests' fakes): any other IP literal is refused as a host
// name is (a mutation sample found plain http accepted for any IP literal untested, issue 30).
func TestLoopbackOrHTTPS(t *testing.T) {
	const def = "https://default.example/certs"
	for _, tc := range []struct{ v, want string }{
		{"", def},
		{"  ", def},
		{"https://tasks.example.com/", "https://tasks.example.com"},
		{"https://10.0.0.1/certs", "https://10.0.0.1/certs"},
		{"http://127.0.0.1:8080/certs/", "http://127.0.0.1:8080/certs"},
		{"http://[::1]:9000", "http://[::1]:9000"},
		{"http://10.0.0.1/certs", ""},
		{"http://169.254.169.254/certs", ""},
		{"http://[2001:db8::1]/certs", ""},
		{"http://localhost:8080/certs", ""},
		{"http://tasks.example.com", ""},
		{"ftp://127.0.0.1/certs", ""},
		{"https://user:pw@tasks.example.com", ""},
		{"http://user@127.0.0.1:8080", ""},
		{"https:///certs", ""},
		{"http://127.0.0.1:8080/%zz", ""},
	} {
		got, err := loopbackOrHTTPS(envMap(map[string]string{"X": tc.v}), "X", def)
		if tc.want == "" {
			if err == nil || err.Error() != "X must be an https URL (plain http only to a loopback address such as 127.0.0.1)" {
				t.Errorf("%q: %q, %v; want refused", tc.v, got, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%q: %q, %v; want %q", tc.v, got, err, tc.want)
		}
	}
}

// TestValidAccount: a service account email is name@domain with a dot in the domain and none of
// the characters that would break out of a header or a policy member.
func TestValidAccount(t *testing.T) {
	for s, want := range map[string]bool{
		"inv@p-test1.iam.gserviceaccount.com": true,
		"inv@p.com":                           true,
		"inv":                                 false,
		"@p.com":                              false,
		"inv@localhost":                       false,
		"in v@p.com":                          false,
		"inv@p.com;x":                         false,
	} {
		if got := validAccount(s); got != want {
			t.Errorf("validAccount(%q) = %v", s, got)
		}
	}
}

// fakeQueueJobs returns Jobs dispatching to a queue of an in-process Cloud Tasks fake, for the
// service https://svc.a.run.app and the invoker inv@p-test1.iam.gserviceaccount.com.
func fakeQueueJobs(t *testing.T) (*Jobs, *cloudtasksfake.Fake) {
	t.Helper()
	fake, endpoint := cloudtasksfake.Start(t)
	const q = "projects/p-test1/locations/l/queues/q"
	fake.AddQueue(cloudtasks.Queue{Name: q})
	j, err := JobsFromEnv(envMap(map[string]string{EnvJobsQueue: q, EnvJobsInvoker: "inv@p-test1.iam.gserviceaccount.com",
		EnvPublicURL: "https://svc.a.run.app", EnvTasksEndpoint: endpoint}), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	j.client.Token = nil // the fake needs no access token
	return j, fake
}

// TestDispatchAtOnce: a task without delay has no schedule time (Cloud Tasks runs it at once);
// it targets the task route with an OIDC token of the invoker for the service URL.
func TestDispatchAtOnce(t *testing.T) {
	j, fake := fakeQueueJobs(t)
	if err := j.Dispatch(context.Background(), jobs.Message{Agent: "a", Workspace: "w", Job: "j", Work: "x"}, 0); err != nil {
		t.Fatal(err)
	}
	tasks := fake.Tasks()
	if len(tasks) != 1 || !tasks[0].ScheduleTime.IsZero() || tasks[0].DispatchDeadline != "1800s" {
		t.Fatalf("tasks %+v", tasks)
	}
	// The token's audience is the service URL, the one the task route's verifier checks.
	want := cloudtasks.OIDCToken{ServiceAccountEmail: "inv@p-test1.iam.gserviceaccount.com", Audience: "https://svc.a.run.app"}
	if tasks[0].URL != "https://svc.a.run.app"+TaskPath || tasks[0].OIDC == nil || *tasks[0].OIDC != want {
		t.Fatalf("task URL %q, OIDC %+v, want %+v", tasks[0].URL, tasks[0].OIDC, want)
	}
}

// TestTaskBodyBound: a task's body of exactly maxTaskBody bytes is read whole (here a message
// after spaces); one byte more is dropped, never delivered.
func TestTaskBodyBound(t *testing.T) {
	google := granttest.NewGoogle("k1")
	jwks := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write(google.JWKS()) }))
	t.Cleanup(jwks.Close)
	const url, inv = "https://svc.a.run.app", "inv@p-test1.iam.gserviceaccount.com"
	j, err := JobsFromEnv(envMap(map[string]string{EnvJobsQueue: "projects/p-test1/locations/l/queues/q", EnvJobsInvoker: inv,
		EnvPublicURL: url, EnvOIDCJWKSURL: jwks.URL}), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	j.now = func() time.Time { return now }
	msg := `{"agent":"a","workspace":"w","job":"j","work":"x","attempt":1}`
	for size, delivered := range map[int]bool{maxTaskBody: true, maxTaskBody + 1: false} {
		rec := &recordDeliveries{}
		req := httptest.NewRequest(http.MethodPost, TaskPath, strings.NewReader(strings.Repeat(" ", size-len(msg))+msg))
		req.Header.Set("Authorization", "Bearer "+google.Token(granttest.IDClaims(now, url, inv)))
		w := httptest.NewRecorder()
		j.Handler(http.NotFoundHandler(), rec).ServeHTTP(w, req)
		if w.Code != http.StatusOK || (len(rec.msg) == 1) != delivered {
			t.Errorf("a body of %d bytes: %d %s, %d deliveries; want delivered %v", size, w.Code, w.Body, len(rec.msg), delivered)
		}
	}
}

// TestCloudTasksCallsBounded: the queue's Cloud Tasks calls time out after 30 s, so that a
// dispatch never waits on an API that does not answer (a mutant that left them unbounded lived,
// issue 30).
func TestCloudTasksCallsBounded(t *testing.T) {
	j, err := JobsFromEnv(envMap(map[string]string{EnvJobsQueue: "projects/p-test1/locations/l/queues/q",
		EnvJobsInvoker: "inv@p-test1.iam.gserviceaccount.com"}), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if j.client.HTTP == nil || j.client.HTTP.Timeout != 30*time.Second {
		t.Fatalf("the Cloud Tasks client: %+v, want a 30 s timeout", j.client.HTTP)
	}
}
