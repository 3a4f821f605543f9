package kit

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/supervaize/svz/core/store"
)

func TestCheckWrite(t *testing.T) {
	now := time.UnixMilli(1_800_000_000_000)
	tests := []struct {
		name  string
		key   string
		value int
		exp   time.Time
		want  error
	}{
		{"ok", "k", 10, now.Add(time.Millisecond), nil},
		{"longest key", strings.Repeat("k", store.MaxKeyLen), 10, now.Add(time.Hour), nil},
		{"value at the limit", "k", 10, now.Add(time.Hour), nil},
		{"value over the limit", "k", 11, now.Add(time.Hour), store.ErrTooLarge},
		{"empty key", "", 0, now.Add(time.Hour), store.ErrInvalid},
		{"key too long", strings.Repeat("k", store.MaxKeyLen+1), 0, now.Add(time.Hour), store.ErrInvalid},
		{"invalid UTF-8", "\xc3", 0, now.Add(time.Hour), store.ErrInvalid},
		{"NUL", "a\x00b", 0, now.Add(time.Hour), store.ErrInvalid},
		{"expiry now", "k", 0, now, store.ErrInvalid},
		{"expiry within the millisecond", "k", 0, now.Add(999 * time.Microsecond), store.ErrInvalid},
	}
	for _, tt := range tests {
		err := CheckWrite(tt.key, make([]byte, tt.value), 10, tt.exp, now)
		if !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
			t.Errorf("%s: CheckWrite error = %v, want %v", tt.name, err, tt.want)
		}
	}
	if err := CheckWrite(strings.Repeat("k", 5000), nil, 10, now.Add(time.Hour), now); strings.Contains(err.Error(), "kkkk") {
		t.Errorf("a rejected key is echoed in the error: %v", err)
	}
}

func TestNewVersion(t *testing.T) {
	seen := make(map[uint64]bool)
	for range 10_000 {
		v := NewVersion()
		if v == 0 || v >= 1<<63 || seen[v] {
			t.Fatalf("NewVersion() = %d: want distinct values in [1, 2^63)", v)
		}
		seen[v] = true
	}
}

func TestLiveIsStrictlyBeforeExpiry(t *testing.T) {
	exp := time.UnixMilli(1_800_000_000_000)
	for d, want := range map[time.Duration]bool{-time.Millisecond: true, -time.Microsecond: true, 0: false, time.Microsecond: false} {
		if got := Live(exp.UnixMilli(), exp.Add(d)); got != want {
			t.Errorf("Live at expiry%+v = %v, want %v", d, got, want)
		}
	}
}

func TestPrefixEnd(t *testing.T) {
	for prefix, want := range map[string]string{
		"a":           "b",
		"a/":          "a0",
		"é":           "ê",
		"a\u007f":     "a\u0080",
		"a\uD7FF":     "a\uE000", // past the surrogates
		"a\U0010FFFF": "b",
		"\U0010FFFF":  "",
	} {
		if got := PrefixEnd(prefix); got != want {
			t.Errorf("PrefixEnd(%q) = %q, want %q", prefix, got, want)
		}
	}
}

// FuzzListRange: a key is in ListRange(prefix, after) exactly when it starts with prefix and
// sorts after after, and the span's end is valid UTF-8.
func FuzzListRange(f *testing.F) {
	for _, s := range [][3]string{{"a/", "", "a/b"}, {"a/", "a/b", "a/c"}, {"é", "", "ê"}, {"a\U0010FFFF", "", "a\U0010FFFFz"}, {"b", "a", "b"}, {"a", "z", "ab"}} {
		f.Add(s[0], s[1], s[2])
	}
	f.Fuzz(func(t *testing.T, prefix, after, key string) {
		if CheckKey(prefix) != nil || CheckKey(key) != nil {
			return
		}
		r := ListRange(prefix, after)
		want := strings.HasPrefix(key, prefix) && key > after
		if got := r.In(key); got != want {
			t.Fatalf("ListRange(%q, %q).In(%q) = %v, want %v (range %+v)", prefix, after, key, got, want, r)
		}
		if end := PrefixEnd(prefix); end != "" && (!utf8.ValidString(end) || end <= prefix) {
			t.Fatalf("PrefixEnd(%q) = %q", prefix, end)
		}
	})
}

func TestTimedOut(t *testing.T) {
	ctx, cancel := Bound(context.Background(), time.Millisecond)
	defer cancel()
	<-ctx.Done()
	err := TimedOut(ctx, context.DeadlineExceeded)
	if !errors.Is(err, context.DeadlineExceeded) || err.Error() != "no answer within the store timeout (1ms): context deadline exceeded" {
		t.Errorf("TimedOut = %v", err)
	}
	if again := TimedOut(ctx, err); again != err {
		t.Errorf("TimedOut twice = %v", again)
	}
	// The caller's own deadline is the caller's: not reported as the store timeout.
	caller, cancel2 := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel2()
	<-caller.Done()
	bounded, cancel3 := Bound(caller, time.Hour)
	defer cancel3()
	if err := TimedOut(bounded, context.DeadlineExceeded); err != context.DeadlineExceeded {
		t.Errorf("TimedOut under the caller's deadline = %v", err)
	}
	if ctx, cancel := Bound(context.Background(), 0); ctx != context.Background() {
		t.Error("Bound(0) bounded the context")
	} else {
		cancel()
	}
}
