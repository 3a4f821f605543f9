package awsapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
)

// clock is a settable test clock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// credsServer is a container credentials endpoint: each fetch gets keys numbered by the fetch,
// expiring after lifetime.
type credsServer struct {
	t        *testing.T
	clock    *clock
	lifetime time.Duration
	token    atomic.Pointer[string] // the Authorization it wants
	fetches  atomic.Int32
	fail     atomic.Int32 // status to answer instead, when non-zero
	delay    time.Duration
}

func (s *credsServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet || r.URL.Path != "/v1/credentials" {
		s.t.Errorf("%s %s", r.Method, r.URL)
	}
	if want := s.token.Load(); want != nil && r.Header.Get("Authorization") != *want {
		w.WriteHeader(http.StatusForbidden)
		_, _ = io.WriteString(w, `{"code":"AccessDenied","message":"bad token `+r.Header.Get("Authorization")+`"}`)
		return
	}
	time.Sleep(s.delay)
	if code := s.fail.Load(); code != 0 {
		w.WriteHeader(int(code))
		_, _ = io.WriteString(w, `{"code":"Unavailable","message":"try later"}`)
		return
	}
	n := s.fetches.Add(1)
	_ = json.NewEncoder(w).Encode(map[string]string{
		"AccessKeyId":     fmt.Sprintf("ASIA%d", n),
		"SecretAccessKey": fmt.Sprintf("secret-%d", n),
		"Token":           fmt.Sprintf("token-%d", n),
		"Expiration":      s.clock.Now().Add(s.lifetime).UTC().Format(time.RFC3339),
		"AccountId":       "123456789012",
	})
}

func containerSetup(t *testing.T, lifetime time.Duration) (*credsServer, *httptest.Server, *clock) {
	clk := &clock{now: signingTime}
	cs := &credsServer{t: t, clock: clk, lifetime: lifetime}
	srv := httptest.NewServer(cs)
	t.Cleanup(srv.Close)
	return cs, srv, clk
}

func TestContainerCredentialsCacheAndRefresh(t *testing.T) {
	cs, srv, clk := containerSetup(t, time.Hour)
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("token-one\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	want := "token-one"
	cs.token.Store(&want)
	cs.delay = 20 * time.Millisecond // concurrent callers pile up on one fetch
	c, err := newProvider(env("AWS_CONTAINER_CREDENTIALS_FULL_URI", srv.URL+"/v1/credentials",
		"AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE", tokenFile, "AWS_CONTAINER_AUTHORIZATION_TOKEN", "ignored"), newSettings([]Option{WithClock(clk.Now)}))
	if err != nil {
		t.Fatal(err)
	}
	if c.variable != "AWS_CONTAINER_CREDENTIALS_FULL_URI" {
		t.Errorf("variable %q", c.variable)
	}
	ctx := context.Background()
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			got, err := c.Retrieve(ctx)
			if err != nil || got.AccessKeyID != "ASIA1" || got.SecretAccessKey != "secret-1" || got.SessionToken != "token-1" ||
				!got.CanExpire || !got.Expires.Equal(signingTime.Add(time.Hour)) || got.AccountID != "123456789012" {
				t.Errorf("%+v %v", got, err)
			}
		})
	}
	wg.Wait()
	if n := cs.fetches.Load(); n != 1 {
		t.Fatalf("32 concurrent callers made %d fetches, want 1", n)
	}
	cs.delay = 0

	clk.Add(54 * time.Minute) // 6 minutes before expiry: still cached
	if got, _ := c.Retrieve(ctx); got.AccessKeyID != "ASIA1" || cs.fetches.Load() != 1 {
		t.Fatalf("%s after %d fetches", got.AccessKeyID, cs.fetches.Load())
	}
	// The token file rotates; the next fetch reads it again.
	if err := os.WriteFile(tokenFile, []byte("token-two"), 0o600); err != nil {
		t.Fatal(err)
	}
	want2 := "token-two"
	cs.token.Store(&want2)
	clk.Add(2 * time.Minute) // 4 minutes before expiry: refreshed
	if got, err := c.Retrieve(ctx); err != nil || got.AccessKeyID != "ASIA2" || cs.fetches.Load() != 2 {
		t.Fatalf("%s %v after %d fetches", got.AccessKeyID, err, cs.fetches.Load())
	}

	// A failed refresh keeps the valid credentials and tries again 10 s later.
	clk.Add(56 * time.Minute)
	cs.fail.Store(http.StatusServiceUnavailable)
	if got, err := c.Retrieve(ctx); err != nil || got.AccessKeyID != "ASIA2" {
		t.Fatalf("failed refresh: %s %v", got.AccessKeyID, err)
	}
	cs.fail.Store(0)
	clk.Add(5 * time.Second)
	if got, _ := c.Retrieve(ctx); got.AccessKeyID != "ASIA2" || cs.fetches.Load() != 2 {
		t.Fatalf("%s after %d fetches", got.AccessKeyID, cs.fetches.Load())
	}
	clk.Add(5 * time.Second)
	if got, err := c.Retrieve(ctx); err != nil || got.AccessKeyID != "ASIA3" || cs.fetches.Load() != 3 {
		t.Fatalf("%s %v after %d fetches", got.AccessKeyID, err, cs.fetches.Load())
	}

	// Past expiry, a failed refresh is an error.
	clk.Add(2 * time.Hour)
	cs.fail.Store(http.StatusInternalServerError)
	if _, err := c.Retrieve(ctx); err == nil || err.Error() != "container credentials endpoint AWS_CONTAINER_CREDENTIALS_FULL_URI: Unavailable: try later (HTTP 500)" {
		t.Fatalf("expired: %v", err)
	}
}

func TestContainerCredentialsErrors(t *testing.T) {
	cs, srv, clk := containerSetup(t, time.Hour)
	want := "the-right-token"
	cs.token.Store(&want)
	ctx := context.Background()

	c, err := newProvider(env("AWS_CONTAINER_CREDENTIALS_FULL_URI", srv.URL+"/v1/credentials", "AWS_CONTAINER_AUTHORIZATION_TOKEN", "wrong-token-value"), newSettings([]Option{WithClock(clk.Now)}))
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Retrieve(ctx)
	if err == nil || err.Error() != "container credentials endpoint AWS_CONTAINER_CREDENTIALS_FULL_URI: AccessDenied: bad token [token] (HTTP 403)" {
		t.Fatalf("%v", err)
	}
	if retryable(err) {
		t.Errorf("a 403 is retryable")
	}

	c, _ = newProvider(env("AWS_CONTAINER_CREDENTIALS_FULL_URI", srv.URL+"/v1/credentials", "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE", "/nonexistent/token"), newSettings([]Option{WithClock(clk.Now)}))
	if _, err := c.Retrieve(ctx); err == nil || !strings.HasPrefix(err.Error(), "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE: open /nonexistent/token: ") {
		t.Fatalf("%v", err)
	}

	c, _ = newProvider(env("AWS_CONTAINER_CREDENTIALS_FULL_URI", "http://"+closedPort(t)+"/v1/credentials"), newSettings([]Option{WithClock(clk.Now)}))
	if _, err := c.Retrieve(ctx); err == nil || !strings.Contains(err.Error(), "connection refused") || !retryable(err) {
		t.Fatalf("%v", err)
	}

	// A caller whose context ends while another fetches gives up.
	cs.delay = 200 * time.Millisecond
	c, _ = newProvider(env("AWS_CONTAINER_CREDENTIALS_FULL_URI", srv.URL+"/v1/credentials", "AWS_CONTAINER_AUTHORIZATION_TOKEN", want), newSettings([]Option{WithClock(clk.Now)}))
	go func() { _, _ = c.Retrieve(ctx) }()
	time.Sleep(50 * time.Millisecond)
	short, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
	defer cancel()
	if _, err := c.Retrieve(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("%v", err)
	}
}

func TestParseContainerAnswer(t *testing.T) {
	now := signingTime
	cases := []struct {
		status  int
		body    string
		wantErr string
		refresh time.Time
	}{
		{200, `{"AccessKeyId":"A","SecretAccessKey":"S","Token":"T","Expiration":"2026-07-08T16:00:00Z"}`, "", now.Add(6*time.Hour - 5*time.Minute)},
		{200, `{"AccessKeyId":"A","SecretAccessKey":"S","Token":"T","Expiration":"2026-07-08T10:02:00.123Z"}`, "", now.Add(60*time.Second + 61500*time.Microsecond)},
		{200, `{"AccessKeyId":"A","SecretAccessKey":"S"}`, "", now.Add(100 * 365 * 24 * time.Hour)},
		{200, `{"AccessKeyId":"A","SecretAccessKey":"S","Expiration":"tomorrow"}`, `the answer's Expiration "tomorrow" is not an RFC 3339 time`, time.Time{}},
		{200, `{"AccessKeyId":"A","SecretAccessKey":"S","Expiration":"2026-07-08T09:00:00Z"}`,
			"the credentials expired at 2026-07-08T09:00:00Z, before they were received (2026-07-08T10:00:00Z)", time.Time{}},
		{200, `{"AccessKeyId":"A"}`, "the answer has no AccessKeyId and SecretAccessKey", time.Time{}},
		{200, `{"AccessKeyId":"A","SecretAccessKey":"S"`, "the answer is not JSON credentials", time.Time{}},
		{404, `not json`, "HTTP 404", time.Time{}},
		{400, `{"code":"InvalidToken"}`, "InvalidToken (HTTP 400)", time.Time{}},
	}
	for _, tc := range cases {
		cc, err := parseContainerAnswer(tc.status, []byte(tc.body), now)
		if tc.wantErr != "" {
			if err == nil || err.Error() != tc.wantErr {
				t.Errorf("%s: %v, want %s", tc.body, err, tc.wantErr)
			}
			continue
		}
		if err != nil || cc.creds.AccessKeyID != "A" || cc.creds.SecretAccessKey != "S" || !cc.refreshAt.Equal(tc.refresh) {
			t.Errorf("%s: %+v %v, want refresh at %s", tc.body, cc, err, tc.refresh)
		}
	}
}

func FuzzParseContainerAnswer(f *testing.F) {
	f.Add(200, []byte(`{"AccessKeyId":"A","SecretAccessKey":"S","Token":"T","Expiration":"2026-07-08T16:00:00Z"}`))
	f.Add(200, []byte(`{"AccessKeyId":"A","SecretAccessKey":"S","Expiration":"2026-07-08T10:00:00.5+02:00"}`))
	f.Add(500, []byte(`{"code":"C","message":"m"}`))
	f.Add(200, []byte(`null`))
	f.Fuzz(func(t *testing.T, status int, body []byte) {
		cc, err := parseContainerAnswer(status, body, signingTime)
		if err != nil {
			var a containerAnswer
			if json.Unmarshal(body, &a) == nil && len(a.SecretAccessKey) > 8 && strings.Contains(err.Error(), a.SecretAccessKey) &&
				!strings.Contains(a.Code+a.Message+a.Expiration, a.SecretAccessKey) {
				t.Fatalf("error shows the secret key: %v", err)
			}
			return
		}
		if status != 200 || cc.creds.AccessKeyID == "" || cc.creds.SecretAccessKey == "" || !cc.refreshAt.After(signingTime) ||
			(!cc.expires.IsZero() && cc.refreshAt.After(cc.expires)) {
			t.Fatalf("accepted %d %q as %+v", status, body, cc)
		}
	})
}

// TestExpiredTokenRefetches: a service that calls the session token expired makes the client
// fetch fresh credentials and try again.
func TestExpiredTokenRefetches(t *testing.T) {
	cs, credsSrv, clk := containerSetup(t, time.Hour)
	var calls atomic.Int32
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		if r.Header.Get("X-Amz-Security-Token") == "token-1" {
			w.WriteHeader(http.StatusBadRequest)
			_, _ = io.WriteString(w, `{"__type":"com.amazon.coral.service#ExpiredTokenException","message":"The security token included in the request is expired"}`)
			return
		}
		_, _ = io.WriteString(w, `{}`)
	}))
	defer api.Close()
	c := newClient(t, env("AWS_REGION", "eu-west-3", "AWS_ENDPOINT_URL", api.URL, "AWS_CONTAINER_CREDENTIALS_FULL_URI", credsSrv.URL+"/v1/credentials"),
		testDynamoDB, WithClock(clk.Now))
	if err := c.Call(context.Background(), "ListTables", struct{}{}, nil); err != nil {
		t.Fatal(err)
	}
	if calls.Load() != 2 || cs.fetches.Load() != 2 {
		t.Fatalf("%d calls, %d fetches", calls.Load(), cs.fetches.Load())
	}

	// Static credentials cannot be refreshed: the error is final.
	calls.Store(0)
	c = newClient(t, env("AWS_REGION", "eu-west-3", "AWS_ENDPOINT_URL", api.URL, "AWS_ACCESS_KEY_ID", "a", "AWS_SECRET_ACCESS_KEY", "b", "AWS_SESSION_TOKEN", "token-1"), testDynamoDB)
	err := c.Call(context.Background(), "ListTables", struct{}{}, nil)
	var apiErr *APIError
	if !errors.As(err, &apiErr) || apiErr.Code != "ExpiredTokenException" || calls.Load() != 1 {
		t.Fatalf("%v after %d calls", err, calls.Load())
	}
}

// rotating is a credentials provider with a cache to invalidate: each fetch gets a new token.
type rotating struct {
	fetches, invalidations atomic.Int32
	current                atomic.Pointer[aws.Credentials]
}

func (r *rotating) Retrieve(context.Context) (aws.Credentials, error) {
	if c := r.current.Load(); c != nil {
		return *c, nil
	}
	n := r.fetches.Add(1)
	c := aws.Credentials{AccessKeyID: "AKIDFALLBACK", SecretAccessKey: "s", SessionToken: fmt.Sprintf("token-%d", n)}
	r.current.Store(&c)
	return c, nil
}

func (r *rotating) Invalidate() { r.invalidations.Add(1); r.current.Store(nil) }

// TestFallback: a client with no credentials in its environment loads its Fallback at the first
// call, not at New, once for many calls; an expired token invalidates the fallback's cache and
// the call is retried with fresh credentials; a failing fallback says what was tried.
func TestFallback(t *testing.T) {
	var loads atomic.Int32
	r := &rotating{}
	var calls atomic.Int32
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		calls.Add(1)
		if req.Header.Get("X-Amz-Security-Token") == "token-1" {
			w.WriteHeader(http.StatusBadRequest)
			_, _ = io.WriteString(w, `{"__type":"com.amazon.coral.service#ExpiredTokenException","message":"expired"}`)
			return
		}
		_, _ = io.WriteString(w, `{}`)
	}))
	defer api.Close()
	c := newClient(t, env("AWS_REGION", "eu-west-3", "AWS_ENDPOINT_URL", api.URL), testDynamoDB,
		WithFallback(func(context.Context) (aws.CredentialsProvider, error) { loads.Add(1); return r, nil }))
	if loads.Load() != 0 {
		t.Fatal("New loaded the fallback")
	}
	for range 3 {
		if err := c.Call(context.Background(), "ListTables", struct{}{}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if loads.Load() != 1 || r.fetches.Load() != 2 || r.invalidations.Load() != 1 || calls.Load() != 4 {
		t.Errorf("%d loads, %d fetches, %d invalidations, %d calls; want 1, 2, 1, 4", loads.Load(), r.fetches.Load(), r.invalidations.Load(), calls.Load())
	}

	failing := newClient(t, env("AWS_REGION", "eu-west-3", "AWS_ENDPOINT_URL", api.URL), testDynamoDB,
		WithFallback(func(context.Context) (aws.CredentialsProvider, error) {
			return nil, errors.New("the chain found nothing")
		}))
	err := failing.Call(context.Background(), "ListTables", struct{}{}, nil)
	want := errNoCredentials + " " + errNoContainer + ", and the chain found nothing"
	if err == nil || err.Error() != want {
		t.Errorf("error = %v, want %q", err, want)
	}
}
