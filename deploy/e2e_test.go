package deploy_test

import (
	"archive/tar"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awslambda "github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/supervaize/svz/deploy"
	"github.com/supervaize/svz/deploy/awsdeploy"
	"github.com/supervaize/svz/deploy/health"
	"github.com/supervaize/svz/deploy/image"
	"github.com/supervaize/svz/deploy/internal/awstest"
	"github.com/supervaize/svz/deploy/internal/lambdaemu"
	"github.com/supervaize/svz/deploy/lambda"
	"github.com/supervaize/svz/internal/testenv"
)

// functionURL plays the Function URL of a function that moto stores: each request is invoked on the
// image and environment the function has now, the image's binary running as the bootstrap under the
// Lambda emulator with its secrets resolved from moto's Secrets Manager, its store in moto's
// DynamoDB.
type functionURL struct {
	t       *testing.T
	lambda  *awslambda.Client
	name    string
	rie     string
	awsEnv  []string
	mu      sync.Mutex
	running map[string]*lambdaemu.Emulator
}

func (f *functionURL) RoundTrip(req *http.Request) (*http.Response, error) {
	fn, err := f.lambda.GetFunction(req.Context(), &awslambda.GetFunctionInput{FunctionName: aws.String(f.name)})
	if err != nil {
		return nil, err
	}
	img := aws.ToString(fn.Code.ImageUri)
	var env []string
	for k, v := range fn.Configuration.Environment.Variables {
		env = append(env, k+"="+v)
	}
	sort.Strings(env)
	key := img + "\n" + strings.Join(env, "\n")
	f.mu.Lock()
	emu, ok := f.running[key]
	if !ok {
		pulled, err := lambdaemu.Pull(req.Context(), img)
		if err != nil {
			f.mu.Unlock()
			return nil, err
		}
		bin, err := lambdaemu.ExtractBinary(pulled, f.t.TempDir())
		if err != nil {
			f.mu.Unlock()
			return nil, err
		}
		env = append(env, f.awsEnv...)
		env = append(env, "AWS_LAMBDA_FUNCTION_NAME="+f.name, "AWS_LAMBDA_FUNCTION_TIMEOUT=60", "PATH=/usr/bin:/bin")
		emu = lambdaemu.Start(f.t, f.rie, bin, env)
		f.running[key] = emu
	}
	f.mu.Unlock()
	return emu.Do(req)
}

// lambdaRig deploys examples/helloworld to Lambda with moto_server as AWS and a real OCI
// registry; the function URL is served by the function's own binary under the RIE
// (functionURL), so the health gate and the test's calls reach the deployed code.
type lambdaRig struct {
	cfg            aws.Config
	reg, name, svc string
	lam            *awslambda.Client
	gate           *health.Gate
	events         []deploy.Event
	// deployer returns a Deployer of the service with settings host, mod changing its Config.
	deployer func(mod func(*deploy.Config)) *deploy.Deployer
}

// newLambdaRig names the service after prefix; everything it deploys is removed with the test.
func newLambdaRig(t *testing.T, prefix string, host map[string]string) *lambdaRig {
	t.Helper()
	r := &lambdaRig{reg: testenv.Need(t, testenv.OCIRegistry), cfg: awstest.Config(t), name: awstest.Name(prefix)}
	rie := testenv.Need(t, testenv.RIE)
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	p, err := lambda.NewPlatform(context.Background(), r.cfg)
	if err != nil {
		t.Fatal(err)
	}
	r.svc = r.name + "-dev"
	r.lam = awslambda.NewFromConfig(r.cfg)
	furl := &functionURL{t: t, lambda: r.lam, name: r.svc, rie: rie, running: map[string]*lambdaemu.Emulator{}, awsEnv: []string{
		"AWS_ENDPOINT_URL=" + os.Getenv("AWS_ENDPOINT_URL"), "AWS_ACCESS_KEY_ID=test", "AWS_SECRET_ACCESS_KEY=test", "AWS_REGION=" + r.cfg.Region,
	}}
	r.gate = &health.Gate{Client: &http.Client{Transport: furl, Timeout: time.Minute}, Timeout: 2 * time.Minute, Interval: 200 * time.Millisecond}
	r.deployer = func(mod func(*deploy.Config)) *deploy.Deployer {
		c := deploy.Config{
			Platform: deploy.PlatformLambda, Name: r.name, Env: "dev", Main: "./examples/helloworld", Dir: root,
			Arch: runtime.GOARCH, ImageRepo: r.reg + "/svz", GenerateAPIKey: true, GeneratePrivateKey: true,
		}
		if mod != nil {
			mod(&c)
		}
		return &deploy.Deployer{Config: c, Platform: p, Getenv: func(k string) string { return host[k] }, Environ: os.Environ(),
			Gate: r.gate, Progress: func(e deploy.Event) { r.events = append(r.events, e) }}
	}
	t.Cleanup(func() { _, _ = r.deployer(func(c *deploy.Config) { c.Purge = true }).Down(context.Background()) })
	return r
}

// TestLambdaEndToEnd deploys the real Hello World controller with moto_server as AWS and a real OCI
// registry: up creates everything and passes the health gate through the function's own binary,
// a second up is a no-op that keeps the secrets, status reports, down removes.
func TestLambdaEndToEnd(t *testing.T) {
	ctx := context.Background()
	host := map[string]string{"SUPERVAIZER_LOG_LEVEL": "DEBUG", "SUPERVAIZE_API_URL": "https://studio.example"}
	r := newLambdaRig(t, "e2e", host)
	reg, cfg, svc, lam, gate, newDeployer := r.reg, r.cfg, r.svc, r.lam, r.gate, r.deployer

	// First up: everything is created, the gate passes through the function's own binary.
	first, err := newDeployer(nil).Up(ctx)
	if err != nil {
		t.Fatalf("up: %v\nevents: %+v", err, r.events)
	}
	if first.Health == nil || first.Health.RPC != "error -32601" {
		t.Fatalf("health %+v", first.Health)
	}
	if first.NewAPIKey.IsZero() {
		t.Fatal("the generated API key was not returned for display")
	}
	byResource := map[string]deploy.Action{}
	for _, c := range first.Changes {
		byResource[c.Resource+" "+c.Name] = c.Action
	}
	for _, r := range []string{"secret " + svc + "-api-key", "secret " + svc + "-private-key", "iam-role " + svc + "-lambda",
		"dynamodb-table " + svc, "lambda-function " + svc, "function-url " + svc, "sqs-queue " + svc + "-jobs", "sqs-queue " + svc + "-jobs-dlq",
		"event-source-mapping " + svc + "-jobs → " + svc, "event-source-mapping " + svc + "-jobs-dlq → " + svc} {
		if byResource[r] != deploy.Create {
			t.Errorf("%s: %q, want create (changes %+v)", r, byResource[r], first.Changes)
		}
	}
	if !strings.HasPrefix(first.Image, reg+"/svz/"+svc+"@sha256:") {
		t.Fatalf("image %s", first.Image)
	}
	fn, err := lam.GetFunction(ctx, &awslambda.GetFunctionInput{FunctionName: aws.String(svc)})
	if err != nil {
		t.Fatal(err)
	}
	vars := fn.Configuration.Environment.Variables
	if vars["SUPERVAIZER_PUBLIC_URL"] != first.URL || vars["SUPERVAIZE_API_URL"] != "https://studio.example" ||
		vars["SUPERVAIZER_STORE"] != "dynamodb" || vars["SUPERVAIZER_API_KEY"] != "" ||
		!strings.HasPrefix(vars["SUPERVAIZER_API_KEY_SECRET_ARN"], "arn:aws:secretsmanager:") {
		t.Errorf("function environment %v", vars)
	}
	for _, v := range vars {
		if strings.Contains(v, first.NewAPIKey.Reveal()) {
			t.Fatal("the API key value is in the function's plain environment")
		}
	}
	assertImage(t, first.Image)
	// The function's own binary serves Hello World through the Function URL.
	cards, err := gate.Client.Get(first.URL + "/.well-known/agents.json")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(cards.Body)
	cards.Body.Close()
	// The card URL carries SUPERVAIZER_PUBLIC_URL, set by the second update once the URL existed.
	if cards.StatusCode != http.StatusOK || !strings.Contains(string(body), `"name":"Hello World AI Agent"`) ||
		!strings.Contains(string(body), `"agent_card_url":"`+first.URL+`/.well-known/agents/v1.0/hello-world-ai-agent_agent.json"`) {
		t.Fatalf("agents.json: %d %s", cards.StatusCode, body)
	}

	sm := &awsdeploy.SecretsManager{Client: secretsmanager.NewFromConfig(cfg)}
	secretsBefore := secretVersions(t, sm, svc)

	// Second up: same digest (reproducible build), same configuration: nothing changes.
	second, err := newDeployer(nil).Up(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if second.Image != first.Image {
		t.Errorf("rebuild changed the digest: %s → %s", first.Image, second.Image)
	}
	if deploy.Changed(second.Changes) {
		t.Errorf("second up changed: %+v", second.Changes)
	}
	if !second.NewAPIKey.IsZero() {
		t.Error("second up shows an API key")
	}
	if after := secretVersions(t, sm, svc); !reflect.DeepEqual(after, secretsBefore) {
		t.Errorf("secrets changed: %v → %v", secretsBefore, after)
	}

	// Plan agrees.
	plan, err := newDeployer(nil).Plan(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if deploy.Changed(plan.Changes) {
		t.Errorf("plan after up: %+v", plan.Changes)
	}

	// A configuration the controller refuses at init (workspace authorization required without an
	// issuer): the gate fails through the function's binary and the previous configuration returns.
	host["SUPERVAIZER_WORKSPACE_AUTH_REQUIRED"] = "true"
	bad := newDeployer(nil)
	// One attempt, run to its end: the function's answer decides, not the clock.
	bad.Gate = &health.Gate{Client: gate.Client, Timeout: time.Nanosecond}
	res, err := bad.Up(ctx)
	delete(host, "SUPERVAIZER_WORKSPACE_AUTH_REQUIRED")
	if deploy.FailedStep(err) != deploy.StepHealth || !res.RolledBack {
		t.Fatalf("bad configuration: step %q rolled back %v: %v", deploy.FailedStep(err), res.RolledBack, err)
	}
	if !strings.Contains(err.Error(), "HTTP 502") {
		t.Errorf("gate error %v, want the function's init failure (502)", err)
	}
	fn, err = lam.GetFunction(ctx, &awslambda.GetFunctionInput{FunctionName: aws.String(svc)})
	if err != nil {
		t.Fatal(err)
	}
	if restored := fn.Configuration.Environment.Variables; !reflect.DeepEqual(restored, vars) {
		t.Errorf("after rollback the environment is %v, want %v", restored, vars)
	}

	st, err := newDeployer(nil).Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !st.Healthy || st.Live.Image != first.Image || st.Live.URL != first.URL || len(st.Secrets) != 2 || !st.Secrets[0].Present ||
		st.Secrets[0].Fingerprint != first.NewAPIKey.Fingerprint() {
		t.Errorf("status %+v", st)
	}

	down, err := newDeployer(nil).Down(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range down.Changes {
		switch c.Resource {
		case "lambda-function", "sqs-queue", "event-source-mapping":
			if c.Action != deploy.Delete {
				t.Errorf("down: %+v", down.Changes)
			}
		}
	}
	if _, err := newDeployer(nil).Status(ctx); deploy.FailedStep(err) != deploy.StepInspect {
		t.Errorf("status after down: %v", err)
	}
	if got := secretVersions(t, sm, svc); !reflect.DeepEqual(got, secretsBefore) {
		t.Errorf("down without --purge touched the secrets: %v", got)
	}
}

func secretVersions(t *testing.T, sm *awsdeploy.SecretsManager, svc string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, s := range []string{"api-key", "private-key"} {
		v, err := sm.Get(context.Background(), svc+"-"+s)
		if err != nil {
			t.Fatal(err)
		}
		out[s] = v.Ref.Version + " " + v.Value.Fingerprint()
	}
	return out
}

// assertImage checks the pushed image: a single-platform OCI manifest with the expected config and
// files.
func assertImage(t *testing.T, ref string) {
	t.Helper()
	img, err := lambdaemu.Pull(context.Background(), ref)
	if err != nil {
		t.Fatal(err)
	}
	mt, err := img.MediaType()
	if err != nil || mt != types.OCIManifestSchema1 {
		t.Errorf("media type %s %v, want a single OCI manifest", mt, err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.OS != "linux" || cf.Architecture != runtime.GOARCH || !reflect.DeepEqual(cf.Config.Entrypoint, []string{image.Entrypoint}) ||
		cf.Config.User != image.User || !reflect.DeepEqual(cf.Config.Env, image.Env) || !cf.Created.Equal(time.Unix(0, 0)) {
		t.Errorf("config %+v", cf)
	}
	files := map[string]*tar.Header{}
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(rc)
		for {
			h, err := tr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			files[h.Name] = h
		}
		rc.Close()
	}
	for name, mode := range map[string]int64{"svz/controller": 0o755, "etc/passwd": 0o644, "etc/ssl/certs/ca-certificates.crt": 0o644, "tmp/": 0o1777} {
		h, ok := files[name]
		if !ok || h.Mode != mode || !h.ModTime.Equal(time.Unix(0, 0)) {
			t.Errorf("%s: %+v, want mode %o at the epoch", name, h, mode)
		}
	}
	raw, _ := json.Marshal(cf.Config)
	if strings.Contains(string(raw), "SUPERVAIZER") {
		t.Errorf("the image bakes settings: %s", raw)
	}
}
