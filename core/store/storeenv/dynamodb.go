//go:build !svz_nodynamodb

package storeenv

import (
	"context"
	"fmt"

	"github.com/supervaize/svz/core/store"
	"github.com/supervaize/svz/core/store/dynamodb"
	"github.com/supervaize/svz/internal/awsapi"
	"github.com/supervaize/svz/internal/awsapi/awschain"
)

// unlistedPrefixes are the keys no one lists, kept out of the DynamoDB index to save its write
// unit: the idempotency records (idempotency.KeyPrefix) and the background jobs' task records
// (jobs.TaskKeyPrefix); a test keeps them equal.
var unlistedPrefixes = []string{"idempotency/", "jobs/v1/t/"}

// openDynamoDB reads the AWS settings through getenv too (AWS_REGION, AWS_ENDPOINT_URL_DYNAMODB,
// the credentials of the environment or of the container endpoint: see internal/awsapi), and
// without those credentials falls back to the AWS SDK's default chain (awschain), loaded only
// then; the Lambda bootstrap leaves the chain out (tag svz_noawschain).
func openDynamoDB(ctx context.Context, getenv func(string) string, set settings) (store.Store, error) {
	table, err := tableSetting(getenv, "dynamodb", "svz-store")
	if err != nil {
		return nil, err
	}
	for _, name := range []string{"AWS_ENDPOINT_URL_DYNAMODB", "AWS_ENDPOINT_URL", "AWS_CONTAINER_CREDENTIALS_FULL_URI"} {
		if err := checkURL(name, getenv(name)); err != nil {
			return nil, fmt.Errorf("%s=dynamodb: %w", Kind, err)
		}
	}
	api, err := dynamodb.NewClient(getenv, awsapi.WithFallback(awschain.Fallback(getenv)))
	if err != nil {
		return nil, fmt.Errorf("%s=dynamodb: %w", Kind, err)
	}
	s, err := dynamodb.New(ctx, api, table, dynamodb.WithTimeout(set.timeout), dynamodb.WithUnlisted(unlistedPrefixes...))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", Table, err)
	}
	return s, nil
}
