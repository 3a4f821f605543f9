package kit

import (
	"errors"
	"strings"
	"testing"
	"time"

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
