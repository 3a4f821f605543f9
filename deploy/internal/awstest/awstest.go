// Package awstest points AWS SDK clients at the moto_server given by testenv.AWSEndpoint, with the
// fake credentials moto accepts, and names test resources uniquely (moto keeps state between tests).
package awstest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/supervaize/svz/deploy/awsdeploy"
	"github.com/supervaize/svz/internal/testenv"
)

// Region of every test.
const Region = "us-east-1"

// Config returns an AWS configuration for moto, loaded through the default chain exactly as the CLI
// loads it (AWS_ENDPOINT_URL, AWS_REGION and static credentials from the environment). It sets the
// process environment, so tests that call it cannot run in parallel.
func Config(t *testing.T) aws.Config {
	t.Helper()
	endpoint := testenv.Need(t, testenv.AWSEndpoint)
	t.Setenv("AWS_ENDPOINT_URL", endpoint)
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	t.Setenv("AWS_SESSION_TOKEN", "")
	t.Setenv("AWS_PROFILE", "")
	t.Setenv("AWS_CONFIG_FILE", "/dev/null")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/dev/null")
	t.Setenv("AWS_REGION", Region)
	cfg, err := awsdeploy.LoadConfig(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// Name returns prefix followed by a random suffix: a fresh resource name for this test.
func Name(prefix string) string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return prefix + hex.EncodeToString(b)
}
