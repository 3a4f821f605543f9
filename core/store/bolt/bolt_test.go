package bolt_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

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
	})
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
	want := "bolt: " + path + " is locked by another process (waited 200ms): timeout"
	if err.Error() != want {
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

func BenchmarkStore(b *testing.B) {
	s, err := bolt.Open(filepath.Join(b.TempDir(), "svz.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	storetest.Benchmark(b, s, nil)
}
