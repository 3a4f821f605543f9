package testkit

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// Server starts an httptest server for h on a loopback port of the slice at base.
func Server(t testing.TB, base int, h http.Handler) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(h)
	_ = srv.Listener.Close()
	srv.Listener = Listen(t, base)
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}
