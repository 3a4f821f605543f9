package httpkit

import (
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"strings"
)

// NotLoopback says why r does not come from this machine, or "" when it does: its peer must be a
// loopback address, and its Host a loopback address or localhost (NotLoopbackHost), so that a web
// page whose name was rebound to 127.0.0.1 (DNS rebinding) cannot reach a server whose key is
// public knowledge.
//
// A request whose target names a host (absolute form, "POST http://127.0.0.1:8000/a2a", or a
// CONNECT's authority) is refused whatever that host: net/http then takes the request's Host from
// the target and drops the Host header (RFC 9112 §3.2.2), so the header cannot be checked, and a
// client that is not a proxy never sends that form to a server.
func NotLoopback(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	if !net.ParseIP(host).IsLoopback() { // a nil IP (not an address) is not loopback
		return "the request comes from " + host
	}
	if r.URL != nil && r.URL.Host != "" {
		return "the request target names the host " + quoteHost(r.URL.Host) + " (absolute form), which hides the Host header local mode checks; " +
			"send the path alone (e.g. POST /a2a) with Host 127.0.0.1, [::1] or localhost"
	}
	return NotLoopbackHost(r.Host)
}

// NotLoopbackHost says why a request's Host header does not name this machine, or "" when it is
// a loopback address or localhost, with or without a port. It is NotLoopback's Host rule, for a
// request whose peer is not a connection (a Lambda event under sam local).
func NotLoopbackHost(name string) string {
	const fix = "open it as 127.0.0.1, [::1] or localhost"
	if name == "" { // HTTP/1.0 may omit it
		return "the request names no host (no Host header); " + fix
	}
	if h, port, err := net.SplitHostPort(name); err == nil {
		if !digits(port) { // "127.0.0.1:3000,attacker.example", a folded pair of Host headers
			return "the request names the host " + quoteHost(name) + "; " + fix
		}
		name = h
	} else if name[0] == '[' && name[len(name)-1] == ']' { // name is not empty; one byte is not both brackets
		name = name[1 : len(name)-1] // an IPv6 literal without a port
	}
	// "localhost." is localhost as a fully qualified name: no one can make it resolve elsewhere.
	if net.ParseIP(name).IsLoopback() || strings.EqualFold(strings.TrimSuffix(name, "."), "localhost") { // nil (not an address) is not loopback
		return ""
	}
	return "the request names the host " + quoteHost(name) + "; " + fix
}

// digits reports whether s is a port number's digits (at least one).
func digits(s string) bool {
	for _, c := range []byte(s) {
		if c < '0' || c > '9' {
			return false
		}
	}
	return s != ""
}

// quoteHost bounds and quotes a Host header for a message.
func quoteHost(s string) string {
	if len(s) > 64 {
		s = s[:64] + "…"
	}
	b, _ := json.Marshal(s)
	return string(b)
}

// LoopbackOnly answers 403 {"detail": …} to every request NotLoopback refuses, before h sees it:
// local mode serves a public API key, so every route (not only the workbench) must refuse a Host
// that is not this machine.
func LoopbackOnly(h http.Handler, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if reason := NotLoopback(r); reason != "" {
			RefuseNotLoopback(w, r, log, reason)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// RefuseNotLoopback logs and answers a request local mode refuses for reason (NotLoopback's or
// NotLoopbackHost's): 403 {"detail": …} naming the fix, the one answer of every adapter.
func RefuseNotLoopback(w http.ResponseWriter, r *http.Request, log *slog.Logger, reason string) {
	log.Warn("request refused: local mode answers loopback only", "remote_addr", r.RemoteAddr, "reason", reason)
	b, _ := json.Marshal(map[string]string{"detail": "Local mode answers loopback only: " + reason})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusForbidden)
	_, _ = w.Write(b)
}
