//go:build svz_noawschain

package awschain_test

import (
	"context"
	"testing"

	"github.com/supervaize/svz/internal/awsapi"
	"github.com/supervaize/svz/internal/awsapi/awschain"
)

// Run with -tags svz_noawschain (as the Lambda bootstrap is built).
func TestLeftOut(t *testing.T) {
	getenv := func(k string) string {
		return map[string]string{"AWS_REGION": "eu-west-3", "AWS_ENDPOINT_URL": "http://127.0.0.1:9"}[k]
	}
	c, err := awsapi.New(getenv, awsapi.Service{ID: "dynamodb", Name: "DynamoDB", Target: "DynamoDB_20120810", JSONVersion: "1.0"},
		awsapi.WithFallback(awschain.Fallback(getenv)))
	if err != nil {
		t.Fatal(err)
	}
	err = c.Call(context.Background(), "DescribeTable", struct{}{}, nil)
	want := "no AWS credentials in the environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY) nor a container credentials endpoint " +
		"(AWS_CONTAINER_CREDENTIALS_RELATIVE_URI, AWS_CONTAINER_CREDENTIALS_FULL_URI), and the AWS SDK's default chain (profiles, SSO, web identity, EC2 instance metadata) " +
		"was left out of this binary (built with tag svz_noawschain): export the credentials, e.g. with `aws configure export-credentials --format env`"
	if err == nil || err.Error() != want {
		t.Errorf("error = %v\nwant %s", err, want)
	}
}
