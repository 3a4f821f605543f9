package storetest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/supervaize/svz/core/store"
)

// RunUpdateAppend runs the store.UpdateAppender conformance suite against the stores open
// returns, which must implement store.Store, store.Log and store.UpdateAppender; stores opened
// by one Opener share their data, as for RunLog (wrap a one-process store in OneInstance). With
// Network, it also loses the answer of an UpdateAppend and checks that the retry appends nothing
// twice.
func RunUpdateAppend(t *testing.T, open Opener, opts ...Option) {
	t.Helper()
	var cfg config
	for _, o := range opts {
		o(&cfg)
	}
	subtests := []struct {
		name string
		fn   func(t *testing.T, o uaOpener, c *Clock, key func(string) string)
	}{
		{"WritesBoth", testUAWritesBoth},
		{"Neither", testUANeither},
		{"Retention", testUARetention},
		{"Concurrent", testUAConcurrent},
		{"Wait", testUAWait},
		{"Closed", testUAClosed},
		{"LostAnswer", cfg.uaLostAnswer},
	}
	for _, st := range subtests {
		t.Run(st.name, func(t *testing.T) {
			c := NewClock()
			o := uaOpener{t: t, open: open, now: c.Now}
			prefix := "storetest/" + randomHex(8) + "/" + st.name + "/"
			st.fn(t, o, c, func(k string) string { return prefix + k })
		})
	}
}

// uaStore is what the suite needs of a store.
type uaStore interface {
	store.Store
	store.Log
	store.UpdateAppender
}

type uaOpener struct {
	t    *testing.T
	open Opener
	now  func() time.Time
}

func (o uaOpener) store() uaStore {
	o.t.Helper()
	s := o.open(o.t, o.now)
	o.t.Cleanup(func() { _ = s.Close() })
	return asUA(o.t, s)
}

func asUA(t testing.TB, s store.Store) uaStore {
	t.Helper()
	u, ok := s.(uaStore)
	if !ok {
		t.Fatalf("%T does not implement store.Log and store.UpdateAppender", s)
	}
	return u
}

func mustUpdateAppend(t testing.TB, s uaStore, key string, version uint64, value string, exp time.Time, name, data string, keep store.Retention) store.Record {
	t.Helper()
	r, err := s.UpdateAppend(context.Background(), key, version, []byte(value), exp, name, []byte(data), keep)
	if err != nil {
		t.Fatalf("UpdateAppend(%q, log %q): %v", key, name, err)
	}
	return r
}

// testUAWritesBoth: the record is updated as Update would, and the data is the log's next entry,
// numbered after plain appends and before the next one.
func testUAWritesBoth(t *testing.T, o uaOpener, c *Clock, key func(string) string) {
	s := o.store()
	k, n := key("k"), key("log")
	exp := c.Now().Add(time.Hour)
	created := mustCreate(t, s, k, "claim", exp)
	mustAppend(t, s, n, "before", store.Retention{})
	done := mustUpdateAppend(t, s, k, created.Version, "done", exp.Add(time.Hour), n, "event", store.Retention{})
	if done.Version == created.Version || done.Version == 0 {
		t.Errorf("UpdateAppend gave version %d after %d", done.Version, created.Version)
	}
	assertRecord(t, "UpdateAppend's answer", done, store.Record{Value: []byte("done"), Version: done.Version, ExpiresAt: exp.Add(time.Hour).UTC()})
	assertRecord(t, "Get after UpdateAppend", mustGet(t, s, k), done)
	after := mustAppend(t, s, n, "after", store.Retention{})
	if after.Seq != 3 {
		t.Errorf("the append after UpdateAppend got position %d, want 3", after.Seq)
	}
	r := mustRead(t, s, n, 0, 10)
	if got := entryData(r); got != "before,event,after" || !equalSeqs(seqs(r), seqRange(1, 3)) || r.Epoch != after.Epoch {
		t.Errorf("log after UpdateAppend: %s, data %s; want before,event,after at 1-3", describe(r), got)
	}
	// A log's first entry may come from UpdateAppend.
	n2 := key("new-log")
	mustUpdateAppend(t, s, k, done.Version, "again", exp, n2, "", store.Retention{})
	if r := mustRead(t, s, n2, 0, 10); r.Epoch == "" || !equalSeqs(seqs(r), []uint64{1}) || len(r.Entries[0].Data) != 0 {
		t.Errorf("a new log by UpdateAppend: %s", describe(r))
	}
}

// testUANeither: when the update cannot write, nothing is appended either.
func testUANeither(t *testing.T, o uaOpener, c *Clock, key func(string) string) {
	s := o.store()
	ctx := context.Background()
	n := key("log")
	exp := c.Now().Add(time.Minute)
	mustAppend(t, s, n, "first", store.Retention{})
	k := key("k")
	created := mustCreate(t, s, k, "claim", exp)
	expired := key("expired")
	old := mustCreate(t, s, expired, "x", c.Now().Add(time.Second))
	c.Advance(time.Second)
	for _, tc := range []struct {
		what    string
		key     string
		version uint64
		value   []byte
		name    string
		want    error
	}{
		{"another version", k, created.Version + 1, []byte("v"), n, store.ErrConflict},
		{"an absent key", key("absent"), created.Version, []byte("v"), n, store.ErrNotFound},
		{"an expired record", expired, old.Version, []byte("v"), n, store.ErrNotFound},
		{"a value too large", k, created.Version, make([]byte, s.MaxValueSize()+1), n, store.ErrTooLarge},
		{"an invalid log name", k, created.Version, []byte("v"), "", store.ErrInvalid},
		{"an invalid key", "", created.Version, []byte("v"), n, store.ErrInvalid},
	} {
		_, err := s.UpdateAppend(ctx, tc.key, tc.version, tc.value, exp, tc.name, []byte("event"), store.Retention{})
		if !errors.Is(err, tc.want) {
			t.Errorf("UpdateAppend with %s: %v, want %v", tc.what, err, tc.want)
		}
	}
	if r := mustRead(t, s, n, 0, 10); r.Last != 1 || entryData(r) != "first" {
		t.Errorf("log after failed UpdateAppends: %s; want only its first entry", describe(r))
	}
	assertRecord(t, "record after failed UpdateAppends", mustGet(t, s, k), created)
	if _, err := s.UpdateAppend(ctx, k, created.Version, []byte("v"), exp, n, []byte("event"), store.Retention{MaxCount: -1}); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("UpdateAppend with a negative retention: %v, want ErrInvalid", err)
	}
	assertRecord(t, "record after an invalid retention", mustGet(t, s, k), created)
}

// testUARetention: UpdateAppend applies the retention it is given, as AppendLog does.
func testUARetention(t *testing.T, o uaOpener, c *Clock, key func(string) string) {
	s := o.store()
	n := key("log")
	exp := c.Now().Add(time.Hour)
	keep := store.Retention{MaxCount: 2}
	for i := 1; i <= 5; i++ {
		k := key(fmt.Sprint(i))
		r := mustCreate(t, s, k, "claim", exp)
		mustUpdateAppend(t, s, k, r.Version, "done", exp, n, fmt.Sprint(i), keep)
	}
	if r := mustRead(t, s, n, 0, 10); !equalSeqs(seqs(r), []uint64{4, 5}) || r.First != 4 || entryData(r) != "4,5" {
		t.Errorf("after 5 UpdateAppends keeping 2: %s; want 4 and 5", describe(r))
	}
	// The byte bound too: entries of 8 bytes, 24 kept (three entries; an eighth of the bound is
	// 3 bytes, so a store that counts in eighths keeps three as well).
	nb := key("bytes")
	for i := 1; i <= 5; i++ {
		k := key("b" + fmt.Sprint(i))
		r := mustCreate(t, s, k, "claim", exp)
		mustUpdateAppend(t, s, k, r.Version, "done", exp, nb, fmt.Sprintf("event-%02d", i), store.Retention{MaxBytes: 24})
	}
	if r := mustRead(t, s, nb, 0, 10); !equalSeqs(seqs(r), []uint64{3, 4, 5}) || r.First != 3 || entryData(r) != "event-03,event-04,event-05" {
		t.Errorf("after 5 UpdateAppends of 8 bytes keeping 24 bytes: %s; want 3 to 5", describe(r))
	}
}

// testUAConcurrent: instances race UpdateAppends on one record and on records of their own,
// beside plain appends: exactly one racer on the shared record wins and appends, every winner's
// event is in the log once, and the positions are dense.
func testUAConcurrent(t *testing.T, o uaOpener, c *Clock, key func(string) string) {
	const instances, each = 3, 8
	stores := make([]uaStore, instances)
	for i := range stores {
		stores[i] = o.store()
	}
	n := key("log")
	exp := c.Now().Add(time.Hour)
	shared := mustCreate(t, stores[0], key("shared"), "claim", exp)
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		wins int
		errs []error
	)
	start := make(chan struct{})
	for i, s := range stores {
		wg.Go(func() {
			<-start
			_, err := s.UpdateAppend(context.Background(), key("shared"), shared.Version, []byte("done"), exp, n, []byte(fmt.Sprintf("shared-%d", i)), store.Retention{})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				wins++
			case !errors.Is(err, store.ErrConflict):
				errs = append(errs, err)
			}
		})
		for j := range each {
			wg.Go(func() {
				<-start
				k := key(fmt.Sprintf("own-%d-%d", i, j))
				r, err := s.Create(context.Background(), k, []byte("claim"), exp)
				if err == nil {
					_, err = s.UpdateAppend(context.Background(), k, r.Version, []byte("done"), exp, n, []byte(fmt.Sprintf("own-%d-%d", i, j)), store.Retention{})
				}
				if err == nil {
					_, err = s.AppendLog(context.Background(), n, []byte(fmt.Sprintf("plain-%d-%d", i, j)), store.Retention{})
				}
				if err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			})
		}
	}
	close(start)
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("concurrent calls failed: %v", errs)
	}
	if wins != 1 {
		t.Fatalf("%d UpdateAppends on one version won, want exactly 1", wins)
	}
	total := 1 + 2*instances*each
	r := mustRead(t, stores[1], n, 0, store.MaxLogRead)
	if !equalSeqs(seqs(r), seqRange(1, uint64(total))) {
		t.Fatalf("log after the race: %s; want 1-%d", describe(r), total)
	}
	seen := map[string]int{}
	for _, e := range r.Entries {
		seen[string(e.Data)]++
	}
	sharedEvents := 0
	for d, k := range seen {
		if k != 1 {
			t.Errorf("event %q is in the log %d times", d, k)
		}
		if strings.HasPrefix(d, "shared-") {
			sharedEvents++
		}
	}
	if sharedEvents != 1 || len(seen) != total {
		t.Errorf("%d distinct events, %d of the shared record; want %d and 1", len(seen), sharedEvents, total)
	}
}

// testUAWait: a waiter of another instance wakes for an UpdateAppend, as for an append.
func testUAWait(t *testing.T, o uaOpener, c *Clock, key func(string) string) {
	writer, reader := o.store(), o.store()
	n, k := key("log"), key("k")
	exp := c.Now().Add(time.Hour)
	mustAppend(t, writer, n, "first", store.Retention{})
	r := mustCreate(t, writer, k, "claim", exp)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	got := make(chan []store.LogEntry, 1)
	go func() { got <- Follow(ctx, reader, n, 1, 1) }()
	mustUpdateAppend(t, writer, k, r.Version, "done", exp, n, "event", store.Retention{})
	if es := <-got; len(es) != 1 || string(es[0].Data) != "event" || es[0].Seq != 2 {
		t.Fatalf("the follower of another instance read %v, want the event at 2", es)
	}
}

func testUAClosed(t *testing.T, o uaOpener, c *Clock, key func(string) string) {
	s := o.store()
	r := mustCreate(t, s, key("k"), "claim", c.Now().Add(time.Hour))
	_ = s.Close()
	_, err := s.UpdateAppend(context.Background(), key("k"), r.Version, []byte("v"), c.Now().Add(time.Hour), key("log"), []byte("e"), store.Retention{})
	if !errors.Is(err, store.ErrClosed) {
		t.Errorf("UpdateAppend after Close: %v, want ErrClosed", err)
	}
}

// uaLostAnswer: an UpdateAppend the server applied but whose answer was lost, sent again by the
// driver or the store, succeeds and appends once.
func (cfg *config) uaLostAnswer(t *testing.T, o uaOpener, c *Clock, key func(string) string) {
	r := cfg.remoteOrSkip(t)
	s := o.store()
	p := NewProxy(t, r.Addr)
	via := asUA(t, r.Open(t, c.Now, p.Addr(), time.Minute))
	t.Cleanup(func() { _ = via.Close() })
	n, k := key("log"), key("mine")
	exp := c.Now().Add(time.Hour)
	// Load scripts, prepare statements, open connections: the lost answer must be the write's.
	warm := mustCreate(t, via, key("warm-up"), "w", exp)
	mustUpdateAppend(t, via, key("warm-up"), warm.Version, "w2", exp, n, "warm-up", store.Retention{})
	created := mustCreate(t, via, k, "claim", exp)
	p.LoseAnswerTo(k)
	done, err := via.UpdateAppend(context.Background(), k, created.Version, []byte("done"), exp, n, []byte("event"), store.Retention{})
	if err != nil {
		t.Fatalf("UpdateAppend whose answer was lost: %v (a retry that finds its own version must succeed)", err)
	}
	if p.Lost() != 1 {
		t.Fatalf("%d answers lost, want 1: the proxy did not see the request", p.Lost())
	}
	assertRecord(t, "Get after an UpdateAppend whose answer was lost", mustGet(t, s, k),
		store.Record{Value: []byte("done"), Version: done.Version, ExpiresAt: exp.UTC()})
	if got := mustRead(t, s, n, 0, 10); entryData(got) != "warm-up,event" || got.Last != 2 {
		t.Errorf("log after a lost answer: %s, data %s; want warm-up,event", describe(got), entryData(got))
	}
}

// entryData joins the data of r's entries with commas.
func entryData(r store.LogRange) string {
	parts := make([]string, len(r.Entries))
	for i, e := range r.Entries {
		parts[i] = string(e.Data)
	}
	return strings.Join(parts, ",")
}
