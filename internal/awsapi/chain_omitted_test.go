//go:build svz_noawschain

package awsapi

import "testing"

// Run with -tags svz_noawschain (as the Lambda bootstrap is built).
func TestDefaultChainLeftOut(t *testing.T) {
	_, err := New(env("AWS_REGION", "eu-west-3"), Service{ID: "dynamodb", Name: "DynamoDB"}, WithDefaultChain())
	want := "no AWS credentials in the environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY) nor a container credentials endpoint " +
		"(AWS_CONTAINER_CREDENTIALS_RELATIVE_URI, AWS_CONTAINER_CREDENTIALS_FULL_URI); this binary was built without the AWS SDK's default chain (tag svz_noawschain): profiles, SSO, web identity and instance metadata are not read"
	if err == nil || err.Error() != want {
		t.Errorf("error = %v\nwant %s", err, want)
	}
}
