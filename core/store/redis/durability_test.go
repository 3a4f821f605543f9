package redis_test

import (
	"context"
	"log/slog"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/supervaize/svz/core/store/redis"
	"github.com/supervaize/svz/internal/testenv"
)

// startRedis runs a private redis-server with args on a Unix socket (no port to collide on) and
// returns a client of it; both end with the test.
func startRedis(t *testing.T, args ...string) *goredis.Client {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if testenv.InCI() {
			t.Fatal("redis-server is not installed: CI must have it (see scripts/with-services)")
		}
		t.Skip("redis-server is not installed")
	}
	dir := t.TempDir()
	sock := filepath.Join(dir, "redis.sock")
	cmd := exec.Command(bin, append([]string{"--port", "0", "--unixsocket", sock, "--dir", dir}, args...)...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	c := goredis.NewClient(&goredis.Options{Network: "unix", Addr: sock, ContextTimeoutEnabled: true})
	deadline := time.Now().Add(time.Minute)
	for c.Ping(context.Background()).Err() != nil {
		if time.Now().After(deadline) {
			t.Fatal("the private redis-server did not answer within a minute")
		}
		time.Sleep(50 * time.Millisecond)
	}
	return c
}

// logged is a slog.Handler that keeps each record's level and message.
type logged struct {
	mu   sync.Mutex
	list []string
}

func (l *logged) Enabled(context.Context, slog.Level) bool { return true }
func (l *logged) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *logged) WithGroup(string) slog.Handler            { return l }
func (l *logged) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.list = append(l.list, r.Level.String()+" "+r.Message)
	return nil
}

func (l *logged) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.list...)
}

// TestDurabilityWarnings: at start, the store warns, naming the setting, about a server that
// forgets records (no persistence) or drops them (an evicting policy), says when it cannot check,
// and is silent about a server that keeps them.
func TestDurabilityWarnings(t *testing.T) {
	const (
		noPersistence = `WARN redis store: the server does not persist writes (appendonly no, save ""): a restart forgets every record, so retried calls whose first run completed run again; set appendonly yes (appendfsync everysec loses at most a second)`
		evicting      = `WARN redis store: maxmemory-policy is allkeys-lru: when memory reaches maxmemory (104857600), Redis drops records, so retried calls whose first run completed run again; set maxmemory-policy noeviction (a full server then refuses writes, loudly)`
		unchecked     = `INFO redis store: cannot read the server's persistence and eviction settings (CONFIG GET refused); make sure it persists writes (appendonly yes) and never evicts (maxmemory-policy noeviction), or retried calls may run twice`
	)
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"no persistence", []string{"--save", "", "--appendonly", "no"}, []string{noPersistence}},
		{"evicting", []string{"--save", "", "--appendonly", "yes", "--maxmemory", "100mb", "--maxmemory-policy", "allkeys-lru"}, []string{evicting}},
		{"snapshots only", []string{"--save", "3600 1", "--appendonly", "no"}, nil},
		{"durable", []string{"--save", "", "--appendonly", "yes", "--maxmemory-policy", "noeviction"}, nil},
		{"CONFIG disabled", []string{"--rename-command", "CONFIG", ""}, []string{unchecked}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var log logged
			s, err := redis.New(context.Background(), startRedis(t, tc.args...), redis.WithLogger(slog.New(&log)))
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if got := log.all(); strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("logged:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

// TestDurabilityUncheckedWithoutPermission: an ACL user without CONFIG (as hosted Redis gives)
// still opens the store.
func TestDurabilityUncheckedWithoutPermission(t *testing.T) {
	admin := startRedis(t)
	ctx := context.Background()
	if err := admin.Do(ctx, "ACL", "SETUSER", "app", "on", ">app-password", "~*", "+@all", "-config").Err(); err != nil {
		t.Fatal(err)
	}
	opts := *admin.Options()
	opts.Username, opts.Password = "app", "app-password"
	d := redis.CheckDurability(ctx, goredis.NewClient(&opts))
	if d.Unchecked == nil || !strings.Contains(d.Unchecked.Error(), "NOPERM") || len(d.Warnings) != 0 {
		t.Errorf("CheckDurability as a user without CONFIG = %+v, want Unchecked with NOPERM", d)
	}
	s, err := redis.New(ctx, goredis.NewClient(&opts), redis.WithLogger(quiet()))
	if err != nil {
		t.Fatalf("New as a user without CONFIG: %v", err)
	}
	s.Close()
}
