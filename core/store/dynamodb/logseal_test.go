package dynamodb_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/supervaize/svz/core/store"
	"github.com/supervaize/svz/core/store/dynamodb"
	"github.com/supervaize/svz/core/store/storetest"
	"github.com/supervaize/svz/internal/awsapi"
	"github.com/supervaize/svz/internal/testenv"
)

// TestLogAppenderResumesAfterSeal: an appender that claimed a position and stalled past
// LogGapTimeout before writing its entry finds the position sealed by a reader. It must not take
// the seal for its own write (its data would be lost): it claims the next position and writes
// there, and the sealed position stays empty.
func TestLogAppenderResumesAfterSeal(t *testing.T) {
	endpoint := testenv.Need(t, testenv.AWSEndpoint)
	plain := client(t, endpoint)
	name := table(t, plain)
	clock := storetest.NewClock()
	ctx := context.Background()
	reader := open(t, plain, name, dynamodb.WithClock(clock.Now))
	if _, err := reader.AppendLog(ctx, "stall", []byte("1"), store.Retention{}); err != nil {
		t.Fatal(err)
	}
	// The appender's first PutItem is its entry at 2, after its claim: the stall happens there,
	// in the appender's own call, so no goroutine or real time is involved.
	var during string
	hook := &onCall{op: "PutItem", n: 1, f: func() {
		clock.Advance(dynamodb.LogGapTimeout)
		r, err := reader.ReadLog(ctx, "stall", 0, 10)
		during = fmt.Sprintf("through %d: %s %v", r.Through, logSeqs(r), err)
	}}
	s := open(t, client(t, endpoint, awsapi.WithHTTPClient(hook)), name, dynamodb.WithClock(clock.Now))
	p, err := s.AppendLog(ctx, "stall", []byte("2"), store.Retention{})
	if want := "through 2: 1=1 <nil>"; during != want {
		t.Fatalf("the read while the appender stalled: %q; want %q (2 sealed)", during, want)
	}
	if err != nil || p.Seq != 3 {
		t.Fatalf("append whose claim of 2 was sealed before its entry: %+v %v; want position 3", p, err)
	}
	if r, err := reader.ReadLog(ctx, "stall", 0, 10); err != nil || r.Through != 3 || logSeqs(r) != "1=1 3=2" {
		t.Fatalf("read after the append: %+v %v; want 1=1 3=2 through 3 (2 sealed)", r, err)
	}
}

// TestLogSweptGapAfterKeptEntry: retention is measured from the newest claim, the sweep check
// from the reader's clock. With MaxAge an hour and 1, a dead claim of 2, and 3 all appended at
// t0, a read at t0 + 3h (no append since) still keeps 1 to 3 by the head, while the gap at 2 is
// past its sweep window (an hour, an eighth of it, and SweepGrace) and counts as swept. Entry 1
// was already read, so First stays 1: swept positions only move First while they lead the range.
func TestLogSweptGapAfterKeptEntry(t *testing.T) {
	c := client(t, testenv.Need(t, testenv.AWSEndpoint))
	name := table(t, c)
	clock := storetest.NewClock()
	s := open(t, c, name, dynamodb.WithClock(clock.Now))
	withGap(t, s, c, name, "swept", store.Retention{MaxAge: time.Hour})
	clock.Advance(3 * time.Hour)
	r, err := s.ReadLog(context.Background(), "swept", 0, 10)
	got := fmt.Sprintf("first %d last %d through %d: %s", r.First, r.Last, r.Through, logSeqs(r))
	if want := "first 1 last 3 through 3: 1=1 3=3"; err != nil || got != want {
		t.Fatalf("read at t0+3h: %s, %v; want %s (2 swept after 1 was read: First stays 1)", got, err, want)
	}
}
