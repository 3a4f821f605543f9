//go:build svz_noawschain

package awschain

import (
	"context"
	"errors"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/supervaize/svz/internal/awsapi"
)

// Fallback reports that this binary was built without the chain (tag svz_noawschain).
func Fallback(func(string) string) awsapi.Fallback {
	return func(context.Context) (aws.CredentialsProvider, error) {
		return nil, errors.New(Name + " was left out of this binary (built with tag svz_noawschain): export the credentials, e.g. with `aws configure export-credentials --format env`")
	}
}

// Name is how errors call the chain.
const Name = "the AWS SDK's default chain (profiles, SSO, web identity, EC2 instance metadata)"
