package storeenv_test

import (
	"context"
	"errors"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/supervaize/svz/core/store/storeenv"
	"github.com/supervaize/svz/core/store/storetest"
	"github.com/supervaize/svz/internal/testenv"
)

func TestTimeoutSetting(t *testing.T) {
	for _, tt := range []struct{ value, want string }{
		{"abc", `SUPERVAIZER_STORE_TIMEOUT="abc": must be a duration such as 30s, 5m or 1h, from 100ms to 5m0s`},
		{"5", `SUPERVAIZER_STORE_TIMEOUT="5": must be a duration such as 30s, 5m or 1h, from 100ms to 5m0s`},
		{"10ms", `SUPERVAIZER_STORE_TIMEOUT="10ms": must be a duration such as 30s, 5m or 1h, from 100ms to 5m0s`},
		{"1h", `SUPERVAIZER_STORE_TIMEOUT="1h": must be a duration such as 30s, 5m or 1h, from 100ms to 5m0s`},
	} {
		// Checked whatever the store, bolt included, though only networked stores use it.
		_, err := storeenv.Open(context.Background(), env(storeenv.Kind, "memory", storeenv.Timeout, tt.value))
		if err == nil || err.Error() != tt.want {
			t.Errorf("%s=%q: error = %v, want %q", storeenv.Timeout, tt.value, err, tt.want)
		}
	}
	s, err := storeenv.Open(context.Background(), env(storeenv.Kind, "memory", storeenv.Timeout, " 250ms "))
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
}

// TestTimeoutReachesTheStores: opened by storeenv with SUPERVAIZER_STORE_TIMEOUT=1s, a PostgreSQL
// and a Redis store whose server stops answering fail their calls at that bound.
func TestTimeoutReachesTheStores(t *testing.T) {
	for _, tc := range []struct {
		kind, variable string
	}{{"postgres", testenv.PostgresURL}, {"redis", testenv.RedisURL}} {
		t.Run(tc.kind, func(t *testing.T) {
			u, err := url.Parse(testenv.Need(t, tc.variable))
			if err != nil {
				t.Fatal(err)
			}
			p := storetest.NewProxy(t, u.Host)
			u.Host = p.Addr()
			s, err := storeenv.Open(context.Background(), env(storeenv.Kind, tc.kind, storeenv.URL, u.String(), storeenv.Timeout, "1s"),
				storeenv.WithLogger(slog.New(slog.DiscardHandler)))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			t.Cleanup(p.Close)
			p.Blackhole(true)
			done := make(chan error, 1)
			go func() {
				_, err := s.Get(context.Background(), "storeenv/timeout")
				done <- err
			}()
			select {
			case err := <-done:
				if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "no answer within the store timeout (1s)") {
					t.Errorf("Get during the outage: error = %v, want the store timeout", err)
				}
			case <-time.After(60 * time.Second):
				t.Fatal("Get still waits 60 s into the outage with SUPERVAIZER_STORE_TIMEOUT=1s")
			}
		})
	}
}

// records is a slog.Handler that keeps what it is given.
type records struct {
	mu   sync.Mutex
	list []slog.Record
}

func (r *records) Enabled(context.Context, slog.Level) bool { return true }
func (r *records) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *records) WithGroup(string) slog.Handler            { return r }
func (r *records) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.list = append(r.list, rec.Clone())
	return nil
}

// TestGoRedisLogsGoThroughTheLogger: go-redis's own lines (here, its dial failures) reach the
// logger given to Open, as structured records marked source=go-redis, instead of stderr.
func TestGoRedisLogsGoThroughTheLogger(t *testing.T) {
	var got records
	_, err := storeenv.Open(context.Background(), env(storeenv.Kind, "redis", storeenv.URL, "redis://"+closedAddr(t)+"/0"),
		storeenv.WithLogger(slog.New(&got)))
	if err == nil {
		t.Fatal("Open succeeded against a closed port")
	}
	got.mu.Lock()
	defer got.mu.Unlock()
	var found bool
	for _, rec := range got.list {
		source := ""
		rec.Attrs(func(a slog.Attr) bool {
			if a.Key == "source" {
				source = a.Value.String()
			}
			return true
		})
		if source == "go-redis" && rec.Level == slog.LevelWarn && strings.HasPrefix(rec.Message, "connection pool: failed to dial") {
			found = true
		}
	}
	if !found {
		t.Errorf("no go-redis record among the %d logged", len(got.list))
	}
}
