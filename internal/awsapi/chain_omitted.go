//go:build svz_noawschain

package awsapi

import (
	"context"
	"errors"

	"github.com/aws/aws-sdk-go-v2/aws"
)

// sdkChain is left out of this binary (tag svz_noawschain).
type sdkChain struct{}

func newSDKChain(func(string) string, settings, string) (*sdkChain, error) {
	return nil, errors.New(errNoCredentials + " " + errNoContainer +
		"; this binary was built without the AWS SDK's default chain (tag svz_noawschain): profiles, SSO, web identity and instance metadata are not read")
}

func (*sdkChain) Retrieve(context.Context) (aws.Credentials, error) {
	return aws.Credentials{}, errors.New("unreachable")
}

func (*sdkChain) invalidate() bool { return false }
