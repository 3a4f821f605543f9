//go:build !svz_nolocal

package platform

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/supervaize/svz/adapters/internal/testkit"
	"github.com/supervaize/svz/adapters/platform/workbench"
	"github.com/supervaize/svz/core"
	"github.com/supervaize/svz/core/grant"
	"github.com/supervaize/svz/core/grant/granttest"
	"github.com/supervaize/svz/core/store/memory"
	"github.com/supervaize/svz/examples/helloworld/hello"
	"github.com/supervaize/svz/internal/fingerprint"
)

var bannerWorkbench = regexp.MustCompile(`\n  workbench  (http://127\.0\.0\.1:\d+)/manage \(open it in a browser\)\n`)

func get(t *testing.T, url string) (int, http.Header, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

// TestWorkbenchInLocalMode: local mode serves the workbench at /manage for any agent and prints
// its URL; the page is told the key only when it is local-dev, and whether calls need a token.
func TestWorkbenchInLocalMode(t *testing.T) {
	iss := granttest.NewIssuer("dev")
	for _, c := range []struct {
		name   string
		env    map[string]string
		config string
		secret string
	}{
		{"local-dev", map[string]string{}, `{"api_key":"local-dev","workspace_authorization":"bypassed"}`, ""},
		{"a key of the user's", map[string]string{"SUPERVAIZER_API_KEY": "users-secret-key"},
			`{"api_key":null,"api_key_fingerprint":"` + fingerprint.Of("users-secret-key") + `","workspace_authorization":"bypassed"}`, "users-secret-key"},
		{"trust settings", map[string]string{
			"SUPERVAIZER_WORKSPACE_AUTH_REQUIRED":   "true",
			"SUPERVAIZER_WORKSPACE_AUTH_ISSUER":     "https://studio.svz-dev.invalid",
			"SUPERVAIZER_WORKSPACE_AUTH_PUBLIC_KEY": iss.PublicKeyPEM(),
			"SUPERVAIZER_SERVER_ID":                 "dev-server-1",
		}, `{"api_key":"local-dev","workspace_authorization":"token"}`, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			banner := startLocal(t, hello.Build, c.env)
			m := bannerWorkbench.FindStringSubmatch(banner)
			if m == nil {
				t.Fatalf("no workbench line in the banner:\n%s", banner)
			}
			status, hd, body := get(t, m[1]+workbench.Path)
			if status != 200 || hd.Get("Content-Security-Policy") != workbench.ContentSecurityPolicy || !strings.HasPrefix(body, "<!doctype html>") {
				t.Fatalf("GET /manage: %d %v %.80s", status, hd, body)
			}
			if status, _, body = get(t, m[1]+workbench.Path+"/api/config"); status != 200 || body != c.config {
				t.Errorf("settings: %d %s, want %s", status, body, c.config)
			}
			if c.secret != "" && strings.Contains(banner+body, c.secret) {
				t.Error("the key is shown")
			}
			// The controller still answers beside it.
			if status, _, body = get(t, m[1]+"/.well-known/agents.json"); status != 200 || !strings.Contains(body, hello.Slug) {
				t.Errorf("discovery: %d %s", status, body)
			}
		})
	}
}

// TestNoWorkbenchOutsideLocalMode: a plain HTTP server (and Cloud Run) answers /manage with the
// controller's own 404, as any unknown path.
func TestNoWorkbenchOutsideLocalMode(t *testing.T) {
	for _, kind := range []platformKind{onHTTP, onCloudRun} {
		t.Run(string(kind), func(t *testing.T) {
			if kind == onCloudRun && !withCloudRun {
				t.Skip("built with svz_nocloudrun")
			}
			env := map[string]string{"PORT": "0", "SUPERVAIZER_STORE": "memory", "SUPERVAIZER_API_KEY": "k"}
			if kind == onCloudRun {
				env["K_SERVICE"] = "svz"
			}
			ctx, cancel := context.WithCancel(context.Background())
			var stderr testkit.LogBuffer
			errc := make(chan error, 1)
			go func() { errc <- Run(ctx, hello.Build, WithEnv(envOf(env)), WithOutput(io.Discard, &stderr)) }()
			base := "http://" + testkit.ServingAddr(t, &stderr)
			waitHTTP(t, base+"/.well-known/health").Body.Close()
			for _, p := range []string{"/manage", "/manage/", "/manage/api/config", "/manage/assets/js/main.js"} {
				status, hd, body := get(t, base+p)
				if status != 404 || body != `{"detail":"Not Found"}` || hd.Get("Content-Security-Policy") == workbench.ContentSecurityPolicy {
					t.Errorf("GET %s: %d %s", p, status, body)
				}
			}
			cancel()
			if err := <-errc; err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestLambdaBuildLeavesWorkbenchOut: the Lambda bootstrap's tags (mk/lambda.mk) leave the
// workbench out of the binary, so its size does not change; without svz_nolocal it is linked.
func TestLambdaBuildLeavesWorkbenchOut(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	f, err := os.Open("../../mk/lambda.mk")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var tags string
	for sc := bufio.NewScanner(f); sc.Scan(); {
		if v, ok := strings.CutPrefix(sc.Text(), "LAMBDA_TAGS ?= "); ok {
			tags = strings.TrimSpace(v)
		}
	}
	if !strings.Contains(tags, "svz_nolocal") {
		t.Fatalf("mk/lambda.mk's LAMBDA_TAGS %q lack svz_nolocal", tags)
	}
	const pkg = "github.com/supervaize/svz/adapters/platform/workbench"
	deps := func(tags string) string {
		out, err := exec.Command("go", "list", "-deps", "-tags", tags, "../../examples/helloworld").Output()
		if err != nil {
			t.Fatalf("go list -tags %s: %v", tags, err)
		}
		return string(out)
	}
	if strings.Contains(deps(tags), pkg+"\n") {
		t.Errorf("the Lambda bootstrap (tags %s) links the workbench", tags)
	}
	if !strings.Contains(deps(strings.ReplaceAll(tags, "svz_nolocal", "")), pkg+"\n") {
		t.Error("a build with local mode does not link the workbench")
	}
}

// verifier stands for a token verifier: any authorizer that is neither the bypass nor the refusal.
type verifier struct{ grant.NotConfigured }

// TestWorkbenchAuthorization: the page is told how the controller authorizes /a2a calls, so it
// asks for a workspace token only when one is needed.
func TestWorkbenchAuthorization(t *testing.T) {
	for _, c := range []struct {
		authz grant.Authorizer
		want  workbench.Authorization
	}{
		{grant.LocalBypass{}, workbench.Bypassed},
		{grant.NotConfigured{}, workbench.Refused},
		{verifier{}, workbench.TokenRequired},
	} {
		a, err := hello.NewAgent()
		if err != nil {
			t.Fatal(err)
		}
		ctrl, err := core.New(core.Config{APIKey: localAPIKey, Authorizer: c.authz, Store: memory.New()}, a)
		if err != nil {
			t.Fatal(err)
		}
		h := mountWorkbench(ctrl, LocalInfo{APIKey: localAPIKey, Controller: ctrl, Log: slog.New(slog.DiscardHandler)})
		req := httptest.NewRequest("GET", "/manage/api/config", nil)
		req.RemoteAddr, req.Host = "127.0.0.1:1", "127.0.0.1"
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if want := `{"api_key":"local-dev","workspace_authorization":"` + string(c.want) + `"}`; w.Body.String() != want {
			t.Errorf("%T: %s, want %s", c.authz, w.Body, want)
		}
		_ = ctrl.Close()
	}
}
