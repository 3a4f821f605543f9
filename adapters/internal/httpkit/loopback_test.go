package httpkit_test

import (
	"bufio"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/supervaize/svz/adapters/internal/httpkit"
)

// TestNotLoopback: the Host variants a browser, a rebinding page or a hand-written request can
// send, from a loopback peer and from another one.
func TestNotLoopback(t *testing.T) {
	const fix = "; open it as 127.0.0.1, [::1] or localhost"
	named := func(host string) string { return `the request names the host "` + host + `"` + fix }
	cases := []struct{ remote, host, want string }{
		{"127.0.0.1:5000", "127.0.0.1:8000", ""},
		{"127.0.0.1:5000", "127.0.0.1", ""},
		{"127.0.0.1:5000", "127.0.0.2:8000", ""}, // all of 127/8 is loopback
		{"127.0.0.1:5000", "localhost:8000", ""},
		{"127.0.0.1:5000", "LOCALHOST:8000", ""},
		{"127.0.0.1:5000", "localhost.:8000", ""}, // the fully qualified name
		{"127.0.0.1:5000", "localhost.", ""},
		{"127.0.0.1:5000", "localhost:1", ""}, // the port is not the point: rebinding changes the name
		{"[::1]:5000", "[::1]:8000", ""},
		{"[::1]:5000", "[::1]", ""},
		{"[::1]:5000", "::1", ""},
		{"127.0.0.1:5000", "[::ffff:127.0.0.1]:8000", ""},
		{"127.0.0.1:5000", "", "the request names no host (no Host header)" + fix},
		{"127.0.0.1:5000", "localhost.attacker.example:8000", named("localhost.attacker.example")},
		{"127.0.0.1:5000", "attacker.example", named("attacker.example")},
		{"127.0.0.1:5000", "127.0.0.1.nip.io", named("127.0.0.1.nip.io")},
		{"127.0.0.1:5000", "localhost..", named("localhost..")},
		{"127.0.0.1:5000", "127.1", named("127.1")}, // not an address net.ParseIP reads
		{"127.0.0.1:5000", "2130706433", named("2130706433")},
		{"127.0.0.1:5000", "0.0.0.0:8000", named("0.0.0.0")},
		{"127.0.0.1:5000", "127.0.0.1:3000,attacker.example", named("127.0.0.1:3000,attacker.example")}, // two Host headers folded
		{"127.0.0.1:5000", "localhost:", named("localhost:")},
		{"127.0.0.1:5000", "localhost:80a", named("localhost:80a")},
		{"127.0.0.1:5000", "[localhost]", ""}, // odd but harmless: no page's name is written in brackets
		{"127.0.0.1:5000", "]localhost[", named("]localhost[")},
		{"127.0.0.1:5000", "localhost:8000:1", named("localhost:8000:1")},
		{"127.0.0.1:5000", "évil.example", named("évil.example")},
		{"127.0.0.1:5000", strings.Repeat("a", 100), named(strings.Repeat("a", 64) + "…")},
		{"192.0.2.7:5000", "127.0.0.1:8000", "the request comes from 192.0.2.7"},
		{"[2001:db8::1]:5000", "localhost", "the request comes from 2001:db8::1"},
		{"pipe", "localhost", "the request comes from pipe"},
	}
	for _, tc := range cases {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.RemoteAddr, r.Host = tc.remote, tc.host
		if got := httpkit.NotLoopback(r); got != tc.want {
			t.Errorf("peer %s, Host %q: %q, want %q", tc.remote, tc.host, got, tc.want)
		}
	}
	// An absolute target: net/http took the Host from it and dropped the header.
	r := httptest.NewRequest(http.MethodPost, "http://127.0.0.1:8000/a2a", nil)
	r.RemoteAddr = "127.0.0.1:5000"
	want := `the request target names the host "127.0.0.1:8000" (absolute form), which hides the Host header local mode checks; ` +
		`send the path alone (e.g. POST /a2a) with Host 127.0.0.1, [::1] or localhost`
	if got := httpkit.NotLoopback(r); got != want {
		t.Errorf("absolute target: %q, want %q", got, want)
	}
	// A request made by hand may have no URL: its Host is what counts.
	for host, want := range map[string]string{"localhost": "", "attacker.example": `the request names the host "attacker.example"` + fix} {
		if got := httpkit.NotLoopback(&http.Request{RemoteAddr: "127.0.0.1:5000", Host: host}); got != want {
			t.Errorf("no URL, Host %q: %q, want %q", host, got, want)
		}
	}
}

// TestLoopbackOnlyOnTheWire sends raw requests to a loopback server behind LoopbackOnly: the Host
// a request names is what counts, however it is written, and a refusal never reaches the handler.
func TestLoopbackOnlyOnTheWire(t *testing.T) {
	reached := make(chan string, 16)
	h := httpkit.LoopbackOnly(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached <- r.Host
		_, _ = io.WriteString(w, "ok")
	}), slog.New(slog.DiscardHandler))
	srv := httptest.NewServer(h)
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	refused := func(host string) string {
		return `{"detail":"Local mode answers loopback only: the request names the host \"` + host + `\"; open it as 127.0.0.1, [::1] or localhost"}`
	}
	absolute := func(host string) string {
		return `{"detail":"Local mode answers loopback only: the request target names the host \"` + host + `\" (absolute form), ` +
			`which hides the Host header local mode checks; send the path alone (e.g. POST /a2a) with Host 127.0.0.1, [::1] or localhost"}`
	}
	cases := []struct{ name, request, status, body string }{
		{"HTTP/1.0 without Host", "GET / HTTP/1.0\r\n\r\n", "HTTP/1.0 403 Forbidden",
			`{"detail":"Local mode answers loopback only: the request names no host (no Host header); open it as 127.0.0.1, [::1] or localhost"}`},
		{"HTTP/1.0 with Host", "GET / HTTP/1.0\r\nHost: localhost\r\n\r\n", "HTTP/1.0 200 OK", "ok"},
		{"rebound name", "GET / HTTP/1.1\r\nHost: attacker.example:80\r\nConnection: close\r\n\r\n", "HTTP/1.1 403 Forbidden", refused("attacker.example")},
		// An absolute target names the host and net/http drops the Host header (RFC 9112
		// §3.2.2): the header cannot be checked, so the request is refused whatever both say.
		{"absolute target, foreign", "GET http://attacker.example/ HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n",
			"HTTP/1.1 403 Forbidden", absolute("attacker.example")},
		{"absolute target, loopback, foreign Host", "POST http://127.0.0.1:8000/a2a HTTP/1.1\r\nHost: evil.example\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
			"HTTP/1.1 403 Forbidden", absolute("127.0.0.1:8000")},
		{"absolute target, loopback, loopback Host", "GET http://localhost/ HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
			"HTTP/1.1 403 Forbidden", absolute("localhost")},
		{"authority target", "CONNECT 127.0.0.1:8000 HTTP/1.1\r\nHost: evil.example\r\nConnection: close\r\n\r\n",
			"HTTP/1.1 403 Forbidden", absolute("127.0.0.1:8000")},
		{"empty Host", "GET / HTTP/1.1\r\nHost:\r\nConnection: close\r\n\r\n", "HTTP/1.1 403 Forbidden",
			`{"detail":"Local mode answers loopback only: the request names no host (no Host header); open it as 127.0.0.1, [::1] or localhost"}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(time.Minute)) // only a broken server reaches it
			if _, err := io.WriteString(c, tc.request); err != nil {
				t.Fatal(err)
			}
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			ctype := "application/json" // every refusal
			if tc.body == "ok" {
				ctype = "text/plain; charset=utf-8"
			}
			if status := resp.Proto + " " + resp.Status; status != tc.status || string(body) != tc.body || resp.Header.Get("Content-Type") != ctype {
				t.Fatalf("%s %s (Content-Type %q), want %s %s (%q)", status, body, resp.Header.Get("Content-Type"), tc.status, tc.body, ctype)
			}
		})
	}
	close(reached)
	var hosts []string
	for h := range reached {
		hosts = append(hosts, h)
	}
	if got := strings.Join(hosts, ","); got != "localhost" {
		t.Errorf("the handler saw Hosts %q, want only the loopback request in origin form", got)
	}
}
