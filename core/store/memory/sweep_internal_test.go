package memory

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/supervaize/svz/core/store/storetest"
)

// TestExpiredRecordsAreSwept: a long-lived process must not keep every expired record; the map
// is swept as it grows, and live records survive the sweep.
func TestExpiredRecordsAreSwept(t *testing.T) {
	c := storetest.NewClock()
	s := New(WithClock(c.Now))
	ctx := context.Background()
	live, err := s.Create(ctx, "live", []byte("v"), c.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10_000 {
		if _, err := s.Create(ctx, "short/"+strconv.Itoa(i), []byte("v"), c.Now().Add(time.Second)); err != nil {
			t.Fatal(err)
		}
		if i%100 == 99 {
			c.Advance(time.Second)
		}
	}
	if n := len(s.records); n > 2100 {
		t.Errorf("%d records kept, want expired ones swept (at most about 2 × 1024)", n)
	}
	got, err := s.Get(ctx, "live")
	if err != nil || got.Version != live.Version {
		t.Errorf("live record after sweeps: %+v, %v", got, err)
	}
}
