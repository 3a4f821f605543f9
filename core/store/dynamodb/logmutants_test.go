package dynamodb_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/supervaize/svz/core/store"
	"github.com/supervaize/svz/core/store/dynamodb"
	"github.com/supervaize/svz/core/store/storetest"
	"github.com/supervaize/svz/internal/awsapi"
	"github.com/supervaize/svz/internal/testenv"
)

// TestLogReadSkipsSeals: a position sealed by one read is skipped by the next reads, which find
// the seal item itself (a tombstone) in their BatchGetItem, not an entry without data.
func TestLogReadSkipsSeals(t *testing.T) {
	c := client(t, testenv.Need(t, testenv.AWSEndpoint))
	name := table(t, c)
	clock := storetest.NewClock()
	s := open(t, c, name, dynamodb.WithClock(clock.Now))
	withGap(t, s, c, name, "moved", store.Retention{})
	clock.Advance(dynamodb.LogGapTimeout)
	ctx := context.Background()
	for _, read := range []string{"the read that seals 2", "the next read"} {
		if r, err := s.ReadLog(ctx, "moved", 0, 10); err != nil || r.Through != 3 || logSeqs(r) != "1=1 3=3" {
			t.Fatalf("%s: %+v %v; want 1 and 3, 2 sealed", read, r, err)
		}
	}
}

// TestLogSealLosesToTheEntry: when the entry of an old gap is written between a read's
// BatchGetItem and its seal, the seal fails and the read returns the entry DynamoDB hands back,
// at its own position.
func TestLogSealLosesToTheEntry(t *testing.T) {
	endpoint := testenv.Need(t, testenv.AWSEndpoint)
	plain := client(t, endpoint)
	name := table(t, plain)
	clock := storetest.NewClock()
	hook := &onCall{op: "PutItem", n: 1} // the reader's first PutItem is its seal of 2
	s := open(t, client(t, endpoint, awsapi.WithHTTPClient(hook)), name, dynamodb.WithClock(clock.Now))
	withGap(t, open(t, plain, name, dynamodb.WithClock(clock.Now)), plain, name, "moved", store.Retention{})
	clock.Advance(dynamodb.LogGapTimeout)
	ctx := context.Background()
	hook.f = func() {
		entry := map[string]any{
			"k":   map[string]string{"S": fmt.Sprintf("\x00log\x00moved\x00%020d", 2)},
			"at":  map[string]string{"N": fmt.Sprint(clock.Now().UnixMilli())},
			"d":   map[string][]byte{"B": []byte("late")},
			"tok": map[string]string{"S": "dead"},
		}
		if err := plain.Call(ctx, "PutItem", map[string]any{"TableName": name, "Item": entry}, nil); err != nil {
			t.Error(err)
		}
	}
	r, err := s.ReadLog(ctx, "moved", 0, 10)
	if err != nil || r.Through != 3 || logSeqs(r) != "1=1 2=late 3=3" {
		t.Fatalf("a gap written while it was being sealed: %+v %v; want 1, 2 (late) and 3", r, err)
	}
}

// rekey answers BatchGetItem with the server's answer, the key of every item returned set by
// key (from the key the server gave); other requests go to the server unchanged.
type rekey struct{ key func(string) string }

func (k *rekey) Do(req *http.Request) (*http.Response, error) {
	resp, err := http.DefaultClient.Do(req)
	if err != nil || req.Header.Get("X-Amz-Target") != "DynamoDB_20120810.BatchGetItem" {
		return resp, err
	}
	defer resp.Body.Close()
	var out struct {
		Responses       map[string][]map[string]map[string]any
		UnprocessedKeys map[string]any
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return nil, err
	}
	for _, items := range out.Responses {
		for _, it := range items {
			it["k"]["S"] = k.key(it["k"]["S"].(string))
		}
	}
	body, err := json.Marshal(out)
	if err != nil {
		return nil, err
	}
	resp.Body, resp.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
	resp.Header.Del("Content-Length")
	resp.Header.Del("X-Amz-Crc32")
	return resp, nil
}

// TestLogReadRejectsForeignKeys: a BatchGetItem answer with an item whose key is not a log
// entry's (no NUL before a position, or a position that is not a number) fails the read as
// corrupt, naming the key; it is never taken for an entry (at position 0 or another).
func TestLogReadRejectsForeignKeys(t *testing.T) {
	endpoint := testenv.Need(t, testenv.AWSEndpoint)
	plain := client(t, endpoint)
	name := table(t, plain)
	ctx := context.Background()
	if _, err := open(t, plain, name).AppendLog(ctx, "keys", []byte("1"), store.Retention{}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, key string
	}{
		{"no NUL", "1"},
		{"a position that is not a number", "\x00log\x00keys\x00one"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := open(t, client(t, endpoint, awsapi.WithHTTPClient(&rekey{key: func(string) string { return tc.key }})), name)
			r, err := s.ReadLog(ctx, "keys", 0, 10)
			if err == nil || !strings.Contains(err.Error(), "corrupt item: log entry key "+fmt.Sprintf("%q", tc.key)) || len(r.Entries) != 0 {
				t.Fatalf("an answer with key %q: %+v %v; want the corrupt key named", tc.key, r, err)
			}
		})
	}
	// The transport itself changes nothing else: with the key the server gave, the read is whole.
	s := open(t, client(t, endpoint, awsapi.WithHTTPClient(&rekey{key: func(k string) string { return k }})), name)
	if r, err := s.ReadLog(ctx, "keys", 0, 10); err != nil || logSeqs(r) != "1=1" {
		t.Fatalf("an answer unchanged: %+v %v", r, err)
	}
}

// TestLogPollIntervalZero: WithLogPollInterval(0), like a negative interval, polls at
// DefaultLogPollInterval: a waiter is woken by another process's append.
func TestLogPollIntervalZero(t *testing.T) {
	c := client(t, testenv.Need(t, testenv.AWSEndpoint))
	name := table(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a guard, not a measure
	defer cancel()
	for _, d := range []time.Duration{0, -time.Second} {
		log := fmt.Sprint("poll", d)
		if _, err := open(t, c, name).AppendLog(ctx, log, []byte("1"), store.Retention{}); err != nil {
			t.Fatal(err)
		}
		if err := open(t, c, name, dynamodb.WithLogPollInterval(d)).WaitLog(ctx, log, 0); err != nil {
			t.Fatalf("wait with a poll interval of %v: %v", d, err)
		}
	}
}

// TestLogSealStepsFail: a read that would seal an old gap fails, sealing nothing, when its second
// read of the head fails, or when the entry the seal found written meanwhile does not decode.
func TestLogSealStepsFail(t *testing.T) {
	endpoint := testenv.Need(t, testenv.AWSEndpoint)
	plain := client(t, endpoint)
	name := table(t, plain)
	clock := storetest.NewClock()
	ctx := context.Background()
	for _, tc := range []struct {
		log  string
		hook func(log string) *onCall
		want string
	}{
		{"head-read-fails", func(string) *onCall { return &onCall{op: "GetItem", n: 2, fail: true} }, "injected"}, // 1 is the read's own
		{"corrupt-late-entry", func(log string) *onCall {
			return &onCall{op: "PutItem", n: 1, f: func() { // the seal's: a corrupt entry lands first
				entry := map[string]any{"k": map[string]string{"S": fmt.Sprintf("\x00log\x00%s\x00%020d", log, 2)}, "d": map[string]string{"S": "late"}}
				if err := plain.Call(ctx, "PutItem", map[string]any{"TableName": name, "Item": entry}, nil); err != nil {
					t.Error(err)
				}
			}}
		}, "corrupt item"},
	} {
		withGap(t, open(t, plain, name, dynamodb.WithClock(clock.Now)), plain, name, tc.log, store.Retention{})
		s := open(t, client(t, endpoint, awsapi.WithHTTPClient(tc.hook(tc.log))), name, dynamodb.WithClock(clock.Now))
		clock.Advance(dynamodb.LogGapTimeout)
		if r, err := s.ReadLog(ctx, tc.log, 0, 10); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %+v %v; want an error with %q", tc.log, r, err, tc.want)
		}
	}
}

// handWrittenSecond appends entry 1 of log through s, then claims position 2 and writes its item
// by hand with attrs (beside its key), as no store would.
func handWrittenSecond(t *testing.T, s *dynamodb.Store, c *awsapi.Client, table, log string, attrs map[string]any) {
	t.Helper()
	ctx := context.Background()
	if _, err := s.AppendLog(ctx, log, []byte("1"), store.Retention{}); err != nil {
		t.Fatal(err)
	}
	claimDead(t, c, table, log)
	item := map[string]any{"k": map[string]string{"S": fmt.Sprintf("\x00log\x00%s\x00%020d", log, 2)}}
	for k, v := range attrs {
		item[k] = v
	}
	if err := c.Call(ctx, "PutItem", map[string]any{"TableName": table, "Item": item}, nil); err != nil {
		t.Fatal(err)
	}
}

// TestLogCorruptEntry: a read that meets an entry whose time or data does not decode fails naming
// the position and the fault; it returns no entry with a made-up time or data.
func TestLogCorruptEntry(t *testing.T) {
	endpoint := testenv.Need(t, testenv.AWSEndpoint)
	plain := client(t, endpoint)
	name := table(t, plain)
	s := open(t, plain, name)
	ctx := context.Background()
	for _, tc := range []struct {
		log  string
		at   map[string]string
		d    any
		want string
	}{
		{"at-of-another-type", map[string]string{"S": "5"}, map[string][]byte{"B": []byte("x")}, `attribute "at" is not of type N`},
		{"at-not-an-integer", map[string]string{"N": "1.5"}, map[string][]byte{"B": []byte("x")}, `at "1.5"`},
		{"data-of-another-type", map[string]string{"N": "1000"}, map[string]string{"S": "x"}, `attribute "d" is not of type B`},
	} {
		handWrittenSecond(t, s, plain, name, tc.log, map[string]any{"at": tc.at, "d": tc.d})
		want := fmt.Sprintf(`dynamodb: read log %q: entry 2: corrupt item: %s`, tc.log, tc.want)
		if r, err := s.ReadLog(ctx, tc.log, 0, 10); err == nil || err.Error() != want {
			t.Errorf("%s: %+v %v; want %s", tc.log, r, err, want)
		}
	}
}

// TestLogEntryWithoutData: an entry item without its data attribute (DynamoDB keeps no empty
// attribute for some writers) reads as an empty entry, not absent data.
func TestLogEntryWithoutData(t *testing.T) {
	endpoint := testenv.Need(t, testenv.AWSEndpoint)
	plain := client(t, endpoint)
	name := table(t, plain)
	s := open(t, plain, name)
	ctx := context.Background()
	handWrittenSecond(t, s, plain, name, "nd", map[string]any{"at": map[string]string{"N": "1000"}})
	r, err := s.ReadLog(ctx, "nd", 1, 10)
	if err != nil || len(r.Entries) != 1 || r.Entries[0].Data == nil || len(r.Entries[0].Data) != 0 || r.Entries[0].At.UnixMilli() != 1000 {
		t.Fatalf("an entry without data: %+v %v; want entry 2, empty, at 1000 ms", r, err)
	}
}
