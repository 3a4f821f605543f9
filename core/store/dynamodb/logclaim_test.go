package dynamodb_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/supervaize/svz/core/store"
	"github.com/supervaize/svz/internal/awsapi"
	"github.com/supervaize/svz/internal/testenv"
)

// The first append of a log when another appender starts it at the same time, and a claim whose
// answer holds no head: each step of the race is a request the test holds, no clock.

// afterClaim runs hook once, after the first claim (UpdateItem) of the appender it serves has
// failed and before the appender reads that answer: another appender acting between the two
// writes of a first append. Answers to UpdateItem are replaced by body while it is set.
type afterClaim struct {
	mu   sync.Mutex
	hook func()
	body string
}

func (a *afterClaim) Do(req *http.Request) (*http.Response, error) {
	resp, err := http.DefaultClient.Do(req)
	if err != nil || req.Header.Get("X-Amz-Target") != "DynamoDB_20120810.UpdateItem" {
		return resp, err
	}
	a.mu.Lock()
	hook, body := a.hook, a.body
	a.hook = nil
	a.mu.Unlock()
	if hook != nil {
		hook()
	}
	if body != "" && resp.StatusCode == http.StatusOK {
		resp.Body.Close()
		resp.Body = io.NopCloser(strings.NewReader(body))
		resp.ContentLength = int64(len(body))
		resp.Header.Del("X-Amz-Crc32") // the checksum of the answer replaced
	}
	return resp, nil
}

// putHead writes the head of log as an appender that claimed position 1 (token tok) and has not
// yet written its entry, with first set to first (0 is corrupt).
func putHead(t *testing.T, c *awsapi.Client, table, log, tok string, first int) {
	t.Helper()
	it := map[string]any{"k": map[string]string{"S": "\x00log\x00" + log}, "ep": map[string]string{"S": "theirs"}, "tok": map[string]string{"S": tok}}
	for k, v := range map[string]int{"seq": 1, "at": 1, "pseq": 0, "pat": 1, "keepn": 0, "keepage": 0, "first": first, "gone": 1, "mv": 0} {
		it[k] = map[string]string{"N": strconv.Itoa(v)}
	}
	if err := c.Call(context.Background(), "PutItem", map[string]any{"TableName": table, "Item": it}, nil); err != nil {
		t.Fatal(err)
	}
}

// TestLogFirstAppendRace: an appender whose new head loses to another appender's claims after
// that one's position 1 (still being written), never position 1 too; and a head found corrupt
// there is an error, not claimed.
func TestLogFirstAppendRace(t *testing.T) {
	endpoint := testenv.Need(t, testenv.AWSEndpoint)
	admin := client(t, endpoint)
	name := table(t, admin)
	ctx := context.Background()
	a := &afterClaim{}
	s := open(t, client(t, endpoint, awsapi.WithHTTPClient(a)), name)

	a.hook = func() { putHead(t, admin, name, "race", "theirs", 1) }
	p, err := s.AppendLog(ctx, "race", []byte("mine"), store.Retention{})
	if err != nil || p.Epoch != "theirs" || p.Seq != 2 {
		t.Fatalf("append after another appender created the head: %+v %v; want theirs-2", p, err)
	}

	a.hook = func() { putHead(t, admin, name, "corrupt", "theirs", 0) }
	if p, err := s.AppendLog(ctx, "corrupt", []byte("mine"), store.Retention{}); err == nil || !strings.Contains(err.Error(), "seq 1 first 0") {
		t.Fatalf("append over a corrupt head: %+v %v; want the head's error, seq 1", p, err)
	}
	var head struct{ Item map[string]map[string]string }
	key := map[string]any{"k": map[string]string{"S": "\x00log\x00corrupt"}}
	if err := admin.Call(ctx, "GetItem", map[string]any{"TableName": name, "Key": key, "ConsistentRead": true}, &head); err != nil || head.Item["seq"]["N"] != "1" {
		t.Fatalf("the corrupt head after the append: %v %v; want it unclaimed, seq 1", head.Item, err)
	}
}

// TestLogClaimWithoutHead: a claim answered without the head it returns (a broken endpoint) fails
// the append; nothing is written at a position 0.
func TestLogClaimWithoutHead(t *testing.T) {
	endpoint := testenv.Need(t, testenv.AWSEndpoint)
	admin := client(t, endpoint)
	name := table(t, admin)
	ctx := context.Background()
	a := &afterClaim{}
	s := open(t, client(t, endpoint, awsapi.WithHTTPClient(a)), name)
	if _, err := s.AppendLog(ctx, "nohead", []byte("1"), store.Retention{}); err != nil {
		t.Fatal(err)
	}
	a.body = `{}`
	p, err := s.AppendLog(ctx, "nohead", []byte("2"), store.Retention{})
	if err == nil || !strings.Contains(err.Error(), "the claim returned no head") {
		t.Fatalf("append whose claim returned no head: %+v %v", p, err)
	}
	if keys := scanLog(t, admin, name); len(keys) != 2 {
		t.Fatalf("log items %q; want the head and entry 1", keys)
	}
}

// TestLogLostHeadAnswer: a first append whose new head was written but whose answer was lost
// finds its own head on the retry and takes it as written: no claim beyond the first (the one
// that found no head).
func TestLogLostHeadAnswer(t *testing.T) {
	endpoint := testenv.Need(t, testenv.AWSEndpoint)
	name := table(t, client(t, endpoint))
	l := &loseNth{op: "PutItem", n: 1}
	o := &ops{next: l}
	s := open(t, client(t, endpoint, awsapi.WithHTTPClient(o), awsapi.WithRetries(3, time.Millisecond)), name)
	p, err := s.AppendLog(context.Background(), "lost", []byte("e"), store.Retention{})
	if err != nil || p.Seq != 1 || l.lost.Load() != 1 {
		t.Fatalf("first append with the head's answer lost: %+v %v (%d lost)", p, err, l.lost.Load())
	}
	if claims, puts := o.count("UpdateItem"), o.count("PutItem"); claims != 1 || puts != 3 {
		t.Fatalf("%d UpdateItem, %d PutItem; want 1 (no head yet) and 3 (the head twice, the entry)", claims, puts)
	}
}

// unprocessed answers the first times requests of op (BatchGetItem or BatchWriteItem) as
// DynamoDB does when it is throttled: nothing done, every key or item handed back unprocessed.
// The others go to the server.
type unprocessed struct {
	op    string
	times int
	seen  int
}

func (u *unprocessed) Do(req *http.Request) (*http.Response, error) {
	if req.Header.Get("X-Amz-Target") != "DynamoDB_20120810."+u.op {
		return http.DefaultClient.Do(req)
	}
	if u.seen++; u.seen > u.times {
		return http.DefaultClient.Do(req)
	}
	var in struct{ RequestItems json.RawMessage }
	if err := json.NewDecoder(req.Body).Decode(&in); err != nil {
		return nil, err
	}
	field := map[string]string{"BatchGetItem": "UnprocessedKeys", "BatchWriteItem": "UnprocessedItems"}[u.op]
	body, _ := json.Marshal(map[string]json.RawMessage{field: in.RequestItems})
	return &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {"application/x-amz-json-1.0"}},
		Body: io.NopCloser(bytes.NewReader(body)), ContentLength: int64(len(body)), Request: req}, nil
}

// TestLogReadUnprocessedKeys: a read asks again for the keys DynamoDB left unprocessed, and gives
// up with an error after 5 answers that processed none (never a range with entries missing).
func TestLogReadUnprocessedKeys(t *testing.T) {
	endpoint := testenv.Need(t, testenv.AWSEndpoint)
	admin := client(t, endpoint)
	name := table(t, admin)
	ctx := context.Background()
	w := open(t, admin, name)
	for _, d := range []string{"a", "b", "c"} {
		if _, err := w.AppendLog(ctx, "u", []byte(d), store.Retention{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		times, requests int
		ok              bool
	}{{1, 2, true}, {4, 5, true}, {5, 5, false}} {
		u := &unprocessed{op: "BatchGetItem", times: tc.times}
		s := open(t, client(t, endpoint, awsapi.WithHTTPClient(u)), name)
		r, err := s.ReadLog(ctx, "u", 0, 10)
		if tc.ok && (err != nil || logSeqs(r) != "1=a 2=b 3=c") || !tc.ok && (err == nil || !strings.Contains(err.Error(), "unprocessed 5 times")) || u.seen != tc.requests {
			t.Fatalf("read with %d answers processing nothing: %+v %v after %d BatchGetItem; want ok %v after %d", tc.times, r, err, u.seen, tc.ok, tc.requests)
		}
	}
}

// beforeMaintain runs hook once, just before the first maintenance write (the UpdateItem
// conditional on mv) it forwards: another appender's maintenance winning the race.
type beforeMaintain struct{ hook func() }

func (b *beforeMaintain) Do(req *http.Request) (*http.Response, error) {
	if b.hook != nil && req.Header.Get("X-Amz-Target") == "DynamoDB_20120810.UpdateItem" {
		body, err := io.ReadAll(req.Body)
		if err != nil {
			return nil, err
		}
		req.Body = io.NopCloser(bytes.NewReader(body))
		if bytes.Contains(body, []byte(`":mv0"`)) {
			hook := b.hook
			b.hook = nil
			hook()
		}
	}
	return http.DefaultClient.Do(req)
}

// TestLogMaintenanceRace: a maintenance that loses to another's (mv moved under it) redoes its
// work on the head as it now is: the reclaim batch is still deleted.
func TestLogMaintenanceRace(t *testing.T) {
	endpoint := testenv.Need(t, testenv.AWSEndpoint)
	admin := client(t, endpoint)
	name := table(t, admin)
	ctx := context.Background()
	b := &beforeMaintain{}
	s := open(t, client(t, endpoint, awsapi.WithHTTPClient(b)), name)
	keep := store.Retention{MaxCount: 5}
	for range 29 {
		if _, err := s.AppendLog(ctx, "race", []byte("e"), keep); err != nil {
			t.Fatal(err)
		}
	}
	b.hook = func() {
		key := map[string]any{"k": map[string]string{"S": "\x00log\x00race"}}
		if err := admin.Call(ctx, "UpdateItem", map[string]any{"TableName": name, "Key": key, "UpdateExpression": "SET mv = mv + :one",
			"ExpressionAttributeValues": map[string]any{":one": map[string]string{"N": "1"}}}, nil); err != nil {
			t.Error(err)
		}
	}
	if _, err := s.AppendLog(ctx, "race", []byte("e"), keep); err != nil || b.hook != nil {
		t.Fatalf("the 30th append: %v (maintenance raced: %v)", err, b.hook == nil)
	}
	entries := 0
	for _, k := range scanLog(t, admin, name) {
		if strings.Count(k, "\x00") == 3 {
			entries++
		}
	}
	if entries != 5 {
		t.Fatalf("after 30 appends keeping 5 and a lost maintenance race: %d entries; want 5 (the batch of 25 deleted on the retry)", entries)
	}
}

// TestLogEntriesWithoutAgeBoundKeepNoTTL: the entries of a log without an age bound carry no
// ttl (DynamoDB's sweeper would delete them while retention keeps them), a log with one does.
func TestLogEntriesWithoutAgeBoundKeepNoTTL(t *testing.T) {
	c := client(t, testenv.Need(t, testenv.AWSEndpoint))
	name := table(t, c)
	s := open(t, c, name)
	ctx := context.Background()
	for log, keep := range map[string]store.Retention{"none": {}, "count": {MaxCount: 10}, "bytes": {MaxBytes: 1000}, "age": {MaxAge: time.Hour}} {
		if _, err := s.AppendLog(ctx, log, []byte("e"), keep); err != nil {
			t.Fatal(err)
		}
	}
	var out struct {
		Items []map[string]map[string]string
	}
	if err := c.Call(ctx, "Scan", map[string]string{"TableName": name}, &out); err != nil {
		t.Fatal(err)
	}
	entries := 0
	for _, it := range out.Items {
		k := it["k"]["S"]
		if strings.Count(k, "\x00") != 3 {
			continue
		}
		entries++
		if _, has := it["ttl"]; has != strings.HasPrefix(k, "\x00log\x00age\x00") {
			t.Errorf("entry %q: ttl %v", k, it["ttl"])
		}
	}
	if entries != 4 {
		t.Fatalf("%d entries, want 4", entries)
	}
}

// TestLogReclaimUnprocessedItems: a reclaim batch that DynamoDB leaves unprocessed is sent again
// once: the entries are deleted when the second answer processes them.
func TestLogReclaimUnprocessedItems(t *testing.T) {
	endpoint := testenv.Need(t, testenv.AWSEndpoint)
	admin := client(t, endpoint)
	name := table(t, admin)
	ctx := context.Background()
	u := &unprocessed{op: "BatchWriteItem", times: 1}
	s := open(t, client(t, endpoint, awsapi.WithHTTPClient(u)), name)
	for range 30 { // keeping 5, the 30th append reclaims 25
		if _, err := s.AppendLog(ctx, "u", []byte("e"), store.Retention{MaxCount: 5}); err != nil {
			t.Fatal(err)
		}
	}
	entries := 0
	for _, k := range scanLog(t, admin, name) {
		if strings.Count(k, "\x00") == 3 {
			entries++
		}
	}
	if entries != 5 || u.seen != 2 {
		t.Fatalf("after a reclaim left unprocessed once: %d entries after %d BatchWriteItem; want 5 after 2", entries, u.seen)
	}
}
