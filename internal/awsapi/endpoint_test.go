package awsapi

import (
	"strings"
	"testing"
)

func env(kv ...string) func(string) string {
	m := make(map[string]string)
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) string { return m[k] }
}

var (
	testDynamoDB = Service{ID: "dynamodb", Name: "DynamoDB", Target: "DynamoDB_20120810", JSONVersion: "1.0"}
	testSecrets  = Service{ID: "secretsmanager", Name: "Secrets Manager", Target: "secretsmanager", JSONVersion: "1.1"}
)

func TestEndpointVariable(t *testing.T) {
	for svc, want := range map[Service]string{
		testDynamoDB: "AWS_ENDPOINT_URL_DYNAMODB",
		testSecrets:  "AWS_ENDPOINT_URL_SECRETS_MANAGER",
	} {
		if got := svc.EndpointVariable(); got != want {
			t.Errorf("%s: %s, want %s", svc.Name, got, want)
		}
	}
}

func TestRegion(t *testing.T) {
	for _, tc := range []struct {
		env  func(string) string
		want string
	}{
		{env(), ""},
		{env("AWS_REGION", " eu-west-3 "), "eu-west-3"},
		{env("AWS_DEFAULT_REGION", "us-east-1"), "us-east-1"},
		{env("AWS_REGION", "eu-west-3", "AWS_DEFAULT_REGION", "us-east-1"), "eu-west-3"},
	} {
		if got := Region(tc.env); got != tc.want {
			t.Errorf("Region = %q, want %q", got, tc.want)
		}
	}
}

func TestEndpoint(t *testing.T) {
	cases := []struct {
		name    string
		svc     Service
		env     func(string) string
		region  string
		want    string
		wantErr string
	}{
		{"regional", testDynamoDB, env(), "eu-west-3", "https://dynamodb.eu-west-3.amazonaws.com", ""},
		{"china", testDynamoDB, env(), "cn-north-1", "https://dynamodb.cn-north-1.amazonaws.com.cn", ""},
		{"govcloud", testSecrets, env(), "us-gov-west-1", "https://secretsmanager.us-gov-west-1.amazonaws.com", ""},
		{"global override", testDynamoDB, env("AWS_ENDPOINT_URL", "http://127.0.0.1:4566"), "us-east-1", "http://127.0.0.1:4566", ""},
		{"service override wins", testSecrets,
			env("AWS_ENDPOINT_URL", "http://a", "AWS_ENDPOINT_URL_SECRETS_MANAGER", "http://b"), "us-east-1", "http://b", ""},
		{"other service's override ignored", testDynamoDB,
			env("AWS_ENDPOINT_URL_SECRETS_MANAGER", "http://b"), "us-east-1", "https://dynamodb.us-east-1.amazonaws.com", ""},
		{"overrides ignored on request", testDynamoDB,
			env("AWS_ENDPOINT_URL_DYNAMODB", "http://b", "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "true"), "us-east-1", "https://dynamodb.us-east-1.amazonaws.com", ""},
		{"override with a path", testDynamoDB, env("AWS_ENDPOINT_URL", "https://proxy.example/ddb"), "us-east-1", "https://proxy.example/ddb", ""},
		{"iso partition", testSecrets, env(), "us-iso-east-1", "",
			`no known Secrets Manager endpoint in partition "aws-iso": set AWS_ENDPOINT_URL_SECRETS_MANAGER`},
		{"isob partition", testDynamoDB, env(), "us-isob-east-1", "",
			`no known DynamoDB endpoint in partition "aws-iso-b": set AWS_ENDPOINT_URL_DYNAMODB`},
		{"fips", testDynamoDB, env("AWS_USE_FIPS_ENDPOINT", "TRUE"), "us-east-1", "",
			"AWS_USE_FIPS_ENDPOINT is not supported: set AWS_ENDPOINT_URL_DYNAMODB to the endpoint to use"},
		{"fips with an explicit endpoint", testDynamoDB,
			env("AWS_USE_FIPS_ENDPOINT", "true", "AWS_ENDPOINT_URL_DYNAMODB", "https://dynamodb-fips.us-east-1.amazonaws.com"), "us-east-1",
			"https://dynamodb-fips.us-east-1.amazonaws.com", ""},
		{"dual stack", testDynamoDB, env("AWS_USE_DUALSTACK_ENDPOINT", "true"), "us-east-1", "",
			"AWS_USE_DUALSTACK_ENDPOINT is not supported: set AWS_ENDPOINT_URL_DYNAMODB to the endpoint to use"},
		{"not a URL", testDynamoDB, env("AWS_ENDPOINT_URL", "127.0.0.1:4566"), "us-east-1", "",
			`AWS_ENDPOINT_URL is not a URL`},
		{"relative URL", testDynamoDB, env("AWS_ENDPOINT_URL_DYNAMODB", "/ddb"), "us-east-1", "",
			`AWS_ENDPOINT_URL_DYNAMODB: "/ddb" is not an http(s) URL`},
		{"other scheme, password hidden", testDynamoDB, env("AWS_ENDPOINT_URL", "ftp://u:hunter2@h"), "us-east-1", "",
			`AWS_ENDPOINT_URL: "ftp://xxxxx@h" is not an http(s) URL`},
		{"region with a dot", testDynamoDB, env(), "evil.com/x", "", `AWS region "evil.com/x" is not a region name (e.g. eu-west-3)`},
		{"upper-case region", testDynamoDB, env(), "EU-WEST-3", "", `AWS region "EU-WEST-3" is not a region name (e.g. eu-west-3)`},
		{"empty region", testDynamoDB, env(), "", "", `AWS region "" is not a region name (e.g. eu-west-3)`},
		{"hyphen-ended region", testDynamoDB, env(), "eu-", "", `AWS region "eu-" is not a region name (e.g. eu-west-3)`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := resolveEndpoint(tc.env, tc.svc, tc.region)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("error = %v, want %s", err, tc.wantErr)
				}
				if strings.Contains(err.Error(), "hunter2") {
					t.Fatalf("error shows a password: %v", err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("Endpoint = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func TestNewErrors(t *testing.T) {
	cases := []struct {
		name    string
		env     func(string) string
		opts    []Option
		wantErr string
	}{
		{"no region", env("AWS_ACCESS_KEY_ID", "a", "AWS_SECRET_ACCESS_KEY", "b"), nil, "no AWS region: set AWS_REGION"},
		{"bad region option", env("AWS_ACCESS_KEY_ID", "a", "AWS_SECRET_ACCESS_KEY", "b"), []Option{WithRegion("x y")},
			`AWS region "x y" is not a region name (e.g. eu-west-3)`},
		{"no credentials", env("AWS_REGION", "eu-west-3"), nil,
			"no AWS credentials in the environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY) nor a container credentials endpoint (AWS_CONTAINER_CREDENTIALS_RELATIVE_URI, AWS_CONTAINER_CREDENTIALS_FULL_URI)"},
		{"a profile", env("AWS_REGION", "eu-west-3", "AWS_PROFILE", "dev"), nil,
			"no AWS credentials in the environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY) nor a container credentials endpoint (AWS_CONTAINER_CREDENTIALS_RELATIVE_URI, AWS_CONTAINER_CREDENTIALS_FULL_URI); profiles and web identity are not read: export the credentials, e.g. with `aws configure export-credentials --format env`"},
		{"no secret key", env("AWS_REGION", "eu-west-3", "AWS_ACCESS_KEY_ID", "AKID"), nil,
			"no AWS credentials in the environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY): AWS_ACCESS_KEY_ID is set but AWS_SECRET_ACCESS_KEY is empty"},
		{"no key id", env("AWS_REGION", "eu-west-3", "AWS_SECRET_ACCESS_KEY", "s3cr3t", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "/v2/x"), nil,
			"no AWS credentials in the environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY): AWS_SECRET_ACCESS_KEY is set but AWS_ACCESS_KEY_ID is empty"},
		{"relative URI without a slash", env("AWS_REGION", "eu-west-3", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "v2/x"), nil,
			"AWS_CONTAINER_CREDENTIALS_RELATIVE_URI must be a path starting with /"},
		{"full URI to the network", env("AWS_REGION", "eu-west-3", "AWS_CONTAINER_CREDENTIALS_FULL_URI", "http://203.0.113.7/creds"), nil,
			`AWS_CONTAINER_CREDENTIALS_FULL_URI "http://203.0.113.7/creds" must use https, or http to loopback, 169.254.170.2, 169.254.170.23 or fd00:ec2::23`},
		{"full URI to a host name", env("AWS_REGION", "eu-west-3", "AWS_CONTAINER_CREDENTIALS_FULL_URI", "http://creds.internal/"), nil,
			`AWS_CONTAINER_CREDENTIALS_FULL_URI "http://creds.internal/" must use https, or http to loopback, 169.254.170.2, 169.254.170.23 or fd00:ec2::23`},
		{"full URI not absolute", env("AWS_REGION", "eu-west-3", "AWS_CONTAINER_CREDENTIALS_FULL_URI", "/creds"), nil,
			"AWS_CONTAINER_CREDENTIALS_FULL_URI is not an absolute URL"},
		{"token with a line break", env("AWS_REGION", "eu-west-3", "AWS_CONTAINER_CREDENTIALS_FULL_URI", "http://127.0.0.1:1/",
			"AWS_CONTAINER_AUTHORIZATION_TOKEN", "abc\r\nX-Evil: 1"), nil,
			"AWS_CONTAINER_AUTHORIZATION_TOKEN: the authorization token contains a line break"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.env, testDynamoDB, tc.opts...)
			if err == nil || err.Error() != tc.wantErr {
				t.Fatalf("error = %v\nwant    %s", err, tc.wantErr)
			}
			if strings.Contains(err.Error(), "s3cr3t") {
				t.Fatalf("error shows the secret key: %v", err)
			}
		})
	}
}

func TestNewAcceptsContainerEndpoints(t *testing.T) {
	for _, tc := range []struct{ env func(string) string }{
		{env("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "/v2/credentials/abc")},
		{env("AWS_CONTAINER_CREDENTIALS_FULL_URI", "http://169.254.170.23/v1/credentials", "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE", "/var/run/token")},
		{env("AWS_CONTAINER_CREDENTIALS_FULL_URI", "http://169.254.170.2/creds")},
		{env("AWS_CONTAINER_CREDENTIALS_FULL_URI", "http://[fd00:ec2::23]/v1/credentials")},
		{env("AWS_CONTAINER_CREDENTIALS_FULL_URI", "http://localhost:9000/creds")},
		{env("AWS_CONTAINER_CREDENTIALS_FULL_URI", "http://127.0.0.2:9000/creds")},
		{env("AWS_CONTAINER_CREDENTIALS_FULL_URI", "http://[::1]:9000/creds")},
		{env("AWS_CONTAINER_CREDENTIALS_FULL_URI", "https://creds.example.com/creds")},
	} {
		c, err := newProvider(tc.env, newSettings(nil))
		if err != nil {
			t.Errorf("%v", err)
			continue
		}
		want := tc.env("AWS_CONTAINER_CREDENTIALS_FULL_URI")
		if rel := tc.env("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"); rel != "" {
			want = "http://169.254.170.2" + rel
		}
		if c.endpoint != want {
			t.Errorf("endpoint %q, want %q", c.endpoint, want)
		}
	}
}
