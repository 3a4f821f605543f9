package dynamodb_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/supervaize/svz/core/store"
	"github.com/supervaize/svz/core/store/dynamodb"
	"github.com/supervaize/svz/core/store/storetest"
	"github.com/supervaize/svz/internal/awsapi"
	"github.com/supervaize/svz/internal/testenv"
)

// tableEnv passes the test's table to appender processes.
const tableEnv = "SVZ_STORETEST_TABLE"

func TestMain(m *testing.M) {
	storetest.LogProcessMain(func(ctx context.Context) (store.Store, error) {
		c, err := dynamodb.NewClient(env("AWS_ACCESS_KEY_ID", "test", "AWS_SECRET_ACCESS_KEY", secretKey, "AWS_REGION", "us-east-1",
			"AWS_ENDPOINT_URL_DYNAMODB", os.Getenv(testenv.AWSEndpoint)))
		if err != nil {
			return nil, err
		}
		return dynamodb.New(ctx, c, os.Getenv(tableEnv), dynamodb.WithLogPollInterval(20*time.Millisecond))
	})
	os.Exit(m.Run())
}

func TestLogConformance(t *testing.T) {
	// Concurrent appends race their counter updates and conditional puts: testenv.MotoWrites
	// makes each atomic, as on DynamoDB (moto_server's are not).
	c := client(t, testenv.Need(t, testenv.AWSEndpoint), awsapi.WithHTTPClient(&testenv.MotoWrites{}))
	name := table(t, c)
	storetest.RunLog(t, func(t testing.TB, now func() time.Time) store.Store {
		return open(t, c, name, dynamodb.WithClock(now), dynamodb.WithLogPollInterval(20*time.Millisecond))
	}, storetest.SealsGaps(), storetest.BytesInEighths())
}

func TestLogProcesses(t *testing.T) {
	// The children's appends race on one log: through MotoProxy their writes are atomic, as on
	// DynamoDB.
	proxy := testenv.MotoProxy(t, testenv.Need(t, testenv.AWSEndpoint))
	c := client(t, proxy)
	name := table(t, c)
	storetest.RunLogProcesses(t, func(t testing.TB, now func() time.Time) store.Store {
		return open(t, c, name, dynamodb.WithLogPollInterval(20*time.Millisecond))
	}, []string{tableEnv + "=" + name, testenv.AWSEndpoint + "=" + proxy}, storetest.SealsGaps())
}

// TestLogRoundTrips pins the package doc: an append is two writes (whoever appended before; one
// more to create a log), a read a GetItem and a BatchGetItem.
func TestLogRoundTrips(t *testing.T) {
	var tr trips
	c := client(t, testenv.Need(t, testenv.AWSEndpoint), awsapi.WithHTTPClient(&tr))
	name := table(t, c)
	s := open(t, c, name)
	ctx := context.Background()
	keep := store.Retention{MaxAge: time.Hour, MaxCount: 1000}
	count := func(what string, want int64, f func() error) {
		t.Helper()
		before := tr.n.Load()
		if err := f(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if got := tr.n.Load() - before; got != want {
			t.Errorf("%s took %d round trips, want %d", what, got, want)
		}
	}
	appendOne := func() error { _, err := s.AppendLog(ctx, "rt", []byte("e"), keep); return err }
	count("the first append of a new log", 3, appendOne) // a failed claim, the head, the entry
	count("an append", 2, appendOne)
	count("a read", 2, func() error { _, err := s.ReadLog(ctx, "rt", 0, 10); return err })
	count("a read at the end", 1, func() error { _, err := s.ReadLog(ctx, "rt", 2, 10); return err })
	other := open(t, client(t, testenv.Need(t, testenv.AWSEndpoint)), name)
	if _, err := other.AppendLog(ctx, "rt", []byte("e"), keep); err != nil {
		t.Fatal(err)
	}
	count("an append after another process's", 2, appendOne)
}

// scanLog returns the keys of the log items of the table.
func scanLog(t *testing.T, c *awsapi.Client, table string) []string {
	t.Helper()
	var out struct {
		Items []map[string]map[string]json.RawMessage
	}
	if err := c.Call(context.Background(), "Scan", map[string]string{"TableName": table}, &out); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, it := range out.Items {
		var k string
		_ = json.Unmarshal(it["k"]["S"], &k)
		if strings.HasPrefix(k, "\x00log\x00") {
			keys = append(keys, k)
		}
	}
	return keys
}

// TestLogReclaimsItems: in a log with a count bound alone (no ttl to give its entries), the store
// deletes the entries retention drops, in batches.
func TestLogReclaimsItems(t *testing.T) {
	c := client(t, testenv.Need(t, testenv.AWSEndpoint))
	name := table(t, c)
	s := open(t, c, name)
	ctx := context.Background()
	keep := store.Retention{MaxCount: 5}
	for range 100 {
		if _, err := s.AppendLog(ctx, "gc", []byte("e"), keep); err != nil {
			t.Fatal(err)
		}
	}
	keys := scanLog(t, c, name)
	if len(keys) > 1+keep.MaxCount+dynamodb.LogReclaimBatch {
		t.Errorf("after 100 appends keeping 5, the table holds %d log items, want at most %d", len(keys), 1+keep.MaxCount+dynamodb.LogReclaimBatch)
	}
	r, err := s.ReadLog(ctx, "gc", 0, 100)
	if err != nil || r.First != 96 || len(r.Entries) != 5 {
		t.Fatalf("read: %+v %v", r, err)
	}
}

// ops counts requests per DynamoDB operation and sends them through next (nil: the server).
type ops struct {
	next interface {
		Do(*http.Request) (*http.Response, error)
	}
	mu sync.Mutex
	n  map[string]int
}

func (o *ops) Do(req *http.Request) (*http.Response, error) {
	o.mu.Lock()
	if o.n == nil {
		o.n = map[string]int{}
	}
	o.n[strings.TrimPrefix(req.Header.Get("X-Amz-Target"), "DynamoDB_20120810.")]++
	o.mu.Unlock()
	if o.next != nil {
		return o.next.Do(req)
	}
	return http.DefaultClient.Do(req)
}

func (o *ops) count(op string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.n[op]
}

// TestLogLeavesAgedEntriesToTheSweeper: a log with an age bound deletes nothing itself (a delete
// costs a write unit, a TTL deletion none): its entries carry a ttl past the latest time its
// retention keeps them. A read that finds them swept from an idle log moves First past them, as
// retention would have, and seals nothing.
func TestLogLeavesAgedEntriesToTheSweeper(t *testing.T) {
	var o ops
	c := client(t, testenv.Need(t, testenv.AWSEndpoint), awsapi.WithHTTPClient(&o))
	name := table(t, c)
	clock := storetest.NewClock()
	s := open(t, c, name, dynamodb.WithClock(clock.Now))
	ctx := context.Background()
	keep := store.Retention{MaxAge: time.Hour, MaxCount: 5}
	for i := range 100 {
		if _, err := s.AppendLog(ctx, "ttl", fmt.Appendf(nil, "e%d", i+1), keep); err != nil {
			t.Fatal(err)
		}
	}
	if n := o.count("BatchWriteItem"); n != 0 {
		t.Errorf("100 appends keeping 5 for an hour sent %d BatchWriteItem; want none (the sweeper reclaims)", n)
	}
	if n := o.count("UpdateItem"); n != 100 {
		t.Errorf("100 appends sent %d UpdateItem; want 100 claims (the first fails: no head yet) and no maintenance", n)
	}
	// Every entry is still there, with its ttl: append time + an hour + an eighth of it + SweepGrace.
	var got struct {
		Items []map[string]map[string]string
	}
	if err := c.Call(ctx, "Scan", map[string]string{"TableName": name}, &got); err != nil {
		t.Fatal(err)
	}
	wantTTL := strconv.FormatInt((clock.Now().UnixMilli()+(time.Hour+time.Hour/8+dynamodb.SweepGrace).Milliseconds())/1000+1, 10)
	entries := 0
	for _, it := range got.Items {
		if strings.Count(it["k"]["S"], "\x00") == 3 {
			entries++
			if it["ttl"]["N"] != wantTTL {
				t.Errorf("entry %q: ttl %s, want %s", it["k"]["S"], it["ttl"]["N"], wantTTL)
			}
		}
	}
	if entries != 100 {
		t.Errorf("the table holds %d entries, want all 100 until the sweeper runs", entries)
	}
	r, err := s.ReadLog(ctx, "ttl", 0, 100)
	if err != nil || r.First != 96 || r.Through != 100 || len(r.Entries) != 5 || string(r.Entries[0].Data) != "e96" {
		t.Fatalf("read: %+v %v; want First 96 and entries 96 to 100", r, err)
	}

	// The log stays idle past the sweep window, and the sweeper deletes every entry.
	clock.Advance(time.Hour + time.Hour/8 + dynamodb.SweepGrace + time.Second)
	for _, it := range got.Items {
		if k := it["k"]["S"]; strings.Count(k, "\x00") == 3 {
			if err := c.Call(ctx, "DeleteItem", map[string]any{"TableName": name, "Key": map[string]any{"k": map[string]string{"S": k}}}, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	puts := o.count("PutItem")
	r, err = s.ReadLog(ctx, "ttl", 95, 100)
	if err != nil || r.First != 101 || r.Last != 100 || r.Through != 100 || len(r.Entries) != 0 {
		t.Fatalf("read of the swept log: %+v %v; want First 101, through 100, no entry", r, err)
	}
	if n := o.count("PutItem") - puts; n != 0 {
		t.Errorf("the read of swept entries sent %d PutItem; want no seal", n)
	}
	if p, err := s.AppendLog(ctx, "ttl", []byte("e101"), keep); err != nil || p.Seq != 101 {
		t.Fatalf("append after the sweep: %+v %v", p, err)
	}
	r, err = s.ReadLog(ctx, "ttl", 100, 10)
	if err != nil || r.First != 101 || len(r.Entries) != 1 || string(r.Entries[0].Data) != "e101" {
		t.Fatalf("read after the sweep: %+v %v; want e101 first and alone", r, err)
	}
}

// TestLogSealsAbandonedClaims: an appender that claimed a position and died before writing its
// entry holds readers back for LogGapTimeout at most; then a reader seals the position and reads
// on. Nothing after it is skipped, and the sealed position holds no entry.
func TestLogSealsAbandonedClaims(t *testing.T) {
	c := client(t, testenv.Need(t, testenv.AWSEndpoint))
	name := table(t, c)
	clock := storetest.NewClock()
	s := open(t, c, name, dynamodb.WithClock(clock.Now))
	ctx := context.Background()
	if _, err := s.AppendLog(ctx, "gap", []byte("1"), store.Retention{}); err != nil {
		t.Fatal(err)
	}
	claimDead(t, c, name, "gap") // position 2: claimed, never written
	other := open(t, c, name, dynamodb.WithClock(clock.Now))
	if _, err := other.AppendLog(ctx, "gap", []byte("3"), store.Retention{}); err != nil {
		t.Fatal(err)
	}
	r, err := s.ReadLog(ctx, "gap", 0, 10)
	if err != nil || r.Last != 3 || r.Through != 1 || len(r.Entries) != 1 {
		t.Fatalf("read with position 2 claimed but not written: %+v %v; want entry 1 only, through 1", r, err)
	}
	clock.Advance(dynamodb.LogGapTimeout + time.Second)
	r, err = s.ReadLog(ctx, "gap", 1, 10)
	if err != nil || r.Through != 3 || len(r.Entries) != 1 || r.Entries[0].Seq != 3 || string(r.Entries[0].Data) != "3" {
		t.Fatalf("read after the gap timeout: %+v %v; want entry 3, through 3", r, err)
	}
	if p, err := s.AppendLog(ctx, "gap", []byte("4"), store.Retention{}); err != nil || p.Seq != 4 {
		t.Fatalf("append after the seal: %+v %v", p, err)
	}
}

// loseNth loses the answer of the nth request of operation op (counting from 1), once.
type loseNth struct {
	op         string
	n          int64
	seen, lost atomic.Int64
}

func (l *loseNth) Do(req *http.Request) (*http.Response, error) {
	resp, err := http.DefaultClient.Do(req)
	if err == nil && req.Header.Get("X-Amz-Target") == "DynamoDB_20120810."+l.op && l.seen.Add(1) == l.n {
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		l.lost.Add(1)
		return nil, fmt.Errorf("read tcp: connection reset by peer (answer to %s lost)", l.op)
	}
	return resp, err
}

// TestLogLostAnswers: an append whose head claim or entry write is applied but whose answer is
// lost is retried by awsapi, recognizes its own write, and appends once.
func TestLogLostAnswers(t *testing.T) {
	endpoint := testenv.Need(t, testenv.AWSEndpoint)
	admin := client(t, endpoint)
	name := table(t, admin)
	ctx := context.Background()
	for i, op := range []string{"PutItem", "UpdateItem", "PutItem"} { // the new head, a claim, an entry
		l := &loseNth{op: op, n: 1}
		s := open(t, client(t, endpoint, awsapi.WithHTTPClient(l), awsapi.WithRetries(3, time.Millisecond)), name)
		if _, err := s.AppendLog(ctx, "lost", fmt.Appendf(nil, "e%d", i+1), store.Retention{}); err != nil {
			t.Fatalf("append %d: %v", i+1, err)
		}
		if l.lost.Load() != 1 {
			t.Fatalf("append %d: %d answers lost, want 1", i+1, l.lost.Load())
		}
	}
	r, err := open(t, admin, name).ReadLog(ctx, "lost", 0, 100)
	if err != nil || r.Last != 3 || len(r.Entries) != 3 || string(r.Entries[0].Data) != "e1" || string(r.Entries[2].Data) != "e3" {
		t.Fatalf("after lost answers: %+v %v; want e1, e2, e3 at 1, 2, 3", r, err)
	}
}

func BenchmarkLog(b *testing.B) {
	endpoint := testenv.Need(b, testenv.AWSEndpoint)
	var tr trips
	c := client(b, endpoint, awsapi.WithHTTPClient(&tr))
	name := table(b, c)
	storetest.BenchmarkLog(b, func(b *testing.B) (store.Log, store.Log) {
		return open(b, c, name), open(b, client(b, endpoint), name)
	}, tr.n.Load)
}

// TestLogHeadOfAnOlderVersion: a head written before the byte bound (no sum, psum, keepb,
// bmarks) takes its next claims, counting bytes from 0: its older entries go once the bound's
// worth of newer data is claimed.
func TestLogHeadOfAnOlderVersion(t *testing.T) {
	c := client(t, testenv.Need(t, testenv.AWSEndpoint), awsapi.WithHTTPClient(&testenv.MotoWrites{}))
	name := table(t, c)
	s := open(t, c, name)
	defer s.Close()
	ctx := context.Background()
	const log = "effects/older"
	for range 2 {
		if _, err := s.AppendLog(ctx, log, []byte("old"), store.Retention{}); err != nil {
			t.Fatal(err)
		}
	}
	err := c.Call(ctx, "UpdateItem", map[string]any{
		"TableName": name, "Key": map[string]any{"k": map[string]string{"S": "\x00log\x00" + log}},
		"UpdateExpression":         "REMOVE #sum, #psum, #keepb, #bmarks",
		"ExpressionAttributeNames": map[string]string{"#sum": "sum", "#psum": "psum", "#keepb": "keepb", "#bmarks": "bmarks"},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The older entries end at byte 0: they go once 10 bytes are claimed after them.
	storetest.AppendsRead(t, s, log, "12345", store.Retention{MaxBytes: 10}, "1-3: old old 12345", "3-4: 12345 12345", "4-5: 12345 12345")
}
