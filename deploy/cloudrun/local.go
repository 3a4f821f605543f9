package cloudrun

import (
	"context"
	"io"
	"maps"
	"strconv"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/supervaize/svz/deploy"
	"github.com/supervaize/svz/deploy/local"
	"github.com/supervaize/svz/internal/localmode"
)

// Local runs the image on this machine as Cloud Run runs it (svz deploy local): its binary as the
// container's process, given the service's variables, the secrets as values (as Cloud Run injects
// them), and what Cloud Run adds: PORT (a free port here instead of 8080), K_SERVICE, K_REVISION and
// K_CONFIGURATION; a controller with background work runs it in process (SUPERVAIZER_LOCAL_EMULATOR,
// no Cloud Tasks queue). Cloud Run's adapter listens on every interface, here too; the API key guards it.
type Local struct{}

var _ deploy.LocalRunner = Local{}

// Start runs the image.
func (Local) Start(_ context.Context, img v1.Image, s deploy.Service, secrets map[string]deploy.Secret, logs io.Writer) (*deploy.LocalInstance, error) {
	port, err := local.FreePort()
	if err != nil {
		return nil, err
	}
	return local.StartProcess(img, Local{}.Env(s, secrets, port), port, logs, "as a Cloud Run container process")
}

// Env is the container's environment for a local run on port.
func (Local) Env(s deploy.Service, secrets map[string]deploy.Secret, port int) map[string]string {
	env := maps.Clone(s.Env)
	env[deploy.EnvPublicURL] = "http://127.0.0.1:" + strconv.Itoa(port)
	local.SecretValues(env, secrets)
	env["PORT"] = strconv.Itoa(port)
	env["K_SERVICE"] = s.Name
	env["K_CONFIGURATION"] = s.Name
	env["K_REVISION"] = s.Name + "-00001-loc"
	if s.BackgroundWork {
		// No Cloud Tasks here: a local emulation runs background work in process.
		env[localmode.EnvEmulator] = "true"
	}
	return env
}

// LocalPlatform is Cloud Run for svz deploy local: nothing to connect to.
func LocalPlatform(region string) deploy.Platform {
	if region == "" {
		region = DefaultRegion
	}
	return deploy.Platform{Name: deploy.PlatformCloudRun, Scope: "local", Region: region, DefaultArch: "amd64", Local: Local{}}
}
