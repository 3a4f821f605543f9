package config

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/supervaize/svz/core"
)

func TestEventSettings(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		want core.Config
		errs []string
	}{
		{"defaults", map[string]string{}, core.Config{EventRetention: 24 * time.Hour, EventRetentionCount: 10000, MaxEventStreams: 100, EventCatchUp: 1000,
			EventRetentionBytes: 32 << 20, EventMaxBytes: 64 << 10}, nil},
		{"set", map[string]string{EnvEventRetention: "90m", EnvEventRetentionCount: "50", EnvEventStreamsMax: "3", EnvEventCatchUpMax: "7",
			EnvEventRetentionBytes: "1048576", EnvEventMaxBytes: "1024"},
			core.Config{EventRetention: 90 * time.Minute, EventRetentionCount: 50, MaxEventStreams: 3, EventCatchUp: 7, EventRetentionBytes: 1 << 20, EventMaxBytes: 1 << 10}, nil},
		{"an event as large as the log", map[string]string{EnvEventRetentionBytes: "1048576", EnvEventMaxBytes: "1048576"},
			core.Config{EventRetention: 24 * time.Hour, EventRetentionCount: 10000, MaxEventStreams: 100, EventCatchUp: 1000, EventRetentionBytes: 1 << 20, EventMaxBytes: 1 << 20}, nil},
		{"all bad at once", map[string]string{EnvEventRetention: "10s", EnvEventRetentionCount: "0", EnvEventStreamsMax: "many", EnvEventCatchUpMax: "1e3",
			EnvEventRetentionBytes: "1048575", EnvEventMaxBytes: "1023"}, core.Config{}, []string{
			`SUPERVAIZER_EVENT_RETENTION="10s": must be a duration such as 30s, 5m or 1h, from 1m0s to 720h0m0s`,
			`SUPERVAIZER_EVENT_RETENTION_COUNT="0": must be a whole number from 1 to 1000000`,
			`SUPERVAIZER_EVENT_STREAMS_MAX="many": must be a whole number from 1 to 10000`,
			`SUPERVAIZER_EVENT_CATCHUP_MAX="1e3": must be a whole number from 1 to 100000`,
			`SUPERVAIZER_EVENT_RETENTION_BYTES="1048575": must be a whole number from 1048576 to 68719476736 bytes`,
			`SUPERVAIZER_EVENT_MAX_BYTES="1023": must be a whole number from 1024 to 1048576 bytes`,
		}},
		{"bytes beyond their bounds", map[string]string{EnvEventRetentionBytes: "68719476737", EnvEventMaxBytes: "1048577"}, core.Config{}, []string{
			`SUPERVAIZER_EVENT_RETENTION_BYTES="68719476737": must be a whole number from 1048576 to 68719476736 bytes`,
			`SUPERVAIZER_EVENT_MAX_BYTES="1048577": must be a whole number from 1024 to 1048576 bytes`,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var cfg core.Config
			err := eventSettings(env(tc.env), &cfg)
			for _, w := range tc.errs {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("error %v lacks %q", err, w)
				}
			}
			got := [6]int64{int64(cfg.EventRetention), int64(cfg.EventRetentionCount), int64(cfg.MaxEventStreams), int64(cfg.EventCatchUp),
				cfg.EventRetentionBytes, cfg.EventMaxBytes}
			want := [6]int64{int64(tc.want.EventRetention), int64(tc.want.EventRetentionCount), int64(tc.want.MaxEventStreams), int64(tc.want.EventCatchUp),
				tc.want.EventRetentionBytes, tc.want.EventMaxBytes}
			if tc.errs == nil && (err != nil || got != want) {
				t.Errorf("got %+v, %v; want %+v", cfg, err, tc.want)
			}
		})
	}
	// Load reports them with the other settings.
	_, err := Load(context.Background(), env(map[string]string{"SUPERVAIZER_STORE": "memory", EnvEventStreamsMax: "0", EnvServerID: "abc"}), slog.New(slog.DiscardHandler))
	if err == nil || !strings.Contains(err.Error(), EnvEventStreamsMax) || !strings.Contains(err.Error(), EnvServerID) {
		t.Errorf("Load with a bad stream limit and server id: %v", err)
	}
}
