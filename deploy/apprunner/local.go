package apprunner

import (
	"context"
	"io"
	"strconv"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/supervaize/svz/deploy"
	"github.com/supervaize/svz/deploy/awsdeploy"
	"github.com/supervaize/svz/deploy/local"
)

// Local runs the image on this machine as App Runner runs it (svz deploy local): its binary as the
// service's process, given the variables Driver.Env gives the service, the secrets as values (as
// App Runner resolves them at deployment), and PORT (a free port here instead of 8000). It
// listens on loopback only (SUPERVAIZER_HOST=127.0.0.1). A DynamoDB store is replaced by the
// in-memory one: the table exists only in AWS, and nothing here reaches AWS.
type Local struct {
	Region string
}

var _ deploy.LocalRunner = Local{}

// Start runs the image.
func (l Local) Start(_ context.Context, img v1.Image, s deploy.Service, secrets map[string]deploy.Secret, logs io.Writer) (*deploy.LocalInstance, error) {
	port, err := local.FreePort()
	if err != nil {
		return nil, err
	}
	return local.StartProcess(img, l.Env(s, secrets, port), port, logs, "as an App Runner service process")
}

// Env is the service's environment for a local run on port.
func (l Local) Env(s deploy.Service, secrets map[string]deploy.Secret, port int) map[string]string {
	env := (&Driver{Region: l.Region}).Env(s)
	if deploy.StoreIsDynamoDB(env[deploy.EnvStore]) {
		env[deploy.EnvStore] = "memory"
		delete(env, deploy.EnvStoreTable)
	}
	env[deploy.EnvPublicURL] = "http://127.0.0.1:" + strconv.Itoa(port)
	local.SecretValues(env, secrets)
	env["PORT"] = strconv.Itoa(port)
	env["SUPERVAIZER_HOST"] = "127.0.0.1"
	return env
}

// LocalPlatform is App Runner for svz deploy local: nothing to connect to.
func LocalPlatform(region string) deploy.Platform {
	if region == "" {
		region = awsdeploy.DefaultRegion
	}
	return deploy.Platform{Name: deploy.PlatformAppRunner, Scope: "local", Region: region, DefaultArch: "amd64", Local: Local{Region: region}}
}
