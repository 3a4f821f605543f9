package httpkit

import (
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"strings"
)

// NotLoopback says why r does not come from this machine, or "" when it does: its peer must be a
// loopback address, and its Host a loopback address or localhost, so that a web page whose name
// was rebound to 127.0.0.1 (DNS rebinding) cannot reach a server whose key is public knowledge.
func NotLoopback(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return "the request comes from " + host
	}
	const fix = "open it as 127.0.0.1, [::1] or localhost"
	name := r.Host
	if name == "" { // HTTP/1.0 may omit it
		return "the request names no host (no Host header); " + fix
	}
	if h, _, err := net.SplitHostPort(name); err == nil {
		name = h
	} else if len(name) > 1 && name[0] == '[' && name[len(name)-1] == ']' {
		name = name[1 : len(name)-1] // an IPv6 literal without a port
	}
	// "localhost." is localhost as a fully qualified name: no one can make it resolve elsewhere.
	if ip := net.ParseIP(name); ip != nil && ip.IsLoopback() || strings.EqualFold(strings.TrimSuffix(name, "."), "localhost") {
		return ""
	}
	return "the request names the host " + quoteHost(name) + "; " + fix
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
		reason := NotLoopback(r)
		if reason == "" {
			h.ServeHTTP(w, r)
			return
		}
		log.Warn("request refused: local mode answers loopback only", "remote_addr", r.RemoteAddr, "reason", reason)
		b, _ := json.Marshal(map[string]string{"detail": "Local mode answers loopback only: " + reason})
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusForbidden)
		_, _ = w.Write(b)
	})
}
