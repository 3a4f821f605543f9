package cloudrun

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/supervaize/svz/core/grant/granttest"
	"github.com/supervaize/svz/core/jobs"
	"github.com/supervaize/svz/internal/cloudtasks"
	"github.com/supervaize/svz/internal/cloudtasks/cloudtasksfake"
)

func envMap(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestJobsSettings(t *testing.T) {
	base := map[string]string{EnvJobsQueue: "projects/proj-test/locations/us-central1/queues/q-1", EnvJobsInvoker: "inv@proj-test.iam.gserviceaccount.com",
		EnvPublicURL: "https://svc.a.run.app/"}
	with := func(kv ...string) map[string]string {
		m := map[string]string{}
		for k, v := range base {
			m[k] = v
		}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	for _, tc := range []struct {
		env  map[string]string
		want string
	}{
		{with(EnvJobsQueue, "q-1"), `SUPERVAIZER_JOBS_QUEUE="q-1": must be a Cloud Tasks queue name, projects/PROJECT/locations/LOCATION/queues/QUEUE (letters, digits and hyphens)`},
		{with(EnvJobsQueue, "projects/proj-test/locations/us-central1/queues/q_1"), `SUPERVAIZER_JOBS_QUEUE="projects/proj-test/locations/us-central1/queues/q_1": must be a Cloud Tasks queue name, projects/PROJECT/locations/LOCATION/queues/QUEUE (letters, digits and hyphens)`},
		{with(EnvJobsMaxAttempts, "ten"), `SUPERVAIZER_JOBS_MAX_ATTEMPTS="ten": must be a whole number from -1 to 1000 (the queue's maxAttempts; -1 is unlimited)`},
		{with(EnvTasksEndpoint, "http://tasks.example.com"), `SUPERVAIZER_CLOUD_TASKS_ENDPOINT must be an https URL (plain http only to a loopback address such as 127.0.0.1)`},
		{with(EnvOIDCJWKSURL, "ftp://127.0.0.1/certs"), `SUPERVAIZER_JOBS_OIDC_JWKS_URL must be an https URL (plain http only to a loopback address such as 127.0.0.1)`},
		{with(EnvMetadataHost, "http://169.254.169.254/"), `GCE_METADATA_HOST must be a host or host:port, got "http://169.254.169.254/"`},
	} {
		_, err := JobsFromEnv(envMap(tc.env), slog.New(slog.DiscardHandler))
		if err == nil || err.Error() != tc.want {
			t.Errorf("%v:\n got %v\nwant %s", tc.env, err, tc.want)
		}
	}
	j, err := JobsFromEnv(envMap(base), nil)
	if err != nil || j.url != "https://svc.a.run.app" || j.maxAttempts != DefaultMaxAttempts || j.verifier == nil {
		t.Fatalf("%v %+v", err, j)
	}
	if j, err = JobsFromEnv(envMap(with(EnvJobsMaxAttempts, "-1")), nil); err != nil || j.maxAttempts != 0 {
		t.Fatalf("unlimited attempts: %v %+v", err, j)
	}
}

// TestJobsWithoutURL: the first revision of a deployment has no SUPERVAIZER_PUBLIC_URL yet: it
// starts, but dispatches fail and deliveries are refused (503, retried later), naming it.
func TestJobsWithoutURL(t *testing.T) {
	var logs strings.Builder
	log := slog.New(slog.NewTextHandler(&logs, nil))
	j, err := JobsFromEnv(envMap(map[string]string{EnvJobsQueue: "projects/p-test1/locations/l/queues/q", EnvJobsInvoker: "inv@p-test1.iam.gserviceaccount.com"}), log)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "SUPERVAIZER_PUBLIC_URL is not set") {
		t.Fatalf("logs: %s", logs.String())
	}
	err = j.Dispatch(context.Background(), jobs.Message{Agent: "a", Workspace: "w", Job: "j", Work: "x"}, 0)
	if want := "cloudrun: SUPERVAIZER_PUBLIC_URL is not set: the task's target is unknown (svz deploy sets it; or set it to the service's URL)"; err == nil || err.Error() != want {
		t.Fatalf("dispatch: %v", err)
	}
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "controller") })
	h := j.Handler(next, nil)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, TaskPath, strings.NewReader("{}")))
	if rec.Code != http.StatusServiceUnavailable || strings.TrimSpace(rec.Body.String()) != `{"status":"unavailable"}` {
		t.Fatalf("delivery: %d %s", rec.Code, rec.Body)
	}
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/a2a", nil))
	if rec.Body.String() != "controller" {
		t.Fatalf("other paths: %s", rec.Body)
	}
}

type recordDeliveries struct {
	got []jobs.Delivery
	msg []jobs.Message
	err error
}

func (r *recordDeliveries) Deliver(_ context.Context, m jobs.Message, d jobs.Delivery) error {
	r.got, r.msg = append(r.got, d), append(r.msg, m)
	return r.err
}

// TestTaskDelivery: an authenticated delivery reaches the job service with the receive count
// from X-CloudTasks-TaskRetryCount, the queue's max attempts and the earlier of the request's
// deadline and the task's; its answer says whether Cloud Tasks retries.
func TestTaskDelivery(t *testing.T) {
	google := granttest.NewGoogle("k1")
	jwks := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write(google.JWKS()) }))
	defer jwks.Close()
	const url, inv = "https://svc.a.run.app", "inv@p-test1.iam.gserviceaccount.com"
	j, err := JobsFromEnv(envMap(map[string]string{EnvJobsQueue: "projects/p-test1/locations/l/queues/q", EnvJobsInvoker: inv,
		EnvPublicURL: url, EnvOIDCJWKSURL: jwks.URL, EnvJobsMaxAttempts: "7"}), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	j.now = func() time.Time { return now }
	rec := &recordDeliveries{}
	h := j.Handler(http.NotFoundHandler(), rec)
	tok := "Bearer " + google.Token(granttest.IDClaims(now, url, inv))
	body := `{"agent":"a","workspace":"w","job":"j","work":"x","attempt":2}`
	serve := func(method, body, retry string, deadline time.Time) (int, string) {
		req := httptest.NewRequest(method, TaskPath, strings.NewReader(body))
		req.Header.Set("Authorization", tok)
		if retry != "" {
			req.Header.Set("X-CloudTasks-TaskRetryCount", retry)
		}
		if !deadline.IsZero() {
			ctx, cancel := context.WithDeadline(req.Context(), deadline)
			defer cancel()
			req = req.WithContext(ctx)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w.Code, strings.TrimSpace(w.Body.String())
	}
	short := now.Add(5 * time.Minute)
	if code, b := serve(http.MethodPost, body, "3", short); code != 200 || b != `{"status":"ok"}` {
		t.Fatalf("%d %s", code, b)
	}
	if code, b := serve(http.MethodPost, body, "", time.Time{}); code != 200 || b != `{"status":"ok"}` {
		t.Fatalf("%d %s", code, b)
	}
	want := []jobs.Delivery{{Deadline: short, Receive: 4, MaxReceives: 7}, {Deadline: now.Add(TaskDeadline), Receive: 0, MaxReceives: 7}}
	if !reflect.DeepEqual(rec.got, want) || rec.msg[0] != (jobs.Message{Agent: "a", Workspace: "w", Job: "j", Work: "x", Attempt: 2}) {
		t.Fatalf("deliveries %+v %+v", rec.got, rec.msg)
	}
	rec.err = jobs.ErrBusy
	if code, b := serve(http.MethodPost, body, "0", time.Time{}); code != 503 || b != `{"status":"retry"}` {
		t.Fatalf("busy: %d %s", code, b)
	}
	rec.err = nil
	for _, bad := range []string{`{}`, `{"agent":"a","workspace":"w","job":"j","work":"x","attempt":0,"input":{}}`, strings.Repeat("x", maxTaskBody+1),
		`{"agent":"a","workspace":"w","job":"` + strings.Repeat("j", 60<<10) + `","work":"x","attempt":0}`} { // a 60 KB job id: no store keeps its key
		if code, b := serve(http.MethodPost, bad, "0", time.Time{}); code != 200 || b != `{"status":"dropped"}` {
			t.Fatalf("bad body: %d %s", code, b)
		}
	}
	if code, _ := serve(http.MethodGet, "", "", time.Time{}); code != http.StatusMethodNotAllowed {
		t.Fatalf("GET: %d", code)
	}
	if len(rec.got) != 3 {
		t.Fatalf("%d deliveries, want 3", len(rec.got))
	}
}

// TestDispatchDelay: a delayed dispatch schedules the task; a failing API names the job.
func TestDispatchDelay(t *testing.T) {
	fake, endpoint := cloudtasksfake.Start(t)
	const q = "projects/p-test1/locations/l/queues/q"
	fake.AddQueue(cloudtasks.Queue{Name: q})
	meta := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, `{"access_token":"tok","expires_in":3600}`)
	}))
	defer meta.Close()
	env := map[string]string{EnvJobsQueue: q, EnvJobsInvoker: "inv@p-test1.iam.gserviceaccount.com", EnvPublicURL: "https://svc.a.run.app",
		EnvTasksEndpoint: endpoint, EnvMetadataHost: strings.TrimPrefix(meta.URL, "http://")}
	j, err := JobsFromEnv(envMap(env), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	j.now = func() time.Time { return now }
	m := jobs.Message{Agent: "a", Workspace: "w", Job: "j", Work: "x", Attempt: 1}
	if err := j.Dispatch(context.Background(), m, 90*time.Second); err != nil {
		t.Fatal(err)
	}
	tasks := fake.Tasks()
	if len(tasks) != 1 || !tasks[0].ScheduleTime.Equal(now.Add(90*time.Second)) || tasks[0].Authorization != "Bearer tok" {
		t.Fatalf("tasks %+v", tasks)
	}
	env[EnvJobsQueue] = "projects/p-test1/locations/l/queues/absent"
	j, _ = JobsFromEnv(envMap(env), slog.New(slog.DiscardHandler))
	err = j.Dispatch(context.Background(), m, 0)
	if want := `cloudrun: create the task of job "j": cloud tasks: 404 NOT_FOUND: Requested entity was not found.`; err == nil || err.Error() != want {
		t.Fatalf("dispatch to a missing queue: %v", err)
	}
}

// TestTaskRouteHostile: the task route delivers only a request that carries a valid ID token of
// the invoker for the service, in one Authorization header; every other request is 401 with
// nothing delivered, whatever its method or body, and the route is the exact path (with any
// query). A retry count that is not a small non-negative integer is ignored.
func TestTaskRouteHostile(t *testing.T) {
	google, other := granttest.NewGoogle("k1"), granttest.NewGoogle("k1")
	jwks := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write(google.JWKS()) }))
	defer jwks.Close()
	const url, inv = "https://svc.a.run.app", "inv@p-test1.iam.gserviceaccount.com"
	j, err := JobsFromEnv(envMap(map[string]string{EnvJobsQueue: "projects/p-test1/locations/l/queues/q", EnvJobsInvoker: inv,
		EnvPublicURL: url, EnvOIDCJWKSURL: jwks.URL}), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	j.now = func() time.Time { return now }
	rec := &recordDeliveries{}
	next := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "next", http.StatusTeapot) })
	h := j.Handler(next, rec)
	valid := "Bearer " + google.Token(granttest.IDClaims(now, url, inv))
	claims := func(edit func(granttest.Claims)) string {
		c := granttest.IDClaims(now, url, inv)
		edit(c)
		return "Bearer " + google.Token(c)
	}
	body := `{"agent":"a","workspace":"w","job":"j","work":"x","attempt":1}`
	serve := func(method, target string, auth []string, header map[string]string) (int, string, http.Header) {
		req := httptest.NewRequest(method, target, strings.NewReader(body))
		req.Header["Authorization"] = auth
		for k, v := range header {
			req.Header.Set(k, v)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w.Code, strings.TrimSpace(w.Body.String()), w.Header()
	}
	for _, tc := range []struct {
		name string
		auth []string
	}{
		{"no Authorization", nil},
		{"empty", []string{""}},
		{"scheme alone", []string{"Bearer"}},
		{"scheme and space", []string{"Bearer "}},
		{"not a JWT", []string{"Bearer not-a-jwt"}},
		{"Basic", []string{"Basic aW52OnB3"}},
		{"token without scheme", []string{strings.TrimPrefix(valid, "Bearer ")}},
		{"two headers", []string{valid, valid}},
		{"another key", []string{"Bearer " + other.Token(granttest.IDClaims(now, url, inv))}},
		{"another audience", []string{claims(func(c granttest.Claims) { c["aud"] = "https://other.a.run.app" })}},
		{"another account", []string{claims(func(c granttest.Claims) { c["email"] = "evil@p-test1.iam.gserviceaccount.com" })}},
		{"unverified email", []string{claims(func(c granttest.Claims) { c["email_verified"] = false })}},
		{"another issuer", []string{claims(func(c granttest.Claims) { c["iss"] = "https://evil.example" })}},
		{"expired", []string{claims(func(c granttest.Claims) { c["exp"] = now.Add(-time.Hour).Unix() })}},
		{"HS256 with the public key", []string{"Bearer " + granttest.SignHS256(google.JWKS(), map[string]any{"alg": "HS256", "kid": "k1"}, granttest.IDClaims(now, url, inv))}},
		{"line break", []string{valid + "\r\nX-Injected: 1"}},
	} {
		for _, method := range []string{http.MethodPost, http.MethodGet} {
			code, got, hdr := serve(method, TaskPath, tc.auth, nil)
			if code != http.StatusUnauthorized || got != `{"status":"unauthorized"}` || hdr.Get("WWW-Authenticate") != `Bearer error="invalid_token"` {
				t.Errorf("%s, %s: %d %s %v", tc.name, method, code, got, hdr)
			}
		}
	}
	if len(rec.got) != 0 {
		t.Fatalf("refused requests were delivered: %+v", rec.msg)
	}
	for _, target := range []string{TaskPath + "/", TaskPath + "%2F", "/.svz//tasks", "/.svz/tasks.json", "/.SVZ/tasks"} {
		if code, got, _ := serve(http.MethodPost, target, []string{valid}, nil); code != http.StatusTeapot {
			t.Errorf("%s: %d %s, want the next handler", target, code, got)
		}
	}
	for retry, receive := range map[string]int{"": 0, "0": 1, "4": 5, "-1": 0, "+3": 4, "1e3": 0, "99999999999999999999": 0, " 2": 0, "0x10": 0} {
		rec.got = nil
		code, got, _ := serve(http.MethodPost, TaskPath+"?x=1", []string{valid}, map[string]string{"X-CloudTasks-TaskRetryCount": retry})
		if code != http.StatusOK || got != `{"status":"ok"}` || len(rec.got) != 1 || rec.got[0].Receive != receive {
			t.Errorf("retry count %q: %d %s %+v, want receive %d", retry, code, got, rec.got, receive)
		}
	}
}
