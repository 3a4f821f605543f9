// Package deploy takes a controller from source to a running, checked service: it builds the agent's
// main package into a single-platform OCI image without a Docker daemon, pushes it, keeps the
// controller's secrets in the platform's secret store, creates or updates the service through a
// platform Driver (Lambda, App Runner, Cloud Run), and gates the result on a health check that uses
// the stored API key, rolling back when it fails.
//
// The promises: a redeploy of the same image digest and configuration changes nothing; an existing
// secret is never replaced without RotateSecrets; secret values never reach logs, errors or output
// (only fingerprints, and the API key once, on creation, when the caller asks for it); every failure
// names the step that failed.
package deploy

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
)

// Platform names accepted by --platform.
const (
	PlatformLambda    = "lambda"
	PlatformAppRunner = "app-runner"
	PlatformCloudRun  = "cloud-run"
)

// Action is what a plan does to one resource.
type Action string

// Actions of a Change.
const (
	Create Action = "create"
	Update Action = "update"
	NoOp   Action = "no-op"
	Delete Action = "delete"
)

// Change is one line of a plan: what happens to one resource.
type Change struct {
	Resource string `json:"resource"`         // kind, e.g. "lambda-function", "secret"
	Name     string `json:"name"`             // the platform's name for it
	Action   Action `json:"action"`           // create, update, no-op, delete
	Detail   string `json:"detail,omitempty"` // why, for update and delete; never a secret value
}

func (c Change) String() string {
	s := fmt.Sprintf("%-7s %s %s", c.Action, c.Resource, c.Name)
	if c.Detail != "" {
		s += " (" + c.Detail + ")"
	}
	return s
}

// Changed reports whether any change in cs is not a no-op.
func Changed(cs []Change) bool {
	for _, c := range cs {
		if c.Action != NoOp {
			return true
		}
	}
	return false
}

// ErrNotFound is returned (wrapped) when a service, secret or repository does not exist.
var ErrNotFound = errors.New("not found")

// ErrNotManaged matches a NotManagedError.
var ErrNotManaged = errors.New("not created by svz deploy")

// ManagedBy is the marker svz deploy puts on everything it creates (a tag on AWS; a label, or the
// description of a service account, on GCP) and checks before it changes or deletes anything: a
// resource with the name svz wants but without the marker belongs to someone else.
const ManagedBy = "managed-by=svz"

// NotManagedError reports a resource that has the name svz wants but that svz did not create.
// svz neither changes, deletes nor hands it to the controller.
type NotManagedError struct {
	Kind string // e.g. "iam role", "secret", "service account"
	Name string
	// Adopt is the command that marks the resource as svz's, for the user who means it to be.
	Adopt string
}

func (e *NotManagedError) Error() string {
	return fmt.Sprintf("%s %s exists but svz deploy did not create it (it lacks the marker %s), so svz leaves it alone: "+
		"choose another --name or --env, or delete that %s; to let svz manage it, run: %s", e.Kind, e.Name, ManagedBy, e.Kind, e.Adopt)
}

// Is makes errors.Is(err, ErrNotManaged) true.
func (e *NotManagedError) Is(target error) bool { return target == ErrNotManaged }

// KeptChange is how Delete reports a resource it left alone because svz did not create it.
func KeptChange(resource, name string) Change {
	return Change{Resource: resource, Name: name, Action: NoOp, Detail: "kept: svz deploy did not create it"}
}

// Service is the desired state of the controller service, the input of a Driver.
type Service struct {
	Name    string               // platform resource name, {name}-{env}
	Image   string               // repository@sha256:digest
	Arch    string               // amd64 or arm64
	Env     map[string]string    // plain environment variables
	Secrets map[string]SecretRef // environment variable → secret holding its value
	// MinInstances is kept warm where the platform can (Cloud Run).
	MinInstances int
	// ActiveTracing turns on the platform's own trace recording where it has a switch (Lambda:
	// X-Ray active tracing, and the execution role may write to X-Ray).
	ActiveTracing bool
	// BackgroundWork: the controller defines background work (core/jobs), so the driver gives it
	// the platform's queue (Cloud Run: a Cloud Tasks queue, its invoker account and bindings).
	BackgroundWork bool
}

// SecretRef points at one version of a platform secret.
type SecretRef struct {
	Name    string `json:"name"`              // the secret's short name, {name}-{env}-api-key
	ID      string `json:"id"`                // ARN (AWS) or projects/{number}/secrets/{name} (GCP)
	Version string `json:"version,omitempty"` // version id; a new one means new instances must start
}

// Live is a deployed service as the platform reports it.
type Live struct {
	Name     string            `json:"name"`
	URL      string            `json:"url"`
	Image    string            `json:"image"`    // the image reference the service runs
	Revision string            `json:"revision"` // version, revision or operation id
	Ready    bool              `json:"ready"`
	Env      map[string]string `json:"-"` // plain variables (no secret values by construction)
}

// Deployment is the outcome of Driver.Deploy.
type Deployment struct {
	Live    Live
	Changes []Change
	// Rollback restores what was serving before Deploy, or is nil when nothing was replaced (a new
	// service, a no-op).
	Rollback func(context.Context) error
}

// Driver runs the controller service on one platform. Implementations converge: Deploy with the
// state already live makes no call that changes anything.
type Driver interface {
	// Plan reports what Deploy would do to reach s, changing nothing.
	Plan(ctx context.Context, s Service) ([]Change, error)
	// Deploy creates or updates the service and the resources it needs, and waits until it serves.
	Deploy(ctx context.Context, s Service) (Deployment, error)
	// Inspect returns the live service, or an error wrapping ErrNotFound.
	Inspect(ctx context.Context, name string) (Live, error)
	// Delete removes the service and the resources Deploy created for it; purge also removes its
	// stored data where the driver owns some (the Lambda store table).
	Delete(ctx context.Context, name string, purge bool) ([]Change, error)
}

// Registry hands out the image repository of a service and credentials to push to it.
type Registry interface {
	// Lookup returns the repository for name and whether it exists, changing nothing.
	Lookup(ctx context.Context, name string) (repo string, exists bool, err error)
	// Ensure creates the repository when absent and returns it with push credentials.
	Ensure(ctx context.Context, name string) (repo string, auth authn.Authenticator, err error)
}

// SecretStore is the platform's secret manager.
type SecretStore interface {
	// Get returns the current version of the secret, or an error wrapping ErrNotFound, or
	// ErrNotManaged (a NotManagedError) when svz did not create the secret.
	Get(ctx context.Context, name string) (StoredSecret, error)
	// Put creates the secret (marked ManagedBy), or adds a new current version to a secret svz
	// created; ErrNotManaged otherwise.
	Put(ctx context.Context, name string, value Secret) (SecretRef, error)
	// Delete removes a secret svz created at once (no recovery window: the name can be reused);
	// ErrNotFound or ErrNotManaged otherwise.
	Delete(ctx context.Context, name string) error
}

// StoredSecret is a secret read back from a SecretStore.
type StoredSecret struct {
	Ref   SecretRef
	Value Secret
}

// Platform bundles what one cloud provides. The cmd/svz constructors fill it.
type Platform struct {
	Name     string // PlatformLambda, PlatformAppRunner or PlatformCloudRun
	Scope    string // AWS account id or GCP project: part of the stable server id
	Region   string
	Registry Registry
	Secrets  SecretStore
	Driver   Driver
	// Notices are shown before plan and up (App Runner's end of sale).
	Notices []string
	// DefaultArch is the architecture used when Config.Arch is empty.
	DefaultArch string
	// SecretVars, when not nil, are the only secret variables the platform can deliver to the
	// controller; others set on the host are reported and left out.
	SecretVars []string
	// Local runs the image on this machine the way the platform would (svz deploy local).
	Local LocalRunner
}

// StepError is a failure of one named step of a command.
type StepError struct {
	Step string
	Err  error
}

func (e *StepError) Error() string { return fmt.Sprintf("step %s: %v", e.Step, e.Err) }
func (e *StepError) Unwrap() error { return e.Err }

// FailedStep returns the step named by a StepError in err's chain, or "".
func FailedStep(err error) string {
	var se *StepError
	if errors.As(err, &se) {
		return se.Step
	}
	return ""
}

// DiffEnv describes how live differs from want by variable name only (values may be sensitive
// configuration): "+NAME" added, "-NAME" removed, "~NAME" changed. Empty when equal.
func DiffEnv(live, want map[string]string) string {
	var d []string
	for k, v := range want {
		lv, ok := live[k]
		switch {
		case !ok:
			d = append(d, "+"+k)
		case lv != v:
			d = append(d, "~"+k)
		}
	}
	for k := range live {
		if _, ok := want[k]; !ok {
			d = append(d, "-"+k)
		}
	}
	sort.Strings(d)
	return strings.Join(d, " ")
}

// ShortDigest returns the first 12 hex characters of the digest in an image reference, for display.
func ShortDigest(ref string) string {
	_, d, ok := strings.Cut(ref, "@sha256:")
	if !ok {
		return ref
	}
	if len(d) > 12 {
		d = d[:12]
	}
	return "sha256:" + d
}
