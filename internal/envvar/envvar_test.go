package envvar

import (
	"strings"
	"testing"
	"time"
)

func env(kv ...string) Getenv {
	return func(k string) string {
		for i := 0; i+1 < len(kv); i += 2 {
			if kv[i] == k {
				return kv[i+1]
			}
		}
		return ""
	}
}

func TestBool(t *testing.T) {
	tests := []struct {
		v       string
		def     bool
		want    bool
		wantErr bool
	}{
		{"", true, true, false},
		{"  ", false, false, false},
		{"true", false, true, false},
		{"TRUE ", false, true, false},
		{"1", false, true, false},
		{"yes", false, true, false},
		{"On", false, true, false},
		{"false", true, false, false},
		{"0", true, false, false},
		{"no", true, false, false},
		{"OFF", true, false, false},
		{"ture", false, false, true},
		{"verbose", false, false, true},
		{"2", false, false, true},
	}
	for _, tt := range tests {
		got, err := Bool(env("X_B", tt.v), "X_B", tt.def)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("Bool(%q, def %v) = %v, %v; want %v, error %v", tt.v, tt.def, got, err, tt.want, tt.wantErr)
		}
		if err != nil && (!strings.Contains(err.Error(), "X_B") || !strings.Contains(err.Error(), "true or false")) {
			t.Errorf("Bool(%q) error %q does not name the variable and the accepted values", tt.v, err)
		}
	}
}

func TestInt(t *testing.T) {
	for _, tt := range []struct {
		v       string
		want    int64
		wantErr bool
	}{{"", 7, false}, {"10", 10, false}, {" 1 ", 1, false}, {"0", 0, true}, {"11", 0, true}, {"abc", 0, true}, {"1.5", 0, true}} {
		got, err := Int(env("X_I", tt.v), "X_I", 7, 1, 10)
		if (err != nil) != tt.wantErr || (err == nil && got != tt.want) {
			t.Errorf("Int(%q) = %v, %v; want %v, error %v", tt.v, got, err, tt.want, tt.wantErr)
		}
		if err != nil && !strings.Contains(err.Error(), "X_I=") {
			t.Errorf("Int(%q) error %q does not name the variable", tt.v, err)
		}
	}
}

func TestDuration(t *testing.T) {
	for _, tt := range []struct {
		v       string
		want    time.Duration
		wantErr bool
	}{{"", time.Minute, false}, {"30s", 30 * time.Second, false}, {"1h", 0, true}, {"10", 0, true}, {"0s", 0, true}} {
		got, err := Duration(env("X_D", tt.v), "X_D", time.Minute, time.Second, 10*time.Minute)
		if (err != nil) != tt.wantErr || (err == nil && got != tt.want) {
			t.Errorf("Duration(%q) = %v, %v; want %v, error %v", tt.v, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestEnum(t *testing.T) {
	got, err := Enum(env("X_E", "Debug"), "X_E", "info", "debug", "info", "warn", "error")
	if err != nil || got != "debug" {
		t.Errorf("Enum(Debug) = %q, %v; want debug", got, err)
	}
	if got, err := Enum(env(), "X_E", "info", "debug", "info"); err != nil || got != "info" {
		t.Errorf("Enum(unset) = %q, %v; want the default", got, err)
	}
	_, err = Enum(env("X_E", "verbose"), "X_E", "info", "debug", "info", "warn", "error")
	if err == nil || !strings.Contains(err.Error(), "debug, info, warn, error") || !strings.Contains(err.Error(), "X_E=") {
		t.Errorf("Enum(verbose) error = %v, want one naming the variable and the accepted values", err)
	}
}
