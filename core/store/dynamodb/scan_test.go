package dynamodb_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/supervaize/svz/core/store"
	"github.com/supervaize/svz/core/store/dynamodb"
	"github.com/supervaize/svz/internal/awsapi"
	"github.com/supervaize/svz/internal/testenv"
)

// countScans counts the Scan requests it forwards.
type countScans struct{ n atomic.Int64 }

func (c *countScans) Do(req *http.Request) (*http.Response, error) {
	if req.Header.Get("X-Amz-Target") == "DynamoDB_20120810.Scan" {
		c.n.Add(1)
	}
	return http.DefaultClient.Do(req)
}

// manualNow is a clock the test moves.
type manualNow struct {
	mu sync.Mutex
	t  time.Time
}

func (m *manualNow) now() time.Time { m.mu.Lock(); defer m.mu.Unlock(); return m.t }
func (m *manualNow) add(d time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.t = m.t.Add(d)
}

// TestScanKeys: ScanKeys finds every live key under the prefix, the keys WithUnlisted keeps out
// of the index included, across Scan pages (more than 1 MB of items), and no expired record, no
// key outside the prefix; an error of fn ends the scan with it; a closed store refuses.
func TestScanKeys(t *testing.T) {
	scans := &countScans{}
	c := client(t, testenv.Need(t, testenv.AWSEndpoint), awsapi.WithHTTPClient(scans))
	clk := &manualNow{t: time.Now().UTC().Truncate(time.Millisecond)}
	s := open(t, c, table(t, c), dynamodb.WithUnlisted("jobs/v1/t/"), dynamodb.WithClock(clk.now))
	ctx := context.Background()
	big := bytes.Repeat([]byte("x"), 250_000) // five of them make more than one Scan page
	var want []string
	put := func(key string, value []byte, exp time.Time) {
		t.Helper()
		if _, err := s.Create(ctx, key, value, exp); err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range []string{"jobs/v1/t/a/w/j1", "jobs/v1/t/a/w/j1/s/1", "jobs/v1/t/a/w/j2", "jobs/v1/t/b/w/j3"} {
		put(k, []byte("small"), store.Never)
		want = append(want, k)
	}
	for i := range 5 {
		k := "jobs/v1/t/a/w/big" + string(rune('0'+i))
		put(k, big, clk.now().Add(time.Hour))
		want = append(want, k)
	}
	put("jobs/v1/t/a/w/expired", []byte("gone"), clk.now().Add(time.Minute))
	put("jobs/v1/p/a/w/j1", []byte("other prefix"), store.Never)
	put("idempotency/x", []byte("other prefix"), store.Never)
	clk.add(time.Minute) // the record expiring at +1m is gone at +1m

	var got []string
	if err := s.ScanKeys(ctx, "jobs/v1/t/", func(k string) error { got = append(got, k); return nil }); err != nil {
		t.Fatal(err)
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("scanned\n%q\nwant\n%q", got, want)
	}
	if n := scans.n.Load(); n < 2 {
		t.Fatalf("%d Scan requests: the test means to read more than one page", n)
	}

	stop := errors.New("enough")
	n := 0
	err := s.ScanKeys(ctx, "jobs/v1/t/a/", func(k string) error {
		if !strings.HasPrefix(k, "jobs/v1/t/a/") {
			t.Errorf("key %q outside the prefix", k)
		}
		n++
		return stop
	})
	if !errors.Is(err, stop) || n != 1 {
		t.Fatalf("fn's error: %v after %d keys, want it after 1", err, n)
	}

	_ = s.Close()
	if err := s.ScanKeys(ctx, "jobs/v1/t/", func(string) error { return nil }); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("scan of a closed store: %v", err)
	}
}
