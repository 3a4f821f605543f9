package redis_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/supervaize/svz/core/store"
	"github.com/supervaize/svz/core/store/redis"
	"github.com/supervaize/svz/core/store/storetest"
	"github.com/supervaize/svz/internal/testenv"
)

func options(t testing.TB) *goredis.Options {
	t.Helper()
	opts, err := goredis.ParseURL(testenv.Need(t, testenv.RedisURL))
	if err != nil {
		t.Fatal(err)
	}
	opts.ContextTimeoutEnabled = true // as storeenv builds it
	return opts
}

func client(t testing.TB) *goredis.Client { return goredis.NewClient(options(t)) }

// quiet is a logger for stores whose start-up warnings (the test server persists nothing) are
// not the subject.
func quiet() *slog.Logger { return slog.New(slog.DiscardHandler) }

func open(t testing.TB, c *goredis.Client, opts ...redis.Option) *redis.Store {
	t.Helper()
	s, err := redis.New(context.Background(), c, append([]redis.Option{redis.WithLogger(quiet())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestConformance(t *testing.T) {
	opts := options(t)
	storetest.Run(t, func(t testing.TB, now func() time.Time) store.Store {
		return open(t, client(t), redis.WithClock(now))
	}, storetest.Network(storetest.Remote{Addr: opts.Addr,
		Open: func(t testing.TB, now func() time.Time, addr string, timeout time.Duration) store.Store {
			o := options(t)
			o.Addr = addr
			return open(t, goredis.NewClient(o), redis.WithClock(now), redis.WithTimeout(timeout))
		}}))
}

// trips counts the commands a client sends; without pipelining each is one round trip.
type trips struct{ n atomic.Int64 }

func (tr *trips) DialHook(next goredis.DialHook) goredis.DialHook { return next }
func (tr *trips) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		tr.n.Add(1)
		return next(ctx, cmd)
	}
}
func (tr *trips) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []goredis.Cmder) error {
		tr.n.Add(1)
		return next(ctx, cmds)
	}
}

func TestOneRoundTripPerCall(t *testing.T) {
	c := client(t)
	var tr trips
	c.AddHook(&tr)
	s := open(t, c)
	defer s.Close()
	ctx := context.Background()
	exp := time.Now().Add(time.Hour)
	want := func(target error) func(error) error {
		return func(err error) error {
			if errors.Is(err, target) {
				return nil
			}
			return fmt.Errorf("want %v, got %w", target, err)
		}
	}
	var r store.Record
	var err error
	calls := []struct {
		name string
		call func(k string) error
	}{
		{"Create", func(k string) error { r, err = s.Create(ctx, k, []byte("claim"), exp); return err }},
		{"Create of a live key", func(k string) error { _, err := s.Create(ctx, k, []byte("x"), exp); return want(store.ErrExists)(err) }},
		{"Get", func(k string) error { r, err = s.Get(ctx, k); return err }},
		{"Update", func(k string) error { r, err = s.Update(ctx, k, r.Version, []byte("done"), exp); return err }},
		{"Update with a stale version", func(k string) error {
			_, err := s.Update(ctx, k, r.Version+1, []byte("x"), exp)
			return want(store.ErrConflict)(err)
		}},
		{"Delete with a stale version", func(k string) error { return want(store.ErrConflict)(s.Delete(ctx, k, r.Version+1)) }},
		{"Delete", func(k string) error { return s.Delete(ctx, k, r.Version) }},
	}
	for _, c := range calls { // load the scripts
		if err := c.call("rt/warm-up"); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
	}
	for _, c := range calls {
		before := tr.n.Load()
		if err := c.call("rt/measured"); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got := tr.n.Load() - before; got != 1 {
			t.Errorf("%s took %d round trips, want 1", c.name, got)
		}
	}
}

// TestLayout pins the documented hash layout and the sweeper expiry, which operators rely on.
func TestLayout(t *testing.T) {
	c := client(t)
	s := open(t, c)
	defer s.Close()
	ctx := context.Background()
	exp := time.Now().Add(10 * time.Second).Truncate(time.Millisecond)
	r, err := s.Create(ctx, "layout/k", []byte("value"), exp)
	if err != nil {
		t.Fatal(err)
	}
	probe := client(t)
	defer probe.Close()
	got, err := probe.HGetAll(ctx, redis.KeyPrefix+"layout/k").Result()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"v": "value", "ver": fmt.Sprint(r.Version), "exp": fmt.Sprint(exp.UnixMilli())}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("hash = %v, want %v", got, want)
	}
	ttl, err := probe.PTTL(ctx, redis.KeyPrefix+"layout/k").Result()
	if err != nil {
		t.Fatal(err)
	}
	if lo, hi := redis.SweepGrace+9*time.Second, redis.SweepGrace+10*time.Second; ttl < lo || ttl > hi {
		t.Errorf("PTTL = %s, want between %s and %s", ttl, lo, hi)
	}
	if err := s.Delete(ctx, "layout/k", r.Version); err != nil {
		t.Fatal(err)
	}
}

// TestCorruptRecord: a hash someone else wrote under the prefix is reported, not misread.
func TestCorruptRecord(t *testing.T) {
	c := client(t)
	s := open(t, c)
	defer s.Close()
	ctx := context.Background()
	probe := client(t)
	defer probe.Close()
	if err := probe.HSet(ctx, redis.KeyPrefix+"corrupt/k", "v", "x", "ver", "not-a-number", "exp", "1").Err(); err != nil {
		t.Fatal(err)
	}
	defer probe.Del(ctx, redis.KeyPrefix+"corrupt/k")
	_, err := s.Get(ctx, "corrupt/k")
	if err == nil || !strings.Contains(err.Error(), `corrupt record: version "not-a-number"`) {
		t.Errorf("Get of a corrupt record: error = %v", err)
	}
}

func TestUnreachableServerNamesAddressNotPassword(t *testing.T) {
	const password = "s3cret-Passw0rd"
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	opts, err := goredis.ParseURL("redis://:" + password + "@" + addr + "/0")
	if err != nil {
		t.Fatal(err)
	}
	opts.MaxRetries = -1
	_, err = redis.New(context.Background(), goredis.NewClient(opts))
	if err == nil {
		t.Fatal("New succeeded against a closed port")
	}
	if !strings.HasPrefix(err.Error(), "redis: cannot reach "+addr+": ") {
		t.Errorf("error = %q, want it to start with %q", err, "redis: cannot reach "+addr+": ")
	}
	if strings.Contains(err.Error(), password) {
		t.Errorf("error leaks the password: %q", err)
	}
}

func BenchmarkStore(b *testing.B) {
	c := client(b)
	var tr trips
	c.AddHook(&tr)
	s := open(b, c)
	defer s.Close()
	storetest.Benchmark(b, s, tr.n.Load)
}

// TestIndex: the index of keys follows the records: a record Redis dropped (swept after its
// expiry, or evicted) leaves it when a listing meets it, and a record written before the index
// existed joins it at its next Update.
func TestIndex(t *testing.T) {
	c := client(t)
	s := open(t, c)
	defer s.Close()
	probe := client(t)
	defer probe.Close()
	ctx := context.Background()
	exp := time.Now().Add(time.Hour)
	prefix := fmt.Sprintf("index/%d/", time.Now().UnixNano())
	for _, k := range []string{"a", "b", "c"} {
		if _, err := s.Create(ctx, prefix+k, []byte("v"), exp); err != nil {
			t.Fatal(err)
		}
	}
	if err := probe.Del(ctx, redis.KeyPrefix+prefix+"b").Err(); err != nil { // as Redis's sweeper would
		t.Fatal(err)
	}
	page, err := s.List(ctx, prefix, "", 10)
	if err != nil || len(page.Items) != 2 || page.Items[0].Key != prefix+"a" || page.Items[1].Key != prefix+"c" {
		t.Fatalf("List after a record was dropped = %+v, %v", page, err)
	}
	if err := probe.ZScore(ctx, redis.IndexKey, prefix+"b").Err(); !errors.Is(err, goredis.Nil) {
		t.Errorf("the dropped record is still indexed: %v", err)
	}

	// A record of an earlier version: a hash without an index entry.
	old := prefix + "old"
	if err := probe.HSet(ctx, redis.KeyPrefix+old, "v", "x", "ver", "7", "exp", fmt.Sprint(exp.UnixMilli())).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Update(ctx, old, 7, []byte("y"), exp); err != nil {
		t.Fatal(err)
	}
	page, err = s.List(ctx, prefix+"o", "", 10)
	if err != nil || len(page.Items) != 1 || page.Items[0].Key != old || string(page.Items[0].Value) != "y" {
		t.Errorf("List after updating a record of an earlier version = %+v, %v", page, err)
	}
}
