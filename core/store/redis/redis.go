// Package redis is the Redis store.Store, on go-redis/v9. Each record is one hash, and every
// conditional write is one Lua script, so a check and its write are atomic and take one round trip.
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
//
// Listing: every key is also a member of the sorted set IndexKey (all scores 0, so members sort
// in byte order), added and removed by the same scripts that write the records, atomically. List
// is one script: a ZRANGEBYLEX of the page's span, then the page's hashes, so a page costs
// O(log n + its members). A member whose hash Redis has dropped (after its expiry, or evicted) is
// removed when a listing meets it, and every Create also checks a few random members, so the
// index holds few dead members. The scripts touch the record and the index, two keys: the store
// needs one Redis (standalone, or a primary with replicas and Sentinel), not Redis Cluster, and
// Redis 6.2 or later (ZRANDMEMBER).
//
// go-redis retries a command whose connection broke or timed out, writes included. That is safe:
// every write carries a fresh random version, so a retried Create or Update that finds its own
// version knows its first attempt was applied and succeeds, as it did; a retried Delete finds the
// record gone. Every call is bounded by the store timeout (WithTimeout); build the client with
// ContextTimeoutEnabled so the bound reaches socket reads (storeenv does).
//
// Redis keeps data in memory: without persistence (appendonly, save) a restart forgets every
// record, and an evicting maxmemory-policy drops records when memory runs short, so a retried
// job.start would run again. New checks both with CONFIG GET and logs a warning naming the
// setting (see Durability).
package redis

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/supervaize/svz/core/store"
	"github.com/supervaize/svz/core/store/internal/kit"
)

// MaxValueSize is the value limit of the Redis store.
const MaxValueSize = 1 << 20

// KeyPrefix starts every record key the store writes.
const KeyPrefix = "svz:store:"

// IndexKey is the sorted set of every record's key, for List.
const IndexKey = "svz:store-index"

// SweepGrace is how long after its logical expiry Redis keeps a record before dropping it.
const SweepGrace = time.Minute

// DefaultTimeout bounds each call unless WithTimeout says otherwise.
const DefaultTimeout = kit.DefaultTimeout

// reclaimSample is how many random index members each Create checks for a dropped record: with
// as many records expiring as created, dead members settle at about 1/reclaimSample of the index.
const reclaimSample = "3"

// createScript: KEYS record, index. ARGV value, version, expires_ms, now_ms, pexpire_ms, key.
// Returns 1 when it wrote (or finds its own write: a retry), or the live record as {value,
// version, expires_ms}.
const createScript = `
local cur = redis.call('HMGET', KEYS[1], 'v', 'ver', 'exp')
if cur[2] and tonumber(cur[3]) > tonumber(ARGV[4]) then
	if cur[2] == ARGV[2] then return 1 end
	return {cur[1], cur[2], cur[3]}
end
redis.call('HSET', KEYS[1], 'v', ARGV[1], 'ver', ARGV[2], 'exp', ARGV[3])
if tonumber(ARGV[5]) > 0 then redis.call('PEXPIRE', KEYS[1], ARGV[5]) else redis.call('PERSIST', KEYS[1]) end
redis.call('ZADD', KEYS[2], 0, ARGV[6])
for _, m in ipairs(redis.call('ZRANDMEMBER', KEYS[2], ` + reclaimSample + `)) do
	if redis.call('EXISTS', '` + KeyPrefix + `' .. m) == 0 then redis.call('ZREM', KEYS[2], m) end
end
return 1`

// updateScript: KEYS record, index. ARGV expected_version, value, version, expires_ms, now_ms,
// pexpire_ms, key. Returns 1 when it wrote (or finds its own write), 0 when no live record exists,
// -1 when the live record has another version. A record written before the index existed joins it.
const updateScript = `
local cur = redis.call('HMGET', KEYS[1], 'ver', 'exp')
if not cur[1] or tonumber(cur[2]) <= tonumber(ARGV[5]) then
	return 0
end
if cur[1] == ARGV[3] then return 1 end
if cur[1] ~= ARGV[1] then
	return -1
end
redis.call('HSET', KEYS[1], 'v', ARGV[2], 'ver', ARGV[3], 'exp', ARGV[4])
if tonumber(ARGV[6]) > 0 then redis.call('PEXPIRE', KEYS[1], ARGV[6]) else redis.call('PERSIST', KEYS[1]) end
redis.call('ZADD', KEYS[2], 0, ARGV[7])
return 1`

// deleteScript: KEYS record, index. ARGV version, now_ms, key. Returns 1 when the record is
// gone, -1 when a live record has another version.
const deleteScript = `
local cur = redis.call('HMGET', KEYS[1], 'ver', 'exp')
if cur[1] and tonumber(cur[2]) > tonumber(ARGV[2]) and cur[1] ~= ARGV[1] then
	return -1
end
redis.call('DEL', KEYS[1])
redis.call('ZREM', KEYS[2], ARGV[3])
return 1`

// listScript: KEYS index. ARGV min, max (ZRANGEBYLEX bounds), count, now_ms, byte budget.
// Returns {last member examined, 1 if members may remain else 0, then key, value, version,
// expires_ms of each live record}. Members whose record is gone leave the index.
const listScript = `
local members = redis.call('ZRANGEBYLEX', KEYS[1], ARGV[1], ARGV[2], 'LIMIT', 0, tonumber(ARGV[3]))
local out = {'', 0}
local bytes = 0
for i, m in ipairs(members) do
	out[1] = m
	local cur = redis.call('HMGET', '` + KeyPrefix + `' .. m, 'v', 'ver', 'exp')
	if not cur[2] then
		redis.call('ZREM', KEYS[1], m)
	elseif tonumber(cur[3]) > tonumber(ARGV[4]) then
		table.insert(out, m)
		table.insert(out, cur[1])
		table.insert(out, cur[2])
		table.insert(out, cur[3])
		bytes = bytes + #cur[1]
		if bytes >= tonumber(ARGV[5]) and i < #members then
			out[2] = 1
			return out
		end
	end
end
if #members == tonumber(ARGV[3]) then out[2] = 1 end
return out`

// Store is a store.Store in Redis.
type Store struct {
	client  goredis.UniversalClient
	now     func() time.Time
	timeout time.Duration
	log     *slog.Logger
	closed  atomic.Bool

	create, update, del, list *goredis.Script

	logOnce  sync.Once // store.Log, in log.go
	logState *redisLogs
}

var (
	_ store.Store  = (*Store)(nil)
	_ store.Lister = (*Store)(nil)
)

// Option configures New.
type Option func(*Store)

// WithClock makes the store compare expiries with now instead of time.Now.
func WithClock(now func() time.Time) Option { return func(s *Store) { s.now = now } }

// WithTimeout bounds every call, go-redis's retries included (default DefaultTimeout; 0 or less:
// no bound but the caller's context).
func WithTimeout(d time.Duration) Option { return func(s *Store) { s.timeout = d } }

// WithLogger sets where New reports what it finds of the server's durability, and where
// go-redis's own log lines go, for the whole process (default slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(s *Store) { s.log = l } }

// New checks that the server answers and can hold the store, reports its durability (see
// Durability) and returns a Store on client. The Store takes ownership of client: Close closes
// it, and so does a failing New.
func New(ctx context.Context, client goredis.UniversalClient, opts ...Option) (*Store, error) {
	if _, ok := client.(*goredis.ClusterClient); ok {
		_ = client.Close()
		return nil, errors.New("redis: Redis Cluster is not supported: a write and its index entry are one script on two keys; use one primary (with replicas and Sentinel if needed)")
	}
	s := &Store{
		client:  client,
		now:     time.Now,
		timeout: DefaultTimeout,
		log:     slog.Default(),
		create:  goredis.NewScript(createScript),
		update:  goredis.NewScript(updateScript),
		del:     goredis.NewScript(deleteScript),
		list:    goredis.NewScript(listScript),
	}
	for _, o := range opts {
		o(s)
	}
	routeLibraryLogs(s.log)
	info, err := client.Info(ctx, "server").Result()
	if err != nil {
		_ = client.Close()
		return nil, fmt.Errorf("redis: cannot reach %s: %w", address(client), err)
	}
	if v := infoField(info, "redis_version"); !atLeast(v, 6, 2) {
		_ = client.Close()
		return nil, fmt.Errorf("redis: %s runs Redis %s; the store needs 6.2 or later", address(client), v)
	}
	d := CheckDurability(ctx, client)
	for _, w := range d.Warnings {
		s.log.Warn("redis store: "+w, "server", address(client))
	}
	if d.Unchecked != nil {
		s.log.Info("redis store: cannot read the server's persistence and eviction settings (CONFIG GET refused); make sure it persists writes (appendonly yes) and never evicts (maxmemory-policy noeviction), or retried calls may run twice",
			"server", address(client), "error", d.Unchecked)
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

// infoField returns the value of name in an INFO answer ("name:value" lines).
func infoField(info, name string) string {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+":"); ok {
			return v
		}
	}
	return ""
}

// atLeast reports whether the version "major.minor.patch" is at least major.minor.
func atLeast(version string, major, minor int) bool {
	parts := strings.SplitN(version, ".", 3)
	if len(parts) < 2 {
		return false
	}
	ma, err1 := strconv.Atoi(parts[0])
	mi, err2 := strconv.Atoi(parts[1])
	return err1 == nil && err2 == nil && (ma > major || ma == major && mi >= minor)
}

// Get implements store.Store.
func (s *Store) Get(ctx context.Context, key string) (store.Record, error) {
	if err := s.ready(ctx, key); err != nil {
		return store.Record{}, fmt.Errorf("redis: get: %w", err)
	}
	ctx, cancel := kit.Bound(ctx, s.timeout)
	defer cancel()
	fields, err := s.client.HMGet(ctx, KeyPrefix+key, "v", "ver", "exp").Result()
	if err != nil {
		return store.Record{}, fmt.Errorf("redis: get: %w", kit.TimedOut(ctx, err))
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
	ctx, cancel := kit.Bound(ctx, s.timeout)
	defer cancel()
	version := kit.NewVersion()
	res, err := s.create.Run(ctx, s.client, []string{KeyPrefix + key, IndexKey},
		value, strconv.FormatUint(version, 10), kit.Millis(expiresAt), kit.Millis(now), pexpire(expiresAt, now), key).Result()
	if err != nil {
		return store.Record{}, fmt.Errorf("redis: create: %w", kit.TimedOut(ctx, err))
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
	ctx, cancel := kit.Bound(ctx, s.timeout)
	defer cancel()
	next := kit.NewVersion()
	res, err := s.update.Run(ctx, s.client, []string{KeyPrefix + key, IndexKey},
		strconv.FormatUint(version, 10), value, strconv.FormatUint(next, 10), kit.Millis(expiresAt), kit.Millis(now),
		pexpire(expiresAt, now), key).Int64()
	switch {
	case err != nil:
		return store.Record{}, fmt.Errorf("redis: update: %w", kit.TimedOut(ctx, err))
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
	ctx, cancel := kit.Bound(ctx, s.timeout)
	defer cancel()
	res, err := s.del.Run(ctx, s.client, []string{KeyPrefix + key, IndexKey}, strconv.FormatUint(version, 10), kit.Millis(s.now()), key).Int64()
	switch {
	case err != nil:
		return fmt.Errorf("redis: delete: %w", kit.TimedOut(ctx, err))
	case res < 0:
		return fmt.Errorf("redis: delete: %w", store.ErrConflict)
	}
	return nil
}

// List implements store.Lister: one script, reading the page's span of the index and the page's
// records (see the package documentation).
func (s *Store) List(ctx context.Context, prefix, after string, limit int) (store.Page, error) {
	limit, err := kit.ReadyList(ctx, s.closed.Load(), prefix, after, limit)
	if err != nil {
		return store.Page{}, fmt.Errorf("redis: list: %w", err)
	}
	span := kit.ListRange(prefix, after)
	if span.Empty {
		return store.Page{}, nil
	}
	lo, hi := "["+span.From, "+"
	if span.Exclusive {
		lo = "(" + span.From
	}
	if span.To != "" {
		hi = "(" + span.To
	}
	ctx, cancel := kit.Bound(ctx, s.timeout)
	defer cancel()
	res, err := s.list.Run(ctx, s.client, []string{IndexKey}, lo, hi, limit, kit.Millis(s.now()), kit.MaxPageBytes).Slice()
	if err != nil {
		return store.Page{}, fmt.Errorf("redis: list: %w", kit.TimedOut(ctx, err))
	}
	page, err := parseList(res, limit)
	if err != nil {
		return store.Page{}, fmt.Errorf("redis: list under %q: %w", prefix, err)
	}
	return page, nil
}

// parseList reads the list script's answer.
func parseList(res []any, limit int) (store.Page, error) {
	if len(res) < 2 || (len(res)-2)%4 != 0 || (len(res)-2)/4 > limit {
		return store.Page{}, fmt.Errorf("%w: list answer of %d fields", errCorrupt, len(res))
	}
	last, ok := res[0].(string)
	more, ok2 := res[1].(int64)
	if !ok || !ok2 {
		return store.Page{}, fmt.Errorf("%w: list answer starts with %T, %T", errCorrupt, res[0], res[1])
	}
	var page store.Page
	for i := 2; i < len(res); i += 4 {
		key, ok := res[i].(string)
		if !ok {
			return store.Page{}, fmt.Errorf("%w: list answer has a key of type %T", errCorrupt, res[i])
		}
		rec, _, err := parse(res[i+1 : i+4])
		if err != nil {
			return store.Page{}, fmt.Errorf("record %q: %w", key, err)
		}
		page.Items = append(page.Items, store.Item{Key: key, Record: rec})
	}
	if more == 1 {
		page.Next = last
	}
	return page, nil
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
	return kit.Ready(ctx, s.closed.Load(), key)
}

func (s *Store) readyWrite(ctx context.Context, key string, value []byte, expiresAt, now time.Time) error {
	return kit.ReadyWrite(ctx, s.closed.Load(), key, value, MaxValueSize, expiresAt, now)
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
