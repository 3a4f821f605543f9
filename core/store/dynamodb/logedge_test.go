package dynamodb_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/supervaize/svz/core/store"
	"github.com/supervaize/svz/core/store/dynamodb"
	"github.com/supervaize/svz/core/store/storetest"
	"github.com/supervaize/svz/internal/awsapi"
	"github.com/supervaize/svz/internal/testenv"
)

// The log's boundaries, each on both sides: the age bound (an entry exactly MaxAge old is kept),
// the reclaim batch, the sweep window, the gap timeout and a gap at the oldest kept position.

// claimDead claims the next position of the log as an appender that dies before writing its
// entry would: the head's seq moves on, with another appender's token, and no entry is written.
func claimDead(t *testing.T, c *awsapi.Client, table, log string) {
	t.Helper()
	ctx := context.Background()
	var head struct{ Item map[string]map[string]string }
	key := map[string]any{"k": map[string]string{"S": "\x00log\x00" + log}}
	if err := c.Call(ctx, "GetItem", map[string]any{"TableName": table, "Key": key, "ConsistentRead": true}, &head); err != nil {
		t.Fatal(err)
	}
	var seq uint64
	if _, err := fmt.Sscan(head.Item["seq"]["N"], &seq); err != nil || head.Item == nil {
		t.Fatalf("head of %q: %v %v", log, head.Item, err)
	}
	head.Item["seq"] = map[string]string{"N": fmt.Sprint(seq + 1)}
	head.Item["tok"] = map[string]string{"S": "dead"}
	if err := c.Call(ctx, "PutItem", map[string]any{"TableName": table, "Item": head.Item}, nil); err != nil {
		t.Fatal(err)
	}
}

// deleteEntry deletes the item of a log entry, as DynamoDB's TTL sweeper does.
func deleteEntry(t *testing.T, c *awsapi.Client, table, log string, seq uint64) {
	t.Helper()
	k := fmt.Sprintf("\x00log\x00%s\x00%020d", log, seq)
	if err := c.Call(context.Background(), "DeleteItem", map[string]any{"TableName": table, "Key": map[string]any{"k": map[string]string{"S": k}}}, nil); err != nil {
		t.Fatal(err)
	}
}

// logSeqs is the positions of entries read, and their data in one string.
func logSeqs(r store.LogRange) string {
	var b strings.Builder
	for _, e := range r.Entries {
		fmt.Fprintf(&b, "%d=%s ", e.Seq, e.Data)
	}
	return strings.TrimSpace(b.String())
}

// TestLogAgeBoundary: entries appended strictly before now - MaxAge go (kit.Cutoff); one exactly
// MaxAge old stays, whether the claim before the newest or a recorded time mark bounds it.
func TestLogAgeBoundary(t *testing.T) {
	c := client(t, testenv.Need(t, testenv.AWSEndpoint))
	name := table(t, c)
	clock := storetest.NewClock()
	s := open(t, c, name, dynamodb.WithClock(clock.Now))
	ctx := context.Background()
	keep := store.Retention{MaxAge: time.Minute}
	appendAt := func(data string) {
		t.Helper()
		if _, err := s.AppendLog(ctx, "age", []byte(data), keep); err != nil {
			t.Fatal(err)
		}
	}
	read := func(when string, first uint64, want string) {
		t.Helper()
		r, err := s.ReadLog(ctx, "age", 0, 10)
		if err != nil || r.First != first || logSeqs(r) != want {
			t.Fatalf("%s: %+v %v; want First %d and %s", when, r, err, first, want)
		}
	}
	appendAt("a")
	clock.Advance(time.Minute)
	appendAt("b") // the claim before it (1) is exactly a minute old; it also becomes a time mark
	read("the claim before the newest exactly MaxAge old", 1, "1=a 2=b")
	appendAt("c") // at the same time: the mark of 1 bounds it alone
	read("a time mark exactly MaxAge old", 1, "1=a 2=b 3=c")
	clock.Advance(time.Millisecond)
	appendAt("d")
	read("a millisecond later", 2, "2=b 3=c 4=d")
}

// TestLogReclaimBatchBoundary: a log with a count bound alone deletes its dropped entries once
// exactly LogReclaimBatch of them wait, in one BatchWriteItem; not one append before.
func TestLogReclaimBatchBoundary(t *testing.T) {
	var o ops
	c := client(t, testenv.Need(t, testenv.AWSEndpoint), awsapi.WithHTTPClient(&o))
	name := table(t, c)
	s := open(t, c, name)
	ctx := context.Background()
	keep := store.Retention{MaxCount: 5}
	entries := func() int {
		n := 0
		for _, k := range scanLog(t, c, name) {
			if strings.Count(k, "\x00") == 3 {
				n++
			}
		}
		return n
	}
	// After n appends keeping 5, positions 1 to n-5 are dropped: the 25th of them waits at 30.
	for n := 1; n <= 29; n++ {
		if _, err := s.AppendLog(ctx, "batch", []byte("e"), keep); err != nil {
			t.Fatal(err)
		}
	}
	if got, deletes := entries(), o.count("BatchWriteItem"); got != 29 || deletes != 0 {
		t.Fatalf("after 29 appends keeping 5 (24 dropped): %d entries, %d BatchWriteItem; want 29 and none", got, deletes)
	}
	if _, err := s.AppendLog(ctx, "batch", []byte("e"), keep); err != nil {
		t.Fatal(err)
	}
	if got, deletes := entries(), o.count("BatchWriteItem"); got != 5 || deletes != 1 {
		t.Fatalf("after 30 appends keeping 5 (25 dropped): %d entries, %d BatchWriteItem; want 5 and one", got, deletes)
	}
	if r, err := s.ReadLog(ctx, "batch", 0, 10); err != nil || r.First != 26 || len(r.Entries) != 5 {
		t.Fatalf("read: %+v %v; want 26 to 30", r, err)
	}
}

// TestLogSweepWindowBoundary: a missing entry whose claim is exactly the sweep window old
// (MaxAge + MaxAge/8 + SweepGrace) is not yet taken for swept: the reader seals it; a millisecond
// later it is swept, and First moves past it without a seal.
func TestLogSweepWindowBoundary(t *testing.T) {
	var o ops
	c := client(t, testenv.Need(t, testenv.AWSEndpoint), awsapi.WithHTTPClient(&o))
	name := table(t, c)
	clock := storetest.NewClock()
	s := open(t, c, name, dynamodb.WithClock(clock.Now))
	ctx := context.Background()
	keep := store.Retention{MaxAge: time.Hour}
	window := time.Hour + time.Hour/8 + dynamodb.SweepGrace
	for i, log := range []string{"exact", "later"} {
		start := clock.Now()
		for _, d := range []string{"a", "b", "c"} {
			if _, err := s.AppendLog(ctx, log, []byte(d), keep); err != nil {
				t.Fatal(err)
			}
		}
		deleteEntry(t, c, name, log, 1)
		clock.Set(start.Add(window + time.Duration(i)*time.Millisecond))
		puts := o.count("PutItem")
		r, err := s.ReadLog(ctx, log, 0, 10)
		seals := o.count("PutItem") - puts
		if err != nil || logSeqs(r) != "2=b 3=c" || r.Through != 3 {
			t.Fatalf("%s: %+v %v; want 2 and 3", log, r, err)
		}
		if i == 0 && (r.First != 1 || seals != 1) {
			t.Errorf("entry 1 missing, claimed exactly the sweep window ago: First %d, %d seals; want 1 sealed", r.First, seals)
		}
		if i == 1 && (r.First != 2 || seals != 0) {
			t.Errorf("entry 1 missing, claimed the sweep window and 1 ms ago: First %d, %d seals; want First 2, no seal", r.First, seals)
		}
	}
}

// TestLogGapTimeoutBoundary: a reader waits for a claimed position's entry until LogGapTimeout
// after its claim, and seals it at exactly LogGapTimeout.
func TestLogGapTimeoutBoundary(t *testing.T) {
	c := client(t, testenv.Need(t, testenv.AWSEndpoint))
	name := table(t, c)
	clock := storetest.NewClock()
	s := open(t, c, name, dynamodb.WithClock(clock.Now))
	ctx := context.Background()
	withGap(t, s, c, name, "gap", store.Retention{})
	clock.Advance(dynamodb.LogGapTimeout - time.Millisecond)
	if r, err := s.ReadLog(ctx, "gap", 1, 10); err != nil || r.Through != 1 || len(r.Entries) != 0 {
		t.Fatalf("a millisecond before the gap timeout: %+v %v; want to wait at 1", r, err)
	}
	clock.Advance(time.Millisecond)
	if r, err := s.ReadLog(ctx, "gap", 1, 10); err != nil || r.Through != 3 || logSeqs(r) != "3=3" {
		t.Fatalf("at the gap timeout: %+v %v; want 2 sealed and 3 read", r, err)
	}
}

// TestLogGapAtFirst: a gap at the oldest kept position itself is sealed (it is kept: retention
// did not delete it), and the read goes on past it.
func TestLogGapAtFirst(t *testing.T) {
	c := client(t, testenv.Need(t, testenv.AWSEndpoint))
	name := table(t, c)
	clock := storetest.NewClock()
	s := open(t, c, name, dynamodb.WithClock(clock.Now))
	ctx := context.Background()
	withGap(t, s, c, name, "first", store.Retention{MaxCount: 2})
	clock.Advance(dynamodb.LogGapTimeout)
	r, err := s.ReadLog(ctx, "first", 0, 10)
	if err != nil || r.First != 2 || r.Through != 3 || logSeqs(r) != "3=3" {
		t.Fatalf("position 2, the oldest kept, claimed and never written: %+v %v; want First 2, 2 sealed, 3 read", r, err)
	}
}

// TestLogAgeMarks: every claim that enters another eighth of MaxAge records the claim before it
// as a time mark, not only the first: the oldest entries go by the newest mark older than MaxAge
// even when the claim before the newest is recent.
func TestLogAgeMarks(t *testing.T) {
	c := client(t, testenv.Need(t, testenv.AWSEndpoint))
	name := table(t, c)
	clock := storetest.NewClock()
	s := open(t, c, name, dynamodb.WithClock(clock.Now))
	ctx := context.Background()
	keep := store.Retention{MaxAge: 8 * time.Second} // eighths of a second
	for i, data := range []string{"a", "b", "c"} {
		if i > 0 {
			clock.Advance(1500 * time.Millisecond) // another eighth: the claim before becomes a mark
		}
		if _, err := s.AppendLog(ctx, "marks", []byte(data), keep); err != nil {
			t.Fatal(err)
		}
	}
	// 9.6 s after a and 8.1 s after b: both go, by the marks of 1 and 2; c (6.6 s) stays.
	clock.Advance(6600 * time.Millisecond)
	if _, err := s.AppendLog(ctx, "marks", []byte("d"), keep); err != nil {
		t.Fatal(err)
	}
	if r, err := s.ReadLog(ctx, "marks", 0, 10); err != nil || r.First != 3 || logSeqs(r) != "3=c 4=d" {
		t.Fatalf("read: %+v %v; want First 3 and 3=c 4=d", r, err)
	}
}

// TestLogMaintainsOnlyWhatIsDue: an append writes nothing beyond its claim and its entry when no
// mark is due: in a log without an age bound however the clock moves, and in the first append of
// a log with a byte bound whatever its size (there is no claim before it to mark).
func TestLogMaintainsOnlyWhatIsDue(t *testing.T) {
	var o ops
	c := client(t, testenv.Need(t, testenv.AWSEndpoint), awsapi.WithHTTPClient(&o))
	name := table(t, c)
	clock := storetest.NewClock()
	s := open(t, c, name, dynamodb.WithClock(clock.Now))
	ctx := context.Background()
	appendOne := func(log string, data []byte, keep store.Retention, claims int) {
		t.Helper()
		before := o.count("UpdateItem")
		if _, err := s.AppendLog(ctx, log, data, keep); err != nil {
			t.Fatal(err)
		}
		if got := o.count("UpdateItem") - before; got != claims {
			t.Fatalf("append to %s: %d UpdateItem, want %d (its claim alone)", log, got, claims)
		}
	}
	appendOne("bytes", make([]byte, 200), store.Retention{MaxBytes: 800}, 1) // 200 bytes: past an eighth
	for range 3 {
		appendOne("count", []byte("e"), store.Retention{MaxCount: 100}, 1)
		clock.Advance(time.Millisecond)
	}
}

// TestLogReadAcrossBatches: a read of more positions than one BatchGetItem takes (100) reads
// them all, batch after batch, in one call.
func TestLogReadAcrossBatches(t *testing.T) {
	c := client(t, testenv.Need(t, testenv.AWSEndpoint))
	s := open(t, c, table(t, c))
	ctx := context.Background()
	for i := 1; i <= 150; i++ {
		if _, err := s.AppendLog(ctx, "batches", []byte(fmt.Sprint(i)), store.Retention{}); err != nil {
			t.Fatal(err)
		}
	}
	r, err := s.ReadLog(ctx, "batches", 0, 1000)
	if err != nil || len(r.Entries) != 150 || r.Through != 150 || r.Last != 150 {
		t.Fatalf("%d entries, through %d, last %d: %v", len(r.Entries), r.Through, r.Last, err)
	}
	for i, e := range r.Entries {
		if e.Seq != uint64(i+1) || string(e.Data) != fmt.Sprint(i+1) {
			t.Fatalf("entry %d: %d=%s", i, e.Seq, e.Data)
		}
	}
}

// TestLogGapDatedByTheNextEntry: a position claimed and never written is dated by the first entry
// read after it (claimed later, so no later than it), not by the one before it nor by the head's
// newest claim: an old entry before a gap does not seal it, an old entry after it at the end of
// the read does, even when the head's newest claim is recent.
func TestLogGapDatedByTheNextEntry(t *testing.T) {
	c := client(t, testenv.Need(t, testenv.AWSEndpoint))
	name := table(t, c)
	clock := storetest.NewClock()
	s := open(t, c, name, dynamodb.WithClock(clock.Now))
	ctx := context.Background()
	appendLog := func(data string) {
		t.Helper()
		if _, err := s.AppendLog(ctx, "dated", []byte(data), store.Retention{}); err != nil {
			t.Fatal(err)
		}
	}
	appendLog("1")
	claimDead(t, c, name, "dated") // 2
	clock.Advance(dynamodb.LogGapTimeout)
	appendLog("3") // 1 is a gap timeout old, 3 new: 2 may still be written
	if r, err := s.ReadLog(ctx, "dated", 0, 10); err != nil || r.Through != 1 || logSeqs(r) != "1=1" {
		t.Fatalf("a gap after an old entry, before a new one: %+v %v; want 1 read, then to wait", r, err)
	}
	clock.Advance(dynamodb.LogGapTimeout)
	appendLog("4") // 3 is now old; the head's newest claim (4) is new
	if r, err := s.ReadLog(ctx, "dated", 1, 2); err != nil || r.Through != 3 || logSeqs(r) != "3=3" {
		t.Fatalf("a gap before an old entry that ends the read: %+v %v; want 2 sealed and 3 read", r, err)
	}
}

// logEntryItem reads the item of entry seq of log (nil when there is none), as the server holds it.
func logEntryItem(t *testing.T, c *awsapi.Client, table, log string, seq uint64) map[string]map[string]any {
	t.Helper()
	var out struct{ Item map[string]map[string]any }
	key := map[string]any{"k": map[string]string{"S": fmt.Sprintf("\x00log\x00%s\x00%020d", log, seq)}}
	if err := c.Call(context.Background(), "GetItem", map[string]any{"TableName": table, "Key": key, "ConsistentRead": true}, &out); err != nil {
		t.Fatal(err)
	}
	return out.Item
}

// onCall sends requests to the server and runs f once, before the n-th request of operation op;
// with fail set it answers that request with a non-retryable error instead of sending it.
type onCall struct {
	op   string
	n    int
	f    func()
	fail bool
	mu   sync.Mutex
	seen int
}

func (o *onCall) Do(req *http.Request) (*http.Response, error) {
	o.mu.Lock()
	hit := false
	if req.Header.Get("X-Amz-Target") == "DynamoDB_20120810."+o.op {
		o.seen++
		hit = o.seen == o.n
	}
	o.mu.Unlock()
	if hit && o.f != nil {
		o.f()
	}
	if hit && o.fail {
		return &http.Response{StatusCode: http.StatusBadRequest, Header: http.Header{"Content-Type": {"application/x-amz-json-1.0"}},
			Body: io.NopCloser(strings.NewReader(`{"__type":"com.amazonaws.dynamodb.v20120810#ValidationException","message":"injected"}`)), Request: req}, nil
	}
	return http.DefaultClient.Do(req)
}

// withGap writes log (through s; c and table for the claim) as a gap between two entries: 1
// written, 2 claimed and never written, 3 written.
func withGap(t *testing.T, s *dynamodb.Store, c *awsapi.Client, table, log string, keep store.Retention) {
	t.Helper()
	ctx := context.Background()
	if _, err := s.AppendLog(ctx, log, []byte("1"), keep); err != nil {
		t.Fatal(err)
	}
	claimDead(t, c, table, log)
	if _, err := s.AppendLog(ctx, log, []byte("3"), keep); err != nil {
		t.Fatal(err)
	}
}

// TestLogMovesDuringARead: a read that finds a gap old enough to seal reads the head again
// first. Retention that passed the gap meanwhile moves First and ends the read there; a log reset
// meanwhile (its positions now another log's) ends it there too: neither seals the gap, nor
// returns the new log's entry at that position as the old log's.
func TestLogMovesDuringARead(t *testing.T) {
	endpoint := testenv.Need(t, testenv.AWSEndpoint)
	plain := client(t, endpoint)
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		keep store.Retention
		move func(t *testing.T, s *dynamodb.Store, c *awsapi.Client, table string) // between the two head reads
		want string                                                                // First, Through and entries
	}{
		{"retention", store.Retention{MaxCount: 3}, func(t *testing.T, s *dynamodb.Store, _ *awsapi.Client, _ string) {
			for _, d := range []string{"4", "5", "6"} { // keeps 4 to 6
				if _, err := s.AppendLog(ctx, "moved", []byte(d), store.Retention{MaxCount: 3}); err != nil {
					t.Error(err)
				}
			}
		}, "first 4 through 1: 1=1"},
		{"reset", store.Retention{}, func(t *testing.T, s *dynamodb.Store, c *awsapi.Client, table string) {
			key := map[string]any{"k": map[string]string{"S": "\x00log\x00moved"}}
			if err := c.Call(ctx, "DeleteItem", map[string]any{"TableName": table, "Key": key}, nil); err != nil {
				t.Error(err)
			}
			for _, d := range []string{"new-1", "new-2", "new-3"} { // a new log, its 2 written
				if _, err := s.AppendLog(ctx, "moved", []byte(d), store.Retention{}); err != nil {
					t.Error(err)
				}
			}
		}, "first 1 through 1: 1=1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := table(t, plain)
			clock := storetest.NewClock()
			other := open(t, plain, name, dynamodb.WithClock(clock.Now)) // another instance
			hook := &onCall{op: "GetItem", n: 2}
			s := open(t, client(t, endpoint, awsapi.WithHTTPClient(hook)), name, dynamodb.WithClock(clock.Now))
			withGap(t, other, plain, name, "moved", tc.keep)
			clock.Advance(dynamodb.LogGapTimeout)
			hook.f = func() { tc.move(t, other, plain, name) }
			r, err := s.ReadLog(ctx, "moved", 0, 10)
			if got := fmt.Sprintf("first %d through %d: %s", r.First, r.Through, logSeqs(r)); err != nil || got != tc.want {
				t.Fatalf("%s, %v; want %s", got, err, tc.want)
			}
			if item := logEntryItem(t, plain, name, "moved", 2); item["tomb"] != nil {
				t.Fatalf("position 2 sealed: %v", item)
			}
		})
	}
}

// TestLogSealFails: a read whose seal of an old gap fails returns the error and reads nothing
// past the gap; the next read seals it, with the sweeper's ttl (now + SweepGrace), and goes on.
func TestLogSealFails(t *testing.T) {
	endpoint := testenv.Need(t, testenv.AWSEndpoint)
	plain := client(t, endpoint)
	name := table(t, plain)
	clock := storetest.NewClock()
	hook := &onCall{op: "PutItem", n: 1, fail: true}
	s := open(t, client(t, endpoint, awsapi.WithHTTPClient(hook)), name, dynamodb.WithClock(clock.Now))
	withGap(t, open(t, plain, name, dynamodb.WithClock(clock.Now)), plain, name, "moved", store.Retention{})
	clock.Advance(dynamodb.LogGapTimeout)
	ctx := context.Background()
	if r, err := s.ReadLog(ctx, "moved", 1, 10); err == nil || !strings.Contains(err.Error(), "injected") {
		t.Fatalf("a read whose seal failed: %+v %v", r, err)
	}
	if r, err := s.ReadLog(ctx, "moved", 1, 10); err != nil || r.Through != 3 || logSeqs(r) != "3=3" {
		t.Fatalf("the next read: %+v %v; want 2 sealed and 3 read", r, err)
	}
	item := logEntryItem(t, plain, name, "moved", 2)
	if want := strconv.FormatInt(clock.Now().Unix()+int64(dynamodb.SweepGrace/time.Second), 10); item["ttl"]["N"] != want || item["tomb"]["BOOL"] != true {
		t.Fatalf("the seal: %v; want ttl %s", item, want)
	}
}

// TestLogEntryWriteFails: an append whose entry write fails returns that error, naming the
// position it claimed, and claims no other: the position stays claimed without an entry (readers
// seal it after LogGapTimeout); the next append takes the position after it.
func TestLogEntryWriteFails(t *testing.T) {
	endpoint := testenv.Need(t, testenv.AWSEndpoint)
	plain := client(t, endpoint)
	name := table(t, plain)
	ctx := context.Background()
	if _, err := open(t, plain, name).AppendLog(ctx, "w", []byte("a"), store.Retention{}); err != nil {
		t.Fatal(err)
	}
	hook := &onCall{op: "PutItem", n: 1, fail: true}
	s := open(t, client(t, endpoint, awsapi.WithHTTPClient(hook)), name)
	if p, err := s.AppendLog(ctx, "w", []byte("b"), store.Retention{}); err == nil || !strings.HasPrefix(err.Error(), `dynamodb: append log "w": entry 2: `) ||
		!strings.Contains(err.Error(), "injected") {
		t.Fatalf("an append whose entry write failed: %+v %v", p, err)
	}
	if p, err := s.AppendLog(ctx, "w", []byte("c"), store.Retention{}); err != nil || p.Seq != 3 {
		t.Fatalf("the next append: %+v %v; want position 3", p, err)
	}
}

// answered sends requests to the server and closes got once the first answer to op arrived.
type answered struct {
	op   string
	got  chan struct{}
	once sync.Once
}

func (a *answered) Do(req *http.Request) (*http.Response, error) {
	resp, err := http.DefaultClient.Do(req)
	if err == nil && req.Header.Get("X-Amz-Target") == "DynamoDB_20120810."+a.op {
		a.once.Do(func() { close(a.got) })
	}
	return resp, err
}

// wantWoken fails t unless the wait of waited ends without error (by says what should have woken it).
func wantWoken(t *testing.T, waited <-chan error, by string) {
	t.Helper()
	select {
	case err := <-waited:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute): // a failure bound only
		t.Fatalf("the wait was not woken by %s", by)
	}
}

// TestLogWaitWokenByAnAppendHere: a wait on a log is woken by an append through the same store at
// once, not at its next poll of the head (an hour away here).
func TestLogWaitWokenByAnAppendHere(t *testing.T) {
	endpoint := testenv.Need(t, testenv.AWSEndpoint)
	hook := &answered{op: "GetItem", got: make(chan struct{})}
	c := client(t, endpoint, awsapi.WithHTTPClient(hook))
	s := open(t, c, table(t, c), dynamodb.WithLogPollInterval(time.Hour))
	ctx := context.Background()
	if _, err := s.AppendLog(ctx, "w", []byte("a"), store.Retention{}); err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() { waited <- s.WaitLog(ctx, "w", 1) }()
	<-hook.got // the wait's first poll read the head at 1
	if _, err := s.AppendLog(ctx, "w", []byte("b"), store.Retention{}); err != nil {
		t.Fatal(err)
	}
	wantWoken(t, waited, "the append")
}

// TestLogClaimFails: an append whose claim fails (the claim's write, the first append's creation
// of the head, or a head the claim returns that does not decode) returns that error and writes no
// entry.
func TestLogClaimFails(t *testing.T) {
	endpoint := testenv.Need(t, testenv.AWSEndpoint)
	plain := client(t, endpoint)
	name := table(t, plain)
	ctx := context.Background()
	for _, tc := range []struct {
		log  string
		seed bool   // the log has an entry already
		op   string // the request that fails
		edit bool   // the head's mv attribute made a string
		want string // the error after `dynamodb: append log "LOG": claim: `
	}{
		{"update-fails", true, "UpdateItem", false, "injected"},
		{"create-fails", false, "PutItem", false, "injected"},
		{"corrupt-head", true, "", true, `corrupt item: attribute "mv" is not of type N`},
	} {
		if tc.seed {
			if _, err := open(t, plain, name).AppendLog(ctx, tc.log, []byte("a"), store.Retention{}); err != nil {
				t.Fatal(err)
			}
		}
		if tc.edit {
			key := map[string]any{"k": map[string]string{"S": "\x00log\x00" + tc.log}}
			if err := plain.Call(ctx, "UpdateItem", map[string]any{"TableName": name, "Key": key, "UpdateExpression": "SET mv = :s",
				"ExpressionAttributeValues": map[string]any{":s": map[string]string{"S": "0"}}}, nil); err != nil {
				t.Fatal(err)
			}
		}
		s := open(t, client(t, endpoint, awsapi.WithHTTPClient(&onCall{op: tc.op, n: 1, fail: true})), name)
		p, err := s.AppendLog(ctx, tc.log, []byte("b"), store.Retention{})
		prefix := `dynamodb: append log "` + tc.log + `": claim: `
		if err == nil || !strings.HasPrefix(err.Error(), prefix) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %+v %v; want %s…%s", tc.log, p, err, prefix, tc.want)
		}
		seq := uint64(1)
		if tc.seed {
			seq = 2
		}
		if item := logEntryItem(t, plain, name, tc.log, seq); item != nil {
			t.Errorf("%s: entry %d written: %v", tc.log, seq, item)
		}
	}
}

// TestLogHeadReadFails: a read whose read of the log's head fails returns that error, not an
// empty log.
func TestLogHeadReadFails(t *testing.T) {
	endpoint := testenv.Need(t, testenv.AWSEndpoint)
	plain := client(t, endpoint)
	name := table(t, plain)
	ctx := context.Background()
	if _, err := open(t, plain, name).AppendLog(ctx, "h", []byte("a"), store.Retention{}); err != nil {
		t.Fatal(err)
	}
	s := open(t, client(t, endpoint, awsapi.WithHTTPClient(&onCall{op: "GetItem", n: 1, fail: true})), name)
	if r, err := s.ReadLog(ctx, "h", 0, 10); err == nil || !strings.HasPrefix(err.Error(), `dynamodb: read log "h": `) || !strings.Contains(err.Error(), "injected") {
		t.Fatalf("a read whose head read failed: %+v %v", r, err)
	}
}

// TestLogReclaimAfterAFailedMaintenance: an append whose maintenance (moving the head's oldest
// kept position) fails deletes no entry: the head still names them.
func TestLogReclaimAfterAFailedMaintenance(t *testing.T) {
	endpoint := testenv.Need(t, testenv.AWSEndpoint)
	plain := client(t, endpoint)
	name := table(t, plain)
	ctx := context.Background()
	keep := store.Retention{MaxCount: 1}
	w := open(t, plain, name)
	// The first reclaim (of entries 1 to LogReclaimBatch) lands at the next append's; the next is
	// due at the append after twice as many.
	for range 2 * dynamodb.LogReclaimBatch {
		if _, err := w.AppendLog(ctx, "r", []byte("e"), keep); err != nil {
			t.Fatal(err)
		}
	}
	s := open(t, client(t, endpoint, awsapi.WithHTTPClient(&onCall{op: "UpdateItem", n: 2, fail: true})), name) // 1 is the claim
	if p, err := s.AppendLog(ctx, "r", []byte("e"), keep); err != nil || p.Seq != 2*dynamodb.LogReclaimBatch+1 {
		t.Fatalf("the append whose maintenance fails: %+v %v", p, err)
	}
	if item := logEntryItem(t, plain, name, "r", dynamodb.LogReclaimBatch+1); item == nil {
		t.Fatalf("entry %d after a failed maintenance is gone; want it kept", dynamodb.LogReclaimBatch+1)
	}
}

// TestLogWaitWokenByARead: a read that finds the log moved wakes the store's waits on it at
// once, not at their next poll of the head (an hour away here).
func TestLogWaitWokenByARead(t *testing.T) {
	endpoint := testenv.Need(t, testenv.AWSEndpoint)
	plain := client(t, endpoint)
	name := table(t, plain)
	w := open(t, plain, name)
	hook := &answered{op: "GetItem", got: make(chan struct{})}
	s := open(t, client(t, endpoint, awsapi.WithHTTPClient(hook)), name, dynamodb.WithLogPollInterval(time.Hour))
	ctx := context.Background()
	if _, err := w.AppendLog(ctx, "w", []byte("a"), store.Retention{}); err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() { waited <- s.WaitLog(ctx, "w", 1) }()
	<-hook.got                                                                       // the wait's first poll read the head at 1
	if _, err := w.AppendLog(ctx, "w", []byte("b"), store.Retention{}); err != nil { // another instance's
		t.Fatal(err)
	}
	if r, err := s.ReadLog(ctx, "w", 1, 10); err != nil || r.Last != 2 {
		t.Fatalf("the read: %+v %v", r, err)
	}
	wantWoken(t, waited, "the read")
}

// TestLogReadStopsAtAGapBeingWritten: a read that meets a position still being written (claimed
// just now, no entry yet) ends before it, even when more batches of entries follow it.
func TestLogReadStopsAtAGapBeingWritten(t *testing.T) {
	c := client(t, testenv.Need(t, testenv.AWSEndpoint))
	name := table(t, c)
	s := open(t, c, name)
	ctx := context.Background()
	// 1, then 2 claimed now and not written, then 3 to 110: the second batch of positions starts at 101.
	withGap(t, s, c, name, "g", store.Retention{})
	for i := 4; i <= 110; i++ {
		if _, err := s.AppendLog(ctx, "g", []byte(fmt.Sprint(i)), store.Retention{}); err != nil {
			t.Fatal(err)
		}
	}
	if r, err := s.ReadLog(ctx, "g", 0, 1000); err != nil || r.Through != 1 || logSeqs(r) != "1=1" {
		t.Fatalf("a read across a gap being written: through %d, %s, %v; want 1 alone", r.Through, logSeqs(r), err)
	}
}
