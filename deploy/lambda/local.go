package lambda

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/supervaize/svz/deploy"
	"github.com/supervaize/svz/deploy/awsdeploy"
	"github.com/supervaize/svz/deploy/local"
	"github.com/supervaize/svz/deploy/rie"
)

// Local runs the image on this machine as Lambda runs it (svz deploy local): its binary is the
// bootstrap, under the Lambda Runtime Interface Emulator, behind a loopback Function URL. The
// function gets the environment Driver.Env gives it and the variables Lambda sets
// (AWS_LAMBDA_FUNCTION_NAME, _MEMORY_SIZE, _VERSION, the timeout, AWS_REGION, TZ), less what
// reaches AWS: the secrets are given as values instead of ARNs, the store is in memory instead of
// the function's DynamoDB table, and there are no AWS credentials.
type Local struct {
	// RIE is the emulator's path; empty: rie.Find.
	RIE    string
	Region string
}

var _ deploy.LocalRunner = Local{}

// Start runs the image.
func (l Local) Start(ctx context.Context, img v1.Image, s deploy.Service, secrets map[string]deploy.Secret, logs io.Writer) (*deploy.LocalInstance, error) {
	emulator, err := rie.Find(l.RIE)
	if err != nil {
		return nil, err
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	url := "http://127.0.0.1:" + strconv.Itoa(lis.Addr().(*net.TCPAddr).Port)
	dir, bootstrap, err := local.WriteBinary(img, "bootstrap")
	if err != nil {
		lis.Close()
		return nil, err
	}
	env := l.Env(s, secrets, url)
	emu, err := rie.Start(ctx, rie.Options{RIE: emulator, Bootstrap: bootstrap, Env: local.Environ(env), Dir: dir, Output: logs})
	if err != nil {
		lis.Close()
		os.RemoveAll(dir)
		return nil, err
	}
	srv := &http.Server{
		Handler:           &rie.FunctionURL{Emulator: emu, Domain: s.Name + ".lambda-url." + l.Region + ".on.aws"},
		ReadHeaderTimeout: 10 * time.Second, MaxHeaderBytes: 64 << 10,
	}
	served := make(chan struct{})
	go func() {
		defer close(served)
		if err := srv.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
			fmt.Fprintf(logs, "svz: local Function URL: %v\n", err)
		}
	}()
	var once sync.Once
	return &deploy.LocalInstance{
		URL: url, How: "under the Lambda Runtime Interface Emulator, behind a local Function URL",
		Exited: emu.Exited(), ExitErr: emu.Err,
		Stop: func() error {
			once.Do(func() {
				_ = srv.Close()
				<-served
				_ = emu.Stop()
				os.RemoveAll(dir)
			})
			return nil
		},
	}, nil
}

// Env is the function's environment for a local run.
func (l Local) Env(s deploy.Service, secrets map[string]deploy.Secret, url string) map[string]string {
	s.Secrets = nil // given as values below, not as ARNs
	env := (&Driver{Region: l.Region}).Env(s)
	env[deploy.EnvStore] = "memory"
	delete(env, deploy.EnvStoreTable)
	// No queue runs locally: an agent with background work says at start that it needs one.
	delete(env, EnvJobsQueueURL)
	delete(env, EnvJobsMaxReceives)
	delete(env, EnvJobsDeadLetterARN)
	env[deploy.EnvPublicURL] = url
	local.SecretValues(env, secrets)
	for k, v := range map[string]string{
		"AWS_LAMBDA_FUNCTION_NAME":        s.Name,
		"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": strconv.Itoa(MemoryMB),
		"AWS_LAMBDA_FUNCTION_VERSION":     "$LATEST",
		"AWS_LAMBDA_FUNCTION_TIMEOUT":     strconv.Itoa(TimeoutSeconds), // read by the emulator
		"AWS_LAMBDA_LOG_GROUP_NAME":       "/aws/lambda/" + s.Name,
		"AWS_REGION":                      l.Region,
		"AWS_DEFAULT_REGION":              l.Region,
		"TZ":                              ":UTC",
	} {
		env[k] = v
	}
	return env
}

// LocalPlatform is Lambda for svz deploy local: nothing to connect to.
func LocalPlatform(emulator, region string) deploy.Platform {
	if region == "" {
		region = awsdeploy.DefaultRegion
	}
	return deploy.Platform{Name: deploy.PlatformLambda, Scope: "local", Region: region, DefaultArch: "arm64", SecretVars: SecretVars,
		Local: Local{RIE: emulator, Region: region}}
}
