//go:build !svz_noawschain

package awschain_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/supervaize/svz/internal/awsapi"
	"github.com/supervaize/svz/internal/awsapi/awschain"
	"github.com/supervaize/svz/internal/testenv"
)

func env(kv ...string) func(string) string {
	m := make(map[string]string)
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) string { return m[k] }
}

// client is a DynamoDB client of getenv with the chain as its fallback, as storeenv makes it.
func client(t *testing.T, getenv func(string) string) *awsapi.Client {
	t.Helper()
	c, err := awsapi.New(getenv, testService, awsapi.WithFallback(awschain.Fallback(getenv)))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// isolate clears what the SDK's chain reads of the process (environment, ~/.aws, instance
// metadata), so that a test sees only what it sets up, and returns a directory for its files.
func isolate(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, name := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_DEFAULT_PROFILE",
		"AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN", "AWS_ROLE_SESSION_NAME", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
		"AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_STS", "AWS_EC2_METADATA_SERVICE_ENDPOINT", "AWS_REGION"} {
		t.Setenv(name, "")
	}
	t.Setenv("HOME", dir)
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(dir, "config"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(dir, "credentials"))
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	return dir
}

// signer answers every call with {} and keeps the access key id of its signature.
func signer(t *testing.T) (*httptest.Server, func() string) {
	t.Helper()
	keys := make(chan string, 10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, rest, _ := strings.Cut(r.Header.Get("Authorization"), "Credential=")
		id, _, _ := strings.Cut(rest, "/")
		keys <- id
		_, _ = io.WriteString(w, "{}")
	}))
	t.Cleanup(srv.Close)
	return srv, func() string { return <-keys }
}

var testService = awsapi.Service{ID: "dynamodb", Name: "DynamoDB", Target: "DynamoDB_20120810", JSONVersion: "1.0"}

// TestDefaultChainProfile: with no credentials in the environment, a client with the chain
// signs with the keys of the profile AWS_PROFILE names in the shared credentials file.
func TestDefaultChainProfile(t *testing.T) {
	dir := isolate(t)
	if err := os.WriteFile(filepath.Join(dir, "credentials"), []byte("[dev]\naws_access_key_id = AKIDPROFILE\naws_secret_access_key = profile-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	srv, signedBy := signer(t)
	c := client(t, env("AWS_REGION", "eu-west-3", "AWS_PROFILE", "dev", "AWS_ENDPOINT_URL", srv.URL))
	if err := c.Call(context.Background(), "DescribeTable", struct{}{}, nil); err != nil {
		t.Fatal(err)
	}
	if id := signedBy(); id != "AKIDPROFILE" {
		t.Errorf("signed by %q, want the profile's AKIDPROFILE", id)
	}
}

// TestDefaultChainInstanceMetadata: on an EC2 host, the instance role's credentials come from
// the instance metadata service (IMDSv2, served here in process).
func TestDefaultChainInstanceMetadata(t *testing.T) {
	isolate(t)
	t.Setenv("AWS_EC2_METADATA_DISABLED", "")
	var fetches int
	imds := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == http.MethodPut && r.URL.Path == "/latest/api/token":
			w.Header().Set("X-Aws-Ec2-Metadata-Token-Ttl-Seconds", r.Header.Get("X-Aws-Ec2-Metadata-Token-Ttl-Seconds"))
			_, _ = io.WriteString(w, "imds-token")
		case r.Header.Get("X-Aws-Ec2-Metadata-Token") != "imds-token":
			w.WriteHeader(http.StatusUnauthorized)
		case r.URL.Path == "/latest/meta-data/iam/security-credentials/":
			_, _ = io.WriteString(w, "svz-role")
		case r.URL.Path == "/latest/meta-data/iam/security-credentials/svz-role":
			fetches++
			_ = json.NewEncoder(w).Encode(map[string]string{"Code": "Success", "Type": "AWS-HMAC", "AccessKeyId": "ASIAINSTANCE",
				"SecretAccessKey": "instance-secret", "Token": "instance-token", "Expiration": time.Now().Add(time.Hour).UTC().Format(time.RFC3339)})
		default:
			w.WriteHeader(http.StatusNotFound)
		}
	}))
	defer imds.Close()
	srv, signedBy := signer(t)
	c := client(t, env("AWS_REGION", "eu-west-3", "AWS_EC2_METADATA_SERVICE_ENDPOINT", imds.URL, "AWS_ENDPOINT_URL", srv.URL))
	for range 3 {
		if err := c.Call(context.Background(), "DescribeTable", struct{}{}, nil); err != nil {
			t.Fatal(err)
		}
		if id := signedBy(); id != "ASIAINSTANCE" {
			t.Errorf("signed by %q, want the instance role's ASIAINSTANCE", id)
		}
	}
	if fetches != 1 {
		t.Errorf("the instance role's credentials were fetched %d times for 3 calls, want 1", fetches)
	}
}

// TestDefaultChainWebIdentity: on EKS with IRSA, the pod's web identity token is exchanged with
// STS (moto here) for the role's credentials, which then sign DynamoDB calls.
func TestDefaultChainWebIdentity(t *testing.T) {
	endpoint := testenv.Need(t, testenv.AWSEndpoint)
	dir := isolate(t)
	token := filepath.Join(dir, "token")
	if err := os.WriteFile(token, []byte("eyJhbGciOiJSUzI1NiJ9.e30.c2ln"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AWS_WEB_IDENTITY_TOKEN_FILE", token)
	t.Setenv("AWS_ROLE_ARN", "arn:aws:iam::123456789012:role/svz-pod")
	t.Setenv("AWS_ENDPOINT_URL_STS", endpoint)
	c := client(t, env("AWS_REGION", "us-east-1", "AWS_ENDPOINT_URL_DYNAMODB", endpoint))
	var out struct{ TableNames []string }
	if err := c.Call(context.Background(), "ListTables", struct{}{}, &out); err != nil {
		t.Fatalf("ListTables with web identity credentials: %v", err)
	}
}

// TestDefaultChainFindsNothing: with nothing anywhere, the error says where svz looked.
func TestDefaultChainFindsNothing(t *testing.T) {
	isolate(t)
	c := client(t, env("AWS_REGION", "eu-west-3", "AWS_ENDPOINT_URL", "http://127.0.0.1:9"))
	err := c.Call(context.Background(), "DescribeTable", struct{}{}, nil)
	want := "no AWS credentials in the environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY) nor a container credentials endpoint " +
		"(AWS_CONTAINER_CREDENTIALS_RELATIVE_URI, AWS_CONTAINER_CREDENTIALS_FULL_URI), and the AWS SDK's default chain (profiles, SSO, web identity, EC2 instance metadata) found none: "
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("error = %v\nwant prefix %s", err, want)
	}
	// Without the fallback, the client refuses at once, as before.
	if _, err := awsapi.New(env("AWS_REGION", "eu-west-3"), testService); err == nil || !strings.HasPrefix(err.Error(), "no AWS credentials in the environment") {
		t.Errorf("New without the chain: error = %v", err)
	}
}
