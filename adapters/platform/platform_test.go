package platform

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/supervaize/svz/adapters/internal/testkit"
	"github.com/supervaize/svz/adapters/lambda"
	"github.com/supervaize/svz/core/jobs"
	"github.com/supervaize/svz/internal/fingerprint"
	"github.com/supervaize/svz/internal/testenv"
)

func envOf(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestDetect(t *testing.T) {
	cases := []struct {
		env  map[string]string
		want platformKind
	}{
		{map[string]string{}, onHTTP},
		{map[string]string{"PORT": "8080"}, onHTTP},
		{map[string]string{"AWS_LAMBDA_RUNTIME_API": "127.0.0.1:9001"}, onLambda},
		{map[string]string{"AWS_LAMBDA_RUNTIME_API": "127.0.0.1:9001", "K_SERVICE": "x"}, onLambda},
		{map[string]string{"FUNCTION_TARGET": "Controller"}, onCloudRun},
		{map[string]string{"K_SERVICE": "svz", "PORT": "8080"}, onCloudRun},
	}
	for _, tc := range cases {
		if got := detect(envOf(tc.env)); got != tc.want {
			t.Errorf("detect(%v) = %s, want %s", tc.env, got, tc.want)
		}
	}
}

func TestLogger(t *testing.T) {
	cases := []struct {
		kind  platformKind
		level string
		want  string // the JSON of log.Warn("careful", "n", 1), without the time
	}{
		{onLambda, "", `{"level":"WARN","msg":"careful","n":1}`},
		{onCloudRun, "debug", `{"severity":"WARNING","message":"careful","n":1}`},
		{onHTTP, "WARNING", `{"level":"WARN","msg":"careful","n":1}`},
		{onHTTP, "error", ``},
		{onHTTP, "CRITICAL", ``},
	}
	for _, tc := range cases {
		var buf bytes.Buffer
		log, err := newLogger(tc.kind, envOf(map[string]string{"SUPERVAIZER_LOG_LEVEL": tc.level}), &buf)
		if err != nil {
			t.Fatal(err)
		}
		log.Debug("debug only")
		log.Warn("careful", "n", 1)
		got := ""
		if buf.Len() > 0 {
			var m map[string]any
			for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
				if err := json.Unmarshal([]byte(line), &m); err != nil {
					t.Fatalf("%s: not JSON: %s", tc.kind, line)
				}
			}
			delete(m, "time")
			b, _ := json.Marshal(m)
			got = string(b)
		}
		if tc.level == "debug" && !strings.Contains(buf.String(), `"severity":"DEBUG","message":"debug only"`) {
			t.Errorf("debug level: %s", buf.String())
		}
		if got != tc.want && !(tc.want != "" && sameJSON(got, tc.want)) {
			t.Errorf("%s %q: %s, want %s", tc.kind, tc.level, got, tc.want)
		}
	}
	if _, err := newLogger(onHTTP, envOf(map[string]string{"SUPERVAIZER_LOG_LEVEL": "verbose"}), io.Discard); err == nil ||
		err.Error() != `platform: SUPERVAIZER_LOG_LEVEL="verbose": must be one of DEBUG, INFO, WARNING, WARN, ERROR, CRITICAL` {
		t.Fatalf("bad level: %v", err)
	}
}

func sameJSON(a, b string) bool {
	var x, y any
	return json.Unmarshal([]byte(a), &x) == nil && json.Unmarshal([]byte(b), &y) == nil && fmt.Sprint(x) == fmt.Sprint(y)
}

func TestSettings(t *testing.T) {
	for _, tc := range []struct {
		env     map[string]string
		wantErr string
	}{
		{map[string]string{"SUPERVAIZER_LAMBDA_INVOKE_MODE": "STREAM"}, `platform: SUPERVAIZER_LAMBDA_INVOKE_MODE="STREAM": must be one of BUFFERED, RESPONSE_STREAM (the Function URL's InvokeMode)`},
		{map[string]string{"SUPERVAIZER_LAMBDA_INVOKE_MODE": "RESPONSE_STREAM"}, ""},
		{map[string]string{"SUPERVAIZER_LAMBDA_INVOKE_MODE": "BUFFERED"}, ""},
	} {
		_, err := lambdaOptions(envOf(tc.env))
		if (err == nil) != (tc.wantErr == "") || err != nil && err.Error() != tc.wantErr {
			t.Errorf("%v: %v, want %q", tc.env, err, tc.wantErr)
		}
	}
	for _, tc := range []struct {
		env     map[string]string
		wantErr string
		max     int
	}{
		{map[string]string{}, "", 5},
		{map[string]string{"SUPERVAIZER_JOBS_MAX_RECEIVES": "3"}, "", 3},
		{map[string]string{"SUPERVAIZER_JOBS_MAX_RECEIVES": "0"}, `platform: lambda: SUPERVAIZER_JOBS_MAX_RECEIVES="0": must be a whole number from 1 to 1000 (the maxReceiveCount of the jobs queue's redrive policy)`, 0},
	} {
		ctx, n, err := lambdaJobs(context.Background(), envOf(tc.env))
		if (err == nil) != (tc.wantErr == "") || err != nil && err.Error() != tc.wantErr || n != tc.max {
			t.Errorf("%v: %d %v, want %d %q", tc.env, n, err, tc.max, tc.wantErr)
			continue
		}
		if err != nil {
			continue
		}
		// The queue is made only when asked (an agent defines work), and says which setting it needs.
		newQueue := jobs.QueueFrom(ctx)
		if newQueue == nil {
			t.Fatal("no queue maker in the build's context")
		}
		if _, err := newQueue(); err == nil || !strings.HasPrefix(err.Error(), "lambda: SUPERVAIZER_JOBS_QUEUE_URL is not set: ") {
			t.Errorf("queue without its setting: %v", err)
		}
	}
	q, err := jobs.QueueFrom(must(lambdaJobs(context.Background(), envOf(map[string]string{
		"SUPERVAIZER_JOBS_QUEUE_URL": "https://sqs.eu-west-3.amazonaws.com/123456789012/q", "AWS_REGION": "eu-west-3",
		"AWS_ACCESS_KEY_ID": "a", "AWS_SECRET_ACCESS_KEY": "b",
	}))))()
	if lq, ok := q.(*lambda.Queue); err != nil || !ok || lq.URL() != "https://sqs.eu-west-3.amazonaws.com/123456789012/q" {
		t.Errorf("queue: %#v %v", q, err)
	}
	for _, tc := range []struct {
		env     map[string]string
		wantErr string
	}{
		{map[string]string{"PORT": "80a"}, `platform: PORT="80a": must be a whole number from 0 to 65535 (the port to listen on)`},
		{map[string]string{"SUPERVAIZER_PORT": "-1"}, `platform: SUPERVAIZER_PORT="-1": must be a whole number from 0 to 65535 (the port to listen on)`},
		{map[string]string{"PORT": "8080", "SUPERVAIZER_PORT": "x"}, ""},
	} {
		_, err := httpOptions(envOf(tc.env), &options{})
		if (err == nil) != (tc.wantErr == "") || err != nil && err.Error() != tc.wantErr {
			t.Errorf("%v: %v, want %q", tc.env, err, tc.wantErr)
		}
	}
}

func must(ctx context.Context, _ int, err error) context.Context {
	if err != nil {
		panic(err)
	}
	return ctx
}

// closer is a controller that records its life.
type closer struct {
	http.Handler
	closed atomic.Bool
}

func (c *closer) Close() error { c.closed.Store(true); return nil }

// waitHTTP polls url until it answers.
func waitHTTP(t *testing.T, url string) *http.Response {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		resp, err := http.Get(url)
		if err == nil {
			return resp
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never answered: %v", url, err)
		}
	}
}

func TestRunHTTPAndCloudRun(t *testing.T) {
	for _, kind := range []platformKind{onHTTP, onCloudRun} {
		t.Run(string(kind), func(t *testing.T) {
			if kind == onCloudRun && !withCloudRun {
				t.Skip("built with svz_nocloudrun")
			}
			// Port 0: the server takes a port from the kernel and logs it.
			env := map[string]string{"PORT": "0", "SUPERVAIZER_API_KEY": "plain-key"}
			if kind == onCloudRun {
				env["FUNCTION_TARGET"] = "Controller"
			}
			var gotKey string
			var gotLog *slog.Logger
			ctrl := &closer{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "hello "+r.URL.Path) })}
			build := func(ctx context.Context, getenv func(string) string, log *slog.Logger) (http.Handler, error) {
				gotKey, gotLog = getenv("SUPERVAIZER_API_KEY"), log
				return ctrl, nil
			}
			ctx, cancel := context.WithCancel(context.Background())
			var stderr testkit.LogBuffer
			errc := make(chan error, 1)
			go func() { errc <- Run(ctx, build, WithEnv(envOf(env)), WithOutput(io.Discard, &stderr)) }()
			resp := waitHTTP(t, "http://"+testkit.ServingAddr(t, &stderr)+"/a2a")
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if string(b) != "hello /a2a" {
				t.Fatalf("body %q", b)
			}
			cancel()
			if err := <-errc; err != nil {
				t.Fatalf("run: %v", err)
			}
			if !ctrl.closed.Load() {
				t.Fatal("the controller was not closed after shutdown")
			}
			if gotKey != "plain-key" || gotLog == nil {
				t.Fatalf("build got key %q, logger %v", gotKey, gotLog)
			}
			if want := `"platform":"` + string(kind) + `"`; !strings.Contains(stderr.String(), `"controller ready"`) || !strings.Contains(stderr.String(), want) {
				t.Fatalf("logs: %s", stderr.String())
			}
		})
	}
}

// TestLocalModeLoopback checks local mode never listens beyond loopback, whatever the host.
func TestLocalModeLoopback(t *testing.T) {
	for _, host := range []string{"0.0.0.0", "::", "::0", "0:0::0", ""} {
		t.Run(host, func(t *testing.T) {
			env := envOf(map[string]string{"PORT": "0", "SUPERVAIZER_HOST": host, "SUPERVAIZER_LOCAL_MODE": "true"})
			var stderr testkit.LogBuffer
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			errc := make(chan error, 1)
			go func() {
				errc <- Run(ctx, func(context.Context, func(string) string, *slog.Logger) (http.Handler, error) {
					return http.NotFoundHandler(), nil
				}, WithEnv(env), WithOutput(io.Discard, &stderr))
			}()
			addr := testkit.ServingAddr(t, &stderr)
			host, port, err := net.SplitHostPort(addr)
			if err != nil || host != "127.0.0.1" {
				t.Fatalf("local mode listens on %q (%v), want 127.0.0.1", addr, err)
			}
			resp := waitHTTP(t, "http://"+addr+"/")
			resp.Body.Close()
			// A wildcard listener would also take the port on the other loopback addresses.
			if ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.2", port)); err != nil {
				t.Fatalf("the server listens beyond 127.0.0.1: %v", err)
			} else {
				ln.Close()
			}
			cancel()
			if err := <-errc; err != nil {
				t.Fatal(err)
			}
		})
	}
	// An address that is not loopback is refused before anything is built.
	for _, host := range []string{"10.0.0.5", "192.168.1.20", "2001:db8::1"} {
		built := false
		err := Run(context.Background(), func(context.Context, func(string) string, *slog.Logger) (http.Handler, error) {
			built = true
			return http.NotFoundHandler(), nil
		}, WithEnv(envOf(map[string]string{"SUPERVAIZER_LOCAL_MODE": "true", "SUPERVAIZER_HOST": host})), WithOutput(io.Discard, io.Discard))
		if err == nil || !strings.Contains(err.Error(), "local mode listens on loopback only (its API key is public knowledge), but the host is "+host) || built {
			t.Errorf("SUPERVAIZER_HOST=%s: %v (built %v)", host, err, built)
		}
	}
}

func TestRunFailures(t *testing.T) {
	buildErr := errors.New("no store")
	cases := []struct {
		name    string
		env     map[string]string
		build   error
		wantErr string
		built   bool
	}{
		{name: "bad setting", env: map[string]string{"PORT": "x"}, wantErr: `platform: PORT="x": must be a whole number from 0 to 65535 (the port to listen on)`},
		{name: "bad log level", env: map[string]string{"SUPERVAIZER_LOG_LEVEL": "loud"}, wantErr: `platform: SUPERVAIZER_LOG_LEVEL="loud": must be one of DEBUG, INFO, WARNING, WARN, ERROR, CRITICAL`},
		{name: "local mode on Cloud Run", env: map[string]string{"SUPERVAIZER_LOCAL_MODE": "true", "K_SERVICE": "svz"},
			wantErr: "platform: SUPERVAIZER_LOCAL_MODE=true on Cloud Run (K_SERVICE is set): local mode bypasses workspace authorization behind a public API key, so it never runs on a serverless platform. " +
				"Remove SUPERVAIZER_LOCAL_MODE from the deployed environment; under a local emulator set AWS_SAM_LOCAL=true (sam local does) or SUPERVAIZER_LOCAL_EMULATOR=true"},
		{
			name:    "ambiguous secret",
			env:     map[string]string{"SUPERVAIZER_PRIVATE_KEY": "pem", "SUPERVAIZER_PRIVATE_KEY_SECRET_ARN": "arn:aws:secretsmanager:eu-west-3:1:secret:k"},
			wantErr: "platform: SUPERVAIZER_PRIVATE_KEY and SUPERVAIZER_PRIVATE_KEY_SECRET_ARN are both set: set the value or the secret reference, not both",
		},
		{name: "build", env: map[string]string{}, build: buildErr, wantErr: "platform: build the controller: no store", built: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			built := false
			err := Run(context.Background(), func(context.Context, func(string) string, *slog.Logger) (http.Handler, error) {
				built = true
				return nil, tc.build
			}, WithEnv(envOf(tc.env)), WithOutput(io.Discard, io.Discard))
			if err == nil || err.Error() != tc.wantErr || built != tc.built {
				t.Fatalf("run: %v (built %v), want %s", err, built, tc.wantErr)
			}
			if tc.build != nil && !errors.Is(err, tc.build) {
				t.Fatal("the build error is not wrapped")
			}
		})
	}
}

func motoClient(t *testing.T) *secretsmanager.Client {
	return secretsmanager.New(secretsmanager.Options{
		Region: "eu-west-3", BaseEndpoint: aws.String(testenv.Need(t, testenv.AWSEndpoint)),
		Credentials: credentials.NewStaticCredentialsProvider("test", "test", ""),
	})
}

// motoSecrets creates secrets in moto_server and returns their ARNs and the environment that
// reaches moto.
func motoSecrets(t *testing.T, values ...string) ([]string, map[string]string) {
	t.Helper()
	endpoint := testenv.Need(t, testenv.AWSEndpoint)
	sm := motoClient(t)
	var arns []string
	for i, v := range values {
		out, err := sm.CreateSecret(context.Background(), &secretsmanager.CreateSecretInput{
			Name:         aws.String(fmt.Sprintf("svz-platform-test/%d/%d", time.Now().UnixNano(), i)),
			SecretString: aws.String(v),
		})
		if err != nil {
			t.Fatal(err)
		}
		arns = append(arns, *out.ARN)
	}
	return arns, map[string]string{"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "AWS_ENDPOINT_URL": endpoint}
}

const (
	apiKey     = "sk-svz-0123456789abcdef"
	privateKey = "-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIB\n-----END PRIVATE KEY-----\n"
)

func TestResolveSecrets(t *testing.T) {
	const studioKey = "studio-key-for-platform-tests"
	arns, env := motoSecrets(t, apiKey, privateKey, studioKey)
	env["SUPERVAIZER_API_KEY_SECRET_ARN"] = arns[0]
	env["SUPERVAIZER_PRIVATE_KEY_SECRET_ARN"] = arns[1]
	env["SUPERVAIZE_API_KEY_SECRET_ARN"] = arns[2]
	env["SUPERVAIZER_SERVER_ID"] = "srv-1"
	log, logs := testkit.Logger()
	getenv, err := resolveSecrets(context.Background(), envOf(env), log)
	if err != nil {
		t.Fatal(err)
	}
	if getenv("SUPERVAIZER_API_KEY") != apiKey || getenv("SUPERVAIZER_PRIVATE_KEY") != privateKey || getenv("SUPERVAIZER_SERVER_ID") != "srv-1" ||
		getenv("SUPERVAIZE_API_KEY") != studioKey {
		t.Fatalf("resolved %q %q %q", getenv("SUPERVAIZER_API_KEY"), getenv("SUPERVAIZER_PRIVATE_KEY"), getenv("SUPERVAIZER_SERVER_ID"))
	}
	if strings.Contains(logs.String(), apiKey) || strings.Contains(logs.String(), "MC4CAQAw") || strings.Contains(logs.String(), studioKey) {
		t.Fatalf("a secret value was logged: %s", logs)
	}
	for _, want := range []string{
		`"setting":"SUPERVAIZER_API_KEY","secret":"` + arns[0] + `","fingerprint":"` + fingerprint.Of(apiKey) + `"`,
		`"setting":"SUPERVAIZER_PRIVATE_KEY","secret":"` + arns[1] + `","fingerprint":"` + fingerprint.Of(privateKey) + `"`,
	} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("missing log %s in %s", want, logs)
		}
	}
}

func TestResolveSecretsFailure(t *testing.T) {
	arns, env := motoSecrets(t, apiKey, "x", "")
	missing := "arn:aws:secretsmanager:eu-west-3:123456789012:secret:svz-missing-AbCdEf"
	cases := []struct {
		name, apiRef, pkRef, wantErr string
	}{
		{"missing", arns[0], missing, "platform: SUPERVAIZER_PRIVATE_KEY_SECRET_ARN: secret " + missing + " cannot be read: ResourceNotFoundException: "},
		{"no current value", arns[2], "", "platform: SUPERVAIZER_API_KEY_SECRET_ARN: secret " + arns[2] + " cannot be read: ResourceNotFoundException: "},
		{"no credentials", arns[0], "", "platform: SUPERVAIZER_API_KEY_SECRET_ARN: secret " + arns[0] + " cannot be read: no AWS credentials in the environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := map[string]string{}
			for k, v := range env {
				e[k] = v
			}
			if tc.name == "no credentials" {
				delete(e, "AWS_SECRET_ACCESS_KEY")
			}
			e["SUPERVAIZER_API_KEY_SECRET_ARN"], e["SUPERVAIZER_PRIVATE_KEY_SECRET_ARN"] = tc.apiRef, tc.pkRef
			log, logs := testkit.Logger()
			_, err := resolveSecrets(context.Background(), envOf(e), log)
			if err == nil || !strings.HasPrefix(err.Error(), tc.wantErr) {
				t.Fatalf("error %v, want %s…", err, tc.wantErr)
			}
			if strings.Contains(err.Error(), apiKey) || strings.Contains(logs.String(), apiKey) {
				t.Fatalf("the API key value leaked: %v / %s", err, logs)
			}
		})
	}
}

// The Lambda tests run this test binary as the bootstrap under the Runtime Interface Emulator,
// with childEnv set: it then runs Main with a controller reporting what it was given.
const childEnv = "SVZ_PLATFORM_TEST_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		Main(func(ctx context.Context, getenv func(string) string, log *slog.Logger) (http.Handler, error) {
			if getenv("SUPERVAIZER_API_KEY") == "" {
				return nil, errors.New("SUPERVAIZER_API_KEY is required")
			}
			key := getenv("SUPERVAIZER_API_KEY")
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Header.Get("X-API-Key") != key {
					w.WriteHeader(http.StatusUnauthorized)
					return
				}
				_, _ = io.WriteString(w, "authorized, private key "+strconv.FormatBool(getenv("SUPERVAIZER_PRIVATE_KEY") == privateKey))
			}), nil
		})
		return
	}
	os.Exit(m.Run())
}

// rie runs this test binary as a Lambda bootstrap under the emulator and returns a function
// invoking it with a Function URL event carrying the API key and no Host header.
func rie(t *testing.T, env map[string]string) func(apiKey string) (int, string) {
	t.Helper()
	invoke := rieHeaders(t, env)
	return func(key string) (int, string) { return invoke(map[string]string{"x-api-key": key}) }
}

// rieHeaders is rie with the event's headers given.
func rieHeaders(t *testing.T, env map[string]string) func(headers map[string]string) (int, string) {
	t.Helper()
	bin := testenv.Need(t, testenv.RIE)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	environ := []string{childEnv + "=1"}
	for k, v := range env {
		environ = append(environ, k+"="+v)
	}
	addr, _ := testkit.RIE(t, bin, environ, self)
	url := "http://" + addr + "/2015-03-31/functions/function/invocations"
	return func(headers map[string]string) (int, string) {
		h, _ := json.Marshal(headers)
		ev := fmt.Sprintf(`{"version":"2.0","rawPath":"/a2a","rawQueryString":"","headers":%s,"requestContext":{"domainName":"x.lambda-url.eu-west-3.on.aws","http":{"method":"GET","sourceIp":"203.0.113.1"}},"isBase64Encoded":false}`, h)
		resp, err := http.Post(url, "application/json", strings.NewReader(ev))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
}

// TestLambdaLocalModeRefusesForeignHost: local mode under sam local (AWS_SAM_LOCAL=true, as
// events/env.json gives it) refuses an event whose Host is not loopback with local mode's answer,
// and serves a loopback one; the same function deployed (no local mode) serves any Host.
func TestLambdaLocalModeRefusesForeignHost(t *testing.T) {
	const refused = `{"statusCode":403,"headers":{"Content-Type":"application/json"},` +
		`"body":"{\"detail\":\"Local mode answers loopback only: the request names the host \\\"attacker.example\\\"; open it as 127.0.0.1, [::1] or localhost\"}","isBase64Encoded":false}`
	const served = `{"statusCode":200,"headers":{"Content-Type":"text/plain; charset=utf-8"},"body":"authorized, private key false","isBase64Encoded":false}`
	local := rieHeaders(t, map[string]string{"SUPERVAIZER_API_KEY": apiKey, "SUPERVAIZER_LOCAL_MODE": "true", "AWS_SAM_LOCAL": "true"})
	deployed := rieHeaders(t, map[string]string{"SUPERVAIZER_API_KEY": apiKey})
	for _, tc := range []struct {
		invoke func(map[string]string) (int, string)
		host   string
		want   string
	}{
		{local, "attacker.example", refused},
		{local, "127.0.0.1:3000", served},
		{local, "localhost:3000", served},
		{deployed, "attacker.example", served},
	} {
		if status, body := tc.invoke(map[string]string{"x-api-key": apiKey, "host": tc.host}); status != http.StatusOK || body != tc.want {
			t.Errorf("Host %s: %d %s, want %s", tc.host, status, body, tc.want)
		}
	}
}

func TestLambdaSecretsUnderEmulator(t *testing.T) {
	arns, env := motoSecrets(t, apiKey, privateKey)
	env["SUPERVAIZER_API_KEY_SECRET_ARN"] = arns[0]
	env["SUPERVAIZER_PRIVATE_KEY_SECRET_ARN"] = arns[1]
	invoke := rie(t, env)
	status, body := invoke(apiKey)
	if status != 200 || body != `{"statusCode":200,"headers":{"Content-Type":"text/plain; charset=utf-8"},"body":"authorized, private key true","isBase64Encoded":false}` {
		t.Fatalf("%d %s", status, body)
	}
	if status, body = invoke("wrong"); status != 200 || !strings.HasPrefix(body, `{"statusCode":401`) {
		t.Fatalf("%d %s", status, body)
	}
}

func TestLambdaInitFailureUnderEmulator(t *testing.T) {
	_, env := motoSecrets(t)
	missing := "arn:aws:secretsmanager:eu-west-3:123456789012:secret:svz-missing-AbCdEf"
	env["SUPERVAIZER_API_KEY_SECRET_ARN"] = missing
	status, body := rie(t, env)(apiKey)
	var got struct{ ErrorMessage, ErrorType string }
	if err := json.Unmarshal([]byte(body), &got); err != nil {
		t.Fatalf("%d %s", status, body)
	}
	want := "platform: SUPERVAIZER_API_KEY_SECRET_ARN: secret " + missing + " cannot be read: ResourceNotFoundException: "
	if status != http.StatusBadGateway || got.ErrorType != "Runtime.InitError" || !strings.HasPrefix(got.ErrorMessage, want) {
		t.Fatalf("%d %s", status, body)
	}
}
