package redis_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/supervaize/svz/core/store"
	"github.com/supervaize/svz/core/store/redis"
	"github.com/supervaize/svz/core/store/storetest"
	"github.com/supervaize/svz/internal/testenv"
)

func TestMain(m *testing.M) {
	storetest.LogProcessMain(func(ctx context.Context) (store.Store, error) {
		opts, err := goredis.ParseURL(os.Getenv(testenv.RedisURL))
		if err != nil {
			return nil, err
		}
		return redis.New(ctx, goredis.NewClient(opts))
	})
	os.Exit(m.Run())
}

func TestLogConformance(t *testing.T) {
	testenv.Need(t, testenv.RedisURL)
	storetest.RunLog(t, func(t testing.TB, now func() time.Time) store.Store {
		return open(t, client(t), redis.WithClock(now))
	})
}

func TestLogProcesses(t *testing.T) {
	testenv.Need(t, testenv.RedisURL)
	storetest.RunLogProcesses(t, func(t testing.TB, now func() time.Time) store.Store {
		return open(t, client(t), redis.WithClock(now))
	}, nil)
}

// TestLogOneRoundTrip pins the package doc: an append and a read are one command each.
func TestLogOneRoundTrip(t *testing.T) {
	c := client(t)
	var tr trips
	c.AddHook(&tr)
	s := open(t, c)
	defer s.Close()
	ctx := context.Background()
	name := "rt/" + time.Now().Format(time.RFC3339Nano)
	keep := store.Retention{MaxAge: time.Hour, MaxCount: 2}
	for range 3 { // loads the scripts
		if _, err := s.AppendLog(ctx, name, []byte("e"), keep); err != nil {
			t.Fatal(err)
		}
		if _, err := s.ReadLog(ctx, name, 0, 10); err != nil {
			t.Fatal(err)
		}
	}
	before := tr.n.Load()
	if _, err := s.AppendLog(ctx, name, []byte("e"), keep); err != nil {
		t.Fatal(err)
	}
	if got := tr.n.Load() - before; got != 1 {
		t.Errorf("AppendLog took %d round trips, want 1", got)
	}
	before = tr.n.Load()
	if r, err := s.ReadLog(ctx, name, 0, 10); err != nil || len(r.Entries) != 2 || r.First != 3 {
		t.Fatalf("ReadLog: %+v, %v", r, err)
	}
	if got := tr.n.Load() - before; got != 1 {
		t.Errorf("ReadLog took %d round trips, want 1", got)
	}
}

// startLog appends data to a new log named after prefix and returns the log's name, the
// entry's position, and the log's keys: its stream and its head.
func startLog(t *testing.T, c *goredis.Client, s *redis.Store, prefix, data string) (name string, p store.LogPosition, stream, head string) {
	t.Helper()
	ctx := context.Background()
	name = prefix + time.Now().Format(time.RFC3339Nano)
	p, err := s.AppendLog(ctx, name, []byte(data), store.Retention{})
	if err != nil {
		t.Fatal(err)
	}
	keys, err := c.Keys(ctx, "svz:log:*:"+name+":*").Result()
	if err != nil || len(keys) != 2 {
		t.Fatalf("keys of the log: %v, %v", keys, err)
	}
	stream, head = keys[0], keys[1]
	if strings.HasSuffix(head, ":s") {
		stream, head = head, stream
	}
	return name, p, stream, head
}

// A log whose keys are deleted (a flushed server) starts again in a new epoch.
func TestLogRecreatedNewEpoch(t *testing.T) {
	c := client(t)
	s := open(t, c)
	defer s.Close()
	ctx := context.Background()
	name, a, stream, head := startLog(t, c, s, "flushed/", "1")
	if err := c.Del(ctx, stream, head).Err(); err != nil {
		t.Fatal(err)
	}
	b, err := s.AppendLog(ctx, name, []byte("2"), store.Retention{})
	if err != nil || b.Seq != 1 || b.Epoch == a.Epoch {
		t.Fatalf("append after the keys were deleted: %+v, %v; want position 1 in a new epoch", b, err)
	}
}

func BenchmarkLog(b *testing.B) {
	testenv.Need(b, testenv.RedisURL)
	var tr trips
	storetest.BenchmarkLog(b, func(b *testing.B) (store.Log, store.Log) {
		wc := client(b)
		wc.AddHook(&tr)
		w, r := open(b, wc), open(b, client(b))
		b.Cleanup(func() { _ = w.Close(); _ = r.Close() })
		return w, r
	}, tr.n.Load)
}

func TestUpdateAppendConformance(t *testing.T) {
	opts := options(t)
	storetest.RunUpdateAppend(t, func(t testing.TB, now func() time.Time) store.Store {
		return open(t, client(t), redis.WithClock(now))
	}, storetest.Network(storetest.Remote{Addr: opts.Addr,
		Open: func(t testing.TB, now func() time.Time, addr string, timeout time.Duration) store.Store {
			o := options(t)
			o.Addr = addr
			return open(t, goredis.NewClient(o), redis.WithClock(now), redis.WithTimeout(timeout))
		}}))
}

// TestLogOfAnOlderVersion: a log written before the byte bound (no b in its head, no s in its
// entries) counts those entries from 0: they go once the bound's worth of newer data is appended.
func TestLogOfAnOlderVersion(t *testing.T) {
	c := client(t)
	s := open(t, c)
	defer s.Close()
	ctx := context.Background()
	name, _, stream, head := startLog(t, c, s, "older/", "x")
	// Rewrite it as an older version left it: two entries without s, a head without b.
	if err := c.Del(ctx, stream).Err(); err != nil {
		t.Fatal(err)
	}
	for i, id := range []string{"1-0", "2-0"} {
		if err := c.XAdd(ctx, &goredis.XAddArgs{Stream: stream, ID: id, Values: []any{"d", "old", "t", 0, "k", "tok" + id}}).Err(); err != nil {
			t.Fatal(i, err)
		}
	}
	if err := c.HSet(ctx, head, "seq", 2).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.HDel(ctx, head, "b").Err(); err != nil {
		t.Fatal(err)
	}
	storetest.AppendsRead(t, s, name, "12345", store.Retention{MaxBytes: 10}, "1-3: old old 12345", "1-4: old old 12345 12345", "4-5: 12345 12345")
}
