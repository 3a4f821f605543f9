package core_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/supervaize/svz/core"
	"github.com/supervaize/svz/core/contract"
)

// TestCloseWaitsForCallsInFlight: OnClose (which closes the store) runs only once the call in
// flight has returned; meanwhile new requests are refused with 503.
func TestCloseWaitsForCallsInFlight(t *testing.T) {
	var closed atomic.Bool
	started, release := make(chan struct{}), make(chan struct{})
	var storeClosedDuringCall atomic.Bool
	c := newController(t, core.Config{OnClose: func() error { closed.Store(true); return nil }}, handlers{
		actions: map[string]core.ActionFunc{"job.start": func(context.Context, *contract.ActionRequest) (*contract.ActionResult, error) {
			close(started)
			<-release
			storeClosedDuringCall.Store(closed.Load())
			return &contract.ActionResult{Status: contract.StatusOK}, nil
		}},
	})
	answered := make(chan int, 1)
	go func() {
		status, _ := post(t, c, rpcBody(t, 1, "supervaizer/action.invoke", params(nil)), nil)
		answered <- status
	}()
	<-started
	closeErr := make(chan error, 1)
	go func() { closeErr <- c.Close() }()

	// Closing has begun once a new request is refused.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(time.Millisecond) {
		rec := httptest.NewRecorder()
		c.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/.well-known/health", nil))
		if rec.Code == http.StatusServiceUnavailable {
			if rec.Body.String() != `{"detail":"Server is shutting down"}` {
				t.Fatalf("refusal %s", rec.Body)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("Close never began refusing new requests")
		}
	}
	if closed.Load() {
		t.Fatal("OnClose ran while a call was in flight")
	}
	close(release)
	if status := <-answered; status != http.StatusOK {
		t.Fatalf("the call in flight answered %d", status)
	}
	if err := <-closeErr; err != nil {
		t.Fatal(err)
	}
	if storeClosedDuringCall.Load() || !closed.Load() {
		t.Fatalf("store closed during the call %v, closed at the end %v", storeClosedDuringCall.Load(), closed.Load())
	}
}

// TestShutdownDeadline: a call still running when the deadline ends is reported, and the store is
// closed all the same.
func TestShutdownDeadline(t *testing.T) {
	var closed atomic.Bool
	started, release, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
	defer func() { close(release); <-done }()
	c := newController(t, core.Config{OnClose: func() error { closed.Store(true); return nil }}, handlers{
		actions: map[string]core.ActionFunc{"job.start": func(context.Context, *contract.ActionRequest) (*contract.ActionResult, error) {
			close(started)
			<-release
			return &contract.ActionResult{Status: contract.StatusOK}, nil
		}},
	})
	body := string(rpcBody(t, 1, "supervaizer/action.invoke", params(nil)))
	go func() {
		defer close(done)
		req := httptest.NewRequest(http.MethodPost, "/a2a", strings.NewReader(body))
		req.Header.Set("X-API-Key", testKey)
		c.ServeHTTP(httptest.NewRecorder(), req)
	}()
	<-started
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the deadline has passed
	err := c.Shutdown(ctx)
	if err == nil || !strings.Contains(err.Error(), "1 call(s) still running when the controller closed") || !errors.Is(err, context.Canceled) || !closed.Load() {
		t.Fatalf("Shutdown: %v, store closed %v", err, closed.Load())
	}
	if again := c.Close(); again == nil || again.Error() != err.Error() {
		t.Fatalf("a second Close returned %v", again)
	}
}
