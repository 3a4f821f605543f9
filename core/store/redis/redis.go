// Package redis is the Redis store.Store, on go-redis/v9. Each record is one hash, and every
// conditional write is one Lua script, so a check and its write are atomic and take one round trip.
// Scripts touch a single key, so the store also works on Redis Cluster.
//
// A record under key k is the hash KeyPrefix+k with the fields
//
//	v    the value (binary-safe)
//	ver  the version, in decimal
//	exp  the expiry in Unix milliseconds, in decimal; live while now < exp
//
// The scripts compare exp with the caller's clock, never with Redis's own expiry. The key also gets
// a Redis expiry (PEXPIRE) of its remaining lifetime plus SweepGrace, relative so that clock
// differences with the server do not matter: it only frees memory, later than the logical expiry.
// Values are limited to MaxValueSize bytes.
package redis

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/supervaize/svz/core/store"
	"github.com/supervaize/svz/core/store/internal/kit"
)

// MaxValueSize is the value limit of the Redis store.
const MaxValueSize = 1 << 20

// KeyPrefix starts every key the store writes.
const KeyPrefix = "svz:store:"

// SweepGrace is how long after its logical expiry Redis keeps a record before dropping it.
const SweepGrace = time.Minute

// createScript: ARGV value, version, expires_ms, now_ms, pexpire_ms. Returns 1 when it wrote, or
// the live record as {value, version, expires_ms}.
const createScript = `
local cur = redis.call('HMGET', KEYS[1], 'v', 'ver', 'exp')
if cur[2] and tonumber(cur[3]) > tonumber(ARGV[4]) then
	return {cur[1], cur[2], cur[3]}
end
redis.call('HSET', KEYS[1], 'v', ARGV[1], 'ver', ARGV[2], 'exp', ARGV[3])
if tonumber(ARGV[5]) > 0 then redis.call('PEXPIRE', KEYS[1], ARGV[5]) else redis.call('PERSIST', KEYS[1]) end
return 1`

// updateScript: ARGV expected_version, value, version, expires_ms, now_ms, pexpire_ms. Returns 1
// when it wrote, 0 when no live record exists, -1 when the live record has another version.
const updateScript = `
local cur = redis.call('HMGET', KEYS[1], 'ver', 'exp')
if not cur[1] or tonumber(cur[2]) <= tonumber(ARGV[5]) then
	return 0
end
if cur[1] ~= ARGV[1] then
	return -1
end
redis.call('HSET', KEYS[1], 'v', ARGV[2], 'ver', ARGV[3], 'exp', ARGV[4])
if tonumber(ARGV[6]) > 0 then redis.call('PEXPIRE', KEYS[1], ARGV[6]) else redis.call('PERSIST', KEYS[1]) end
return 1`

// deleteScript: ARGV version, now_ms. Returns 1 when the record is gone, -1 when a live record
// has another version.
const deleteScript = `
local cur = redis.call('HMGET', KEYS[1], 'ver', 'exp')
if cur[1] and tonumber(cur[2]) > tonumber(ARGV[2]) and cur[1] ~= ARGV[1] then
	return -1
end
redis.call('DEL', KEYS[1])
return 1`

// Store is a store.Store in Redis.
type Store struct {
	client goredis.UniversalClient
	now    func() time.Time
	closed atomic.Bool

	create, update, del *goredis.Script

	logOnce  sync.Once // store.Log, in log.go
	logState *redisLogs
}

var _ store.Store = (*Store)(nil)

// Option configures New.
type Option func(*Store)

// WithClock makes the store compare expiries with now instead of time.Now.
func WithClock(now func() time.Time) Option { return func(s *Store) { s.now = now } }

// New checks that the server answers and returns a Store on client. The Store takes ownership of
// client: Close closes it, and so does a failing New.
func New(ctx context.Context, client goredis.UniversalClient, opts ...Option) (*Store, error) {
	if err := client.Ping(ctx).Err(); err != nil {
		_ = client.Close()
		return nil, fmt.Errorf("redis: cannot reach %s: %w", address(client), err)
	}
	s := &Store{
		client: client,
		now:    time.Now,
		create: goredis.NewScript(createScript),
		update: goredis.NewScript(updateScript),
		del:    goredis.NewScript(deleteScript),
	}
	for _, o := range opts {
		o(s)
	}
	return s, nil
}

// address describes the server(s) of client for error messages, without credentials.
func address(client goredis.UniversalClient) string {
	switch c := client.(type) {
	case *goredis.Client:
		return c.Options().Addr
	case *goredis.ClusterClient:
		return fmt.Sprint(c.Options().Addrs)
	}
	return "the configured server"
}

// Get implements store.Store.
func (s *Store) Get(ctx context.Context, key string) (store.Record, error) {
	if err := s.ready(ctx, key); err != nil {
		return store.Record{}, fmt.Errorf("redis: get: %w", err)
	}
	fields, err := s.client.HMGet(ctx, KeyPrefix+key, "v", "ver", "exp").Result()
	if err != nil {
		return store.Record{}, fmt.Errorf("redis: get: %w", err)
	}
	if fields[1] == nil {
		return store.Record{}, fmt.Errorf("redis: get: %w", store.ErrNotFound)
	}
	rec, expires, err := parse(fields)
	if err != nil {
		return store.Record{}, fmt.Errorf("redis: get %q: %w", key, err)
	}
	if !kit.Live(expires, s.now()) {
		return store.Record{}, fmt.Errorf("redis: get: %w", store.ErrNotFound)
	}
	return rec, nil
}

// Create implements store.Store.
func (s *Store) Create(ctx context.Context, key string, value []byte, expiresAt time.Time) (store.Record, error) {
	now := s.now()
	if err := s.readyWrite(ctx, key, value, expiresAt, now); err != nil {
		return store.Record{}, fmt.Errorf("redis: create: %w", err)
	}
	version := kit.NewVersion()
	res, err := s.create.Run(ctx, s.client, []string{KeyPrefix + key},
		value, strconv.FormatUint(version, 10), kit.Millis(expiresAt), kit.Millis(now), pexpire(expiresAt, now)).Result()
	if err != nil {
		return store.Record{}, fmt.Errorf("redis: create: %w", err)
	}
	if live, ok := res.([]any); ok {
		rec, _, err := parse(live)
		if err != nil {
			return store.Record{}, fmt.Errorf("redis: create %q: %w", key, err)
		}
		return rec, fmt.Errorf("redis: create: %w", store.ErrExists)
	}
	return store.Record{Value: kit.Clone(value), Version: version, ExpiresAt: kit.Time(kit.Millis(expiresAt))}, nil
}

// Update implements store.Store.
func (s *Store) Update(ctx context.Context, key string, version uint64, value []byte, expiresAt time.Time) (store.Record, error) {
	now := s.now()
	if err := s.readyWrite(ctx, key, value, expiresAt, now); err != nil {
		return store.Record{}, fmt.Errorf("redis: update: %w", err)
	}
	next := kit.NewVersion()
	res, err := s.update.Run(ctx, s.client, []string{KeyPrefix + key},
		strconv.FormatUint(version, 10), value, strconv.FormatUint(next, 10), kit.Millis(expiresAt), kit.Millis(now),
		pexpire(expiresAt, now)).Int64()
	switch {
	case err != nil:
		return store.Record{}, fmt.Errorf("redis: update: %w", err)
	case res == 0:
		return store.Record{}, fmt.Errorf("redis: update: %w", store.ErrNotFound)
	case res < 0:
		return store.Record{}, fmt.Errorf("redis: update: %w", store.ErrConflict)
	}
	return store.Record{Value: kit.Clone(value), Version: next, ExpiresAt: kit.Time(kit.Millis(expiresAt))}, nil
}

// Delete implements store.Store.
func (s *Store) Delete(ctx context.Context, key string, version uint64) error {
	if err := s.ready(ctx, key); err != nil {
		return fmt.Errorf("redis: delete: %w", err)
	}
	res, err := s.del.Run(ctx, s.client, []string{KeyPrefix + key}, strconv.FormatUint(version, 10), kit.Millis(s.now())).Int64()
	switch {
	case err != nil:
		return fmt.Errorf("redis: delete: %w", err)
	case res < 0:
		return fmt.Errorf("redis: delete: %w", store.ErrConflict)
	}
	return nil
}

// MaxValueSize implements store.Store.
func (s *Store) MaxValueSize() int { return MaxValueSize }

// Close implements store.Store and closes the client.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	if err := s.client.Close(); err != nil {
		return fmt.Errorf("redis: close: %w", err)
	}
	return nil
}

func (s *Store) ready(ctx context.Context, key string) error {
	if s.closed.Load() {
		return store.ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return kit.CheckKey(key)
}

func (s *Store) readyWrite(ctx context.Context, key string, value []byte, expiresAt, now time.Time) error {
	if err := s.ready(ctx, key); err != nil {
		return err
	}
	return kit.CheckWrite(key, value, MaxValueSize, expiresAt, now)
}

// pexpire is the Redis lifetime of a record: its remaining logical lifetime plus SweepGrace, or 0
// (no Redis expiry) for a record that does not expire.
func pexpire(expiresAt, now time.Time) int64 {
	if expiresAt.IsZero() {
		return 0
	}
	return kit.Millis(expiresAt) - kit.Millis(now) + SweepGrace.Milliseconds()
}

// errCorrupt marks a hash that is not a record this package wrote.
var errCorrupt = errors.New("corrupt record")

// parse reads {value, version, expires_ms} as returned by HMGET or the create script.
func parse(fields []any) (rec store.Record, expiresMs int64, err error) {
	if len(fields) != 3 {
		return store.Record{}, 0, fmt.Errorf("%w: %d fields, want 3", errCorrupt, len(fields))
	}
	value, ok1 := fields[0].(string)
	ver, ok2 := fields[1].(string)
	exp, ok3 := fields[2].(string)
	if !ok1 || !ok2 || !ok3 {
		return store.Record{}, 0, fmt.Errorf("%w: missing or non-string fields", errCorrupt)
	}
	// Only the canonical decimals this package writes: the scripts compare versions as strings.
	version, err := strconv.ParseUint(ver, 10, 63)
	if err != nil || version == 0 || strconv.FormatUint(version, 10) != ver {
		return store.Record{}, 0, fmt.Errorf("%w: version %q", errCorrupt, ver)
	}
	expiresMs, err = strconv.ParseInt(exp, 10, 64)
	if err != nil || strconv.FormatInt(expiresMs, 10) != exp {
		return store.Record{}, 0, fmt.Errorf("%w: expiry %q", errCorrupt, exp)
	}
	return store.Record{Value: []byte(value), Version: version, ExpiresAt: kit.Time(expiresMs)}, expiresMs, nil
}
