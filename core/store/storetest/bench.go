package storetest

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/supervaize/svz/core/store"
)

// BenchValueSize is the size of the values the benchmarks write: a typical recorded job.start
// result.
const BenchValueSize = 2 << 10

// Benchmark measures the two store paths of an idempotent action on s:
//
//   - ClaimComplete: Create of an in-progress claim, then Update to the completed result;
//   - Replay: a Create that finds the completed record and returns it.
//
// trips, when not nil, returns the number of network round trips made so far; the benchmarks then
// report them as rt/op.
func Benchmark(b *testing.B, s store.Store, trips func() int64) {
	claim := []byte(`{"state":"running","fingerprint":"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"}`)
	done := randomBytes(BenchValueSize)
	// The testing package calls each sub-benchmark several times: every call gets fresh keys.
	prefix := func() string { return "storebench/" + randomHex(8) + "/" }
	report := func(b *testing.B, before int64) {
		if trips != nil {
			b.ReportMetric(float64(trips()-before)/float64(b.N), "rt/op")
		}
	}
	count := func() int64 {
		if trips == nil {
			return 0
		}
		return trips()
	}

	b.Run("ClaimComplete", func(b *testing.B) {
		ctx := context.Background()
		exp := time.Now().Add(time.Hour)
		p := prefix()
		before := count()
		b.ResetTimer()
		for i := range b.N {
			k := p + strconv.Itoa(i)
			r, err := s.Create(ctx, k, claim, exp)
			if err != nil {
				b.Fatalf("Create: %v", err)
			}
			if _, err := s.Update(ctx, k, r.Version, done, exp); err != nil {
				b.Fatalf("Update: %v", err)
			}
		}
		b.StopTimer()
		report(b, before)
	})

	b.Run("Replay", func(b *testing.B) {
		ctx := context.Background()
		exp := time.Now().Add(time.Hour)
		k := prefix() + "replay"
		if _, err := s.Create(ctx, k, done, exp); err != nil {
			b.Fatalf("Create: %v", err)
		}
		before := count()
		b.ResetTimer()
		for range b.N {
			r, err := s.Create(ctx, k, claim, exp)
			if !errors.Is(err, store.ErrExists) || len(r.Value) != len(done) {
				b.Fatalf("Create of a completed key: error = %v, value %d bytes; want ErrExists and %d bytes", err, len(r.Value), len(done))
			}
		}
		b.StopTimer()
		report(b, before)
	})
}
