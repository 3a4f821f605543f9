package bolt_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/supervaize/svz/core/store"
	"github.com/supervaize/svz/core/store/bolt"
	"github.com/supervaize/svz/core/store/storetest"
)

// One process holds a bbolt file: the suite's "instances" share one store.
func TestLogConformance(t *testing.T) {
	storetest.RunLog(t, storetest.OneInstance(func(t testing.TB, now func() time.Time) store.Store {
		s, err := bolt.Open(filepath.Join(t.TempDir(), "svz.db"), bolt.WithClock(now))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}))
}

// The log survives a restart, in the same epoch, and a second process cannot open the file: the
// bolt store serves one instance.
func TestLogSurvivesReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "svz.db")
	ctx := context.Background()
	s, err := bolt.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	p, err := s.AppendLog(ctx, "effects/x", []byte("e1"), store.Retention{MaxCount: 10})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bolt.Open(path, bolt.WithTimeout(50*time.Millisecond)); err == nil || !strings.Contains(err.Error(), "locked by another process") {
		t.Errorf("a second opening of %s: %v, want the file to be locked", path, err)
	}
	_ = s.Close()
	if _, err := s.ReadLog(ctx, "effects/x", 0, 1); !errors.Is(err, store.ErrClosed) {
		t.Errorf("ReadLog after Close: %v", err)
	}
	s, err = bolt.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	r, err := s.ReadLog(ctx, "effects/x", 0, 10)
	if err != nil || r.Epoch != p.Epoch || r.Last != 1 || len(r.Entries) != 1 || string(r.Entries[0].Data) != "e1" {
		t.Fatalf("after reopen: %+v, %v", r, err)
	}
	q, err := s.AppendLog(ctx, "effects/x", []byte("e2"), store.Retention{MaxCount: 10})
	if err != nil || q != (store.LogPosition{Epoch: p.Epoch, Seq: 2}) {
		t.Errorf("append after reopen: %+v, %v", q, err)
	}
}

func BenchmarkLog(b *testing.B) {
	storetest.BenchmarkLog(b, func(b *testing.B) (store.Log, store.Log) {
		s, err := bolt.Open(filepath.Join(b.TempDir(), "svz.db"))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = s.Close() })
		return s, s
	}, nil)
}

func TestUpdateAppendConformance(t *testing.T) {
	storetest.RunUpdateAppend(t, storetest.OneInstance(func(t testing.TB, now func() time.Time) store.Store {
		s, err := bolt.Open(filepath.Join(t.TempDir(), "svz.db"), bolt.WithClock(now))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}), storetest.InProcess("a bbolt file is in the process"))
}
