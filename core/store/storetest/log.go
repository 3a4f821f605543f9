package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/supervaize/svz/core/store"
)

// RunLog runs the store.Log conformance suite against the stores open returns, which must
// implement store.Log. Stores opened by one Opener must share their backing data (one file, table
// or database), as instances of one controller do: the suite opens several to play several
// instances, each subtest on logs of its own.
func RunLog(t *testing.T, open Opener, opts ...LogOption) {
	t.Helper()
	var lo logOptions
	for _, o := range opts {
		o(&lo)
	}
	subtests := []struct {
		name string
		fn   func(t *testing.T, o logOpener, c *Clock, name func(string) string)
	}{
		{"Empty", testLogEmpty},
		{"AppendRead", testLogAppendRead},
		{"DataIsCopied", testLogDataIsCopied},
		{"LogsAreSeparate", testLogsAreSeparate},
		{"RetentionCount", testLogRetentionCount},
		{"RetentionAge", testLogRetentionAge},
		{"RetentionBytes", testLogRetentionBytes},
		{"ReadAcrossRetentionEdge", testLogAcrossRetentionEdge},
		{"Wait", testLogWait},
		{"ConcurrentAppends", testLogConcurrentAppends},
		{"InvalidArguments", testLogInvalidArguments},
		{"Closed", testLogClosed},
	}
	for _, st := range subtests {
		t.Run(st.name, func(t *testing.T) {
			c := NewClock()
			o := logOpener{t: t, open: open, now: c.Now, logOptions: lo}
			prefix := "storetest/" + randomHex(8) + "/" + st.name + "/"
			st.fn(t, o, c, func(n string) string { return prefix + n })
		})
	}
}

// LogOption adapts the log suite to a backend.
type LogOption func(*logOptions)

type logOptions struct{ sealsGaps, bytesInEighths bool }

// SealsGaps accepts positions skipped by a store's recovery of appends that died half-way (and
// of appends an emulator failed to make atomic): entries must still all be there, in order, but
// their positions need not be dense.
func SealsGaps() LogOption { return func(o *logOptions) { o.sealsGaps = true } }

// BytesInEighths accepts a byte bound applied in eighths of MaxBytes (store.Retention): an entry
// may stay until the entries after it hold MaxBytes and an eighth, never go while it and they
// hold MaxBytes or less.
func BytesInEighths() LogOption { return func(o *logOptions) { o.bytesInEighths = true } }

// logOpener opens stores as store.Log, each closed when the subtest ends.
type logOpener struct {
	t    *testing.T
	open Opener
	now  func() time.Time
	logOptions
}

func (o logOpener) log() store.Log {
	o.t.Helper()
	return o.logAt(o.now)
}

// logAt opens a store whose clock is now.
func (o logOpener) logAt(now func() time.Time) store.Log {
	o.t.Helper()
	s := o.open(o.t, now)
	o.t.Cleanup(func() { _ = s.Close() })
	l, ok := s.(store.Log)
	if !ok {
		o.t.Fatalf("%T does not implement store.Log", s)
	}
	return l
}

// AsLog returns s as a store.Log, failing t when it is not one.
func AsLog(t testing.TB, s store.Store) store.Log {
	t.Helper()
	l, ok := s.(store.Log)
	if !ok {
		t.Fatalf("%T does not implement store.Log", s)
	}
	return l
}

func mustAppend(t testing.TB, l store.Log, name, data string, keep store.Retention) store.LogPosition {
	t.Helper()
	p, err := l.AppendLog(context.Background(), name, []byte(data), keep)
	if err != nil {
		t.Fatalf("AppendLog(%q, %q): %v", name, data, err)
	}
	return p
}

// AppendsRead appends data to the log name with keep, once per want, and fails t unless the log
// then reads as want (Span): how a backend's own test follows a log an older version wrote.
func AppendsRead(t testing.TB, l store.Log, name, data string, keep store.Retention, wants ...string) {
	t.Helper()
	for i, want := range wants {
		mustAppend(t, l, name, data, keep)
		if got := Span(mustRead(t, l, name, 0, store.MaxLogRead)); got != want {
			t.Fatalf("after append %d of %q: %s, want %s", i+1, data, got, want)
		}
	}
}

// Span is what a read of a log found: "first-last:", then each entry's data after a space.
func Span(r store.LogRange) string {
	s := fmt.Sprintf("%d-%d:", r.First, r.Last)
	for _, e := range r.Entries {
		s += " " + string(e.Data)
	}
	return s
}

func mustRead(t testing.TB, l store.Log, name string, after uint64, limit int) store.LogRange {
	t.Helper()
	r, err := l.ReadLog(context.Background(), name, after, limit)
	if err != nil {
		t.Fatalf("ReadLog(%q, after %d, limit %d): %v", name, after, limit, err)
	}
	checkRange(t, r, after)
	return r
}

// checkRange asserts what every range promises whatever the log holds.
func checkRange(t testing.TB, r store.LogRange, after uint64) {
	t.Helper()
	if r.First > r.Last+1 || r.First == 0 {
		t.Errorf("range bounds First %d, Last %d: want 1 <= First <= Last+1", r.First, r.Last)
	}
	if r.Through < after {
		t.Errorf("Through %d is before the position read from (%d)", r.Through, after)
	}
	prev := after
	for _, e := range r.Entries {
		if e.Seq <= prev || e.Seq < r.First || e.Seq > r.Through {
			t.Errorf("entry %d out of place: after %d, previous %d, First %d, Through %d", e.Seq, after, prev, r.First, r.Through)
		}
		prev = e.Seq
	}
}

// describe renders a range for failure messages.
func describe(r store.LogRange) string {
	var b strings.Builder
	fmt.Fprintf(&b, "epoch %q first %d last %d through %d [", r.Epoch, r.First, r.Last, r.Through)
	for i, e := range r.Entries {
		if i > 0 {
			b.WriteString(" ")
		}
		fmt.Fprintf(&b, "%d:%s", e.Seq, e.Data)
	}
	b.WriteString("]")
	return b.String()
}

func seqs(r store.LogRange) []uint64 {
	out := make([]uint64, len(r.Entries))
	for i, e := range r.Entries {
		out[i] = e.Seq
	}
	return out
}

func seqRange(from, to uint64) []uint64 {
	var out []uint64
	for s := from; s <= to; s++ {
		out = append(out, s)
	}
	return out
}

func equalSeqs(a, b []uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

var keepAll = store.Retention{}

func testLogEmpty(t *testing.T, o logOpener, _ *Clock, name func(string) string) {
	l := o.log()
	for _, after := range []uint64{0, 5} {
		r := mustRead(t, l, name("never"), after, 10)
		if r.Epoch != "" || r.First != 1 || r.Last != 0 || len(r.Entries) != 0 || r.Through != after {
			t.Errorf("a log never appended to, read after %d: %s; want epoch \"\", first 1, last 0, through %d", after, describe(r), after)
		}
	}
}

func testLogAppendRead(t *testing.T, o logOpener, c *Clock, name func(string) string) {
	l := o.log()
	n := name("log")
	var ps []store.LogPosition
	for i, d := range []string{"one", "two", "three"} {
		ps = append(ps, mustAppend(t, l, n, d, keepAll))
		if ps[i].Seq != uint64(i+1) || ps[i].Epoch == "" || ps[i].Epoch != ps[0].Epoch {
			t.Fatalf("append %d at %+v (first at %+v): want positions 1, 2, 3 in one non-empty epoch", i+1, ps[i], ps[0])
		}
		c.Advance(time.Second)
	}
	start := c.Now().Add(-3 * time.Second)
	r := mustRead(t, l, n, 0, 10)
	if r.Epoch != ps[0].Epoch || r.First != 1 || r.Last != 3 || r.Through != 3 || len(r.Entries) != 3 {
		t.Fatalf("read all: %s", describe(r))
	}
	for i, e := range r.Entries {
		want := []string{"one", "two", "three"}[i]
		if string(e.Data) != want || !e.At.Equal(start.Add(time.Duration(i)*time.Second)) {
			t.Errorf("entry %d: %q at %s, want %q at %s", e.Seq, e.Data, e.At, want, start.Add(time.Duration(i)*time.Second))
		}
	}
	for _, tc := range []struct {
		after   uint64
		limit   int
		seqs    []uint64
		through uint64
	}{
		{1, 1, []uint64{2}, 2},
		{1, 10, []uint64{2, 3}, 3},
		{0, 2, []uint64{1, 2}, 2},
		{3, 10, nil, 3},
		{7, 10, nil, 7}, // ahead of the log: nothing, and the position is kept
		{math.MaxUint64, 10, nil, math.MaxUint64},
		{1, 0, nil, 1}, // bounds only
	} {
		r := mustRead(t, l, n, tc.after, tc.limit)
		if !equalSeqs(seqs(r), tc.seqs) || r.Through != tc.through || r.First != 1 || r.Last != 3 {
			t.Errorf("read after %d limit %d: %s; want %v through %d", tc.after, tc.limit, describe(r), tc.seqs, tc.through)
		}
	}
	// Another instance of the store sees the same log.
	if r := mustRead(t, o.log(), n, 0, 10); r.Epoch != ps[0].Epoch || r.Last != 3 || len(r.Entries) != 3 {
		t.Errorf("read from another instance: %s", describe(r))
	}
	if p := mustAppend(t, o.log(), n, "four", keepAll); p != (store.LogPosition{Epoch: ps[0].Epoch, Seq: 4}) {
		t.Errorf("append from another instance at %+v, want position 4 of epoch %s", p, ps[0].Epoch)
	}
	// An empty entry reads back empty, not absent (nil).
	mustAppend(t, l, n, "", keepAll)
	if r := mustRead(t, l, n, 4, 10); len(r.Entries) != 1 || r.Entries[0].Data == nil || len(r.Entries[0].Data) != 0 {
		t.Errorf("an empty entry read back: %s (nil data: %v)", describe(r), len(r.Entries) == 1 && r.Entries[0].Data == nil)
	}
}

func testLogDataIsCopied(t *testing.T, o logOpener, _ *Clock, name func(string) string) {
	l := o.log()
	n := name("log")
	binary := []byte{0, 1, 0xff, '\n', 0}
	data := bytes.Clone(binary)
	if _, err := l.AppendLog(context.Background(), n, data, keepAll); err != nil {
		t.Fatal(err)
	}
	data[0] = 'x'
	if _, err := l.AppendLog(context.Background(), n, nil, keepAll); err != nil {
		t.Fatal(err)
	}
	r := mustRead(t, l, n, 0, 10)
	if len(r.Entries) != 2 || !bytes.Equal(r.Entries[0].Data, binary) || len(r.Entries[1].Data) != 0 {
		t.Fatalf("binary then empty data read back as %s", describe(r))
	}
	r.Entries[0].Data[1] = 'y'
	if r := mustRead(t, l, n, 0, 1); !bytes.Equal(r.Entries[0].Data, binary) {
		t.Errorf("changing read data changed the log: %q", r.Entries[0].Data)
	}
	big := bytes.Repeat([]byte("e"), min(l.(store.Store).MaxValueSize(), 256<<10))
	p := mustAppend(t, l, n, string(big), keepAll)
	if r := mustRead(t, l, n, p.Seq-1, 1); len(r.Entries) != 1 || !bytes.Equal(r.Entries[0].Data, big) {
		t.Errorf("a %d-byte entry did not read back whole", len(big))
	}
}

func testLogsAreSeparate(t *testing.T, o logOpener, _ *Clock, name func(string) string) {
	l := o.log()
	a, ab, b := name("a"), name("a/b"), name("b")
	pa := mustAppend(t, l, a, "a1", keepAll)
	mustAppend(t, l, ab, "ab1", keepAll)
	mustAppend(t, l, ab, "ab2", keepAll)
	pb := mustAppend(t, l, b, "b1", store.Retention{MaxCount: 1})
	mustAppend(t, l, b, "b2", store.Retention{MaxCount: 1})
	if pa.Seq != 1 || pb.Seq != 1 || pa.Epoch == pb.Epoch {
		t.Errorf("two new logs start at %+v and %+v: want position 1 each, in distinct epochs", pa, pb)
	}
	if r := mustRead(t, l, a, 0, 10); len(r.Entries) != 1 || string(r.Entries[0].Data) != "a1" || r.Last != 1 {
		t.Errorf("log a: %s", describe(r))
	}
	if r := mustRead(t, l, ab, 0, 10); len(r.Entries) != 2 || r.Last != 2 {
		t.Errorf("log a/b: %s", describe(r))
	}
	if r := mustRead(t, l, b, 0, 10); len(r.Entries) != 1 || string(r.Entries[0].Data) != "b2" || r.First != 2 {
		t.Errorf("log b, keeping one entry: %s", describe(r))
	}
}

func testLogRetentionCount(t *testing.T, o logOpener, _ *Clock, name func(string) string) {
	l := o.log()
	n := name("log")
	keep := store.Retention{MaxCount: 3}
	for i := 1; i <= 10; i++ {
		mustAppend(t, l, n, fmt.Sprint(i), keep)
		r := mustRead(t, l, n, 0, 20)
		want := seqRange(uint64(max(1, i-2)), uint64(i))
		if !equalSeqs(seqs(r), want) || r.First != want[0] || r.Last != uint64(i) || r.Through != uint64(i) {
			t.Fatalf("after %d appends keeping 3: %s; want %v", i, describe(r), want)
		}
	}
	// limit 0 reads the bounds alone: no entry, and the reader has reached nothing new.
	if r := mustRead(t, l, n, 0, 0); len(r.Entries) != 0 || r.First != 8 || r.Last != 10 || r.Through != 0 {
		t.Fatalf("the bounds of 8 to 10: %s; want no entry, through 0", describe(r))
	}
	// Raising the bound loses nothing kept (a store may keep more: entries it had not deleted
	// yet); lowering it trims at the next append.
	mustAppend(t, l, n, "11", store.Retention{MaxCount: 5})
	if r := mustRead(t, l, n, 0, 20); r.First > 8 || r.First < 7 || r.Last != 11 || !equalSeqs(seqs(r), seqRange(r.First, 11)) {
		t.Errorf("after raising the bound: %s; want 7 or 8 to 11", describe(r))
	}
	mustAppend(t, l, n, "12", store.Retention{MaxCount: 1})
	if r := mustRead(t, l, n, 0, 20); !equalSeqs(seqs(r), []uint64{12}) || r.First != 12 {
		t.Errorf("after lowering the bound to 1: %s; want only 12", describe(r))
	}
}

// testLogRetentionAge: an entry older than MaxAge goes at an append made once MaxAge and an
// eighth of it have passed (stores may group entries by eighths of MaxAge); a younger one stays.
func testLogRetentionAge(t *testing.T, o logOpener, c *Clock, name func(string) string) {
	l := o.log()
	n := name("log")
	keep := store.Retention{MaxAge: time.Minute}
	mustAppend(t, l, n, "1", keep)
	mustAppend(t, l, n, "2", keep)
	c.Advance(30 * time.Second)
	mustAppend(t, l, n, "3", keep)
	mustAppend(t, l, n, "4", keep)
	if r := mustRead(t, l, n, 0, 20); r.First != 1 || len(r.Entries) != 4 {
		t.Fatalf("nothing is a minute old yet: %s", describe(r))
	}
	c.Advance(40 * time.Second) // 1 and 2 are 70 s old, 3 and 4 are 40 s old
	mustAppend(t, l, n, "5", keep)
	if r := mustRead(t, l, n, 0, 20); !equalSeqs(seqs(r), []uint64{3, 4, 5}) || r.First != 3 {
		t.Fatalf("70 s later, keeping a minute: %s; want 3, 4, 5", describe(r))
	}
	c.Advance(80 * time.Second)
	mustAppend(t, l, n, "6", keep)
	if r := mustRead(t, l, n, 0, 20); !equalSeqs(seqs(r), []uint64{6}) || r.First != 6 || r.Last != 6 {
		t.Fatalf("after a long pause: %s; want only 6", describe(r))
	}
	// Reading an idle log does not trim it: retention is applied by appends.
	c.Advance(time.Hour)
	if r := mustRead(t, l, n, 0, 20); !equalSeqs(seqs(r), []uint64{6}) {
		t.Errorf("an hour later without appends: %s; want 6 still there", describe(r))
	}
}

// testLogRetentionBytes: an entry goes at the append after which it and the newer entries hold
// more than MaxBytes of data, oldest first; the newest stays whatever its size. The first entries
// are an eighth of the bound each, so that a store that counts in eighths (BytesInEighths) is
// exact on them; then sizes vary, and such a store may keep more, within its eighth.
func testLogRetentionBytes(t *testing.T, o logOpener, _ *Clock, name func(string) string) {
	l := o.log()
	n := name("log")
	const bound = 800
	var sizes []int // sizes[i] is the data size of entry i+1
	// firsts returns the oldest entry the exact rule keeps, and the oldest one a store in
	// eighths may have to keep at most: every older one has newer entries holding 900 bytes.
	firsts := func(bound int) (exact, loose uint64) {
		last := len(sizes)
		exact = uint64(last)
		for total := sizes[last-1]; exact > 1 && total+sizes[exact-2] <= bound; exact-- {
			total += sizes[exact-2]
		}
		loose = 1
		for s, newer := last, 0; s >= 1; s-- {
			if newer >= bound+bound/8 {
				loose = uint64(s) + 1
				break
			}
			newer += sizes[s-1]
		}
		return exact, loose
	}
	var dropped uint64 // entries below it are gone: a raised bound brings nothing back
	appendSized := func(size int, bound int64) {
		t.Helper()
		c := byte('a' + len(sizes)%26)
		mustAppend(t, l, n, strings.Repeat(string(c), size), store.Retention{MaxBytes: bound})
		sizes = append(sizes, size)
		exact, loose := firsts(int(bound))
		r := mustRead(t, l, n, 0, 100)
		lo, hi := max(exact, dropped), max(exact, dropped)
		if o.bytesInEighths {
			lo = max(loose, dropped)
		}
		last := uint64(len(sizes))
		if r.First < lo || r.First > hi || r.Last != last || !equalSeqs(seqs(r), seqRange(r.First, last)) {
			t.Fatalf("after appending %d bytes (sizes %v) keeping %d bytes: %s; want First from %d to %d", size, sizes, bound, describe(r), lo, hi)
		}
		for _, e := range r.Entries {
			if len(e.Data) != sizes[e.Seq-1] {
				t.Fatalf("entry %d holds %d bytes, %d were appended", e.Seq, len(e.Data), sizes[e.Seq-1])
			}
		}
		dropped = r.First
	}
	for range 12 {
		appendSized(bound/8, bound) // eight are kept: 800 bytes, not more
	}
	for _, size := range []int{900, 100, 700, 1, 99, 100, 450, 350, 1, 800, 100} {
		appendSized(size, bound)
	}
	// A lowered bound trims at the next append; a raised one keeps what was kept.
	appendSized(100, 200)
	appendSized(100, 5000)
}

// testLogAcrossRetentionEdge: a reader behind the retention finds out (its position + 1 < First),
// then reads on from First with nothing missing or repeated, in pages.
func testLogAcrossRetentionEdge(t *testing.T, o logOpener, _ *Clock, name func(string) string) {
	writer, reader := o.log(), o.log()
	n := name("log")
	keep := store.Retention{MaxCount: 5}
	mustAppend(t, writer, n, "1", keep)
	mustAppend(t, writer, n, "2", keep)
	at := mustRead(t, reader, n, 0, 10).Through
	if at != 2 {
		t.Fatalf("reader at %d, want 2", at)
	}
	for i := 3; i <= 20; i++ {
		mustAppend(t, writer, n, fmt.Sprint(i), keep)
	}
	r := mustRead(t, reader, n, at, 2)
	if r.First != 16 || r.Last != 20 || at+1 >= r.First {
		t.Fatalf("reader at %d after 18 more appends keeping 5: %s; want First 16, a visible loss", at, describe(r))
	}
	var got []uint64
	for {
		got = append(got, seqs(r)...)
		if r.Through == r.Last {
			break
		}
		if r.Through <= at {
			t.Fatalf("read made no progress from %d: %s", at, describe(r))
		}
		at = r.Through
		r = mustRead(t, reader, n, at, 2)
	}
	if !equalSeqs(got, seqRange(16, 20)) {
		t.Errorf("read across the edge in pages of 2: %v, want 16..20", got)
	}
	for i, e := range mustRead(t, reader, n, 15, 10).Entries {
		if string(e.Data) != fmt.Sprint(16+i) {
			t.Errorf("entry %d holds %q, want %d", e.Seq, e.Data, 16+i)
		}
	}
}

func testLogWait(t *testing.T, o logOpener, _ *Clock, name func(string) string) {
	waiter, writer := o.log(), o.log()
	n := name("log")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// A log never appended to is at 0: waiting after any other position returns at once.
	if err := waiter.WaitLog(ctx, n, 3); err != nil {
		t.Fatalf("WaitLog after 3 on an empty log: %v", err)
	}
	p := mustAppend(t, writer, n, "1", keepAll)
	if err := waiter.WaitLog(ctx, n, 0); err != nil {
		t.Fatalf("WaitLog after 0 with entry 1 appended: %v", err)
	}
	// Waiting at the newest position returns once another instance appends.
	woke := make(chan error, 1)
	go func() { woke <- waiter.WaitLog(ctx, n, p.Seq) }()
	mustAppend(t, writer, n, "2", keepAll)
	select {
	case err := <-woke:
		if err != nil {
			t.Fatalf("WaitLog: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("WaitLog did not return within a minute of an append by another instance")
	}
	if r := mustRead(t, waiter, n, p.Seq, 10); !equalSeqs(seqs(r), []uint64{2}) {
		t.Errorf("after waking: %s", describe(r))
	}
	// A wait with nothing new ends with its context.
	short, stop := context.WithTimeout(ctx, 200*time.Millisecond)
	defer stop()
	if err := waiter.WaitLog(short, n, 2); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("WaitLog at the newest position with a 200 ms context: %v, want context.DeadlineExceeded", err)
	}
}

// testLogConcurrentAppends: instances append at once while another follows with WaitLog and
// ReadLog. Positions are dense and unique, each instance's entries keep its order, and the
// follower sees every entry once, in order, even those whose append committed late.
func testLogConcurrentAppends(t *testing.T, o logOpener, _ *Clock, name func(string) string) {
	const writers, each = 6, 20
	n := name("log")
	// Real time: a store that seals abandoned positions must see time pass.
	follower := o.logAt(time.Now)
	logs := make([]store.Log, writers)
	for i := range logs {
		logs[i] = o.logAt(time.Now)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	followed := make(chan []store.LogEntry, 1)
	go func() { followed <- Follow(ctx, follower, n, 0, writers*each) }()

	var wg sync.WaitGroup
	got := make([][]store.LogPosition, writers)
	errs := make(chan error, writers)
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				p, err := logs[w].AppendLog(ctx, n, fmt.Appendf(nil, "w%d-%d", w, i), keepAll)
				if err != nil {
					errs <- fmt.Errorf("writer %d, append %d: %w", w, i, err)
					return
				}
				got[w] = append(got[w], p)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	all := checkConcurrentLog(t, follower, n, got, func(w, i int) string { return fmt.Sprintf("w%d-%d", w, i) }, o.logOptions)
	select {
	case entries := <-followed:
		checkFollowed(t, entries, all)
	case <-ctx.Done():
		t.Fatal("the follower did not see every entry within 2 minutes")
	}
}

// checkConcurrentLog checks the log after concurrent appends: got[w] are the positions writer w
// was given, data(w, i) the data of its i-th append.
func checkConcurrentLog(t testing.TB, l store.Log, n string, got [][]store.LogPosition, data func(w, i int) string, o logOptions) []store.LogEntry {
	t.Helper()
	total := 0
	for _, ps := range got {
		total += len(ps)
	}
	var all []store.LogEntry
	deadline := time.Now().Add(time.Minute)
	for at := uint64(0); len(all) < total; {
		r := mustRead(t, l, n, at, store.MaxLogRead)
		switch {
		case r.Through > at:
			all = append(all, r.Entries...)
			at = r.Through
		case r.Through < r.Last && time.Now().Before(deadline):
			time.Sleep(50 * time.Millisecond) // an entry is still being written (or to be sealed)
		default:
			t.Fatalf("the log holds %d entries, %d were appended: %s", len(all), total, describe(r))
		}
	}
	bySeq := map[uint64]string{}
	for i, e := range all {
		if (o.sealsGaps && i > 0 && e.Seq <= all[i-1].Seq) || (!o.sealsGaps && e.Seq != uint64(i+1)) {
			t.Fatalf("entry %d has position %d (previous: %v): positions must be dense from 1, or increasing for a store that seals gaps", i, e.Seq, seqs(store.LogRange{Entries: all[max(0, i-1):i]}))
		}
		bySeq[e.Seq] = string(e.Data)
	}
	epoch := got[0][0].Epoch
	for w, ps := range got {
		for i, p := range ps {
			if i > 0 && p.Seq <= ps[i-1].Seq {
				t.Errorf("writer %d: append %d at %d after append %d at %d", w, i, p.Seq, i-1, ps[i-1].Seq)
			}
			if p.Epoch != epoch {
				t.Errorf("writer %d: epoch %q, want %q", w, p.Epoch, epoch)
			}
			if bySeq[p.Seq] != data(w, i) {
				t.Errorf("position %d holds %q, want %q (the writer was told it was there)", p.Seq, bySeq[p.Seq], data(w, i))
			}
		}
	}
	return all
}

func checkFollowed(t testing.TB, entries, all []store.LogEntry) {
	t.Helper()
	if len(entries) != len(all) {
		t.Fatalf("the follower saw %d entries, the log holds %d", len(entries), len(all))
	}
	for i, e := range entries {
		if e.Seq != all[i].Seq || !bytes.Equal(e.Data, all[i].Data) {
			t.Fatalf("the follower's entry %d is position %d, the log's is %d: it skipped or repeated one", i, e.Seq, all[i].Seq)
		}
	}
}

// Follow reads the log name from after until it has n entries or ctx ends, waiting with WaitLog
// when it has read everything, as a stream reader does. It returns the entries read.
func Follow(ctx context.Context, l store.Log, name string, after uint64, n int) []store.LogEntry {
	var out []store.LogEntry
	for len(out) < n && ctx.Err() == nil {
		r, err := l.ReadLog(ctx, name, after, store.MaxLogRead)
		if err != nil {
			continue // ctx ended, or a transient failure: the loop condition decides
		}
		out = append(out, r.Entries...)
		switch {
		case r.Through > after:
			after = r.Through
		case r.Through < r.Last:
			pause(ctx, 20*time.Millisecond) // the next entry is still being written
		default:
			_ = l.WaitLog(ctx, name, after)
		}
	}
	return out
}

func pause(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

func testLogInvalidArguments(t *testing.T, o logOpener, _ *Clock, name func(string) string) {
	l := o.log()
	ctx := context.Background()
	s := l.(store.Store)
	for _, bad := range []string{"", "a\x00b", "line\nbreak", strings.Repeat("n", store.MaxLogNameLen+1), "\xff\xfe"} {
		if _, err := l.AppendLog(ctx, bad, []byte("x"), keepAll); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("AppendLog(%q): %v, want ErrInvalid", bad, err)
		}
		if _, err := l.ReadLog(ctx, bad, 0, 1); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("ReadLog(%q): %v, want ErrInvalid", bad, err)
		}
		if err := l.WaitLog(ctx, bad, 0); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("WaitLog(%q): %v, want ErrInvalid", bad, err)
		}
	}
	n := name("log")
	if _, err := l.AppendLog(ctx, strings.Repeat("n", store.MaxLogNameLen-len(n))+n, []byte("x"), keepAll); err != nil {
		t.Errorf("AppendLog with a %d-byte name: %v", store.MaxLogNameLen, err)
	}
	if _, err := l.ReadLog(ctx, n, 0, -1); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("ReadLog with limit -1: %v, want ErrInvalid", err)
	}
	for _, keep := range []store.Retention{{MaxCount: -1}, {MaxAge: -time.Second}, {MaxBytes: -1}} {
		if _, err := l.AppendLog(ctx, n, []byte("x"), keep); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("AppendLog with a negative retention %+v: %v, want ErrInvalid", keep, err)
		}
	}
	if _, err := l.AppendLog(ctx, n, make([]byte, s.MaxValueSize()+1), keepAll); !errors.Is(err, store.ErrTooLarge) {
		t.Errorf("AppendLog of MaxValueSize+1 bytes: %v, want ErrTooLarge", err)
	}
	if r := mustRead(t, l, n, 0, 10); r.Last != 0 {
		t.Errorf("refused appends wrote something: %s", describe(r))
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := l.AppendLog(cctx, n, []byte("x"), keepAll); !errors.Is(err, context.Canceled) {
		t.Errorf("AppendLog with a canceled context: %v, want context.Canceled", err)
	}
	if err := l.WaitLog(cctx, n, 0); !errors.Is(err, context.Canceled) {
		t.Errorf("WaitLog with a canceled context: %v, want context.Canceled", err)
	}
}

func testLogClosed(t *testing.T, o logOpener, _ *Clock, name func(string) string) {
	l := o.log()
	n := name("log")
	mustAppend(t, l, n, "1", keepAll)
	if err := l.(store.Store).Close(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := l.AppendLog(ctx, n, []byte("x"), keepAll); !errors.Is(err, store.ErrClosed) {
		t.Errorf("AppendLog after Close: %v, want ErrClosed", err)
	}
	if _, err := l.ReadLog(ctx, n, 0, 1); !errors.Is(err, store.ErrClosed) {
		t.Errorf("ReadLog after Close: %v, want ErrClosed", err)
	}
	if err := l.WaitLog(ctx, n, 0); !errors.Is(err, store.ErrClosed) {
		t.Errorf("WaitLog after Close: %v, want ErrClosed", err)
	}
}

// OneInstance adapts open to RunLog for a store only one process can hold (memory, bolt): within
// a test, every store it opens is a handle on one store, closed when its last handle is. Closing
// a handle makes that handle fail with store.ErrClosed.
func OneInstance(open Opener) Opener {
	var mu sync.Mutex
	shared := map[testing.TB]*sharedStore{}
	return func(t testing.TB, now func() time.Time) store.Store {
		mu.Lock()
		defer mu.Unlock()
		s := shared[t]
		if s == nil {
			s = &sharedStore{s: open(t, now)}
			shared[t] = s
			t.Cleanup(func() {
				mu.Lock()
				delete(shared, t)
				mu.Unlock()
			})
		}
		s.refs++
		return &handle{sharedStore: s, Log: AsLog(t, s.s)}
	}
}

type sharedStore struct {
	mu   sync.Mutex
	s    store.Store
	refs int
}

// handle is one opening of a shared store.
type handle struct {
	*sharedStore
	store.Log
	closed bool
}

func (h *handle) isClosed() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.closed
}

func (h *handle) Get(ctx context.Context, key string) (store.Record, error) {
	if h.isClosed() {
		return store.Record{}, store.ErrClosed
	}
	return h.s.Get(ctx, key)
}

func (h *handle) Create(ctx context.Context, key string, value []byte, exp time.Time) (store.Record, error) {
	if h.isClosed() {
		return store.Record{}, store.ErrClosed
	}
	return h.s.Create(ctx, key, value, exp)
}

func (h *handle) Update(ctx context.Context, key string, version uint64, value []byte, exp time.Time) (store.Record, error) {
	if h.isClosed() {
		return store.Record{}, store.ErrClosed
	}
	return h.s.Update(ctx, key, version, value, exp)
}

func (h *handle) Delete(ctx context.Context, key string, version uint64) error {
	if h.isClosed() {
		return store.ErrClosed
	}
	return h.s.Delete(ctx, key, version)
}

func (h *handle) MaxValueSize() int { return h.s.MaxValueSize() }

func (h *handle) AppendLog(ctx context.Context, name string, data []byte, keep store.Retention) (store.LogPosition, error) {
	if h.isClosed() {
		return store.LogPosition{}, store.ErrClosed
	}
	return h.Log.AppendLog(ctx, name, data, keep)
}

func (h *handle) ReadLog(ctx context.Context, name string, after uint64, limit int) (store.LogRange, error) {
	if h.isClosed() {
		return store.LogRange{}, store.ErrClosed
	}
	return h.Log.ReadLog(ctx, name, after, limit)
}

func (h *handle) WaitLog(ctx context.Context, name string, after uint64) error {
	if h.isClosed() {
		return store.ErrClosed
	}
	return h.Log.WaitLog(ctx, name, after)
}

func (h *handle) Close() error {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil
	}
	h.closed = true
	h.refs--
	last := h.refs == 0
	h.mu.Unlock()
	if last {
		return h.s.Close()
	}
	return nil
}

// UpdateAppend delegates to the shared store (a store.UpdateAppender, or it fails).
func (h *handle) UpdateAppend(ctx context.Context, key string, version uint64, value []byte, exp time.Time,
	name string, data []byte, keep store.Retention) (store.Record, error) {
	if h.isClosed() {
		return store.Record{}, store.ErrClosed
	}
	ua, ok := h.s.(store.UpdateAppender)
	if !ok {
		return store.Record{}, fmt.Errorf("%T does not implement store.UpdateAppender", h.s)
	}
	return ua.UpdateAppend(ctx, key, version, value, exp, name, data, keep)
}
