//go:build !svz_noawschain

// Package awschain is the AWS SDK's default credential chain as an awsapi.Fallback: the profile
// of AWS_PROFILE in the shared config and credentials files (static keys, SSO, credential_process,
// assumed roles), web identity (EKS IRSA) and EC2 instance metadata, for processes on a
// workstation, EC2 or EKS, whose environment has neither static nor container credentials.
//
// It is its own package so that only binaries that want it link the SDK's configuration loader
// and its SSO, STS and IMDS clients (about 3 MB, and their package initialisation at every
// start): build with the tag svz_noawschain to leave it out (the Lambda bootstrap does: Lambda
// always gives static credentials); Fallback then reports that it was left out.
package awschain

import (
	"context"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/smithy-go/logging"

	"github.com/supervaize/svz/internal/awsapi"
)

// Fallback returns the AWS SDK's default chain, loaded when the client first needs it. It reads
// the process environment and files as the SDK does; the profile (AWS_PROFILE), the region and
// the instance metadata endpoint (AWS_EC2_METADATA_SERVICE_ENDPOINT) of getenv take precedence.
func Fallback(getenv func(string) string) awsapi.Fallback {
	opts := []func(*config.LoadOptions) error{
		config.WithLogger(logging.Nop{}), // its warnings (IMDS probing…) would bury the error that matters
	}
	if r := awsapi.Region(getenv); r != "" {
		opts = append(opts, config.WithRegion(r))
	}
	if p := strings.TrimSpace(getenv("AWS_PROFILE")); p != "" {
		opts = append(opts, config.WithSharedConfigProfile(p))
	}
	if e := strings.TrimSpace(getenv("AWS_EC2_METADATA_SERVICE_ENDPOINT")); e != "" {
		opts = append(opts, config.WithEC2IMDSEndpoint(e))
	}
	return func(ctx context.Context) (aws.CredentialsProvider, error) {
		cfg, err := config.LoadDefaultConfig(ctx, opts...)
		if err == nil && cfg.Credentials == nil {
			err = fmt.Errorf("no credentials provider")
		}
		if err != nil {
			return nil, fmt.Errorf("%s could not load: %w", Name, err)
		}
		return found{cfg.Credentials}, nil
	}
}

// Name is how errors call the chain.
const Name = "the AWS SDK's default chain (profiles, SSO, web identity, EC2 instance metadata)"

// found says, when the chain has no credentials, that it looked.
type found struct{ aws.CredentialsProvider }

// Invalidate drops the cached credentials (awsapi calls it after an expired-token answer).
func (f found) Invalidate() {
	if c, ok := f.CredentialsProvider.(*aws.CredentialsCache); ok {
		c.Invalidate()
	}
}

func (f found) Retrieve(ctx context.Context) (aws.Credentials, error) {
	c, err := f.CredentialsProvider.Retrieve(ctx)
	if err != nil {
		return aws.Credentials{}, fmt.Errorf("%s found none: %w", Name, err)
	}
	return c, nil
}
