package memory_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/supervaize/svz/core/store"
	"github.com/supervaize/svz/core/store/memory"
	"github.com/supervaize/svz/core/store/storetest"
)

// The memory store lives in one process: the suite's "instances" share one store.
func TestLogConformance(t *testing.T) {
	storetest.RunLog(t, storetest.OneInstance(func(t testing.TB, now func() time.Time) store.Store {
		return memory.New(memory.WithClock(now), memory.WithMaxValueSize(256<<10))
	}))
}

func TestLogClosed(t *testing.T) {
	s := memory.New()
	_ = s.Close()
	if _, err := s.AppendLog(context.Background(), "l", nil, store.Retention{}); !errors.Is(err, store.ErrClosed) {
		t.Errorf("AppendLog after Close: %v", err)
	}
}

// A restarted process starts its logs afresh, in a new epoch.
func TestLogNewStoreNewEpoch(t *testing.T) {
	ctx := context.Background()
	a, _ := memory.New().AppendLog(ctx, "l", nil, store.Retention{})
	b, _ := memory.New().AppendLog(ctx, "l", nil, store.Retention{})
	if a.Seq != 1 || b.Seq != 1 || a.Epoch == b.Epoch || len(a.Epoch) != 16 {
		t.Errorf("two stores' first entries: %+v, %+v; want position 1 in distinct 16-digit epochs", a, b)
	}
}

func BenchmarkLog(b *testing.B) {
	storetest.BenchmarkLog(b, func(b *testing.B) (store.Log, store.Log) {
		s := memory.New()
		b.Cleanup(func() { _ = s.Close() })
		return s, s
	}, nil)
}

func TestUpdateAppendConformance(t *testing.T) {
	storetest.RunUpdateAppend(t, storetest.OneInstance(func(t testing.TB, now func() time.Time) store.Store {
		return memory.New(memory.WithClock(now), memory.WithMaxValueSize(256<<10))
	}), storetest.InProcess("the memory store is in the process"))
}
