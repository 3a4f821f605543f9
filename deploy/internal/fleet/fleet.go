// Package fleet stands in for a platform's instances in tests of the fakes: it serves the real Hello
// World controller (hello.Build), built from the environment the fake platform gives the revision
// that currently receives traffic, so the health gate talks to the real controller with the real
// stored API key.
package fleet

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"sync"

	"github.com/supervaize/svz/examples/helloworld/hello"
)

// Revision is what serves now: a key naming it and its resolved environment (secrets as values).
// Down makes instances fail to answer, like a container that crashes after starting.
type Revision struct {
	Key  string
	Env  map[string]string
	Down bool
}

// Fleet is an http.Handler answering as the serving revision.
type Fleet struct {
	// Serving returns the revision that receives traffic, false when none does.
	Serving func() (Revision, bool)

	mu       sync.Mutex
	handlers map[string]http.Handler
}

func (f *Fleet) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rev, ok := f.Serving()
	if !ok || rev.Down {
		http.Error(w, "no healthy instance", http.StatusServiceUnavailable)
		return
	}
	h, err := f.handler(r.Context(), rev)
	if err != nil {
		http.Error(w, "instance failed to start: "+err.Error(), http.StatusServiceUnavailable)
		return
	}
	h.ServeHTTP(w, r)
}

func (f *Fleet) handler(ctx context.Context, rev Revision) (http.Handler, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if h, ok := f.handlers[rev.Key]; ok {
		return h, nil
	}
	env := map[string]string{"SUPERVAIZER_STORE": "memory"}
	for k, v := range rev.Env {
		env[k] = v
	}
	h, err := hello.Build(ctx, func(k string) string { return env[k] }, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		return nil, err
	}
	if f.handlers == nil {
		f.handlers = map[string]http.Handler{}
	}
	f.handlers[rev.Key] = h
	return h, nil
}
