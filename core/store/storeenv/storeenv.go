// Package storeenv opens the store.Store the environment chooses, so every entry point (local
// mode, Lambda, Cloud Run, plain HTTP) configures persistence the same way:
//
//	SUPERVAIZER_STORE        memory | bolt | dynamodb | postgres | redis (default bolt)
//	SUPERVAIZER_DATA_DIR     bolt: directory of svz.db (default ./.svz, created 0700)
//	SUPERVAIZER_STORE_URL    postgres: postgres://user:password@host:5432/db; redis: redis://host:6379/0
//	SUPERVAIZER_STORE_TABLE  dynamodb: table name (required); postgres: table (default svz_store)
//	SUPERVAIZER_STORE_TIMEOUT  postgres, redis, dynamodb: bound of each call (default 5s)
//
// DynamoDB reads its AWS settings through getenv (see internal/awsapi): region (AWS_REGION,
// AWS_DEFAULT_REGION), endpoint (AWS_ENDPOINT_URL_DYNAMODB, AWS_ENDPOINT_URL), and static or
// container credentials (what Lambda, App Runner and ECS provide), else the AWS SDK's default
// chain (profiles, SSO, web identity, instance metadata), loaded only then.
//
// SUPERVAIZER_STORE_TIMEOUT bounds every call of the networked stores, their retries included, so
// that an unreachable server fails calls (the controller answers -32603) instead of holding them;
// PostgreSQL connection attempts are bounded by it too. bolt and memory are in process: nothing
// there waits on a network, and the setting does not apply (it is still checked).
//
// A bad or unreachable store fails in Open, at start, with an error that names the setting to fix
// and never shows a secret: a URL is shown with its userinfo and every query value masked, and
// whatever a dependency's message might quote of the settings' secrets (the URL's password and
// query values, the password of a key=value connection string, AWS_SECRET_ACCESS_KEY,
// AWS_SESSION_TOKEN, AWS_CONTAINER_AUTHORIZATION_TOKEN, the userinfo and query values of the AWS
// endpoint URLs) is masked too. Each backend sits in its own file behind a build tag (svz_nobolt,
// svz_nodynamodb, svz_nopostgres, svz_noredis), so a size-sensitive binary can leave it out;
// choosing a left-out backend is then an error.
package storeenv

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/supervaize/svz/core/store"
	"github.com/supervaize/svz/core/store/internal/kit"
	"github.com/supervaize/svz/core/store/memory"
	"github.com/supervaize/svz/internal/envvar"
)

// Settings read by Open.
const (
	Kind    = "SUPERVAIZER_STORE"
	DataDir = "SUPERVAIZER_DATA_DIR"
	URL     = "SUPERVAIZER_STORE_URL"
	Table   = "SUPERVAIZER_STORE_TABLE"
	Timeout = "SUPERVAIZER_STORE_TIMEOUT"
)

// Bounds of SUPERVAIZER_STORE_TIMEOUT: under 100 ms a loaded server fails calls it would answer;
// over 5 minutes a call outlives any request that waits on it.
const (
	MinTimeout = 100 * time.Millisecond
	MaxTimeout = 5 * time.Minute
)

// Defaults used when a setting is empty.
const (
	DefaultKind    = "bolt"
	DefaultDataDir = ".svz"
	BoltFile       = "svz.db"
)

// ConnectTimeout bounds the start-up checks when ctx has no earlier deadline.
const ConnectTimeout = 15 * time.Second

// kinds lists the values SUPERVAIZER_STORE accepts.
const kinds = "memory, bolt, dynamodb, postgres, redis"

// Option configures Open.
type Option func(*settings)

// WithLogger sets where the store reports what it finds at start (Redis durability) and where
// go-redis's own log lines go (default slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(s *settings) { s.log = l } }

// settings are what every backend's opener gets besides getenv.
type settings struct {
	timeout time.Duration
	log     *slog.Logger
}

// Open opens the store the settings choose, reading them through getenv (os.Getenv in production).
// It checks reachability before returning; the caller closes the store.
func Open(ctx context.Context, getenv func(string) string, opts ...Option) (store.Store, error) {
	set := settings{log: slog.Default()}
	for _, o := range opts {
		o(&set)
	}
	s, err := open(ctx, getenv, set)
	if err != nil {
		return nil, scrub(err, secrets(getenv))
	}
	return s, nil
}

func open(ctx context.Context, getenv func(string) string, set settings) (store.Store, error) {
	ctx, cancel := context.WithTimeout(ctx, ConnectTimeout)
	defer cancel()
	timeout, err := envvar.Duration(getenv, Timeout, kit.DefaultTimeout, MinTimeout, MaxTimeout)
	if err != nil {
		return nil, err
	}
	set.timeout = timeout
	kind, _ := setting(getenv, Kind, "", "")
	kind = strings.ToLower(kind)
	if kind == "" {
		kind = DefaultKind
	}
	switch kind {
	case "memory":
		return memory.New(), nil
	case "bolt":
		return openBolt(ctx, getenv)
	case "dynamodb":
		return openDynamoDB(ctx, getenv, set)
	case "postgres":
		return openPostgres(ctx, getenv, set)
	case "redis":
		return openRedis(ctx, getenv, set)
	}
	if !plainName(kind) { // e.g. the URL, set in the wrong variable: never echo it
		return nil, fmt.Errorf("%s: unknown store (the value is not shown); want one of %s", Kind, kinds)
	}
	return nil, fmt.Errorf("%s: unknown store %q; want one of %s", Kind, kind, kinds)
}

// setting returns the trimmed value of name, or an error naming it when it is required and empty.
func setting(getenv func(string) string, name, kind, example string) (string, error) {
	v := strings.TrimSpace(getenv(name))
	if v == "" && example != "" {
		return "", fmt.Errorf("%s: required when %s=%s (e.g. %s)", name, Kind, kind, example)
	}
	return v, nil
}

// plainName reports whether v is short and made of letters, digits, '-' and '_' only: a value an
// error message may quote.
func plainName(v string) bool {
	if v == "" || len(v) > 32 {
		return false
	}
	for _, c := range []byte(v) {
		if (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') && (c < '0' || c > '9') && c != '-' && c != '_' {
			return false
		}
	}
	return true
}
