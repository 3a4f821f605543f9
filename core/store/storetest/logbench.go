package storetest

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/supervaize/svz/core/store"
)

// BenchLogDataSize is the size of the entries the log benchmarks append: a typical effect event.
const BenchLogDataSize = 300

// BenchRetention is the retention the log benchmarks append with: the controller's defaults.
var BenchRetention = store.Retention{MaxAge: 24 * time.Hour, MaxCount: 10000}

// BenchmarkLog measures the effect log on two instances of one store (open returns them; a
// single-instance backend returns the same store twice):
//
//   - Append: the extra cost of one action, an AppendLog on the first instance; with trips (the
//     round trips made so far on the first instance, nil when the store makes none) reported as
//     rt/op.
//   - Delay: from AppendLog's return on the first instance to the entry's arrival at a reader
//     that follows the log on the second (WaitLog then ReadLog, as the effect stream does),
//     reported as p50-ms and p99-ms over b.N appends made one at a time.
func BenchmarkLog(b *testing.B, open func(b *testing.B) (writer, reader store.Log), trips func() int64) {
	data := randomBytes(BenchLogDataSize)
	count := func() int64 {
		if trips == nil {
			return 0
		}
		return trips()
	}
	b.Run("Append", func(b *testing.B) {
		w, _ := open(b)
		ctx := context.Background()
		name := "storebench/" + randomHex(8)
		if _, err := w.AppendLog(ctx, name, data, BenchRetention); err != nil { // the log exists
			b.Fatal(err)
		}
		before := count()
		b.ResetTimer()
		for range b.N {
			if _, err := w.AppendLog(ctx, name, data, BenchRetention); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		if trips != nil {
			b.ReportMetric(float64(count()-before)/float64(b.N), "rt/op")
		}
	})
	b.Run("Delay", func(b *testing.B) {
		w, r := open(b)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		name := "storebench/" + randomHex(8)
		first, err := w.AppendLog(ctx, name, data, BenchRetention)
		if err != nil {
			b.Fatal(err)
		}
		type arrival struct {
			seq uint64
			at  time.Time
		}
		arrived := make(chan arrival, 64)
		go func() {
			after := first.Seq
			for ctx.Err() == nil {
				rg, err := r.ReadLog(ctx, name, after, store.MaxLogRead)
				if err != nil {
					continue
				}
				now := time.Now()
				for _, e := range rg.Entries {
					arrived <- arrival{e.Seq, now}
				}
				switch {
				case rg.Through > after:
					after = rg.Through
				case rg.Through < rg.Last:
					pause(ctx, 5*time.Millisecond)
				default:
					_ = r.WaitLog(ctx, name, after)
				}
			}
		}()
		delays := make([]time.Duration, 0, b.N)
		b.ResetTimer()
		for range b.N {
			p, err := w.AppendLog(ctx, name, data, BenchRetention)
			if err != nil {
				b.Fatal(err)
			}
			answered := time.Now()
			for a := range arrived {
				if a.seq == p.Seq {
					delays = append(delays, max(0, a.at.Sub(answered)))
					break
				}
			}
		}
		b.StopTimer()
		slices.Sort(delays)
		ms := func(q float64) float64 {
			return float64(delays[min(len(delays)-1, int(q*float64(len(delays))))]) / float64(time.Millisecond)
		}
		b.ReportMetric(ms(0.50), "p50-ms")
		b.ReportMetric(ms(0.99), "p99-ms")
	})
}
