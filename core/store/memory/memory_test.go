package memory_test

import (
	"testing"
	"time"

	"github.com/supervaize/svz/core/store"
	"github.com/supervaize/svz/core/store/memory"
	"github.com/supervaize/svz/core/store/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t testing.TB, now func() time.Time) store.Store {
		return memory.New(memory.WithClock(now), memory.WithMaxValueSize(256<<10))
	})
}

func BenchmarkStore(b *testing.B) {
	s := memory.New()
	defer s.Close()
	storetest.Benchmark(b, s, nil)
}
