package local_test

import (
	"reflect"
	"testing"

	"github.com/supervaize/svz/deploy"
	"github.com/supervaize/svz/deploy/apprunner"
	"github.com/supervaize/svz/deploy/cloudrun"
	"github.com/supervaize/svz/deploy/lambda"
	"github.com/supervaize/svz/deploy/local"
)

// TestPlatformEnvironments pins what "the way the platform would" means for each platform of
// svz deploy local: the variables the platform's driver gives the controller, the secrets as
// values, and what the platform itself adds.
func TestPlatformEnvironments(t *testing.T) {
	svc := func(store string) deploy.Service {
		env := map[string]string{"SUPERVAIZER_ENVIRONMENT": "dev", "SUPERVAIZER_SERVER_ID": "id-1", "SUPERVAIZER_LOG_LEVEL": "DEBUG"}
		if store != "" {
			env["SUPERVAIZER_STORE"] = store
		}
		return deploy.Service{Name: "hello-dev", Env: env,
			// Refs never reach a local run: the values do.
			Secrets: map[string]deploy.SecretRef{"SUPERVAIZER_API_KEY": {Name: "hello-dev-api-key", ID: "arn:aws:secretsmanager:x"}}}
	}
	secrets := map[string]deploy.Secret{"SUPERVAIZER_API_KEY": deploy.NewSecret("k-0123456789abcdef0123456789abcdef")}
	base := map[string]string{"SUPERVAIZER_ENVIRONMENT": "dev", "SUPERVAIZER_SERVER_ID": "id-1", "SUPERVAIZER_LOG_LEVEL": "DEBUG",
		"SUPERVAIZER_API_KEY": "k-0123456789abcdef0123456789abcdef"}
	with := func(extra map[string]string) map[string]string {
		m := map[string]string{}
		for k, v := range base {
			m[k] = v
		}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	for _, tc := range []struct {
		name string
		got  map[string]string
		want map[string]string
	}{
		{"cloud run", cloudrun.Local{}.Env(svc(""), secrets, 4321), with(map[string]string{
			"SUPERVAIZER_PUBLIC_URL": "http://127.0.0.1:4321", "PORT": "4321",
			"K_SERVICE": "hello-dev", "K_CONFIGURATION": "hello-dev", "K_REVISION": "hello-dev-00001-loc",
		})},
		{"app runner", apprunner.Local{Region: "eu-west-3"}.Env(svc("postgres"), secrets, 4321), with(map[string]string{
			"SUPERVAIZER_STORE": "postgres", "SUPERVAIZER_PUBLIC_URL": "http://127.0.0.1:4321", "PORT": "4321", "SUPERVAIZER_HOST": "127.0.0.1",
			"SUPERVAIZER_PLATFORM": "app-runner",
		})},
		{"app runner, dynamodb store", apprunner.Local{Region: "eu-west-3"}.Env(svc("dynamodb"), secrets, 4321), with(map[string]string{
			"SUPERVAIZER_STORE": "memory", "AWS_REGION": "eu-west-3",
			"SUPERVAIZER_PUBLIC_URL": "http://127.0.0.1:4321", "PORT": "4321", "SUPERVAIZER_HOST": "127.0.0.1",
			"SUPERVAIZER_PLATFORM": "app-runner",
		})},
		{"lambda", lambda.Local{Region: "eu-west-3"}.Env(svc(""), secrets, "http://127.0.0.1:4321"), with(map[string]string{
			"SUPERVAIZER_STORE": "memory", "SUPERVAIZER_LAMBDA_INVOKE_MODE": "RESPONSE_STREAM", "SUPERVAIZER_PUBLIC_URL": "http://127.0.0.1:4321",
			"AWS_LAMBDA_FUNCTION_NAME": "hello-dev", "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "512", "AWS_LAMBDA_FUNCTION_VERSION": "$LATEST",
			"AWS_LAMBDA_FUNCTION_TIMEOUT": "60", "AWS_LAMBDA_LOG_GROUP_NAME": "/aws/lambda/hello-dev",
			"AWS_REGION": "eu-west-3", "AWS_DEFAULT_REGION": "eu-west-3", "TZ": ":UTC",
		})},
	} {
		if !reflect.DeepEqual(tc.got, tc.want) {
			t.Errorf("%s:\n got %v\nwant %v", tc.name, tc.got, tc.want)
		}
	}
	// The image's own variables come first; the platform's win.
	got := local.Environ(map[string]string{"PATH": "/custom", "A": "1"})
	want := []string{"A=1", "PATH=/custom", "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Environ: %q, want %q", got, want)
	}
}
