package deploy

import (
	"reflect"
	"regexp"
	"strings"
	"testing"
)

func TestValidate(t *testing.T) {
	ok := Config{Platform: PlatformLambda, Name: "hello", Env: "dev"}
	for _, tc := range []struct {
		name string
		mod  func(*Config)
		want string
	}{
		{"valid", func(*Config) {}, ""},
		{"no platform", func(c *Config) { c.Platform = "" }, "--platform is required: cloud-run, app-runner or lambda"},
		{"bad platform", func(c *Config) { c.Platform = "aws-app-runner" }, `--platform "aws-app-runner": want cloud-run, app-runner or lambda`},
		{"no name", func(c *Config) { c.Name = "" }, "--name is required: the service's name, e.g. --name my-agent (its resources are named {name}-{env})"},
		{"upper name", func(c *Config) { c.Name = "Hello" }, `--name "Hello": use lowercase letters, digits and single hyphens, at least 2 characters, starting with a letter and not ending with a hyphen`},
		{"one letter", func(c *Config) { c.Name = "x" }, `--name "x": use lowercase letters, digits and single hyphens, at least 2 characters, starting with a letter and not ending with a hyphen`},
		{"trailing hyphen", func(c *Config) { c.Name = "ab-" }, `--name "ab-": use lowercase letters, digits and single hyphens, at least 2 characters, starting with a letter and not ending with a hyphen`},
		{"double hyphen", func(c *Config) { c.Name = "a--b" }, `--name "a--b": use lowercase letters, digits and single hyphens, at least 2 characters, starting with a letter and not ending with a hyphen`},
		{"bad env", func(c *Config) { c.Env = "pro-d" }, `--env "pro-d": use lowercase letters and digits, starting with a letter`},
		{"too long", func(c *Config) { c.Name = strings.Repeat("a", 37) }, `--name and --env make "` + strings.Repeat("a", 37) + `-dev" (41 characters); keep it within 40`},
		{"bad arch", func(c *Config) { c.Arch = "386" }, `--arch "386": want amd64 or arm64`},
		{"arm on cloud run", func(c *Config) { c.Platform, c.ProjectID, c.Arch = PlatformCloudRun, "p", "arm64" }, "--arch arm64: cloud-run runs amd64 images only"},
		{"cloud run without project", func(c *Config) { c.Platform = PlatformCloudRun }, "--project-id is required for cloud-run"},
		{"min instances", func(c *Config) { c.MinInstances = -1 }, "--min-instances -1: want 0 to 100"},
		{"tracing passthrough", func(c *Config) { c.Tracing = TracingPassThrough }, ""},
		{"tracing active on lambda", func(c *Config) { c.Tracing = TracingActive }, ""},
		{"bad tracing", func(c *Config) { c.Tracing = "Active" }, `--tracing "Active": want passthrough (the default) or active (X-Ray active tracing, Lambda)`},
		{"tracing on", func(c *Config) { c.Tracing = "on" }, `--tracing "on": want passthrough (the default) or active (X-Ray active tracing, Lambda)`},
		{"tracing active on app runner", func(c *Config) { c.Platform, c.Tracing = PlatformAppRunner, TracingActive },
			"--tracing active: svz does not manage App Runner's observability configuration (App Runner's own X-Ray segments); the controller's spans reach X-Ray through a collector named by OTEL_EXPORTER_OTLP_ENDPOINT (docs/observability.md, Sending to X-Ray)"},
		{"tracing passthrough on app runner", func(c *Config) { c.Platform, c.Tracing = PlatformAppRunner, TracingPassThrough }, ""},
		{"tracing active on cloud run", func(c *Config) { c.Platform, c.ProjectID, c.Tracing = PlatformCloudRun, "p", TracingActive },
			"--tracing active: Cloud Run needs no switch; point OTEL_EXPORTER_OTLP_ENDPOINT at a collector whose service account holds roles/cloudtrace.agent (docs/observability.md, Sending to Cloud Trace)"},
		{"image repo with digest", func(c *Config) { c.ImageRepo = "r.example/x@sha256:00" }, `--image-repo "r.example/x@sha256:00": give a repository prefix such as registry.example.com/team, without tag or digest`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := ok
			tc.mod(&c)
			err := c.Validate()
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tc.want {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestDeriveServerID(t *testing.T) {
	id := DeriveServerID(PlatformLambda, "123456789012", "us-east-1", "hello-dev")
	if !regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`).MatchString(id) {
		t.Fatalf("%q is not a version 5 UUID", id)
	}
	if again := DeriveServerID(PlatformLambda, "123456789012", "us-east-1", "hello-dev"); again != id {
		t.Fatal("not stable")
	}
	// Deployed ids must never change with an svz version: Studio knows the server by it.
	if id != "fe7ada3d-1b28-547b-b8ca-67fca515967b" {
		t.Fatalf("DeriveServerID gives %s, it gave fe7ada3d-1b28-547b-b8ca-67fca515967b", id)
	}
	for _, other := range []string{
		DeriveServerID(PlatformAppRunner, "123456789012", "us-east-1", "hello-dev"),
		DeriveServerID(PlatformLambda, "210987654321", "us-east-1", "hello-dev"),
		DeriveServerID(PlatformLambda, "123456789012", "eu-west-3", "hello-dev"),
		DeriveServerID(PlatformLambda, "123456789012", "us-east-1", "hello-prod"),
	} {
		if other == id {
			t.Fatal("different deployments share a server id")
		}
	}
}

func TestPlainEnv(t *testing.T) {
	host := map[string]string{
		"SUPERVAIZER_WORKSPACE_AUTH_REQUIRED": "true",
		"SUPERVAIZER_WORKSPACE_AUTH_ISSUER":   " https://studio.supervaize.com ",
		"SUPERVAIZE_WORKSPACE_ID":             "ws-1",
		"SUPERVAIZER_API_KEY":                 "secret-must-not-be-forwarded-as-plain",
		"SUPERVAIZE_API_KEY":                  "secret-too",
		"HOME":                                "/root",
		"OTEL_EXPORTER_OTLP_ENDPOINT":         "http://localhost:4318",
		"OTEL_SERVICE_NAME":                   "my-agent",
		"OTEL_EXPORTER_OTLP_HEADERS":          "x-honeycomb-team=secret-key",
	}
	cfg := Config{Env: "prod"}
	got := plainEnv(&cfg, func(k string) string { return host[k] }, "srv", "https://x.example")
	want := map[string]string{
		"SUPERVAIZER_ENVIRONMENT":             "prod",
		"SUPERVAIZER_SERVER_ID":               "srv",
		"SUPERVAIZER_PUBLIC_URL":              "https://x.example",
		"SUPERVAIZER_WORKSPACE_AUTH_REQUIRED": "true",
		"SUPERVAIZER_WORKSPACE_AUTH_ISSUER":   "https://studio.supervaize.com",
		"SUPERVAIZE_WORKSPACE_ID":             "ws-1",
		"OTEL_EXPORTER_OTLP_ENDPOINT":         "http://localhost:4318",
		"OTEL_SERVICE_NAME":                   "my-agent",
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v\nwant %v", got, want)
	}
}

func TestDiffEnv(t *testing.T) {
	got := DiffEnv(map[string]string{"A": "1", "B": "2", "C": "3"}, map[string]string{"A": "1", "B": "x", "D": "4"})
	if got != "+D -C ~B" {
		t.Fatalf("got %q", got)
	}
	if DiffEnv(map[string]string{"A": "1"}, map[string]string{"A": "1"}) != "" {
		t.Fatal("equal maps differ")
	}
}

func TestSecretsVersion(t *testing.T) {
	a := map[string]SecretRef{"X": {ID: "arn:x", Version: "1"}, "Y": {ID: "arn:y", Version: "1"}}
	b := map[string]SecretRef{"Y": {ID: "arn:y", Version: "1"}, "X": {ID: "arn:x", Version: "1"}}
	c := map[string]SecretRef{"X": {ID: "arn:x", Version: "2"}, "Y": {ID: "arn:y", Version: "1"}}
	if secretsVersion(a) != secretsVersion(b) || secretsVersion(a) == secretsVersion(c) {
		t.Fatal("the secrets version must depend on versions only, not on map order")
	}
}

// TestActiveTracing: only --tracing active turns tracing on; a Config that leaves Tracing empty
// (library callers, tests) means passthrough.
func TestActiveTracing(t *testing.T) {
	for tracing, want := range map[string]bool{"": false, TracingPassThrough: false, TracingActive: true} {
		if got := (&Config{Tracing: tracing}).ActiveTracing(); got != want {
			t.Errorf("Tracing %q: ActiveTracing() = %v, want %v", tracing, got, want)
		}
	}
}
