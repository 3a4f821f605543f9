// Package settingstest holds the tables every controller binary is tested with (cmd/local, and
// platform.Main over an agent: examples/helloworld, the agents svz init writes): settings that
// must stop the start with an error naming the variable and the accepted values, and URL-shaped
// settings whose errors must not show any part of a credential they carry.
package settingstest

import (
	"strings"
	"testing"
)

// Case is one environment that must not start, and what its error must say.
type Case struct {
	Name string
	Env  map[string]string
	Want []string // substrings of the error
}

// Bad are the settings a controller binary must refuse, one per kind of value: each boolean, enum
// and number is parsed strictly (package envvar), never read as something else.
func Bad() []Case {
	return []Case{
		{"boolean misspelt", map[string]string{"SUPERVAIZER_WORKSPACE_AUTH_REQUIRED": "ture"},
			[]string{`SUPERVAIZER_WORKSPACE_AUTH_REQUIRED="ture" is not a boolean: use true or false (also accepted: 1/0, yes/no, on/off)`}},
		{"local mode misspelt", map[string]string{"SUPERVAIZER_LOCAL_MODE": "sure"},
			[]string{`SUPERVAIZER_LOCAL_MODE="sure" is not a boolean: use true or false`}},
		{"log level", map[string]string{"SUPERVAIZER_LOG_LEVEL": "verbose"},
			[]string{`SUPERVAIZER_LOG_LEVEL="verbose": must be one of DEBUG, INFO, WARNING, WARN, ERROR, CRITICAL`}},
		{"port not a number", map[string]string{"SUPERVAIZER_PORT": "abc"},
			[]string{`SUPERVAIZER_PORT="abc": must be a whole number from 0 to 65535`}},
		{"platform port not a number", map[string]string{"PORT": "80a"},
			[]string{`PORT="80a": must be a whole number from 0 to 65535`}},
		{"connection cap", map[string]string{"SUPERVAIZER_MAX_CONNECTIONS": "4k"},
			[]string{`SUPERVAIZER_MAX_CONNECTIONS="4k": must be a whole number from 1 to 1048576`}},
		{"body limit", map[string]string{"SUPERVAIZER_MAX_REQUEST_BYTES": "1k"},
			[]string{`SUPERVAIZER_MAX_REQUEST_BYTES="1k": must be a whole number from 1024 to 33554432 bytes`}},
		{"effect log bytes", map[string]string{"SUPERVAIZER_EVENT_RETENTION_BYTES": "32MiB"},
			[]string{`SUPERVAIZER_EVENT_RETENTION_BYTES="32MiB": must be a whole number from 1048576 to 68719476736 bytes`}},
		{"effect event bytes", map[string]string{"SUPERVAIZER_EVENT_MAX_BYTES": "2000000"},
			[]string{`SUPERVAIZER_EVENT_MAX_BYTES="2000000": must be a whole number from 1024 to 1048576 bytes`}},
		{"leeway", map[string]string{"SUPERVAIZER_WORKSPACE_AUTH_LEEWAY_SECONDS": "30s"},
			[]string{`SUPERVAIZER_WORKSPACE_AUTH_LEEWAY_SECONDS="30s": must be a whole number from 0 to 600`}},
		{"store", map[string]string{"SUPERVAIZER_STORE": "mongo"}, []string{"SUPERVAIZER_STORE", "mongo"}},
		{"store timeout", map[string]string{"SUPERVAIZER_STORE_TIMEOUT": "5"},
			[]string{`SUPERVAIZER_STORE_TIMEOUT="5": must be a duration such as 30s, 5m or 1h, from 100ms to 5m0s`}},
		{"studio registration", map[string]string{"SUPERVAIZER_STUDIO_REGISTER": "sometimes"},
			[]string{`SUPERVAIZER_STUDIO_REGISTER="sometimes": must be one of auto, off`}},
		{"studio timeout", map[string]string{"SUPERVAIZER_STUDIO_TIMEOUT": "10"},
			[]string{`SUPERVAIZER_STUDIO_TIMEOUT="10": must be a duration such as 30s, 5m or 1h`}},
		{"studio retries", map[string]string{"SUPERVAIZE_HTTP_MAX_RETRIES": "many"},
			[]string{`SUPERVAIZE_HTTP_MAX_RETRIES="many": must be a whole number from 0 to 10`}},
		{"studio parameters lifetime", map[string]string{"SUPERVAIZER_STUDIO_PARAMETERS_TTL": "1s"},
			[]string{`SUPERVAIZER_STUDIO_PARAMETERS_TTL="1s": must be a duration such as 30s, 5m or 1h, from 10s to 24h0m0s`}},
		{"half-configured authorization", map[string]string{"SUPERVAIZER_WORKSPACE_AUTH_ISSUER": "https://studio.example",
			"SUPERVAIZER_WORKSPACE_AUTH_JWKS_URL": "https://studio.example/jwks/"},
			[]string{"workspace authorization is half configured", "Set SUPERVAIZER_WORKSPACE_AUTH_REQUIRED=true"}},
		{"bad public key", map[string]string{"SUPERVAIZER_WORKSPACE_AUTH_REQUIRED": "true", "SUPERVAIZER_WORKSPACE_AUTH_ISSUER": "https://studio.example",
			"SUPERVAIZER_SERVER_ID": "server-1", "SUPERVAIZER_WORKSPACE_AUTH_PUBLIC_KEY": "not a key"},
			[]string{"SUPERVAIZER_WORKSPACE_AUTH_PUBLIC_KEY: no PEM block found"}},
		{"plain-http JWKS", map[string]string{"SUPERVAIZER_WORKSPACE_AUTH_REQUIRED": "true", "SUPERVAIZER_WORKSPACE_AUTH_ISSUER": "https://studio.example",
			"SUPERVAIZER_SERVER_ID": "server-1", "SUPERVAIZER_WORKSPACE_AUTH_JWKS_URL": "http://studio.example/jwks/"},
			[]string{"SUPERVAIZER_WORKSPACE_AUTH_JWKS_URL: the JWKS URL must use https"}},
	}
}

// Password is the credential the URL cases carry. No 4-character piece of it is an English word,
// so a message that shows any part of it is caught.
const Password = "Zq7x@K9vW/w3"

// URLs are URL-shaped settings outside the stores (the stores' own are tested by package
// storeenv), each holding Password in a form the controller must refuse or fail to reach.
func URLs() []Case {
	must := func(name string) []string { return []string{name} }
	var cases []Case
	for _, u := range []string{
		"ftp://admin:" + Password + "@agent.example.com",
		"https://admin:" + Password + "@agent.example.com",
		"https://admin:Zq7xK9vWw3@agent.example.com/?token=Zq7xK9vWw3",
		"admin:Zq7xK9vWw3@agent.example.com:8000",
		"https://admin:Zq7xK9vWw3@agent.example.com:80a/",
		"https://admin:Zq7x%zzK9vWw3@agent.example.com",
	} {
		cases = append(cases, Case{"SUPERVAIZER_PUBLIC_URL " + u, map[string]string{"SUPERVAIZER_PUBLIC_URL": u}, must("SUPERVAIZER_PUBLIC_URL")})
		cases = append(cases, Case{"SUPERVAIZER_WORKSPACE_AUTH_JWKS_URL " + u, map[string]string{
			"SUPERVAIZER_WORKSPACE_AUTH_REQUIRED": "true", "SUPERVAIZER_WORKSPACE_AUTH_ISSUER": "https://studio.example",
			"SUPERVAIZER_SERVER_ID": "server-1", "SUPERVAIZER_WORKSPACE_AUTH_JWKS_URL": u,
		}, must("SUPERVAIZER_WORKSPACE_AUTH_JWKS_URL")})
	}
	// An AWS endpoint is reached for a secret reference: the failure names the endpoint masked.
	cases = append(cases, Case{"AWS_ENDPOINT_URL with credentials", map[string]string{
		"AWS_ENDPOINT_URL": "http://admin:Zq7xK9vWw3@127.0.0.1:1/?X-Amz-Security-Token=Zq7xK9vWw3", "AWS_REGION": "eu-west-3",
		"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "Zq7xK9vWw3",
		"SUPERVAIZER_API_KEY_SECRET_ARN": "arn:aws:secretsmanager:eu-west-3:123456789012:secret:svz-key-AbCdEf",
	}, must("SUPERVAIZER_API_KEY_SECRET_ARN")})
	return cases
}

// Check checks err against c: an error holding every wanted piece and no 4-character piece of
// Password (its '@' and '/' dropped, as they also appear in URLs).
func Check(t *testing.T, c Case, err error) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: started, want an error", c.Name)
		return
	}
	for _, w := range c.Want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%s: the error lacks %q:\n%v", c.Name, w, err)
		}
	}
	secret := strings.NewReplacer("@", "", "/", "").Replace(Password)
	for i := 0; i+4 <= len(secret); i++ {
		if strings.Contains(err.Error(), secret[i:i+4]) {
			t.Errorf("%s: the error shows a piece (%q) of the password:\n%v", c.Name, secret[i:i+4], err)
		}
	}
}
