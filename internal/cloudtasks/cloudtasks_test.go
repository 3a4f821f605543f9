package cloudtasks_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"testing/iotest"
	"time"

	"github.com/supervaize/svz/internal/cloudtasks"
	"github.com/supervaize/svz/internal/cloudtasks/cloudtasksfake"
)

const queue = "projects/proj-test/locations/us-central1/queues/q-1"

func client(url string) *cloudtasks.Client {
	return &cloudtasks.Client{Endpoint: url + "/", Token: func(context.Context) (string, error) { return "tok-1", nil }}
}

// TestCreateTask: the task as the API receives it: POST to the URL with the body and headers, an
// OIDC token of the account for the audience (the service's public URL, which the delivery's
// verifier expects), the schedule and the dispatch deadline; the caller's access token.
func TestCreateTask(t *testing.T) {
	fake, url := cloudtasksfake.Start(t)
	fake.AddQueue(cloudtasks.Queue{Name: queue})
	c := client(url)
	at := time.Date(2026, 3, 4, 5, 6, 7, 8, time.FixedZone("x", 3600))
	err := c.CreateTask(context.Background(), queue, cloudtasks.Task{URL: "https://svc.a.run.app/.svz/tasks", Body: []byte(`{"a":1}`),
		Headers: map[string]string{"Content-Type": "application/json"}, OIDCAccount: "inv@proj-test.iam.gserviceaccount.com",
		Audience: "https://svc.a.run.app", Schedule: at, Deadline: 30 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	// Without a schedule or a deadline the API's defaults apply (at once; 10 minutes).
	if err := c.CreateTask(context.Background(), queue, cloudtasks.Task{URL: "http://127.0.0.1:1/x", OIDCAccount: "inv@proj-test.iam.gserviceaccount.com",
		Audience: "http://127.0.0.1:1"}); err != nil {
		t.Fatal(err)
	}
	want := []cloudtasksfake.Task{
		{Queue: queue, URL: "https://svc.a.run.app/.svz/tasks", Method: "POST", Headers: map[string]string{"Content-Type": "application/json"},
			Body: []byte(`{"a":1}`), OIDC: &cloudtasks.OIDCToken{ServiceAccountEmail: "inv@proj-test.iam.gserviceaccount.com", Audience: "https://svc.a.run.app"},
			ScheduleTime: at.UTC(), DispatchDeadline: "1800s", Authorization: "Bearer tok-1"},
		{Queue: queue, URL: "http://127.0.0.1:1/x", Method: "POST", OIDC: &cloudtasks.OIDCToken{ServiceAccountEmail: "inv@proj-test.iam.gserviceaccount.com", Audience: "http://127.0.0.1:1"},
			Authorization: "Bearer tok-1"},
	}
	if got := fake.Tasks(); !reflect.DeepEqual(got, want) {
		t.Fatalf("tasks\n%+v\nwant\n%+v", got, want)
	}
}

// TestCreateTaskRefused: a task without an OIDC account, or whose token names no audience, is
// refused (the fake checks what svz must send), as a task for a missing queue is; the error is
// the API's.
func TestCreateTaskRefused(t *testing.T) {
	fake, url := cloudtasksfake.Start(t)
	fake.AddQueue(cloudtasks.Queue{Name: queue})
	c := client(url)
	for _, tc := range []struct {
		queue string
		task  cloudtasks.Task
		want  string
	}{
		{queue, cloudtasks.Task{URL: "https://svc/x", Audience: "https://svc"}, "cloud tasks: 400 INVALID_ARGUMENT: svz tasks carry an OIDC token"},
		{queue, cloudtasks.Task{URL: "https://svc/x", OIDCAccount: "inv@p.iam.gserviceaccount.com"}, "cloud tasks: 400 INVALID_ARGUMENT: svz tasks name their OIDC token's audience"},
		{queue + "x", cloudtasks.Task{URL: "https://svc/x", OIDCAccount: "inv@p.iam.gserviceaccount.com", Audience: "https://svc"}, "cloud tasks: 404 NOT_FOUND: Requested entity was not found."},
	} {
		err := c.CreateTask(context.Background(), tc.queue, tc.task)
		if err == nil || err.Error() != tc.want {
			t.Errorf("%+v: %v, want %s", tc.task, err, tc.want)
		}
		if cloudtasks.IsNotFound(err) != strings.Contains(tc.want, "404") || cloudtasks.IsAlreadyExists(err) {
			t.Errorf("%v: IsNotFound %v, IsAlreadyExists %v", err, cloudtasks.IsNotFound(err), cloudtasks.IsAlreadyExists(err))
		}
	}
	if n := len(fake.Tasks()); n != 0 {
		t.Fatalf("%d tasks recorded", n)
	}
}

// TestQueueLifecycle: get (absent: nil, no error), create, create again (already exists),
// update, IAM policy read and write with its etag, delete.
func TestQueueLifecycle(t *testing.T) {
	fake, url := cloudtasksfake.Start(t)
	c := client(url)
	ctx := context.Background()
	if q, err := c.GetQueue(ctx, queue); q != nil || err != nil {
		t.Fatalf("absent queue: %+v, %v", q, err)
	}
	q := cloudtasks.Queue{Name: queue, RetryConfig: &cloudtasks.RetryConfig{MaxAttempts: 10, MinBackoff: "1s"}}
	if err := c.CreateQueue(ctx, q); err != nil {
		t.Fatal(err)
	}
	if err := c.CreateQueue(ctx, q); !cloudtasks.IsAlreadyExists(err) || cloudtasks.IsNotFound(err) {
		t.Fatalf("second create: %v", err)
	}
	got, err := c.GetQueue(ctx, queue)
	if err != nil || !reflect.DeepEqual(*got, cloudtasks.Queue{Name: queue, RetryConfig: q.RetryConfig, State: "RUNNING"}) {
		t.Fatalf("queue %+v, %v", got, err)
	}
	q.RetryConfig.MaxAttempts = 3
	q.HTTPTarget = &cloudtasks.HTTPTarget{HeaderOverrides: []cloudtasks.HeaderOverride{{Header: cloudtasks.Header{Key: "X-A", Value: "b"}}}}
	if err := c.UpdateQueue(ctx, q); err != nil {
		t.Fatal(err)
	}
	if got := fake.Queue(queue); got.RetryConfig.MaxAttempts != 3 || !reflect.DeepEqual(got.HTTPTarget, q.HTTPTarget) {
		t.Fatalf("after update %+v", got)
	}
	p, err := c.GetIamPolicy(ctx, queue)
	if err != nil || p.Etag != "BwX0" || len(p.Bindings) != 0 {
		t.Fatalf("policy %+v, %v", p, err)
	}
	p.Bindings = []cloudtasks.Binding{{Role: "roles/cloudtasks.enqueuer", Members: []string{"serviceAccount:a@p.iam.gserviceaccount.com"}}}
	if err := c.SetIamPolicy(ctx, queue, p); err != nil {
		t.Fatal(err)
	}
	if err := c.SetIamPolicy(ctx, queue, p); err == nil || err.Error() != "cloud tasks: 409 ABORTED: There were concurrent policy changes." {
		t.Fatalf("a write with a stale etag: %v", err)
	}
	if got := fake.Policy(queue); !reflect.DeepEqual(got.Bindings, p.Bindings) || got.Etag != "BwX1" {
		t.Fatalf("policy %+v", got)
	}
	if err := c.DeleteQueue(ctx, queue); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteQueue(ctx, queue); !cloudtasks.IsNotFound(err) {
		t.Fatalf("second delete: %v", err)
	}
	if _, err := c.GetIamPolicy(ctx, queue); !cloudtasks.IsNotFound(err) {
		t.Fatalf("policy of a deleted queue: %v", err)
	}
	want := []string{"queues.get", "queues.create", "queues.create", "queues.get", "queues.patch", "queues.getIamPolicy", "queues.setIamPolicy",
		"queues.setIamPolicy", "queues.delete", "queues.delete", "queues.getIamPolicy"}
	if got := fake.Calls(); !reflect.DeepEqual(got, want) {
		t.Fatalf("calls %v", got)
	}
}

// roundTrip answers every request with status and body, recording the request.
type roundTrip struct {
	status int
	body   string
	req    *http.Request
}

func (rt *roundTrip) RoundTrip(r *http.Request) (*http.Response, error) {
	rt.req = r
	return &http.Response{StatusCode: rt.status, Body: io.NopCloser(strings.NewReader(rt.body)), Header: http.Header{}, Request: r}, nil
}

// TestClientRequests: the default endpoint, the JSON content type only with a body, no
// Authorization without a token source, a token source's error, the status classes.
func TestClientRequests(t *testing.T) {
	rt := &roundTrip{status: 200, body: `{"name":"` + queue + `"}`}
	c := &cloudtasks.Client{HTTP: &http.Client{Transport: rt}}
	q, err := c.GetQueue(context.Background(), queue)
	if err != nil || q.Name != queue {
		t.Fatalf("%+v, %v", q, err)
	}
	if got := rt.req.URL.String(); got != cloudtasks.DefaultEndpoint+"/v2/"+queue || rt.req.Method != http.MethodGet ||
		rt.req.Header.Get("Authorization") != "" || rt.req.Header.Get("Content-Type") != "" {
		t.Fatalf("request %s %s %v", rt.req.Method, got, rt.req.Header)
	}
	if err := c.DeleteQueue(context.Background(), queue); err != nil || rt.req.Method != http.MethodDelete {
		t.Fatalf("delete: %v", err)
	}
	if err := c.UpdateQueue(context.Background(), cloudtasks.Queue{Name: queue}); err != nil || rt.req.Header.Get("Content-Type") != "application/json" ||
		rt.req.URL.RawQuery != "updateMask=retryConfig%2ChttpTarget" || rt.req.Method != http.MethodPatch {
		t.Fatalf("update: %v, %s %v", err, rt.req.URL, rt.req.Header)
	}
	// 2xx is success, whatever the code; any other status is an error, with the API's message when it has one.
	for status, want := range map[int]string{
		204: "",
		299: "",
		300: "cloud tasks: 300 : ",
		199: "cloud tasks: 199 : ",
		503: "cloud tasks: 503 UNAVAILABLE: try later",
	} {
		rt.status, rt.body = status, `{"error":{"code":503,"message":"try later","status":"UNAVAILABLE"}}`
		if status != 503 {
			rt.body = ""
		}
		err := c.DeleteQueue(context.Background(), queue)
		if got := ""; err != nil {
			got = err.Error()
			if got != want {
				t.Errorf("status %d: %q, want %q", status, got, want)
			}
		} else if want != "" {
			t.Errorf("status %d: no error, want %q", status, want)
		}
	}
	boom := errors.New("no metadata server")
	c.Token = func(context.Context) (string, error) { return "", boom }
	if err := c.DeleteQueue(context.Background(), queue); !errors.Is(err, boom) || err.Error() != "cloud tasks: access token: no metadata server" {
		t.Fatalf("token error: %v", err)
	}
}

func TestParseQueueAndDuration(t *testing.T) {
	p, l, q, err := cloudtasks.ParseQueue(queue)
	if err != nil || p != "proj-test" || l != "us-central1" || q != "q-1" {
		t.Fatalf("%q %q %q %v", p, l, q, err)
	}
	for _, bad := range []string{"", "q-1", "projects/proj-test/locations/us-central1/queues/q_1", queue + "/tasks"} {
		if _, _, _, err := cloudtasks.ParseQueue(bad); err == nil {
			t.Errorf("ParseQueue(%q) accepted", bad)
		}
	}
	if got := cloudtasks.Duration(90*time.Second + 900*time.Millisecond); got != "90s" {
		t.Fatalf("Duration %q", got)
	}
}

// TestMetadataToken: the token is read with the Metadata-Flavor header and cached until a minute
// before it expires; a token that expires within the minute is read again at the next call;
// errors name the metadata server.
func TestMetadataToken(t *testing.T) {
	var calls atomic.Int32
	var answer atomic.Value
	answer.Store(`{"access_token":"at-1","expires_in":3600}`)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		if r.Header.Get("Metadata-Flavor") != "Google" || r.URL.Path != "/computeMetadata/v1/instance/service-accounts/default/token" {
			http.Error(w, "no", http.StatusForbidden)
			return
		}
		_, _ = io.WriteString(w, answer.Load().(string))
	}))
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")
	tok := cloudtasks.MetadataToken(host, nil)
	for range 2 {
		if got, err := tok(context.Background()); got != "at-1" || err != nil {
			t.Fatalf("%q %v", got, err)
		}
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("%d reads, want 1 (cached)", n)
	}
	// Expiring within the minute: not cached.
	answer.Store(`{"access_token":"at-2","expires_in":59}`)
	tok = cloudtasks.MetadataToken(host, srv.Client())
	for range 2 {
		if got, err := tok(context.Background()); got != "at-2" || err != nil {
			t.Fatalf("%q %v", got, err)
		}
	}
	if n := calls.Load(); n != 3 {
		t.Fatalf("%d reads, want 3", n)
	}
	for body, want := range map[string]string{
		`{"expires_in":3600}`: "metadata server: no access token in its answer",
		`not json`:            "metadata server: no access token in its answer",
	} {
		answer.Store(body)
		if _, err := cloudtasks.MetadataToken(host, nil)(context.Background()); err == nil || err.Error() != want {
			t.Errorf("%s: %v", body, err)
		}
	}
	bad := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(bad.Close)
	if _, err := cloudtasks.MetadataToken(strings.TrimPrefix(bad.URL, "http://"), nil)(context.Background()); err == nil || err.Error() != "metadata server: status 404" {
		t.Fatalf("404: %v", err)
	}
}

// answerBody is a response body that fails its read when err is set and counts its closes.
type answerBody struct {
	r      io.Reader
	closes *atomic.Int32
}

func (b answerBody) Read(p []byte) (int, error) { return b.r.Read(p) }
func (b answerBody) Close() error               { b.closes.Add(1); return nil }

// transport answers every request with status and body (or its error), and counts the bodies
// closed; its status is 0 where no request is expected.
type transport struct {
	err    error     // the round trip's
	body   io.Reader // nil: an empty body
	status int
	closes atomic.Int32
}

func (tr *transport) RoundTrip(r *http.Request) (*http.Response, error) {
	if tr.err != nil {
		return nil, tr.err
	}
	body := tr.body
	if body == nil {
		body = strings.NewReader("")
	}
	return &http.Response{StatusCode: tr.status, Body: answerBody{body, &tr.closes}, Header: http.Header{}, Request: r}, nil
}

// TestClientFailures: what fails on the way names where, wraps the cause and reads no queue; the
// answer's body is closed once read.
func TestClientFailures(t *testing.T) {
	down := errors.New("connection refused")
	cut := errors.New("connection reset")
	for _, c := range []struct {
		name     string
		endpoint string
		tr       *transport
		want     string
		cause    error
	}{
		{"endpoint", "http://bad host", &transport{}, `cloud tasks: parse "http://bad host/v2/` + queue + `": invalid character " " in host name`, nil},
		{"round trip", "", &transport{err: down}, "cloud tasks: GET /v2/" + queue + ": Get \"" + cloudtasks.DefaultEndpoint + "/v2/" + queue + "\": connection refused", down},
		{"body", "", &transport{status: 200, body: io.MultiReader(strings.NewReader(`{"name":`), iotest.ErrReader(cut))}, "cloud tasks: read the answer: connection reset", cut},
		{"status", "", &transport{status: 403}, "cloud tasks: 403 : ", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			cl := &cloudtasks.Client{Endpoint: c.endpoint, HTTP: &http.Client{Transport: c.tr}}
			q, err := cl.GetQueue(context.Background(), queue)
			if q != nil || err == nil || err.Error() != c.want || c.cause != nil && !errors.Is(err, c.cause) {
				t.Fatalf("GetQueue: %+v, %v; want the error %q", q, err, c.want)
			}
			if c.tr.status != 0 && c.tr.closes.Load() != 1 {
				t.Fatalf("the answer's body closed %d times, want once", c.tr.closes.Load())
			}
		})
	}
}

// TestMetadataTokenFailures: a host that is no host, a server that does not answer or cuts its
// answer, an answer that decodes only in part: each an error, the body closed, nothing cached.
func TestMetadataTokenFailures(t *testing.T) {
	down := errors.New("connection refused")
	cut := errors.New("connection reset")
	for _, c := range []struct {
		name  string
		host  string
		tr    *transport
		want  string
		cause error
	}{
		{"host", "bad host", &transport{}, `parse "http://bad host/computeMetadata/v1/instance/service-accounts/default/token": invalid character " " in host name`, nil},
		{"round trip", cloudtasks.MetadataHost, &transport{err: down}, "metadata server: Get \"http://metadata.google.internal/computeMetadata/v1/instance/service-accounts/default/token\": connection refused", down},
		{"body", cloudtasks.MetadataHost, &transport{status: 200, body: io.MultiReader(strings.NewReader(`{"access_token":"at-1"`), iotest.ErrReader(cut))}, "metadata server: connection reset", cut},
		// A value of the wrong type: json fills the token, then fails.
		{"partly decoded", cloudtasks.MetadataHost, &transport{status: 200, body: strings.NewReader(`{"access_token":"at-1","expires_in":"soon"}`)}, "metadata server: no access token in its answer", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			tok := cloudtasks.MetadataToken(c.host, &http.Client{Transport: c.tr})
			got, err := tok(context.Background())
			if got != "" || err == nil || err.Error() != c.want || c.cause != nil && !errors.Is(err, c.cause) {
				t.Fatalf("token %q, %v; want the error %q", got, err, c.want)
			}
			if c.tr.status != 0 && c.tr.closes.Load() != 1 {
				t.Fatalf("the answer's body closed %d times, want once", c.tr.closes.Load())
			}
		})
	}
}
