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
	}, storetest.InProcess("records live in this process's memory: every call is a function call under a mutex, with no answer to lose and no server to stop"))
}

func BenchmarkStore(b *testing.B) {
	s := memory.New()
	defer s.Close()
	storetest.Benchmark(b, s, nil)
}
