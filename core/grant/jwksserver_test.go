package grant

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
)

// jwksServer is Studio's JWKS endpoint on 127.0.0.1 (httptest binds loopback only): its body,
// status and Cache-Control can be changed while it runs, it counts requests, and it can be held
// (requests wait until released) to observe concurrent callers.
type jwksServer struct {
	srv  *httptest.Server
	hits atomic.Int64

	mu           sync.Mutex
	body         []byte
	status       int
	cacheControl string
	hold         chan struct{} // when non-nil, requests wait for it to close
	arrived      chan struct{} // receives one value per request that starts waiting on hold
}

func newJWKSServer(t testing.TB, body []byte) *jwksServer {
	t.Helper()
	s := &jwksServer{body: body, status: http.StatusOK}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		s.mu.Lock()
		body, status, cc, hold, arrived := s.body, s.status, s.cacheControl, s.hold, s.arrived
		s.mu.Unlock()
		if hold != nil {
			if arrived != nil {
				arrived <- struct{}{}
			}
			select {
			case <-hold:
			case <-r.Context().Done():
				return
			}
		}
		if cc != "" {
			w.Header().Set("Cache-Control", cc)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write(body)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *jwksServer) URL() string { return s.srv.URL + "/w/acme/api/v1/workspace-agent-grants/jwks/" }

func (s *jwksServer) set(body []byte, status int, cacheControl string) {
	s.mu.Lock()
	s.body, s.status, s.cacheControl = body, status, cacheControl
	s.mu.Unlock()
}

// holdRequests makes requests wait until the returned release is called.
func (s *jwksServer) holdRequests() (arrived <-chan struct{}, release func()) {
	hold, arr := make(chan struct{}), make(chan struct{}, 1000)
	s.mu.Lock()
	s.hold, s.arrived = hold, arr
	s.mu.Unlock()
	var once sync.Once
	return arr, func() {
		once.Do(func() {
			s.mu.Lock()
			s.hold, s.arrived = nil, nil
			s.mu.Unlock()
			close(hold)
		})
	}
}

func jwksSettings(url string) Settings {
	return Settings{Required: true, Issuer: testIssuer, JWKSURL: url, Leeway: DefaultLeeway}
}

func newJWKSVerifier(t testing.TB, url string, clk *clock, opts ...Option) *verifier {
	t.Helper()
	opts = append([]Option{WithClock(clk.Now), WithLogger(quietLog())}, opts...)
	a, err := NewVerifier(context.Background(), jwksSettings(url), "SRV", opts...)
	if err != nil {
		t.Fatalf("NewVerifier: %v", err)
	}
	return a.(*verifier)
}
