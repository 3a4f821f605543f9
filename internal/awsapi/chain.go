//go:build !svz_noawschain

package awsapi

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/smithy-go/logging"
)

// sdkChain is the AWS SDK's default credential chain, loaded at the first Retrieve: the SDK's
// configuration loader reads files and the environment, work a process with static or container
// credentials never does.
type sdkChain struct {
	opts []func(*config.LoadOptions) error

	mu    sync.Mutex
	creds aws.CredentialsProvider // nil until loaded
}

func newSDKChain(getenv func(string) string, s settings, region string) (*sdkChain, error) {
	opts := []func(*config.LoadOptions) error{
		config.WithRegion(region),
		config.WithLogger(logging.Nop{}), // its warnings would bury the error that matters
	}
	if p := strings.TrimSpace(getenv("AWS_PROFILE")); p != "" {
		opts = append(opts, config.WithSharedConfigProfile(p))
	}
	if e := strings.TrimSpace(getenv("AWS_EC2_METADATA_SERVICE_ENDPOINT")); e != "" {
		opts = append(opts, config.WithEC2IMDSEndpoint(e))
	}
	return &sdkChain{opts: opts}, nil
}

// Retrieve returns the chain's credentials, cached by the SDK until shortly before they expire.
func (c *sdkChain) Retrieve(ctx context.Context) (aws.Credentials, error) {
	creds, err := c.load(ctx)
	if err != nil {
		return aws.Credentials{}, chainError(err)
	}
	v, err := creds.Retrieve(ctx)
	if err != nil {
		return aws.Credentials{}, chainError(err)
	}
	return v, nil
}

func (c *sdkChain) load(ctx context.Context) (aws.CredentialsProvider, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.creds != nil {
		return c.creds, nil
	}
	cfg, err := config.LoadDefaultConfig(ctx, c.opts...)
	if err != nil {
		return nil, err
	}
	if cfg.Credentials == nil {
		return nil, errors.New("it has no credentials provider")
	}
	c.creds = cfg.Credentials
	return c.creds, nil
}

// invalidate drops the cached credentials after the service called them expired.
func (c *sdkChain) invalidate() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cache, ok := c.creds.(*aws.CredentialsCache); ok {
		cache.Invalidate()
	}
	return true
}

func chainError(err error) error {
	return fmt.Errorf("%s %s, and the AWS SDK's default chain (profiles, SSO, web identity, EC2 instance metadata) found none: %w",
		errNoCredentials, errNoContainer, err)
}
