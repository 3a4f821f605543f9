package storeenv_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/supervaize/svz/core/store"
	"github.com/supervaize/svz/core/store/bolt"
	"github.com/supervaize/svz/core/store/dynamodb"
	"github.com/supervaize/svz/core/store/memory"
	"github.com/supervaize/svz/core/store/postgres"
	"github.com/supervaize/svz/core/store/redis"
	"github.com/supervaize/svz/core/store/storeenv"
	"github.com/supervaize/svz/internal/testenv"
)

const password = "s3cret-Passw0rd"

func env(kv ...string) func(string) string {
	m := make(map[string]string)
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) string { return m[k] }
}

// closedAddr returns a loopback address nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// smoke checks that s works: a record written can be read back.
func smoke(t *testing.T, s store.Store) {
	t.Helper()
	ctx := context.Background()
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	k := "storeenv/" + hex.EncodeToString(b)
	created, err := s.Create(ctx, k, []byte("v"), time.Now().Add(time.Minute))
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	got, err := s.Get(ctx, k)
	if err != nil || got.Version != created.Version {
		t.Fatalf("Get = %+v, %v; want version %d", got, err, created.Version)
	}
	if err := s.Delete(ctx, k, got.Version); err != nil {
		t.Fatalf("Delete: %v", err)
	}
}

func TestDefaultIsBoltUnderDotSvz(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	s, err := storeenv.Open(context.Background(), env())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	b, ok := s.(*bolt.Store)
	if !ok {
		t.Fatalf("default store is %T, want *bolt.Store", s)
	}
	if b.Path() != filepath.Join(".svz", "svz.db") {
		t.Errorf("path = %q, want .svz/svz.db", b.Path())
	}
	fi, err := os.Stat(filepath.Join(dir, ".svz"))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o700 {
		t.Errorf(".svz mode = %v, want 0700", fi.Mode().Perm())
	}
	smoke(t, s)
}

func TestBoltDataDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	s, err := storeenv.Open(context.Background(), env(storeenv.Kind, " BOLT ", storeenv.DataDir, dir))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := s.(*bolt.Store).Path(); got != filepath.Join(dir, "svz.db") {
		t.Errorf("path = %q, want %q", got, filepath.Join(dir, "svz.db"))
	}

	// A second process on the same directory is refused at start, saying what to do.
	_, err = storeenv.Open(context.Background(), env(storeenv.DataDir, dir))
	want := "SUPERVAIZER_DATA_DIR: another process (another svz server?) uses the data directory " + dir +
		": stop it, or give this one its own, e.g. SUPERVAIZER_DATA_DIR=" + dir + "-2 (bolt: " + filepath.Join(dir, "svz.db") + ": locked by another process (waited 1s))"
	if err == nil || err.Error() != want {
		t.Errorf("second Open: error = %v, want %q", err, want)
	}
}

func TestMemory(t *testing.T) {
	s, err := storeenv.Open(context.Background(), env(storeenv.Kind, "memory"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, ok := s.(*memory.Store); !ok {
		t.Fatalf("store is %T, want *memory.Store", s)
	}
	smoke(t, s)
}

func TestSettingErrors(t *testing.T) {
	bad := closedAddr(t)
	tests := []struct {
		name   string
		getenv func(string) string
		prefix string // the error starts with it
	}{
		{"unknown kind", env(storeenv.Kind, "sqlite"),
			`SUPERVAIZER_STORE: unknown store "sqlite"; want one of memory, bolt, dynamodb, postgres, redis`},
		{"postgres without URL", env(storeenv.Kind, "postgres"),
			"SUPERVAIZER_STORE_URL: required when SUPERVAIZER_STORE=postgres (e.g. postgres://user:password@host:5432/database)"},
		{"redis without URL", env(storeenv.Kind, "redis", storeenv.URL, "  "),
			"SUPERVAIZER_STORE_URL: required when SUPERVAIZER_STORE=redis (e.g. redis://:password@host:6379/0)"},
		{"dynamodb without table", env(storeenv.Kind, "dynamodb"),
			"SUPERVAIZER_STORE_TABLE: required when SUPERVAIZER_STORE=dynamodb (e.g. svz-store)"},
		{"postgres URL with a bad port", env(storeenv.Kind, "postgres", storeenv.URL, "postgres://svz:"+password+"@127.0.0.1:notaport/db"),
			"SUPERVAIZER_STORE_URL: not a valid PostgreSQL URL (the value is not shown; want e.g. postgres://user:password@host:5432/database)"},
		{"postgres URL in another scheme", env(storeenv.Kind, "postgres", storeenv.URL, "mysql://svz:"+password+"@127.0.0.1/db"),
			"SUPERVAIZER_STORE_URL: not a valid PostgreSQL URL (got mysql://xxxxx@127.0.0.1/db; want e.g."},
		{"redis URL in another scheme", env(storeenv.Kind, "redis", storeenv.URL, "http://:"+password+"@127.0.0.1:6379/0"),
			"SUPERVAIZER_STORE_URL: not a valid Redis URL (got http://xxxxx@127.0.0.1:6379/0; want e.g. redis://:password@host:6379/0)"},
		{"redis URL with a bad database", env(storeenv.Kind, "redis", storeenv.URL, "redis://:"+password+"@127.0.0.1:6379/x"),
			"SUPERVAIZER_STORE_URL: not a valid Redis URL (got redis://xxxxx@127.0.0.1:6379/x;"},
		{"unreachable postgres", env(storeenv.Kind, "postgres", storeenv.URL, "postgres://svz:"+password+"@"+bad+"/svz?sslmode=disable"),
			"SUPERVAIZER_STORE_URL: cannot reach postgres at " + bad + ": "},
		{"unreachable redis", env(storeenv.Kind, "redis", storeenv.URL, "redis://:"+password+"@"+bad+"/0"),
			"SUPERVAIZER_STORE_URL: redis: cannot reach " + bad + ": "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := storeenv.Open(context.Background(), tt.getenv)
			if err == nil {
				s.Close()
				t.Fatal("Open succeeded")
			}
			if !strings.HasPrefix(err.Error(), tt.prefix) {
				t.Errorf("error = %q\nwant prefix %q", err, tt.prefix)
			}
			if strings.Contains(err.Error(), password) {
				t.Errorf("error leaks the password: %q", err)
			}
		})
	}
}

func TestPostgres(t *testing.T) {
	url := testenv.Need(t, testenv.PostgresURL)
	table := "svz_storeenv_test"
	s, err := storeenv.Open(context.Background(), env(storeenv.Kind, "postgres", storeenv.URL, url, storeenv.Table, table))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	defer func() {
		pool, err := pgxpool.New(context.Background(), url)
		if err != nil {
			t.Fatal(err)
		}
		defer pool.Close()
		if _, err := pool.Exec(context.Background(), "DROP TABLE "+table); err != nil {
			t.Errorf("drop %s: %v", table, err)
		}
	}()
	if _, ok := s.(*postgres.Store); !ok {
		t.Fatalf("store is %T, want *postgres.Store", s)
	}
	smoke(t, s)

	_, err = storeenv.Open(context.Background(), env(storeenv.Kind, "postgres", storeenv.URL, url, storeenv.Table, "bad-name"))
	if want := `SUPERVAIZER_STORE_TABLE: postgres: table name "bad-name": each part must be a lower-case identifier`; err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("bad table name: error = %v, want prefix %q", err, want)
	}
}

func TestRedis(t *testing.T) {
	url := testenv.Need(t, testenv.RedisURL)
	s, err := storeenv.Open(context.Background(), env(storeenv.Kind, "redis", storeenv.URL, url))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, ok := s.(*redis.Store); !ok {
		t.Fatalf("store is %T, want *redis.Store", s)
	}
	smoke(t, s)
}

// TestDynamoDBHonoursAWSEndpointURL opens the table through the AWS settings Open reads with
// getenv only (never the process environment): the sole way to reach moto_server here is
// AWS_ENDPOINT_URL (or its DynamoDB variant).
func TestDynamoDBHonoursAWSEndpointURL(t *testing.T) {
	endpoint := testenv.Need(t, testenv.AWSEndpoint)
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	table := "svz-storeenv-" + hex.EncodeToString(b)
	aws := []string{"AWS_ACCESS_KEY_ID", "test", "AWS_SECRET_ACCESS_KEY", "test", "AWS_REGION", "us-east-1"}
	admin, err := dynamodb.NewClient(env(append(aws, "AWS_ENDPOINT_URL", endpoint)...))
	if err != nil {
		t.Fatal(err)
	}
	if err := dynamodb.CreateTable(context.Background(), admin, table); err != nil {
		t.Fatal(err)
	}
	defer admin.Call(context.Background(), "DeleteTable", map[string]string{"TableName": table}, nil)

	t.Setenv("AWS_ENDPOINT_URL", "http://"+closedAddr(t)) // ignored: Open reads getenv
	for _, variable := range []string{"AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_DYNAMODB"} {
		t.Run(variable, func(t *testing.T) {
			settings := append(aws[:len(aws):len(aws)], variable, endpoint, storeenv.Kind, "dynamodb")
			s, err := storeenv.Open(context.Background(), env(append(settings, storeenv.Table, table)...))
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if _, ok := s.(*dynamodb.Store); !ok {
				t.Fatalf("store is %T, want *dynamodb.Store", s)
			}
			smoke(t, s)

			_, err = storeenv.Open(context.Background(), env(append(settings, storeenv.Table, "svz-missing")...))
			want := `SUPERVAIZER_STORE_TABLE: dynamodb: table "svz-missing" does not exist (create it with partition key "k" of type S)`
			if err == nil || err.Error() != want {
				t.Errorf("missing table: error = %v, want %q", err, want)
			}
		})
	}

}

// TestDynamoDBWithoutCredentials: with no credentials anywhere (the environment, a container
// endpoint, or what the AWS SDK's default chain reads: profiles, web identity, instance
// metadata), the start fails saying where it looked.
func TestDynamoDBWithoutCredentials(t *testing.T) {
	endpoint := testenv.Need(t, testenv.AWSEndpoint)
	dir := t.TempDir()
	for _, name := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN"} {
		t.Setenv(name, "") // the SDK's chain reads the process environment
	}
	t.Setenv("HOME", dir)
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(dir, "config"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(dir, "credentials"))
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	_, err := storeenv.Open(context.Background(), env("AWS_REGION", "us-east-1", "AWS_ENDPOINT_URL", endpoint, storeenv.Kind, "dynamodb", storeenv.Table, "svz-store"))
	want := `SUPERVAIZER_STORE_TABLE: dynamodb: cannot reach table "svz-store": no AWS credentials in the environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY) nor a container credentials endpoint ` +
		"(AWS_CONTAINER_CREDENTIALS_RELATIVE_URI, AWS_CONTAINER_CREDENTIALS_FULL_URI), and the AWS SDK's default chain (profiles, SSO, web identity, EC2 instance metadata) found none: "
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("no credentials: error = %v\nwant prefix %q", err, want)
	}
}

func TestContextDeadlineBoundsStart(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := storeenv.Open(ctx, env(storeenv.DataDir, t.TempDir()))
	if !errors.Is(err, context.Canceled) || !strings.HasPrefix(err.Error(), "SUPERVAIZER_DATA_DIR: ") {
		t.Errorf("Open with a canceled context: error = %v", err)
	}
}
