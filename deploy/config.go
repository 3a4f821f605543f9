package deploy

import (
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/google/uuid"
)

// Config is what the user asked for on the command line.
type Config struct {
	Platform  string // PlatformLambda, PlatformAppRunner, PlatformCloudRun
	Name      string // service name; resources are named {name}-{env}
	Env       string // environment, default "dev"
	Region    string
	ProjectID string // GCP project (Cloud Run)
	Main      string // package to build, default "."
	Dir       string // directory the build runs in, default the current one
	Arch      string // amd64 or arm64; empty: the platform's default
	ImageRepo string // push under this repository prefix instead of the platform registry

	GenerateAPIKey     bool
	GeneratePrivateKey bool
	RotateSecrets      bool
	MinInstances       int  // Cloud Run minimum instances
	Purge              bool // down: also delete the secrets and the store table
	Serve              bool // local: keep the controller running after the health gate

	// Tracing is --tracing: TracingPassThrough (the default; empty means it too) or TracingActive,
	// Lambda's X-Ray active tracing (template.yaml's Tracing parameter, lowercased).
	Tracing string
}

var (
	nameRE = regexp.MustCompile(`^[a-z][a-z0-9-]*[a-z0-9]$`)
	envRE  = regexp.MustCompile(`^[a-z][a-z0-9]*$`)
)

// maxResourceName keeps {name}-{env} and the longest derived name ({name}-{env}-apprunner-ecr,
// {name}-{env}-studio-api-key) within every platform's limits (Cloud Run services: 49, IAM roles: 64).
const maxResourceName = 40

// Validate checks the configuration before anything is built or called.
func (c *Config) Validate() error { return c.validate(false) }

// validate checks the configuration; local runs need no cloud project.
func (c *Config) validate(local bool) error {
	switch c.Platform {
	case PlatformLambda, PlatformAppRunner, PlatformCloudRun:
	case "":
		return fmt.Errorf("--platform is required: %s, %s or %s", PlatformCloudRun, PlatformAppRunner, PlatformLambda)
	default:
		return fmt.Errorf("--platform %q: want %s, %s or %s", c.Platform, PlatformCloudRun, PlatformAppRunner, PlatformLambda)
	}
	if c.Name == "" {
		return fmt.Errorf("--name is required: the service's name, e.g. --name my-agent (its resources are named {name}-{env})")
	}
	if !nameRE.MatchString(c.Name) || strings.Contains(c.Name, "--") {
		return fmt.Errorf("--name %q: use lowercase letters, digits and single hyphens, at least 2 characters, starting with a letter and not ending with a hyphen", c.Name)
	}
	if !envRE.MatchString(c.Env) {
		return fmt.Errorf("--env %q: use lowercase letters and digits, starting with a letter", c.Env)
	}
	if n := len(c.ResourceName()); n > maxResourceName {
		return fmt.Errorf("--name and --env make %q (%d characters); keep it within %d", c.ResourceName(), n, maxResourceName)
	}
	switch c.Arch {
	case "", "amd64", "arm64":
	default:
		return fmt.Errorf("--arch %q: want amd64 or arm64", c.Arch)
	}
	if c.Platform != PlatformLambda && c.Arch == "arm64" {
		return fmt.Errorf("--arch arm64: %s runs amd64 images only", c.Platform)
	}
	if c.Platform == PlatformCloudRun && c.ProjectID == "" && !local {
		return fmt.Errorf("--project-id is required for %s", PlatformCloudRun)
	}
	if c.MinInstances < 0 || c.MinInstances > 100 {
		return fmt.Errorf("--min-instances %d: want 0 to 100", c.MinInstances)
	}
	if err := c.validateTracing(); err != nil {
		return err
	}
	if c.ImageRepo != "" && (strings.Contains(c.ImageRepo, "@") || strings.HasSuffix(c.ImageRepo, "/")) {
		return fmt.Errorf("--image-repo %q: give a repository prefix such as registry.example.com/team, without tag or digest", c.ImageRepo)
	}
	return nil
}

// Values of --tracing: Lambda's TracingConfig modes, lowercased like every other flag value.
const (
	TracingPassThrough = "passthrough"
	TracingActive      = "active"
)

// ActiveTracing reports whether the service records X-Ray traces of its own (--tracing active).
func (c *Config) ActiveTracing() bool { return c.Tracing == TracingActive }

// validateTracing accepts --tracing active on Lambda only: App Runner's own X-Ray segments need an
// observability configuration svz does not manage, and Cloud Run has no switch (spans go out over
// OTLP to a collector that writes to Cloud Trace).
func (c *Config) validateTracing() error {
	switch c.Tracing {
	case "", TracingPassThrough:
		return nil
	case TracingActive:
	default:
		return fmt.Errorf("--tracing %q: want %s (the default) or %s (X-Ray active tracing, Lambda)", c.Tracing, TracingPassThrough, TracingActive)
	}
	switch c.Platform {
	case PlatformAppRunner:
		return fmt.Errorf("--tracing %s: svz does not manage App Runner's observability configuration (App Runner's own X-Ray segments); "+
			"the controller's spans reach X-Ray through a collector named by OTEL_EXPORTER_OTLP_ENDPOINT (docs/observability.md, Sending to X-Ray)", TracingActive)
	case PlatformCloudRun:
		return fmt.Errorf("--tracing %s: Cloud Run needs no switch; point OTEL_EXPORTER_OTLP_ENDPOINT at a collector whose service account "+
			"holds roles/cloudtrace.agent (docs/observability.md, Sending to Cloud Trace)", TracingActive)
	}
	return nil
}

// ResourceName is the name of the service and the prefix of every resource: {name}-{env}.
func (c *Config) ResourceName() string { return c.Name + "-" + c.Env }

// SecretName is the platform secret holding the variable with the given suffix.
func (c *Config) SecretName(suffix string) string { return c.ResourceName() + "-" + suffix }

// forwardedEnv are host variables given to the service unchanged when set (spec §9.3 and the
// settings the server reads). Secrets are not here: they go through the secret store.
var forwardedEnv = []string{
	"SUPERVAIZER_WORKSPACE_AUTH_REQUIRED",
	"SUPERVAIZER_WORKSPACE_AUTH_ISSUER",
	"SUPERVAIZER_WORKSPACE_AUTH_AUDIENCE",
	"SUPERVAIZER_WORKSPACE_AUTH_PUBLIC_KEY",
	"SUPERVAIZER_WORKSPACE_AUTH_JWKS_URL",
	"SUPERVAIZER_WORKSPACE_AUTH_LEEWAY_SECONDS",
	"SUPERVAIZER_STUDIO_AGENT_IDS",
	"SUPERVAIZER_LOG_LEVEL",
	EnvStore,
	EnvStoreTable,
	"SUPERVAIZE_WORKSPACE_ID",
	"SUPERVAIZE_API_URL",
	// Telemetry (docs/observability.md). OTEL_EXPORTER_OTLP_HEADERS is not passed: it may hold a
	// backend's key, which only the secret store may carry.
	"OTEL_SDK_DISABLED",
	"OTEL_SERVICE_NAME",
	"OTEL_RESOURCE_ATTRIBUTES",
	"OTEL_TRACES_EXPORTER",
	"OTEL_METRICS_EXPORTER",
	"OTEL_TRACES_SAMPLER",
	"OTEL_TRACES_SAMPLER_ARG",
	"OTEL_PROPAGATORS",
	"OTEL_METRIC_EXPORT_INTERVAL",
	"OTEL_EXPORTER_OTLP_ENDPOINT",
	"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
	"OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
	"OTEL_EXPORTER_OTLP_PROTOCOL",
	"OTEL_EXPORTER_OTLP_TIMEOUT",
	"OTEL_EXPORTER_OTLP_COMPRESSION",
	"SUPERVAIZER_OTEL_STORE_SPANS",
	"GOOGLE_CLOUD_PROJECT",
}

// Store settings the controller reads (core/store/storeenv), forwarded from the host.
const (
	EnvStore      = "SUPERVAIZER_STORE"
	EnvStoreTable = "SUPERVAIZER_STORE_TABLE"
)

// StoreIsDynamoDB reports whether a SUPERVAIZER_STORE value chooses DynamoDB (the controller reads
// it without regard to case).
func StoreIsDynamoDB(v string) bool { return strings.EqualFold(strings.TrimSpace(v), "dynamodb") }

// Variables the deploy sets itself.
const (
	EnvServerID    = "SUPERVAIZER_SERVER_ID"
	EnvPublicURL   = "SUPERVAIZER_PUBLIC_URL"
	EnvEnvironment = "SUPERVAIZER_ENVIRONMENT"
	// EnvSecretsVersion changes when a secret gets a new version, so that platforms which read
	// secrets only when an instance starts (Lambda init, App Runner deployment) start new instances.
	EnvSecretsVersion = "SUPERVAIZER_SECRETS_VERSION"
)

// plainEnv builds the service's plain environment.
func plainEnv(cfg *Config, getenv func(string) string, serverID, publicURL string) map[string]string {
	env := map[string]string{EnvEnvironment: cfg.Env, EnvServerID: serverID}
	for _, k := range forwardedEnv {
		if v := strings.TrimSpace(getenv(k)); v != "" {
			env[k] = v
		}
	}
	if publicURL != "" {
		env[EnvPublicURL] = publicURL
	}
	return env
}

// secretsVersion summarises the secret versions a service reads: the same versions give the same
// value.
func secretsVersion(refs map[string]SecretRef) string {
	keys := make([]string, 0, len(refs))
	for k := range refs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%s@%s\n", k, refs[k].ID, refs[k].Version)
	}
	return Fingerprint(b.String())
}

// serverIDNamespace is the UUID namespace of derived server ids.
var serverIDNamespace = uuid.UUID{0x6b, 0x1e, 0x2c, 0x41, 0x8f, 0x0d, 0x4e, 0x5a, 0x9c, 0x33, 0x07, 0x52, 0xd1, 0x6e, 0xa4, 0x90}

// DeriveServerID returns a stable server id for a deployment: a name-based UUID (RFC 4122 version
// 5) of platform, scope (account or project), region and resource name. The same deployment gets
// the same id after down and up, so Studio keeps recognising it.
func DeriveServerID(platform, scope, region, resource string) string {
	return uuid.NewSHA1(serverIDNamespace, []byte(platform+"/"+scope+"/"+region+"/"+resource)).String()
}
