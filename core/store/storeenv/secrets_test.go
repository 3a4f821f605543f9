package storeenv_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/supervaize/svz/core/store/storeenv"
	"github.com/supervaize/svz/internal/testenv"
)

// The two halves of every secret below. A password with an unescaped delimiter between them may
// be cut there by a parser, so each half is looked for on its own.
const (
	secretA = "Pw1secretA"
	secretB = "Pw2secretB"
)

// leakCase is a setting with a secret somewhere and the start of the error Open must give.
type leakCase struct {
	name   string
	env    []string
	prefix string
}

// assertNoLeak opens each case and fails unless Open fails with the expected start and shows
// neither half of the secret.
func assertNoLeak(t *testing.T, cases []leakCase) {
	t.Helper()
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			s, err := storeenv.Open(context.Background(), env(tt.env...))
			if err == nil {
				s.Close()
				t.Fatal("Open succeeded")
			}
			if !strings.HasPrefix(err.Error(), tt.prefix) {
				t.Errorf("error = %q\nwant prefix %q", err, tt.prefix)
			}
			for _, s := range []string{secretA, secretB} {
				if strings.Contains(err.Error(), s) {
					t.Errorf("error shows the secret %q: %q", s, err)
				}
			}
		})
	}
}

// spilled is the error for a URL whose password moved into its host (see TestTrickyPasswords).
const spilled = "SUPERVAIZER_STORE_URL: the URL (not shown) has an '@' in its password or after its host: percent-encode the '@', '/', '?' and '#' of its password (%40, %2F, %3F, %23), e.g. user:p%40ss@host for the password p@ss"

func pgEnv(url string) []string    { return []string{storeenv.Kind, "postgres", storeenv.URL, url} }
func redisEnv(url string) []string { return []string{storeenv.Kind, "redis", storeenv.URL, url} }

// TestPostgresErrorsHideSecrets covers every error path of the postgres settings with a secret in
// every place pgx reads one (userinfo, ?password=, ?sslpassword=, a key=value string), in places
// it ends up by mistake (the user name, the wrong variable) and with the delimiters a password
// may hold unescaped.
func TestPostgresErrorsHideSecrets(t *testing.T) {
	bad := closedAddr(t)
	const notURL = "SUPERVAIZER_STORE_URL: not a valid PostgreSQL URL ("
	const example = "; want e.g. postgres://user:password@host:5432/database)"
	assertNoLeak(t, []leakCase{
		// The reproduction of the review: pgx reads ?password= too.
		{"query password, bad sslmode", pgEnv("postgres://svz@127.0.0.1:5432/db?password=" + secretA + "&sslmode=bogus"),
			notURL + "got postgres://xxxxx@127.0.0.1:5432/db?password=xxxxx&sslmode=xxxxx" + example},
		{"userinfo password, bad sslmode", pgEnv("postgres://svz:" + secretA + "@127.0.0.1:5432/db?sslmode=bogus"),
			notURL + "got postgres://xxxxx@127.0.0.1:5432/db?sslmode=xxxxx" + example},
		{"sslpassword", pgEnv("postgres://svz@127.0.0.1/db?sslpassword=" + secretA + "&sslmode=bogus"),
			notURL + "got postgres://xxxxx@127.0.0.1/db?sslpassword=xxxxx&sslmode=xxxxx" + example},
		{"password as the user name", pgEnv("postgresql://" + secretA + "@127.0.0.1/db?sslmode=bogus"),
			notURL + "got postgresql://xxxxx@127.0.0.1/db?sslmode=xxxxx" + example},
		{"encoded password", pgEnv("postgres://svz:" + secretA + "%2F" + secretB + "@127.0.0.1/db?sslmode=bogus"),
			notURL + "got postgres://xxxxx@127.0.0.1/db?sslmode=xxxxx" + example},
		{"bare query parameter", pgEnv("postgres://svz@127.0.0.1/db?" + secretA + "&sslmode=bogus"),
			notURL + "got postgres://xxxxx@127.0.0.1/db?xxxxx&sslmode=xxxxx" + example},
		{"fragment", pgEnv("postgres://svz@127.0.0.1/db?sslmode=bogus#" + secretA),
			notURL + "got postgres://xxxxx@127.0.0.1/db?sslmode=xxxxx" + example},
		{"bad port", pgEnv("postgres://svz:" + secretA + "@127.0.0.1:notaport/db"),
			notURL + "the value is not shown" + example},
		{"unescaped '/' in the password", pgEnv("postgres://svz:12/" + secretA + "@127.0.0.1/db?sslmode=bogus"), spilled},
		{"unescaped '?' in the password", pgEnv("postgres://svz:12?" + secretA + "@127.0.0.1/db?sslmode=bogus"), spilled},
		{"unescaped '#' in the password", pgEnv("postgres://svz:12#" + secretA + "@127.0.0.1/db?sslmode=bogus"), spilled},
		{"unescaped '@' in the password", pgEnv("postgres://svz:" + secretA + "@" + secretB + "@127.0.0.1/db?sslmode=bogus"), spilled},
		{"unescaped '%' in the password", pgEnv("postgres://svz:" + secretA + "%zz" + secretB + "@127.0.0.1/db"),
			notURL + "the value is not shown" + example},
		{"no '//'", pgEnv("postgres:svz:" + secretA + "@127.0.0.1/db"),
			notURL + "the value is not shown" + example},
		{"key=value string", pgEnv("host=127.0.0.1 user=svz password=" + secretA + " sslmode=bogus"),
			notURL + "the value is not shown" + example},
		{"key=value string, quoted password", pgEnv("host=127.0.0.1 user=svz password='" + secretA + " " + secretB + "' sslmode=bogus"),
			notURL + "the value is not shown" + example},
		{"URL in the kind variable", []string{storeenv.Kind, "postgres://svz:" + secretA + "@127.0.0.1/db"},
			"SUPERVAIZER_STORE: unknown store (the value is not shown); want one of memory, bolt, dynamodb, postgres, redis"},
		{"URL in the table variable", append(pgEnv("postgres://svz@127.0.0.1/db"), storeenv.Table, "postgres://svz:"+secretA+"@h/db"),
			"SUPERVAIZER_STORE_TABLE: looks like a URL, not a table name (the value is not shown)"},

		// Parsed, then the server is unreachable: pgx's own message must not carry the secret either.
		{"unreachable, userinfo and query", pgEnv("postgres://svz:" + secretA + "@" + bad + "/svz?sslmode=disable&sslpassword=" + secretB),
			"SUPERVAIZER_STORE_URL: cannot reach postgres at " + bad + ": "},
		{"unreachable, query password", pgEnv("postgres://svz@" + bad + "/svz?sslmode=disable&password=" + secretA),
			"SUPERVAIZER_STORE_URL: cannot reach postgres at " + bad + ": "},
		{"unreachable, key=value string", pgEnv("host=127.0.0.1 port=" + port(t, bad) + " user=svz password=" + secretA + " sslmode=disable"),
			"SUPERVAIZER_STORE_URL: cannot reach postgres at " + bad + ": "},
		// pgx would read this as host "svz", port 12, database "<secretA>@127.0.0.1/db": refused
		// before it connects anywhere.
		{"unreachable, unescaped '/' in the password", pgEnv("postgres://svz:12/" + secretA + "@" + bad + "/db?sslmode=disable&connect_timeout=1"), spilled},
	})
}

// TestPostgresErrorsHideSecretsWithServer: the paths past a reachable server.
func TestPostgresErrorsHideSecretsWithServer(t *testing.T) {
	u, err := url.Parse(testenv.Need(t, testenv.PostgresURL))
	if err != nil {
		t.Fatal(err)
	}
	// The test server trusts every local user, so a password is accepted and ignored.
	u.User = url.UserPassword(u.User.Username(), secretA)
	q := u.Query()
	q.Set("sslpassword", secretB)
	u.RawQuery = q.Encode()
	assertNoLeak(t, []leakCase{
		{"bad table name", append(pgEnv(u.String()), storeenv.Table, "Bad-"+secretA),
			`SUPERVAIZER_STORE_TABLE: postgres: table name "Bad-xxxxx": each part must be a lower-case identifier`},
	})
	missing := *u
	missing.Path = "/svz_missing_db"
	assertNoLeak(t, []leakCase{
		{"missing database", pgEnv(missing.String()), "SUPERVAIZER_STORE_URL: cannot reach postgres at " + u.Host + ": "},
	})
}

// port returns the port of a host:port address.
func port(t *testing.T, addr string) string {
	t.Helper()
	i := strings.LastIndexByte(addr, ':')
	if i < 0 {
		t.Fatalf("no port in %q", addr)
	}
	return addr[i+1:]
}

// TestRedisErrorsHideSecrets: every error path of the redis settings, with a secret in the places
// go-redis reads one (the userinfo of redis://, rediss:// and unix:// URLs) and where it ends up
// by mistake.
func TestRedisErrorsHideSecrets(t *testing.T) {
	bad := closedAddr(t)
	const notURL = "SUPERVAIZER_STORE_URL: not a valid Redis URL ("
	const example = "; want e.g. redis://:password@host:6379/0)"
	assertNoLeak(t, []leakCase{
		{"password, bad database", redisEnv("redis://:" + secretA + "@127.0.0.1:6379/x"),
			notURL + "got redis://xxxxx@127.0.0.1:6379/x" + example},
		{"user and password, unknown option", redisEnv("rediss://svz:" + secretA + "@127.0.0.1:6379/0?password=" + secretB),
			notURL + "got rediss://xxxxx@127.0.0.1:6379/0?password=xxxxx" + example},
		{"password as the user name, bad option value", redisEnv("redis://" + secretA + "@127.0.0.1/0?dial_timeout=" + secretB),
			notURL + "got redis://xxxxx@127.0.0.1/0?dial_timeout=xxxxx" + example},
		{"unix socket, no path", redisEnv("unix://:" + secretA + "@"),
			notURL + "got unix://xxxxx@" + example},
		{"another scheme", redisEnv("http://:" + secretA + "@127.0.0.1:6379/0"),
			notURL + "got http://xxxxx@127.0.0.1:6379/0" + example},
		{"unescaped '/' in the password", redisEnv("redis://:12/" + secretA + "@127.0.0.1:6379/0"), spilled},
		{"unescaped '#' in the password", redisEnv("redis://:" + secretA + "#" + secretB + "@127.0.0.1:6379/0"), spilled},
		{"URL in the kind variable", []string{storeenv.Kind, "redis://:" + secretA + "@127.0.0.1:6379/0"},
			"SUPERVAIZER_STORE: unknown store (the value is not shown)"},
		{"unreachable", redisEnv("redis://svz:" + secretA + "@" + bad + "/0"),
			"SUPERVAIZER_STORE_URL: redis: cannot reach " + bad + ": "},
		{"unreachable unix socket", redisEnv("unix://:" + secretA + "@/nonexistent/redis.sock?db=1"),
			"SUPERVAIZER_STORE_URL: redis: cannot reach /nonexistent/redis.sock: "},
	})
}

// TestRedisErrorsHideSecretsWithServer: the server refuses AUTH as a user it does not know; its
// answer must not bring the password back.
func TestRedisErrorsHideSecretsWithServer(t *testing.T) {
	u, err := url.Parse(testenv.Need(t, testenv.RedisURL))
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword("svz-unknown", secretA)
	assertNoLeak(t, []leakCase{
		{"wrong password", redisEnv(u.String()), "SUPERVAIZER_STORE_URL: redis: cannot reach " + u.Host + ": "},
	})
}

// TestDynamoDBErrorsHideSecrets: every error path of the dynamodb settings with a secret in each
// AWS variable that holds one and in the query and userinfo of the endpoint URLs.
func TestDynamoDBErrorsHideSecrets(t *testing.T) {
	bad := closedAddr(t)
	keys := []string{"AWS_ACCESS_KEY_ID", "AKIDEXAMPLE", "AWS_SECRET_ACCESS_KEY", secretA + "/" + secretB, "AWS_SESSION_TOKEN", secretB + secretA}
	ddb := func(kv ...string) []string {
		return append([]string{storeenv.Kind, "dynamodb", storeenv.Table, "svz-store", "AWS_REGION", "us-east-1"}, kv...)
	}
	// A container credentials endpoint that refuses the token and quotes it back.
	creds := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusForbidden)
		_, _ = w.Write([]byte(`{"code":"AccessDenied","message":"token ` + r.Header.Get("Authorization") + ` refused for ` + r.URL.String() + `"}`))
	}))
	defer creds.Close()
	assertNoLeak(t, []leakCase{
		{"no region", append(keys, storeenv.Kind, "dynamodb", storeenv.Table, "svz-store"),
			"SUPERVAIZER_STORE=dynamodb: no AWS region: set AWS_REGION"},
		{"secret without key id", ddb("AWS_SECRET_ACCESS_KEY", secretA),
			"SUPERVAIZER_STORE=dynamodb: no AWS credentials in the environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY): AWS_SECRET_ACCESS_KEY is set but AWS_ACCESS_KEY_ID is empty"},
		{"endpoint in another scheme", ddb(append(keys, "AWS_ENDPOINT_URL", "ftp://u:"+secretA+"@127.0.0.1/?token="+secretB)...),
			"SUPERVAIZER_STORE=dynamodb: AWS_ENDPOINT_URL: "},
		{"unreachable endpoint with secrets", ddb(append(keys, "AWS_ENDPOINT_URL_DYNAMODB", "http://u:"+secretA+"@"+bad+"/?token="+secretB)...),
			`SUPERVAIZER_STORE_TABLE: dynamodb: cannot reach table "svz-store": `},
		{"container endpoint not allowed", ddb("AWS_CONTAINER_CREDENTIALS_FULL_URI", "http://10.1.2.3/creds?token="+secretA),
			"SUPERVAIZER_STORE=dynamodb: AWS_CONTAINER_CREDENTIALS_FULL_URI "},
		{"container token with a line break", ddb("AWS_CONTAINER_CREDENTIALS_FULL_URI", creds.URL, "AWS_CONTAINER_AUTHORIZATION_TOKEN", secretA+"\n"+secretB),
			"SUPERVAIZER_STORE=dynamodb: AWS_CONTAINER_AUTHORIZATION_TOKEN: the authorization token contains a line break"},
		{"container endpoint refuses", ddb("AWS_CONTAINER_CREDENTIALS_FULL_URI", creds.URL+"/creds?sig="+secretB, "AWS_CONTAINER_AUTHORIZATION_TOKEN", secretA,
			"AWS_ENDPOINT_URL", "http://"+bad),
			`SUPERVAIZER_STORE_TABLE: dynamodb: cannot reach table "svz-store": `},
		{"container endpoint unreachable", ddb("AWS_CONTAINER_CREDENTIALS_FULL_URI", "http://"+bad+"/creds?sig="+secretA, "AWS_ENDPOINT_URL", "http://"+bad),
			`SUPERVAIZER_STORE_TABLE: dynamodb: cannot reach table "svz-store": `},
		{"URL in the table variable", []string{storeenv.Kind, "dynamodb", storeenv.Table, "https://u:" + secretA + "@example.com"},
			"SUPERVAIZER_STORE_TABLE: looks like a URL, not a table name (the value is not shown)"},
	})
}

// TestDynamoDBErrorsHideSecretsWithServer: moto answers; the table is missing or the session
// token is refused, and neither answer may bring a secret back.
func TestDynamoDBErrorsHideSecretsWithServer(t *testing.T) {
	endpoint := testenv.Need(t, testenv.AWSEndpoint)
	assertNoLeak(t, []leakCase{
		{"missing table", []string{storeenv.Kind, "dynamodb", storeenv.Table, "svz-missing-" + strings.ToLower(secretA[:3]),
			"AWS_REGION", "us-east-1", "AWS_ENDPOINT_URL", endpoint + "/?token=" + secretB,
			"AWS_ACCESS_KEY_ID", "test", "AWS_SECRET_ACCESS_KEY", secretA, "AWS_SESSION_TOKEN", secretB},
			`SUPERVAIZER_STORE_TABLE: dynamodb: table "svz-missing-pw1" does not exist`},
	})
}

// TestTrickyPasswords: whatever a password holds ('@', ':', '/', '#', '?', an escape, non-ASCII
// letters), written raw or percent-encoded, in any URL-shaped setting of any store, no piece of
// it appears in the error (the review found "cannot reach postgres at ss:5432" for the password
// "p@ss/word": the parser had taken "ss" for the host).
func TestTrickyPasswords(t *testing.T) {
	bad := closedAddr(t)
	passwords := []string{"Qx7@Zk9", "Qx7@Zk9/Wj4", "Qx7:Zk9@Wj4", "Qx7%40Zk9", "Qx7ü€Zk9", "Qx7#Zk9?Wj4@Vb2", "Qx7/Zk9:Wj4", "Qx7%2FZk9@Wj4"}
	ddb := []string{storeenv.Kind, "dynamodb", storeenv.Table, "svz-store", "AWS_REGION", "us-east-1"}
	static := []string{"AWS_ACCESS_KEY_ID", "AKIDEXAMPLE", "AWS_SECRET_ACCESS_KEY", "test"}
	settings := []struct {
		name string
		env  func(userinfo string) []string
	}{
		{"postgres " + storeenv.URL, func(ui string) []string {
			return pgEnv("postgres://" + ui + "@" + bad + "/svz?sslmode=disable&connect_timeout=1")
		}},
		{"redis " + storeenv.URL, func(ui string) []string { return redisEnv("redis://" + ui + "@" + bad + "/0?max_retries=-1") }},
		{"AWS_ENDPOINT_URL_DYNAMODB", func(ui string) []string {
			return append(append(ddb, static...), "AWS_ENDPOINT_URL_DYNAMODB", "http://"+ui+"@"+bad+"/")
		}},
		{"AWS_ENDPOINT_URL", func(ui string) []string {
			return append(append(ddb, static...), "AWS_ENDPOINT_URL", "http://"+ui+"@"+bad+"/")
		}},
		{"AWS_CONTAINER_CREDENTIALS_FULL_URI", func(ui string) []string {
			return append(ddb, "AWS_ENDPOINT_URL", "http://"+bad, "AWS_CONTAINER_CREDENTIALS_FULL_URI", "http://"+ui+"@"+bad+"/creds")
		}},
	}
	pieces := func(password string) []string {
		out := []string{password}
		if d, err := url.PathUnescape(password); err == nil {
			out = append(out, d)
		}
		return append(out, strings.FieldsFunc(password, func(r rune) bool {
			return !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9')
		})...)
	}
	for _, set := range settings {
		for _, password := range passwords {
			for form, userinfo := range map[string]string{"raw": "svz:" + password, "encoded": url.UserPassword("svz", password).String()} {
				t.Run(set.name+"/"+form+"/"+password, func(t *testing.T) {
					t.Parallel() // most wait on retries against a closed port
					s, err := storeenv.Open(context.Background(), env(append(set.env(userinfo), storeenv.Timeout, "2s")...))
					if err == nil {
						s.Close()
						t.Fatal("Open succeeded")
					}
					for _, p := range pieces(password) {
						if strings.Contains(err.Error(), p) {
							t.Errorf("the error shows %q of the password %q: %s", p, password, err)
						}
					}
				})
			}
		}
	}
}
