// Package storetest is the conformance suite every store.Store implementation runs: the same
// subtests against memory, bbolt, DynamoDB, PostgreSQL and Redis, so callers can rely on one
// behaviour whatever the backend. It also holds the shared benchmarks.
package storetest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/supervaize/svz/core/store"
)

// Opener returns a ready Store whose clock is now. The suite calls it once per subtest and closes
// the store itself; stores opened by one Opener may share their backing table or database, since
// the suite gives every subtest its own keys.
type Opener func(t testing.TB, now func() time.Time) store.Store

// Racers is the number of goroutines that race on one key in the concurrency subtests.
const Racers = 48

// Option tells Run what it cannot find out about a backend: how it is reached.
type Option func(*config)

type config struct {
	remote    *Remote
	inProcess string
}

// Remote describes a backend reached over the network, so that Run can put a Proxy between a
// store and its server and check the store's behaviour under network faults.
type Remote struct {
	// Addr is the host:port of the server.
	Addr string
	// Open opens a store like the Opener, but connecting to addr instead of Addr, and bounding
	// every call by timeout.
	Open func(t testing.TB, now func() time.Time, addr string, timeout time.Duration) store.Store
}

// Network declares a backend reached over the network (see Remote).
func Network(r Remote) Option { return func(c *config) { c.remote = &r } }

// InProcess declares a backend with no network between a store and its data, so that no answer
// can be lost and no server can stop answering; why says so, in a sentence.
func InProcess(why string) Option { return func(c *config) { c.inProcess = why } }

// Run runs the conformance suite against the stores open returns. Every backend must say how it
// is reached (Network or InProcess): the network subtests fail otherwise.
func Run(t *testing.T, open Opener, opts ...Option) {
	t.Helper()
	var cfg config
	for _, o := range opts {
		o(&cfg)
	}
	subtests := []struct {
		name string
		fn   func(t *testing.T, s store.Store, c *Clock, key func(string) string)
	}{
		{"MissingKey", testMissingKey},
		{"CreateGet", testCreateGet},
		{"CreateLiveFails", testCreateLiveFails},
		{"CreateReplacesExpired", testCreateReplacesExpired},
		{"Update", testUpdate},
		{"UpdateConflict", testUpdateConflict},
		{"Delete", testDelete},
		{"DeleteConflict", testDeleteConflict},
		{"VersionsNeverRepeat", testVersionsNeverRepeat},
		{"ExpiryBoundary", testExpiryBoundary},
		{"ConcurrentCreate", testConcurrentCreate},
		{"ConcurrentCreateOverExpired", testConcurrentCreateOverExpired},
		{"ConcurrentUpdate", testConcurrentUpdate},
		{"LargeValues", testLargeValues},
		{"EmptyAndBinaryValues", testEmptyAndBinaryValues},
		{"KeysAreExact", testKeysAreExact},
		{"InvalidArguments", testInvalidArguments},
		{"ValuesAreCopied", testValuesAreCopied},
		{"ContextCanceled", testContextCanceled},
		{"Closed", testClosed},
		{"NeverExpires", testNeverExpires},
		{"ListPages", testListPages},
		{"ListPrefixBoundaries", testListPrefixBoundaries},
		{"ListSkipsExpired", testListSkipsExpired},
		{"ListLargeValues", testListLargeValues},
		{"ListInvalidArguments", testListInvalidArguments},
		{"ListClosed", testListClosed},
		{"LostAnswer", cfg.lostAnswer},
		{"Outage", cfg.outage},
	}
	for _, st := range subtests {
		t.Run(st.name, func(t *testing.T) {
			c := NewClock()
			s := open(t, c.Now)
			t.Cleanup(func() { _ = s.Close() })
			prefix := "storetest/" + randomHex(8) + "/" + st.name + "/"
			st.fn(t, s, c, func(k string) string { return prefix + k })
		})
	}
}

// Clock is a manual clock for crossing expiry boundaries exactly. It starts at the current time
// truncated to the millisecond, so servers that also keep a sweeper TTL see sane values.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock returns a Clock at the current time, truncated to the millisecond.
func NewClock() *Clock { return &Clock{now: time.Now().Truncate(time.Millisecond)} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Set moves the clock to t.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) { c.Set(c.Now().Add(d)) }

func testMissingKey(t *testing.T, s store.Store, c *Clock, key func(string) string) {
	ctx := context.Background()
	k := key("absent")
	if _, err := s.Get(ctx, k); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Get(absent) error = %v, want ErrNotFound", err)
	}
	if _, err := s.Update(ctx, k, 1, []byte("x"), c.Now().Add(time.Minute)); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Update(absent) error = %v, want ErrNotFound", err)
	}
	if err := s.Delete(ctx, k, 1); err != nil {
		t.Errorf("Delete(absent) error = %v, want nil", err)
	}
	if _, err := s.Get(ctx, k); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Get(absent) after Update and Delete: error = %v, want ErrNotFound", err)
	}
}

func testCreateGet(t *testing.T, s store.Store, c *Clock, key func(string) string) {
	ctx := context.Background()
	k := key("k")
	exp := c.Now().Add(90*time.Second + 1500*time.Microsecond) // sub-millisecond part is dropped
	created := mustCreate(t, s, k, "hello", exp)
	if created.Version == 0 {
		t.Error("Create returned version 0")
	}
	want := store.Record{Value: []byte("hello"), Version: created.Version, ExpiresAt: exp.Truncate(time.Millisecond).UTC()}
	assertRecord(t, "Create", created, want)
	got, err := s.Get(ctx, k)
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	assertRecord(t, "Get", got, want)
}

func testCreateLiveFails(t *testing.T, s store.Store, c *Clock, key func(string) string) {
	ctx := context.Background()
	k := key("k")
	first := mustCreate(t, s, k, "first", c.Now().Add(time.Minute))
	c.Advance(59 * time.Second)
	existing, err := s.Create(ctx, k, []byte("second"), c.Now().Add(time.Hour))
	if !errors.Is(err, store.ErrExists) {
		t.Fatalf("second Create error = %v, want ErrExists", err)
	}
	assertRecord(t, "Create's existing record", existing, first)
	got, err := s.Get(ctx, k)
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	assertRecord(t, "Get after failed Create", got, first)
}

func testCreateReplacesExpired(t *testing.T, s store.Store, c *Clock, key func(string) string) {
	k := key("k")
	old := mustCreate(t, s, k, "old", c.Now().Add(time.Second))
	c.Advance(time.Second)
	replaced := mustCreate(t, s, k, "new", c.Now().Add(time.Minute))
	if replaced.Version == old.Version {
		t.Errorf("replacing an expired record kept version %d", old.Version)
	}
	got := mustGet(t, s, k)
	assertRecord(t, "Get after replacing", got, replaced)
	if string(got.Value) != "new" {
		t.Errorf("value = %q, want %q", got.Value, "new")
	}
}

func testUpdate(t *testing.T, s store.Store, c *Clock, key func(string) string) {
	ctx := context.Background()
	k := key("k")
	created := mustCreate(t, s, k, "v1", c.Now().Add(time.Second))
	newExp := c.Now().Add(time.Hour)
	updated, err := s.Update(ctx, k, created.Version, []byte("v2"), newExp)
	if err != nil {
		t.Fatalf("Update: %v", err)
	}
	if updated.Version == created.Version || updated.Version == 0 {
		t.Errorf("Update version = %d, want a new non-zero version (was %d)", updated.Version, created.Version)
	}
	want := store.Record{Value: []byte("v2"), Version: updated.Version, ExpiresAt: newExp.UTC()}
	assertRecord(t, "Update", updated, want)
	c.Advance(time.Second) // past the first expiry: Update moved it
	assertRecord(t, "Get after Update", mustGet(t, s, k), want)

	c.Advance(time.Hour)
	if _, err := s.Update(ctx, k, updated.Version, []byte("v3"), c.Now().Add(time.Hour)); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Update of an expired record: error = %v, want ErrNotFound", err)
	}
	if _, err := s.Get(ctx, k); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Get after Update of an expired record: error = %v, want ErrNotFound", err)
	}
}

func testUpdateConflict(t *testing.T, s store.Store, c *Clock, key func(string) string) {
	ctx := context.Background()
	k := key("k")
	created := mustCreate(t, s, k, "v1", c.Now().Add(time.Minute))
	updated, err := s.Update(ctx, k, created.Version, []byte("v2"), c.Now().Add(time.Minute))
	if err != nil {
		t.Fatalf("Update: %v", err)
	}
	if _, err := s.Update(ctx, k, created.Version, []byte("stale"), c.Now().Add(time.Minute)); !errors.Is(err, store.ErrConflict) {
		t.Errorf("Update with a stale version: error = %v, want ErrConflict", err)
	}
	assertRecord(t, "Get after conflicting Update", mustGet(t, s, k), updated)
}

func testDelete(t *testing.T, s store.Store, c *Clock, key func(string) string) {
	ctx := context.Background()
	k := key("k")
	created := mustCreate(t, s, k, "v", c.Now().Add(time.Minute))
	if err := s.Delete(ctx, k, created.Version); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if _, err := s.Get(ctx, k); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Get after Delete: error = %v, want ErrNotFound", err)
	}
	if err := s.Delete(ctx, k, created.Version); err != nil {
		t.Errorf("second Delete: error = %v, want nil", err)
	}

	// An expired record is gone whatever version the caller holds.
	expired := key("expired")
	mustCreate(t, s, expired, "v", c.Now().Add(time.Second))
	c.Advance(time.Second)
	if err := s.Delete(ctx, expired, 12345); err != nil {
		t.Errorf("Delete of an expired record with another version: error = %v, want nil", err)
	}
	if _, err := s.Get(ctx, expired); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Get of an expired, deleted record: error = %v, want ErrNotFound", err)
	}
}

func testDeleteConflict(t *testing.T, s store.Store, c *Clock, key func(string) string) {
	ctx := context.Background()
	k := key("k")
	created := mustCreate(t, s, k, "v1", c.Now().Add(time.Minute))
	updated, err := s.Update(ctx, k, created.Version, []byte("v2"), c.Now().Add(time.Minute))
	if err != nil {
		t.Fatalf("Update: %v", err)
	}
	if err := s.Delete(ctx, k, created.Version); !errors.Is(err, store.ErrConflict) {
		t.Errorf("Delete with a stale version: error = %v, want ErrConflict", err)
	}
	assertRecord(t, "Get after conflicting Delete", mustGet(t, s, k), updated)
}

// testVersionsNeverRepeat guards compare-and-swap against ABA: a version held from before a delete
// must not match the record created after it.
func testVersionsNeverRepeat(t *testing.T, s store.Store, c *Clock, key func(string) string) {
	ctx := context.Background()
	k := key("k")
	seen := make(map[uint64]bool)
	var prev store.Record
	for i := range 20 {
		if i > 0 {
			if err := s.Delete(ctx, k, prev.Version); err != nil {
				t.Fatalf("Delete %d: %v", i, err)
			}
		}
		r := mustCreate(t, s, k, "v", c.Now().Add(time.Minute))
		if seen[r.Version] {
			t.Fatalf("version %d reused after delete and re-create", r.Version)
		}
		seen[r.Version] = true
		if i > 0 {
			if _, err := s.Update(ctx, k, prev.Version, []byte("aba"), c.Now().Add(time.Minute)); !errors.Is(err, store.ErrConflict) {
				t.Fatalf("Update with the version of a deleted record: error = %v, want ErrConflict", err)
			}
		}
		prev = r
	}
}

func testExpiryBoundary(t *testing.T, s store.Store, c *Clock, key func(string) string) {
	ctx := context.Background()
	start := c.Now()
	expiry := start.Add(10 * time.Second)
	get, update, del, create := key("get"), key("update"), key("delete"), key("create")
	var recs [4]store.Record
	for i, k := range []string{get, update, del, create} {
		recs[i] = mustCreate(t, s, k, "v", expiry)
	}

	c.Set(expiry.Add(-time.Millisecond))
	assertRecord(t, "Get 1 ms before expiry", mustGet(t, s, get), recs[0])
	if _, err := s.Create(ctx, create, []byte("x"), expiry.Add(time.Hour)); !errors.Is(err, store.ErrExists) {
		t.Errorf("Create 1 ms before expiry: error = %v, want ErrExists", err)
	}

	c.Set(expiry)
	if _, err := s.Get(ctx, get); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Get at expiry: error = %v, want ErrNotFound", err)
	}
	if _, err := s.Update(ctx, update, recs[1].Version, []byte("x"), expiry.Add(time.Hour)); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Update at expiry: error = %v, want ErrNotFound", err)
	}
	if err := s.Delete(ctx, del, recs[2].Version+1); err != nil {
		t.Errorf("Delete at expiry with another version: error = %v, want nil", err)
	}
	if _, err := s.Create(ctx, create, []byte("x"), expiry.Add(time.Hour)); err != nil {
		t.Errorf("Create at expiry: error = %v, want nil", err)
	}
}

func testConcurrentCreate(t *testing.T, s store.Store, c *Clock, key func(string) string) {
	raceCreate(t, s, key("k"), c.Now().Add(time.Minute))
}

func testConcurrentCreateOverExpired(t *testing.T, s store.Store, c *Clock, key func(string) string) {
	k := key("k")
	mustCreate(t, s, k, "expired", c.Now().Add(time.Second))
	c.Advance(2 * time.Second)
	raceCreate(t, s, k, c.Now().Add(time.Minute))
}

// raceCreate starts Racers goroutines creating k at once and checks that exactly one wins and the
// others see the winner's record.
func raceCreate(t *testing.T, s store.Store, k string, exp time.Time) {
	t.Helper()
	type outcome struct {
		rec store.Record
		err error
	}
	out := make([]outcome, Racers)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range Racers {
		wg.Go(func() {
			<-start
			rec, err := s.Create(context.Background(), k, []byte{byte(i)}, exp)
			out[i] = outcome{rec, err}
		})
	}
	close(start)
	wg.Wait()

	winner := -1
	for i, o := range out {
		switch {
		case o.err == nil && winner >= 0:
			t.Fatalf("goroutines %d and %d both created %q", winner, i, k)
		case o.err == nil:
			winner = i
		case !errors.Is(o.err, store.ErrExists):
			t.Fatalf("goroutine %d: Create error = %v, want nil or ErrExists", i, o.err)
		}
	}
	if winner < 0 {
		t.Fatalf("no goroutine created %q", k)
	}
	want := store.Record{Value: []byte{byte(winner)}, Version: out[winner].rec.Version, ExpiresAt: exp.UTC()}
	for i, o := range out {
		assertRecord(t, "goroutine "+strconv.Itoa(i)+" record", o.rec, want)
	}
	assertRecord(t, "Get after the race", mustGet(t, s, k), want)
}

func testConcurrentUpdate(t *testing.T, s store.Store, c *Clock, key func(string) string) {
	k := key("k")
	created := mustCreate(t, s, k, "start", c.Now().Add(time.Minute))
	var wins, conflicts atomic.Int32
	errs := make(chan error, Racers)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range Racers {
		wg.Go(func() {
			<-start
			_, err := s.Update(context.Background(), k, created.Version, []byte{byte(i)}, c.Now().Add(time.Minute))
			switch {
			case err == nil:
				wins.Add(1)
			case errors.Is(err, store.ErrConflict):
				conflicts.Add(1)
			default:
				errs <- err
			}
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("Update error = %v, want nil or ErrConflict", err)
	}
	if wins.Load() != 1 || conflicts.Load() != Racers-1 {
		t.Errorf("wins = %d, conflicts = %d; want 1 and %d", wins.Load(), conflicts.Load(), Racers-1)
	}
}

func testLargeValues(t *testing.T, s store.Store, c *Clock, key func(string) string) {
	ctx := context.Background()
	limit := s.MaxValueSize()
	if limit < 64<<10 {
		t.Fatalf("MaxValueSize() = %d, want at least 64 KiB", limit)
	}
	atLimit := randomBytes(limit)
	k := key("at-limit")
	created, err := s.Create(ctx, k, atLimit, c.Now().Add(time.Minute))
	if err != nil {
		t.Fatalf("Create with %d bytes (the limit): %v", limit, err)
	}
	if got := mustGet(t, s, k); !bytes.Equal(got.Value, atLimit) {
		t.Fatalf("value of %d bytes did not round-trip (got %d bytes)", limit, len(got.Value))
	}

	over := randomBytes(limit + 1)
	if _, err := s.Create(ctx, key("over-limit"), over, c.Now().Add(time.Minute)); !errors.Is(err, store.ErrTooLarge) {
		t.Errorf("Create with %d bytes: error = %v, want ErrTooLarge", limit+1, err)
	}
	if _, err := s.Get(ctx, key("over-limit")); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Get after a too large Create: error = %v, want ErrNotFound", err)
	}
	if _, err := s.Update(ctx, k, created.Version, over, c.Now().Add(time.Minute)); !errors.Is(err, store.ErrTooLarge) {
		t.Errorf("Update with %d bytes: error = %v, want ErrTooLarge", limit+1, err)
	}
	if got := mustGet(t, s, k); got.Version != created.Version || !bytes.Equal(got.Value, atLimit) {
		t.Errorf("a too large Update changed the record")
	}
}

func testEmptyAndBinaryValues(t *testing.T, s store.Store, c *Clock, key func(string) string) {
	ctx := context.Background()
	values := map[string][]byte{
		"nil":    nil,
		"empty":  {},
		"binary": {0, 0xff, 0xfe, 0, '\n', 0x80, 'a'},
		"json":   []byte(`{"status":"ok","effects":[]}`),
	}
	for name, v := range values {
		k := key(name)
		created, err := s.Create(ctx, k, v, c.Now().Add(time.Minute))
		if err != nil {
			t.Fatalf("Create(%s): %v", name, err)
		}
		if got := mustGet(t, s, k); !bytes.Equal(got.Value, v) {
			t.Errorf("%s value = %q, want %q", name, got.Value, v)
		}
		updated, err := s.Update(ctx, k, created.Version, v, c.Now().Add(time.Minute))
		if err != nil {
			t.Fatalf("Update(%s): %v", name, err)
		}
		if !bytes.Equal(updated.Value, v) {
			t.Errorf("%s updated value = %q, want %q", name, updated.Value, v)
		}
	}
}

func testKeysAreExact(t *testing.T, s store.Store, c *Clock, key func(string) string) {
	keys := []string{"a", "A", "a ", "a/b", "a:b", "a*", "a?", "{a}", "%61", "é", "e\u0301", "日本",
		"key\twith\nspace", `a"b'c\`, "a\x01", strings.Repeat("z", store.MaxKeyLen-len(key("")))}
	recs := make(map[string]store.Record, len(keys))
	for i, k := range keys {
		recs[k] = mustCreate(t, s, key(k), "value-"+strconv.Itoa(i), c.Now().Add(time.Minute))
	}
	for _, k := range keys {
		assertRecord(t, "Get("+k+")", mustGet(t, s, key(k)), recs[k])
	}
}

func testInvalidArguments(t *testing.T, s store.Store, c *Clock, key func(string) string) {
	ctx := context.Background()
	exp := c.Now().Add(time.Minute)
	for name, k := range map[string]string{
		"empty":    "",
		"too long": strings.Repeat("k", store.MaxKeyLen+1),
		"not utf8": "k\xff",
		"nul":      "k\x00",
	} {
		if _, err := s.Get(ctx, k); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("Get(%s key): error = %v, want ErrInvalid", name, err)
		}
		if _, err := s.Create(ctx, k, nil, exp); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("Create(%s key): error = %v, want ErrInvalid", name, err)
		}
		if _, err := s.Update(ctx, k, 1, nil, exp); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("Update(%s key): error = %v, want ErrInvalid", name, err)
		}
		if err := s.Delete(ctx, k, 1); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("Delete(%s key): error = %v, want ErrInvalid", name, err)
		}
	}
	k := key("k")
	for name, e := range map[string]time.Time{
		"now":         c.Now(),
		"past":        c.Now().Add(-time.Hour),
		"same millis": c.Now().Add(999 * time.Microsecond),
	} {
		if _, err := s.Create(ctx, k, nil, e); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("Create with expiry %s: error = %v, want ErrInvalid", name, err)
		}
	}
	created := mustCreate(t, s, k, "v", exp)
	if _, err := s.Update(ctx, k, created.Version, nil, c.Now()); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("Update with expiry now: error = %v, want ErrInvalid", err)
	}
	assertRecord(t, "Get after invalid Update", mustGet(t, s, k), created)
}

func testValuesAreCopied(t *testing.T, s store.Store, c *Clock, key func(string) string) {
	k := key("k")
	in := []byte("original")
	created, err := s.Create(context.Background(), k, in, c.Now().Add(time.Minute))
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	in[0] = 'X'
	created.Value[1] = 'Y'
	got := mustGet(t, s, k)
	got.Value[2] = 'Z'
	if again := mustGet(t, s, k); string(again.Value) != "original" {
		t.Errorf("value = %q after callers modified their slices, want %q", again.Value, "original")
	}
}

func testContextCanceled(t *testing.T, s store.Store, c *Clock, key func(string) string) {
	k := key("k")
	live := mustCreate(t, s, k, "v", c.Now().Add(time.Minute))
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	expired, cancel2 := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel2()
	for _, tc := range []struct {
		ctx  context.Context
		want error
	}{{canceled, context.Canceled}, {expired, context.DeadlineExceeded}} {
		if _, err := s.Get(tc.ctx, k); !errors.Is(err, tc.want) {
			t.Errorf("Get: error = %v, want %v", err, tc.want)
		}
		if _, err := s.Create(tc.ctx, key("new"), []byte("v"), c.Now().Add(time.Minute)); !errors.Is(err, tc.want) {
			t.Errorf("Create: error = %v, want %v", err, tc.want)
		}
		if _, err := s.Update(tc.ctx, k, live.Version, []byte("changed"), c.Now().Add(time.Minute)); !errors.Is(err, tc.want) {
			t.Errorf("Update: error = %v, want %v", err, tc.want)
		}
		if err := s.Delete(tc.ctx, k, live.Version); !errors.Is(err, tc.want) {
			t.Errorf("Delete: error = %v, want %v", err, tc.want)
		}
	}
	assertRecord(t, "Get after canceled calls", mustGet(t, s, k), live)
	if _, err := s.Get(context.Background(), key("new")); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a canceled Create wrote a record: Get error = %v, want ErrNotFound", err)
	}
}

func testClosed(t *testing.T, s store.Store, c *Clock, key func(string) string) {
	ctx := context.Background()
	k := key("k")
	live := mustCreate(t, s, k, "v", c.Now().Add(time.Minute))
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := s.Get(ctx, k); !errors.Is(err, store.ErrClosed) {
		t.Errorf("Get after Close: error = %v, want ErrClosed", err)
	}
	if _, err := s.Create(ctx, key("new"), nil, c.Now().Add(time.Minute)); !errors.Is(err, store.ErrClosed) {
		t.Errorf("Create after Close: error = %v, want ErrClosed", err)
	}
	if _, err := s.Update(ctx, k, live.Version, nil, c.Now().Add(time.Minute)); !errors.Is(err, store.ErrClosed) {
		t.Errorf("Update after Close: error = %v, want ErrClosed", err)
	}
	if err := s.Delete(ctx, k, live.Version); !errors.Is(err, store.ErrClosed) {
		t.Errorf("Delete after Close: error = %v, want ErrClosed", err)
	}
	if s.MaxValueSize() <= 0 {
		t.Errorf("MaxValueSize() after Close = %d, want the limit", s.MaxValueSize())
	}
}

func mustCreate(t *testing.T, s store.Store, k, v string, exp time.Time) store.Record {
	t.Helper()
	r, err := s.Create(context.Background(), k, []byte(v), exp)
	if err != nil {
		t.Fatalf("Create(%q): %v", k, err)
	}
	return r
}

func mustGet(t *testing.T, s store.Store, k string) store.Record {
	t.Helper()
	r, err := s.Get(context.Background(), k)
	if err != nil {
		t.Fatalf("Get(%q): %v", k, err)
	}
	return r
}

func assertRecord(t *testing.T, what string, got, want store.Record) {
	t.Helper()
	if !bytes.Equal(got.Value, want.Value) || got.Version != want.Version || !got.ExpiresAt.Equal(want.ExpiresAt) {
		t.Errorf("%s = {value %q, version %d, expires %s}, want {value %q, version %d, expires %s}", what,
			trim(got.Value), got.Version, got.ExpiresAt.Format(time.RFC3339Nano),
			trim(want.Value), want.Version, want.ExpiresAt.Format(time.RFC3339Nano))
	}
	if got.ExpiresAt.Location() != time.UTC {
		t.Errorf("%s expiry is in %s, want UTC", what, got.ExpiresAt.Location())
	}
}

func trim(b []byte) []byte {
	if len(b) > 40 {
		return append(b[:40:40], "..."...)
	}
	return b
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return b
}

func randomHex(n int) string { return hex.EncodeToString(randomBytes(n)) }
