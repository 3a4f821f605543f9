package bolt_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/supervaize/svz/core/store"
	"github.com/supervaize/svz/core/store/bolt"
	"github.com/supervaize/svz/core/store/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t testing.TB, now func() time.Time) store.Store {
		s, err := bolt.Open(filepath.Join(t.TempDir(), "svz.db"), bolt.WithClock(now))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}, storetest.InProcess("bbolt is a file this process maps and locks: a call is a transaction in this process, committed or not when it returns, with no answer to lose and no server to stop"))
}

func TestRecordsSurviveReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "svz.db")
	ctx := context.Background()
	s, err := bolt.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	created, err := s.Create(ctx, "job/1", []byte("result"), time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s, err = bolt.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, err := s.Get(ctx, "job/1")
	if err != nil {
		t.Fatalf("Get after reopen: %v", err)
	}
	if string(got.Value) != "result" || got.Version != created.Version || !got.ExpiresAt.Equal(created.ExpiresAt) {
		t.Errorf("after reopen got %+v, want %+v", got, created)
	}
}

func TestOpenCreatesPrivateDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data", ".svz")
	path := filepath.Join(dir, "svz.db")
	s, err := bolt.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Path() != path {
		t.Errorf("Path() = %q, want %q", s.Path(), path)
	}
	for p, want := range map[string]os.FileMode{dir: 0o700 | os.ModeDir, path: 0o600} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode() != want {
			t.Errorf("%s mode = %v, want %v", p, fi.Mode(), want)
		}
	}
}

// bbolt blocks on a file another process holds; Open must give up after its timeout with an error
// that names the file. flock is per open file description, so a second Open in this process
// stands in for a second process.
func TestOpenLockedFileFailsNamingIt(t *testing.T) {
	path := filepath.Join(t.TempDir(), "svz.db")
	first, err := bolt.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()

	start := time.Now()
	second, err := bolt.Open(path, bolt.WithTimeout(200*time.Millisecond))
	if err == nil {
		second.Close()
		t.Fatal("second Open of a locked file succeeded")
	}
	if waited := time.Since(start); waited > 5*time.Second {
		t.Errorf("second Open took %s, want about its 200ms timeout", waited)
	}
	want := "bolt: " + path + ": locked by another process (waited 200ms)"
	if err.Error() != want || !errors.Is(err, bolt.ErrLocked) {
		t.Errorf("error = %q, want %q", err, want)
	}
}

func TestOpenUnusablePath(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, []byte("not a directory"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := bolt.Open(filepath.Join(file, "svz.db"))
	if err == nil || !strings.HasPrefix(err.Error(), "bolt: create the directory of "+filepath.Join(file, "svz.db")+": ") {
		t.Errorf("error = %v, want one naming the path", err)
	}

	notDB := filepath.Join(t.TempDir(), "svz.db")
	if err := os.WriteFile(notDB, []byte(strings.Repeat("garbage!", 1024)), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = bolt.Open(notDB)
	if err == nil || !strings.HasPrefix(err.Error(), "bolt: open "+notDB+": ") {
		t.Errorf("error = %v, want one naming the file", err)
	}
}

func TestClosedStoreReportsClosed(t *testing.T) {
	s, err := bolt.Open(filepath.Join(t.TempDir(), "svz.db"))
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := s.Get(context.Background(), "k"); !errors.Is(err, store.ErrClosed) {
		t.Errorf("Get after Close: %v, want ErrClosed", err)
	}
}

// countByPrefix opens the bbolt file itself and counts the keys of the store's bucket by their
// prefix up to the first '/'.
func countByPrefix(t *testing.T, path string) map[string]int {
	t.Helper()
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	counts := map[string]int{}
	err = db.View(func(tx *bbolt.Tx) error {
		return tx.Bucket([]byte("svz.store.v1")).ForEach(func(k, _ []byte) error {
			prefix, _, _ := strings.Cut(string(k), "/")
			counts[prefix]++
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return counts
}

// TestExpiredRecordsAreReclaimed: each write examines the next ReclaimBatch records and deletes
// the expired ones, so expired records leave the file; live and unreadable records stay.
func TestExpiredRecordsAreReclaimed(t *testing.T) {
	path := filepath.Join(t.TempDir(), "svz.db")
	c := storetest.NewClock()
	ctx := context.Background()
	s, err := bolt.Open(path, bolt.WithClock(c.Now))
	if err != nil {
		t.Fatal(err)
	}
	// Keys sort as a/ (expiring in 1 s), n/ (written below, 1 h), z/ (a day).
	for i := range 100 {
		if _, err := s.Create(ctx, fmt.Sprintf("a/%03d", i), []byte("v"), c.Now().Add(time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 10 {
		if _, err := s.Create(ctx, fmt.Sprintf("z/%d", i), []byte("v"), c.Now().Add(24*time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	// A record this package did not write: reclamation leaves it alone and writes still succeed.
	db, err := bbolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bbolt.Tx) error {
		return tx.Bucket([]byte("svz.store.v1")).Put([]byte("a/corrupt"), []byte{1, 2, 3})
	})
	db.Close()
	if err != nil {
		t.Fatal(err)
	}

	c.Advance(time.Second)
	// Each write reopens the store, so every pass also resumes correctly from the first key.
	write := func(i int) map[string]int {
		t.Helper()
		s, err := bolt.Open(path, bolt.WithClock(c.Now))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Create(ctx, fmt.Sprintf("n/%03d", i), []byte("v"), c.Now().Add(time.Hour)); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
		s.Close()
		return countByPrefix(t, path)
	}
	// Write 1 examines a/000-031, write 2 a/032-063, write 3 a/064-095, write 4 the rest.
	for i, wantA := range []int{101 - 32, 101 - 64, 101 - 96, 1} {
		got := write(i)
		want := map[string]int{"a": wantA, "n": i + 1, "z": 10}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("after write %d: records %v, want %v", i+1, got, want)
		}
	}
	// The n/ records expire in turn; within one pass they are gone.
	c.Advance(time.Hour)
	if got, want := write(4), map[string]int{"a": 1, "n": 1, "z": 10}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("after the n/ records expired and one write: records %v, want %v", got, want)
	}
	s, err = bolt.Open(path, bolt.WithClock(c.Now))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Get(ctx, "a/corrupt"); err == nil || !strings.Contains(err.Error(), "corrupt record") {
		t.Errorf("Get of the unreadable record: %v, want it reported", err)
	}
}

func BenchmarkStore(b *testing.B) {
	s, err := bolt.Open(filepath.Join(b.TempDir(), "svz.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	storetest.Benchmark(b, s, nil)
}

// BenchmarkStoreWithExpired runs the store benchmarks on a file that already holds many expired
// records, as a long-running process accumulates them: the cost of reclaiming them is in the
// figures.
func BenchmarkStoreWithExpired(b *testing.B) {
	c := storetest.NewClock()
	s, err := bolt.Open(filepath.Join(b.TempDir(), "svz.db"), bolt.WithClock(c.Now))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	value := make([]byte, storetest.BenchValueSize)
	for i := range 5000 {
		if _, err := s.Create(context.Background(), "expired/"+strconv.Itoa(i), value, c.Now().Add(time.Second)); err != nil {
			b.Fatal(err)
		}
	}
	c.Advance(2 * time.Minute)
	storetest.Benchmark(b, s, nil)
}
