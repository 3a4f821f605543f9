// Package testenv points tests at the real servers they need (PostgreSQL, Redis, moto_server, the
// Lambda Runtime Interface Emulator, an OCI registry, a headless Chromium, Jaeger) through SVZ_TEST_*
// environment variables.
//
// scripts/with-services starts those servers on 127.0.0.1 and sets the variables; `make test` and
// .ci/run use it. A developer who runs `go test` without it gets the dependent tests skipped, but
// under CI=true a missing variable fails the test: CI never passes by skipping.
package testenv

import (
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
)

// Variables set by scripts/with-services.
const (
	PostgresURL = "SVZ_TEST_POSTGRES_URL"  // postgres://user@127.0.0.1:port/db?sslmode=disable
	RedisURL    = "SVZ_TEST_REDIS_URL"     // redis://127.0.0.1:port/0
	AWSEndpoint = "SVZ_TEST_AWS_ENDPOINT"  // http://127.0.0.1:port of a moto_server
	RIE         = "SVZ_TEST_RIE"           // path of the aws-lambda-rie binary
	OCIRegistry = "SVZ_TEST_OCI_REGISTRY"  // host:port of a plain-HTTP OCI registry on loopback
	Chromium    = "SVZ_TEST_CHROMIUM"      // path of a Chromium binary (Debian's chromium package)
	OTLP        = "SVZ_TEST_OTLP_ENDPOINT" // http://127.0.0.1:port: Jaeger's OTLP/HTTP receiver
	JaegerQuery = "SVZ_TEST_JAEGER_QUERY"  // http://127.0.0.1:port: that Jaeger's query API
)

// Need returns the value of the environment variable name. When it is empty the test is skipped,
// or fails when CI is true.
func Need(t testing.TB, name string) string {
	t.Helper()
	v := strings.TrimSpace(os.Getenv(name))
	if v != "" {
		return v
	}
	if InCI() {
		t.Fatalf("%s is not set: CI must start this server (see scripts/with-services)", name)
	}
	t.Skipf("%s is not set; run through scripts/with-services (make test) to include this test", name)
	return ""
}

// UniqueName returns prefix and 12 random hex digits: a table, log or record of this test run only.
func UniqueName(prefix string) string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

// InCI reports whether the tests run under CI (CI=true), where skipping for a missing server is an
// error.
func InCI() bool {
	v := strings.ToLower(strings.TrimSpace(os.Getenv("CI")))
	return v == "true" || v == "1"
}

// MotoWrites is the HTTP client (an awsapi Doer) of tests that race conditional writes on
// moto_server: DynamoDB evaluates a condition and writes atomically, moto_server 5.2 does not (it
// reads the item, checks the condition, then writes, without a lock), so two racing writes could
// both pass theirs. Sending one PutItem or DeleteItem at a time keeps such a test a test of the
// code under test. The zero value is ready to use.
type MotoWrites struct{ mu sync.Mutex }

// Do sends req, one conditional write at a time.
func (m *MotoWrites) Do(req *http.Request) (*http.Response, error) {
	return m.send(req, http.DefaultClient.Do)
}

// RoundTrip is Do as an http.RoundTripper (the transport of MotoProxy).
func (m *MotoWrites) RoundTrip(req *http.Request) (*http.Response, error) {
	return m.send(req, http.DefaultTransport.RoundTrip)
}

func (m *MotoWrites) send(req *http.Request, next func(*http.Request) (*http.Response, error)) (*http.Response, error) {
	switch req.Header.Get("X-Amz-Target") {
	case "DynamoDB_20120810.PutItem", "DynamoDB_20120810.DeleteItem", "DynamoDB_20120810.UpdateItem":
		m.mu.Lock()
		defer m.mu.Unlock()
	}
	return next(req)
}

// MotoProxy returns the URL of a proxy on 127.0.0.1 to the moto_server at endpoint that sends
// conditional writes one at a time (MotoWrites) for every client that goes through it: tests whose
// instances are separate processes point them all at it. It stops with the test.
func MotoProxy(t testing.TB, endpoint string) string {
	t.Helper()
	u, err := url.Parse(endpoint)
	if err != nil {
		t.Fatalf("moto endpoint %q: %v", endpoint, err)
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.Transport = &MotoWrites{}
	srv := httptest.NewServer(rp)
	t.Cleanup(srv.Close)
	return srv.URL
}
