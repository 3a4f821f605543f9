package workbench_test

import (
	"cmp"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/supervaize/svz/adapters/platform/workbench"
)

var quiet = slog.New(slog.DiscardHandler)

// controllerStub stands for the controller behind the workbench: it answers every other path.
var controllerStub = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusTeapot)
	_, _ = io.WriteString(w, `{"controller":"`+r.URL.Path+`"}`)
})

type request struct {
	method, path, remote, host string
}

func serve(h http.Handler, r request) *httptest.ResponseRecorder {
	req := httptest.NewRequest(r.method, r.path, nil) // origin form, as a browser sends it
	req.RemoteAddr = r.remote
	if req.RemoteAddr == "" {
		req.RemoteAddr = "127.0.0.1:50000"
	}
	req.Host = cmp.Or(r.host, "127.0.0.1:8000")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	return w
}

// TestRoutes: what /manage answers, and that everything else is the controller's.
func TestRoutes(t *testing.T) {
	h := workbench.New(controllerStub, workbench.Config{APIKey: "local-dev", Log: quiet})
	const notFound = `{"detail":"Not Found"}`
	for _, c := range []struct {
		name   string
		req    request
		status int
		ctype  string
		body   string // exact, or a prefix when it ends with "…"
	}{
		{"page", request{"GET", "/manage", "", ""}, 200, "text/html; charset=utf-8", "<!doctype html>…"},
		{"page with slash", request{"GET", "/manage/", "", ""}, 200, "text/html; charset=utf-8", "<!doctype html>…"},
		{"HEAD page", request{"HEAD", "/manage", "", ""}, 200, "text/html; charset=utf-8", ""},
		{"script", request{"GET", "/manage/assets/js/main.js", "", ""}, 200, "text/javascript; charset=utf-8", "// The workbench's entry…"},
		{"style", request{"GET", "/manage/assets/workbench.css", "", ""}, 200, "text/css; charset=utf-8", "/* svz workbench…"},
		{"settings", request{"GET", "/manage/api/config", "", ""}, 200, "application/json", `{"api_key":"local-dev","workspace_authorization":"bypassed"}`},
		{"no directory listing", request{"GET", "/manage/assets/", "", ""}, 404, "application/json", notFound},
		{"no directory listing without slash", request{"GET", "/manage/assets/js", "", ""}, 404, "application/json", notFound},
		{"index only at /manage", request{"GET", "/manage/assets/index.html", "", ""}, 404, "application/json", notFound},
		{"no escape", request{"GET", "/manage/assets/../workbench.go", "", ""}, 404, "application/json", notFound},
		{"no escape, encoded", request{"GET", "/manage/assets/%2e%2e/workbench.go", "", ""}, 404, "application/json", notFound},
		{"unknown", request{"GET", "/manage/nope", "", ""}, 404, "application/json", notFound},
		{"unknown api", request{"GET", "/manage/api/", "", ""}, 404, "application/json", notFound},
		{"POST page", request{"POST", "/manage", "", ""}, 405, "application/json", `{"detail":"Method Not Allowed"}`},
		{"GET validate", request{"GET", "/manage/api/validate", "", ""}, 405, "application/json", `{"detail":"Method Not Allowed"}`},
		{"DELETE asset", request{"DELETE", "/manage/assets/js/main.js", "", ""}, 405, "application/json", `{"detail":"Method Not Allowed"}`},
		{"localhost", request{"GET", "/manage", "", "localhost:8000"}, 200, "text/html; charset=utf-8", "<!doctype html>…"},
		{"IPv6 loopback", request{"GET", "/manage/api/config", "[::1]:50000", "[::1]:8000"}, 200, "application/json", `{"api_key":"local-dev","workspace_authorization":"bypassed"}`},
		{"remote address", request{"GET", "/manage", "192.0.2.7:40000", ""}, 403, "application/json",
			`{"detail":"The workbench answers loopback only: the request comes from 192.0.2.7"}`},
		{"remote IPv6", request{"GET", "/manage/api/config", "[2001:db8::1]:40000", ""}, 403, "application/json",
			`{"detail":"The workbench answers loopback only: the request comes from 2001:db8::1"}`},
		{"remote, unknown path", request{"GET", "/manage/nope", "10.0.0.2:1", ""}, 403, "application/json",
			`{"detail":"The workbench answers loopback only: the request comes from 10.0.0.2"}`},
		{"rebound host name", request{"GET", "/manage/api/config", "", "attacker.example:8000"}, 403, "application/json",
			`{"detail":"The workbench answers loopback only: the request names the host \"attacker.example\"; open it as 127.0.0.1, [::1] or localhost"}`},
		{"public address as host", request{"GET", "/manage", "", "192.0.2.1"}, 403, "application/json",
			`{"detail":"The workbench answers loopback only: the request names the host \"192.0.2.1\"; open it as 127.0.0.1, [::1] or localhost"}`},
		{"controller route", request{"GET", "/a2a/events", "", ""}, 418, "application/json", `{"controller":"/a2a/events"}`},
		{"not under /manage", request{"GET", "/managed", "", ""}, 418, "application/json", `{"controller":"/managed"}`},
		{"controller from elsewhere is not the workbench's to refuse", request{"GET", "/.well-known/agents.json", "192.0.2.7:1", ""}, 418, "application/json",
			`{"controller":"/.well-known/agents.json"}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := serve(h, c.req)
			if w.Code != c.status {
				t.Fatalf("status %d, want %d: %s", w.Code, c.status, w.Body)
			}
			if got := w.Header().Get("Content-Type"); got != c.ctype {
				t.Errorf("Content-Type %q, want %q", got, c.ctype)
			}
			if body := w.Body.String(); !matches(body, c.body) {
				t.Errorf("body\n got %.200s\nwant %s", body, c.body)
			}
			mine := c.status != 418
			if got := w.Header().Get("Content-Security-Policy"); mine != (got == workbench.ContentSecurityPolicy) {
				t.Errorf("Content-Security-Policy %q on a response of the workbench: %v", got, mine)
			}
			if mine {
				for k, v := range map[string]string{"X-Frame-Options": "DENY", "X-Content-Type-Options": "nosniff", "Cache-Control": "no-store", "Referrer-Policy": "no-referrer"} {
					if got := w.Header().Get(k); got != v {
						t.Errorf("%s %q, want %q", k, got, v)
					}
				}
			}
			if c.status == 405 && w.Header().Get("Allow") == "" {
				t.Error("405 without Allow")
			}
		})
	}
}

// TestSecretKeyStaysOut: a key the user chose is never handed to the page, only its fingerprint.
func TestSecretKeyStaysOut(t *testing.T) {
	const secret = "s3cret-key-of-the-user"
	h := workbench.New(controllerStub, workbench.Config{KeyFingerprint: "0123456789ab", Authorization: workbench.TokenRequired})
	for _, p := range []string{"/manage", "/manage/api/config", "/manage/assets/js/main.js", "/manage/assets/js/client.js"} {
		w := serve(h, request{"GET", p, "", ""})
		if strings.Contains(w.Body.String(), secret) {
			t.Fatalf("%s leaks the key", p)
		}
		if p == "/manage/api/config" {
			if want := `{"api_key":null,"api_key_fingerprint":"0123456789ab","workspace_authorization":"token"}`; w.Body.String() != want {
				t.Fatalf("config %s, want %s", w.Body, want)
			}
		}
	}
}

// The policy is strict: nothing inline, nothing from elsewhere, no framing.
func TestContentSecurityPolicy(t *testing.T) {
	directives := map[string]string{}
	for _, d := range strings.Split(workbench.ContentSecurityPolicy, ";") {
		name, value, _ := strings.Cut(strings.TrimSpace(d), " ")
		directives[name] = value
	}
	want := map[string]string{
		"default-src": "'none'", "script-src": "'self'", "style-src": "'self'", "img-src": "'self' data:",
		"connect-src": "'self'", "base-uri": "'none'", "form-action": "'none'", "frame-ancestors": "'none'",
	}
	if len(directives) != len(want) {
		t.Fatalf("directives %v, want %v", directives, want)
	}
	for k, v := range want {
		if directives[k] != v {
			t.Errorf("%s %q, want %q", k, directives[k], v)
		}
	}
	if strings.Contains(workbench.ContentSecurityPolicy, "unsafe") {
		t.Error("the policy allows something unsafe")
	}
}

var (
	inlineScript = regexp.MustCompile(`(?is)<script\b[^>]*>\s*[^<\s]`)
	scriptTag    = regexp.MustCompile(`(?is)<script\b[^>]*>`)
	handlerAttr  = regexp.MustCompile(`(?i)\son[a-z]+\s*=`)
	styleAttr    = regexp.MustCompile(`(?i)\sstyle\s*=`)
	styleTag     = regexp.MustCompile(`(?i)<style\b`)
	externalURL  = regexp.MustCompile(`(?i)(https?:)?//[a-z0-9.-]+\.[a-z]{2,}/`)
	htmlSinks    = regexp.MustCompile(`\b(innerHTML|outerHTML|insertAdjacentHTML|document\.write|eval\s*\(|new Function|setAttribute\(\s*'style')`)
	importFrom   = regexp.MustCompile(`(?m)^import .* from '(\./|\.\./)([^']+)';$`)
	assetRef     = regexp.MustCompile(`(?:src|href)="(/manage/assets/[^"]+)"`)
)

// TestAssets reads the embedded files as the browser gets them: no inline script, style or event
// handler (the policy would block them), nothing from another origin, no HTML sink for the
// agent's untrusted text, and every reference and import resolves to an embedded file.
func TestAssets(t *testing.T) {
	h := workbench.New(controllerStub, workbench.Config{APIKey: "local-dev"})
	get := func(p string) string {
		t.Helper()
		w := serve(h, request{"GET", p, "", ""})
		if w.Code != 200 {
			t.Fatalf("GET %s: %d %s", p, w.Code, w.Body)
		}
		return w.Body.String()
	}
	page := get("/manage")
	if m := inlineScript.FindString(page); m != "" {
		t.Errorf("inline script in the page: %q", m)
	}
	for _, tag := range scriptTag.FindAllString(page, -1) {
		if !strings.Contains(tag, `src="/manage/assets/`) {
			t.Errorf("script without a workbench src: %s", tag)
		}
	}
	for _, re := range []*regexp.Regexp{handlerAttr, styleAttr, styleTag, externalURL} {
		if m := re.FindString(page); m != "" {
			t.Errorf("the page has %q (%s)", m, re)
		}
	}
	refs := assetRef.FindAllStringSubmatch(page, -1)
	if len(refs) < 2 {
		t.Fatalf("the page references %d assets", len(refs))
	}
	seen := map[string]bool{}
	queue := []string{}
	for _, r := range refs {
		queue = append(queue, r[1])
	}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if seen[p] {
			continue
		}
		seen[p] = true
		body := get(p)
		if m := externalURL.FindString(body); m != "" {
			t.Errorf("%s names another origin: %q", p, m)
		}
		if strings.HasSuffix(p, ".js") {
			if m := htmlSinks.FindString(body); m != "" {
				t.Errorf("%s uses %s: agent text must only reach the page as text", p, m)
			}
			for _, imp := range importFrom.FindAllStringSubmatch(body, -1) {
				queue = append(queue, path.Join(path.Dir(p), imp[1]+imp[2]))
			}
		}
	}
	// Every file shipped is reached from the page: no dead asset.
	err := fs.WalkDir(os.DirFS("assets"), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || p == "index.html" {
			return err
		}
		if !seen["/manage/assets/"+p] {
			t.Errorf("assets/%s is embedded but nothing loads it", p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestRefusedFromNetwork: over a real connection from an address of this machine that is not
// loopback (as a neighbour on the network would be seen), the workbench refuses; the controller
// beside it is not its to judge.
func TestRefusedFromNetwork(t *testing.T) {
	ip := nonLoopbackIP(t)
	ln, err := net.Listen("tcp", net.JoinHostPort(ip.String(), "0"))
	if err != nil {
		t.Skipf("cannot listen on %s: %v", ip, err)
	}
	srv := &http.Server{Handler: workbench.New(controllerStub, workbench.Config{APIKey: "local-dev", Log: quiet}), ReadHeaderTimeout: time.Minute}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	for path, want := range map[string]string{
		"/manage":            `{"detail":"The workbench answers loopback only: the request comes from ` + ip.String() + `"}`,
		"/manage/api/config": `{"detail":"The workbench answers loopback only: the request comes from ` + ip.String() + `"}`,
		"/a2a/events":        `{"controller":"/a2a/events"}`,
	} {
		resp, err := http.Get("http://" + ln.Addr().String() + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(b) != want {
			t.Errorf("GET %s: %d %s, want %s", path, resp.StatusCode, b, want)
		}
	}
}

// nonLoopbackIP returns an address of this machine that is not loopback.
func nonLoopbackIP(t *testing.T) net.IP {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && n.IP.To4() != nil && !n.IP.IsLinkLocalUnicast() {
			return n.IP
		}
	}
	t.Skip("this machine has no address but loopback")
	return nil
}
