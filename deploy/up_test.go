package deploy_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	awslambda "github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/google/go-containerregistry/pkg/authn"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/supervaize/svz/deploy"
	"github.com/supervaize/svz/deploy/awsdeploy"
	"github.com/supervaize/svz/deploy/health"
	"github.com/supervaize/svz/deploy/image"
	"github.com/supervaize/svz/deploy/internal/awstest"
	"github.com/supervaize/svz/deploy/lambda"
	"github.com/supervaize/svz/internal/testenv"
)

// toServer sends every request to one test server, whatever host it names (the Function URL moto
// hands out does not resolve).
type toServer struct{ u *url.URL }

func (s toServer) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.URL.Scheme, req.URL.Host = s.u.Scheme, s.u.Host
	return http.DefaultTransport.RoundTrip(req)
}

// stubDeployer is a Deployer of the Lambda service name (env dev) against moto and the test
// registry, whose image wraps a stand-in binary: nothing is compiled.
func stubDeployer(t *testing.T, cfg aws.Config, name string) *deploy.Deployer {
	t.Helper()
	reg := testenv.Need(t, testenv.OCIRegistry)
	p, err := lambda.NewPlatform(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &deploy.Deployer{
		Config: deploy.Config{Platform: deploy.PlatformLambda, Name: name, Env: "dev", Arch: "amd64", ImageRepo: reg + "/svz",
			GenerateAPIKey: true, GeneratePrivateKey: true},
		Platform: p, Getenv: func(string) string { return "" }, Keychain: authn.NewMultiKeychain(),
		Image: func(_ context.Context, arch string) (v1.Image, error) {
			return image.New(image.Spec{Binary: []byte("controller " + name), Arch: arch, CACerts: []byte("ca"), Created: time.Unix(0, 0)})
		},
	}
}

// unhealthyGate is a health gate whose every request gets 503 from a test server: up fails at
// step health and leaves the service as it deployed it.
func unhealthyGate(t *testing.T) *health.Gate {
	unhealthy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "starting", http.StatusServiceUnavailable)
	}))
	t.Cleanup(unhealthy.Close)
	u, _ := url.Parse(unhealthy.URL)
	return &health.Gate{Client: &http.Client{Transport: toServer{u}}, Timeout: 300 * time.Millisecond, Interval: 20 * time.Millisecond}
}

// TestFirstUpFailingGateIsLeftInPlace: when the gate fails after the first deployment of a service,
// there is nothing to roll back to. The public-URL update that follows the create must not serve
// as a "rollback" that strips SUPERVAIZER_PUBLIC_URL from the service just created.
func TestFirstUpFailingGateIsLeftInPlace(t *testing.T) {
	cfg := awstest.Config(t)
	ctx := context.Background()
	name := awstest.Name("first")
	svc := name + "-dev"
	var events []deploy.Event
	d := stubDeployer(t, cfg, name)
	d.Gate = unhealthyGate(t)
	d.Progress = func(e deploy.Event) { events = append(events, e) }
	t.Cleanup(func() {
		d.Config.Purge = true
		_, _ = d.Down(context.Background())
	})

	res, err := d.Up(ctx)
	if deploy.FailedStep(err) != deploy.StepHealth || !strings.Contains(err.Error(), "GET /.well-known/health: HTTP 503: starting") {
		t.Fatalf("up: step %q: %v", deploy.FailedStep(err), err)
	}
	if res.RolledBack {
		t.Fatal("a first deployment was reported rolled back")
	}
	var notes []string
	for _, e := range events {
		if e.Step == deploy.StepRollback && e.State != deploy.StateNote {
			t.Errorf("rollback step ran: %+v", e)
		}
		if e.Step == deploy.StepRollback {
			notes = append(notes, e.Message)
		}
	}
	if want := []string{"no previous version to roll back to; the service is left in place for inspection (svz deploy down removes it)"}; !reflect.DeepEqual(notes, want) {
		t.Errorf("rollback notes %q, want %q", notes, want)
	}
	// The service stays as deployed, its public URL included.
	fn, err := awslambda.NewFromConfig(cfg).GetFunction(ctx, &awslambda.GetFunctionInput{FunctionName: aws.String(svc)})
	if err != nil {
		t.Fatal(err)
	}
	if got := fn.Configuration.Environment.Variables[deploy.EnvPublicURL]; res.URL == "" || got != res.URL {
		t.Errorf("%s = %q, want the service URL %q", deploy.EnvPublicURL, got, res.URL)
	}
	if got := aws.ToString(fn.Code.ImageUri); got != res.Image {
		t.Errorf("image %s, want %s", got, res.Image)
	}
}

// TestStoreChecks: Cloud Run cannot reach DynamoDB (no AWS credentials), so plan and up refuse it
// before building; the shared-store notice offers each platform only what it can use.
func TestStoreChecks(t *testing.T) {
	errStop := errors.New("stop after the notices")
	run := func(platform, store string, up bool) ([]string, error) {
		var notes []string
		d := &deploy.Deployer{
			Config:   deploy.Config{Platform: platform, Name: "hello", Env: "dev", ProjectID: "proj"},
			Platform: deploy.Platform{Name: platform},
			Getenv: func(k string) string {
				if k == deploy.EnvStore {
					return store
				}
				return ""
			},
			Image:    func(context.Context, string) (v1.Image, error) { return nil, errStop },
			Progress: func(e deploy.Event) { notes = append(notes, e.Step+" "+e.State+" "+e.Message) },
		}
		var err error
		if up {
			_, err = d.Up(context.Background())
		} else {
			_, err = d.Plan(context.Background())
		}
		return notes, err
	}
	const refused = "step config: SUPERVAIZER_STORE=dynamodb: cloud-run has no AWS credentials to reach DynamoDB; use postgres or redis (with SUPERVAIZER_STORE_URL)"
	for _, store := range []string{"dynamodb", " DynamoDB "} {
		for _, up := range []bool{false, true} {
			events, err := run(deploy.PlatformCloudRun, store, up)
			if err == nil || err.Error() != refused || deploy.FailedStep(err) != "config" || len(events) != 0 {
				t.Errorf("cloud-run with %q (up %v): %v, events %q", store, up, err, events)
			}
		}
	}

	const local = "notice note SUPERVAIZER_STORE is not a shared store: each instance keeps its own idempotency and checkpoint state; "
	for _, tc := range []struct {
		platform, store string
		want            []string
	}{
		{deploy.PlatformCloudRun, "", []string{local + "set SUPERVAIZER_STORE=postgres or redis (with SUPERVAIZER_STORE_URL) before up"}},
		{deploy.PlatformCloudRun, "Bolt", []string{local + "set SUPERVAIZER_STORE=postgres or redis (with SUPERVAIZER_STORE_URL) before up"}},
		{deploy.PlatformCloudRun, "postgres", nil},
		{deploy.PlatformAppRunner, "memory", []string{local + "set SUPERVAIZER_STORE=postgres or redis (with SUPERVAIZER_STORE_URL), or dynamodb (svz creates the table, SUPERVAIZER_STORE_TABLE or hello-dev), before up"}},
		{deploy.PlatformAppRunner, "dynamodb", nil},
		{deploy.PlatformLambda, "", nil},
	} {
		events, err := run(tc.platform, tc.store, false)
		if !errors.Is(err, errStop) {
			t.Errorf("%s %q: %v", tc.platform, tc.store, err)
		}
		var notes []string
		for _, e := range events {
			if strings.HasPrefix(e, "notice ") {
				notes = append(notes, e)
			}
		}
		if !reflect.DeepEqual(notes, tc.want) {
			t.Errorf("%s %q: notices %q\nwant %q", tc.platform, tc.store, notes, tc.want)
		}
	}
}

// TestUpRefusesOthersRole: up plans before it changes anything, so a role that has the name svz
// wants but that svz did not create stops it before any secret, table or function exists; down
// leaves the role alone.
func TestUpRefusesOthersRole(t *testing.T) {
	cfg := awstest.Config(t)
	ctx := context.Background()
	name := awstest.Name("role")
	svc := name + "-dev"
	client := iam.NewFromConfig(cfg)
	if _, err := client.CreateRole(ctx, &iam.CreateRoleInput{RoleName: aws.String(lambda.RoleName(svc)),
		AssumeRolePolicyDocument: aws.String(awsdeploy.TrustPolicy("ec2.amazonaws.com").JSON())}); err != nil {
		t.Fatal(err)
	}
	d := stubDeployer(t, cfg, name)
	_, err := d.Up(ctx)
	if !errors.Is(err, deploy.ErrNotManaged) || deploy.FailedStep(err) != deploy.StepPlan || !strings.Contains(err.Error(), "iam role "+svc+"-lambda exists but svz deploy did not create it") {
		t.Fatalf("up: %v", err)
	}
	if _, err := secretsmanager.NewFromConfig(cfg).DescribeSecret(ctx, &secretsmanager.DescribeSecretInput{SecretId: aws.String(svc + "-api-key")}); err == nil {
		t.Error("up stored a secret before refusing")
	}
	if _, err := awslambda.NewFromConfig(cfg).GetFunction(ctx, &awslambda.GetFunctionInput{FunctionName: aws.String(svc)}); err == nil {
		t.Error("up created the function")
	}
	d.Config.Purge = true
	res, err := d.Down(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(res.Changes, deploy.KeptChange("iam-role", svc+"-lambda")) {
		t.Errorf("down: %+v", res.Changes)
	}
	if _, err := client.GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String(svc + "-lambda")}); err != nil {
		t.Errorf("down deleted the role: %v", err)
	}
}

// TestUpTracing: --tracing reaches the function through plan and up: up with active creates it
// with X-Ray active tracing (the gate fails, so the function stays as created), a plan with active
// again finds nothing to change in it, a plan with passthrough (the flag's default) turns it off.
func TestUpTracing(t *testing.T) {
	cfg := awstest.Config(t)
	ctx := context.Background()
	name := awstest.Name("trace")
	svc := name + "-dev"
	d := stubDeployer(t, cfg, name)
	d.Config.Tracing = deploy.TracingActive
	d.Gate = unhealthyGate(t)
	t.Cleanup(func() {
		d.Config.Purge = true
		_, _ = d.Down(context.Background())
	})
	if _, err := d.Up(ctx); deploy.FailedStep(err) != deploy.StepHealth {
		t.Fatalf("up: step %q: %v", deploy.FailedStep(err), err)
	}
	fn, err := awslambda.NewFromConfig(cfg).GetFunctionConfiguration(ctx, &awslambda.GetFunctionConfigurationInput{FunctionName: aws.String(svc)})
	if err != nil {
		t.Fatal(err)
	}
	if fn.TracingConfig == nil || fn.TracingConfig.Mode != "Active" {
		t.Fatalf("tracing config %+v, want Active", fn.TracingConfig)
	}
	function := func(tracing string) deploy.Change {
		t.Helper()
		d.Config.Tracing = tracing
		res, err := d.Plan(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range res.Changes {
			if c.Resource == "lambda-function" {
				return c
			}
		}
		t.Fatalf("no lambda-function in %+v", res.Changes)
		return deploy.Change{}
	}
	if c := function(deploy.TracingActive); c.Action != deploy.NoOp {
		t.Errorf("plan with active after up with active: %+v", c)
	}
	if c, want := function(deploy.TracingPassThrough), "tracing Active → PassThrough"; c.Action != deploy.Update || c.Detail != want {
		t.Errorf("plan with passthrough: %+v, want update (%s)", c, want)
	}
}
