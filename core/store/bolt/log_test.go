package bolt_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"

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

// TestLogBytesOfAnOlderFile: a file written before the kept bytes were recorded counts its log at
// the next append, so the byte bound applies to the entries it holds already.
func TestLogBytesOfAnOlderFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "svz.db")
	ctx := context.Background()
	s, err := bolt.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := s.AppendLog(ctx, "effects/x", []byte(strings.Repeat("a", 100)), store.Retention{}); err != nil {
			t.Fatal(err)
		}
	}
	_ = s.Close()
	db, err := bbolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bbolt.Tx) error { return tx.DeleteBucket([]byte("svz.log.bytes.v1")) }); err != nil {
		t.Fatal(err)
	}
	_ = db.Close()
	s, err = bolt.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.AppendLog(ctx, "effects/x", []byte(strings.Repeat("b", 100)), store.Retention{MaxBytes: 250}); err != nil {
		t.Fatal(err)
	}
	r, err := s.ReadLog(ctx, "effects/x", 0, 10)
	if err != nil || r.First != 3 || r.Last != 4 || len(r.Entries) != 2 {
		t.Fatalf("after an append keeping 250 bytes: %+v, %v; want entries 3 and 4", r, err)
	}
}

// TestLogFileBoundedByBytes: the trial that found the byte bound missing, 100 events of 900 KB
// (an artifact.get of a large report, each), grew the file from 1 MiB to 105 MiB. With the log
// bounded to 2 MiB, the file stays within a few times that: bbolt reuses the pages it frees.
func TestLogFileBoundedByBytes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "svz.db")
	s, err := bolt.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	event := []byte(strings.Repeat("r", 900_000))
	for range 100 {
		if _, err := s.AppendLog(context.Background(), "effects/x", event, store.Retention{MaxCount: 10000, MaxBytes: 2 << 20}); err != nil {
			t.Fatal(err)
		}
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Size() > 16<<20 {
		t.Fatalf("the file holds %d MiB after 100 events of 900 KB in a log kept to 2 MiB", st.Size()>>20)
	}
	t.Logf("file size %d KiB", st.Size()>>10)
}
