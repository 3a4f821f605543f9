package awssecret

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/supervaize/svz/adapters/internal/testkit"
	"github.com/supervaize/svz/internal/awsapi"
	"github.com/supervaize/svz/internal/testenv"
)

func env(kv ...string) func(string) string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) string { return m[k] }
}

func TestLocate(t *testing.T) {
	creds := func(kv ...string) func(string) string {
		return env(append([]string{"AWS_ACCESS_KEY_ID", "a", "AWS_SECRET_ACCESS_KEY", "b"}, kv...)...)
	}
	cases := []struct {
		id      string
		env     func(string) string
		region  string
		url     string
		wantErr string
	}{
		{id: "arn:aws:secretsmanager:eu-west-3:123456789012:secret:svz/api-key-AbCdEf", env: creds(), region: "eu-west-3", url: "https://secretsmanager.eu-west-3.amazonaws.com"},
		{id: "arn:aws-cn:secretsmanager:cn-north-1:123456789012:secret:k", env: creds(), region: "cn-north-1", url: "https://secretsmanager.cn-north-1.amazonaws.com.cn"},
		{id: "arn:aws-us-gov:secretsmanager:us-gov-west-1:123456789012:secret:k", env: creds("AWS_REGION", "eu-west-1"), region: "us-gov-west-1", url: "https://secretsmanager.us-gov-west-1.amazonaws.com"},
		{id: "svz/api-key", env: creds("AWS_REGION", "us-east-1"), region: "us-east-1", url: "https://secretsmanager.us-east-1.amazonaws.com"},
		{id: "svz/api-key", env: creds("AWS_DEFAULT_REGION", "cn-northwest-1"), region: "cn-northwest-1", url: "https://secretsmanager.cn-northwest-1.amazonaws.com.cn"},
		{id: "svz/api-key", env: creds("AWS_REGION", "us-east-1", "AWS_ENDPOINT_URL", "http://127.0.0.1:1"), region: "us-east-1", url: "http://127.0.0.1:1"},
		{id: "svz/api-key", env: creds("AWS_REGION", "us-east-1", "AWS_ENDPOINT_URL", "http://a", "AWS_ENDPOINT_URL_SECRETS_MANAGER", "http://b"), region: "us-east-1", url: "http://b"},
		{id: "svz/api-key", env: creds(), wantErr: "no region for a secret named without an ARN: set AWS_REGION"},
		{id: "arn:aws:s3:::bucket", env: creds(), wantErr: "not a Secrets Manager secret ARN (arn:PARTITION:secretsmanager:REGION:ACCOUNT:secret:NAME)"},
		{id: "arn:aws:secretsmanager:eu-west-3:123456789012:key:k", env: creds(), wantErr: "not a Secrets Manager secret ARN (arn:PARTITION:secretsmanager:REGION:ACCOUNT:secret:NAME)"},
		{id: "arn:aws:secretsmanager:evil.example/x:123456789012:secret:k", env: creds(), wantErr: `AWS region "evil.example/x" is not a region name (e.g. eu-west-3)`},
		{id: "arn:aws-iso:secretsmanager:us-iso-east-1:123456789012:secret:k", env: creds(), wantErr: `no known Secrets Manager endpoint in partition "aws-iso": set AWS_ENDPOINT_URL_SECRETS_MANAGER`},
	}
	for _, tc := range cases {
		api, err := New(tc.env).client(tc.id)
		if tc.wantErr != "" {
			if err == nil || err.Error() != tc.wantErr {
				t.Errorf("client(%q): %v, want %s", tc.id, err, tc.wantErr)
			}
			continue
		}
		if err != nil || api.Region() != tc.region || api.Endpoint() != tc.url {
			t.Errorf("client(%q) = %v; want %q %q", tc.id, err, tc.region, tc.url)
			continue
		}
	}
}

func TestDecodeSecret(t *testing.T) {
	cases := []struct {
		body    string
		want    string
		wantErr string
	}{
		{`{"ARN":"arn","Name":"n","SecretString":"s3cr3t","VersionId":"v"}`, "s3cr3t", ""},
		{`{"SecretString":""}`, "", ""},
		{`{"SecretBinary":"AAEC"}`, "\x00\x01\x02", ""},
		{`{"Name":"n"}`, "", "the secret has neither SecretString nor SecretBinary"},
		{`<html>`, "", "the answer is not a GetSecretValue result"},
		{`{"SecretBinary":"not base64!"}`, "", "the answer is not a GetSecretValue result"},
	}
	for _, tc := range cases {
		got, err := decodeSecret([]byte(tc.body))
		if tc.wantErr != "" {
			if err == nil || err.Error() != tc.wantErr {
				t.Errorf("decodeSecret(%s): %v, want %s", tc.body, err, tc.wantErr)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("decodeSecret(%s) = %q, %v; want %q", tc.body, got, err, tc.want)
		}
	}
}

func FuzzDecodeSecret(f *testing.F) {
	f.Add([]byte(`{"SecretString":"x"}`))
	f.Add([]byte(`{"SecretBinary":"AAEC"}`))
	f.Add([]byte(`{"SecretString":null,"SecretBinary":""}`))
	f.Add([]byte(``))
	f.Fuzz(func(t *testing.T, body []byte) {
		v, err := decodeSecret(body)
		if err != nil && v != "" {
			t.Fatalf("a value (%q) with an error (%v)", v, err)
		}
		if err == nil && !json.Valid(body) {
			t.Fatalf("invalid JSON %q accepted", body)
		}
	})
}

// TestWire checks what goes on the wire, which moto does not verify: the signature scope and
// headers, and the retries after a throttled or failed call.
func TestWire(t *testing.T) {
	var calls atomic.Int32
	srv := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := calls.Add(1)
		body, _ := io.ReadAll(r.Body)
		auth := r.Header.Get("Authorization")
		switch {
		case r.Method != http.MethodPost || r.URL.Path != "/":
			t.Errorf("%s %s", r.Method, r.URL)
		case string(body) != `{"SecretId":"arn:aws:secretsmanager:eu-west-3:123456789012:secret:svz-key"}`:
			t.Errorf("body %s", body)
		case r.Header.Get("X-Amz-Target") != "secretsmanager.GetSecretValue" || r.Header.Get("Content-Type") != "application/x-amz-json-1.1":
			t.Errorf("headers %v", r.Header)
		case !strings.HasPrefix(auth, "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20260708/eu-west-3/secretsmanager/aws4_request, SignedHeaders="):
			t.Errorf("authorization %q", auth)
		case r.Header.Get("X-Amz-Security-Token") != "session-token" || r.Header.Get("X-Amz-Date") != "20260708T100000Z":
			t.Errorf("headers %v", r.Header)
		}
		switch n {
		case 1:
			w.WriteHeader(http.StatusBadRequest)
			_, _ = io.WriteString(w, `{"__type":"ThrottlingException","message":"Rate exceeded"}`)
		case 2:
			w.WriteHeader(http.StatusInternalServerError)
		default:
			_, _ = io.WriteString(w, `{"SecretString":"the-value"}`)
		}
	}))
	c := New(env("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE", "AWS_SECRET_ACCESS_KEY", "secret", "AWS_SESSION_TOKEN", "session-token", "AWS_ENDPOINT_URL", srv.URL),
		awsapi.WithClock(func() time.Time { return time.Date(2026, 7, 8, 10, 0, 0, 0, time.UTC) }), awsapi.WithRetries(3, time.Millisecond))
	v, err := c.GetSecretString(context.Background(), "arn:aws:secretsmanager:eu-west-3:123456789012:secret:svz-key")
	if err != nil || v != "the-value" || calls.Load() != 3 {
		t.Fatalf("%q %v after %d calls", v, err, calls.Load())
	}
}

func TestNoRetryOnClientErrors(t *testing.T) {
	var calls atomic.Int32
	srv := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.WriteHeader(http.StatusBadRequest)
		_, _ = io.WriteString(w, `{"__type":"AccessDeniedException","Message":"not authorized"}`)
	}))
	c := New(env("AWS_ACCESS_KEY_ID", "a", "AWS_SECRET_ACCESS_KEY", "b", "AWS_REGION", "eu-west-3", "AWS_ENDPOINT_URL", srv.URL))
	_, err := c.GetSecretString(context.Background(), "k")
	var api *awsapi.APIError
	if !errors.As(err, &api) || api.Code != "AccessDeniedException" || calls.Load() != 1 {
		t.Fatalf("%v after %d calls", err, calls.Load())
	}
}

func TestNoCredentials(t *testing.T) {
	_, err := New(env("AWS_REGION", "eu-west-3")).GetSecretString(context.Background(), "k")
	if err == nil || err.Error() != "no AWS credentials in the environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY) nor a container credentials endpoint (AWS_CONTAINER_CREDENTIALS_RELATIVE_URI, AWS_CONTAINER_CREDENTIALS_FULL_URI)" {
		t.Fatalf("%v", err)
	}
}

func TestTransportErrorsRetried(t *testing.T) {
	port := testkit.FreePort(t) // nothing listens there
	c := New(env("AWS_ACCESS_KEY_ID", "a", "AWS_SECRET_ACCESS_KEY", "b", "AWS_REGION", "eu-west-3", "AWS_ENDPOINT_URL", fmt.Sprintf("http://127.0.0.1:%d", port)),
		awsapi.WithRetries(3, time.Millisecond))
	_, err := c.GetSecretString(context.Background(), "k")
	if err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("%v", err)
	}
}

// TestMoto reads secrets created with the AWS SDK in moto_server.
func TestMoto(t *testing.T) {
	endpoint := testenv.Need(t, testenv.AWSEndpoint)
	ctx := context.Background()
	sm := secretsmanager.New(secretsmanager.Options{
		Region:       "eu-west-3",
		BaseEndpoint: aws.String(endpoint),
		Credentials:  credentials.NewStaticCredentialsProvider("test", "test", ""),
	})
	name := fmt.Sprintf("svz-test/%s/%d", t.Name(), time.Now().UnixNano())
	out, err := sm.CreateSecret(ctx, &secretsmanager.CreateSecretInput{Name: aws.String(name), SecretString: aws.String("-----BEGIN PRIVATE KEY-----\nMC4C\n-----END PRIVATE KEY-----\n")})
	if err != nil {
		t.Fatal(err)
	}
	binName := name + "-bin"
	binOut, err := sm.CreateSecret(ctx, &secretsmanager.CreateSecretInput{Name: aws.String(binName), SecretBinary: []byte{1, 2, 3}})
	if err != nil {
		t.Fatal(err)
	}
	c := New(env("AWS_ACCESS_KEY_ID", "test", "AWS_SECRET_ACCESS_KEY", "test", "AWS_REGION", "eu-west-3", "AWS_ENDPOINT_URL", endpoint))
	for _, tc := range []struct{ id, want string }{
		{*out.ARN, "-----BEGIN PRIVATE KEY-----\nMC4C\n-----END PRIVATE KEY-----\n"},
		{name, "-----BEGIN PRIVATE KEY-----\nMC4C\n-----END PRIVATE KEY-----\n"},
		{*binOut.ARN, "\x01\x02\x03"},
	} {
		got, err := c.GetSecretString(ctx, tc.id)
		if err != nil || got != tc.want {
			t.Errorf("GetSecretString(%q) = %q, %v", tc.id, got, err)
		}
	}
	_, err = c.GetSecretString(ctx, "arn:aws:secretsmanager:eu-west-3:123456789012:secret:svz-missing-AbCdEf")
	var api *awsapi.APIError
	if !errors.As(err, &api) || api.Code != "ResourceNotFoundException" {
		t.Fatalf("missing secret: %v", err)
	}
	// A deleted secret cannot be read either.
	if _, err := sm.DeleteSecret(ctx, &secretsmanager.DeleteSecretInput{SecretId: aws.String(binName), ForceDeleteWithoutRecovery: aws.Bool(true)}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetSecretString(ctx, binName); !errors.As(err, &api) {
		t.Fatalf("deleted secret: %v", err)
	}
}

// newServer starts an httptest server on 127.0.0.1, closed when the test ends.
func newServer(t testing.TB, h http.Handler) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}
