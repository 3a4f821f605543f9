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
		{"defaults", map[string]string{}, core.Config{EventRetention: 24 * time.Hour, EventRetentionCount: 10000, MaxEventStreams: 100, EventCatchUp: 1000}, nil},
		{"set", map[string]string{EnvEventRetention: "90m", EnvEventRetentionCount: "50", EnvEventStreamsMax: "3", EnvEventCatchUpMax: "7"},
			core.Config{EventRetention: 90 * time.Minute, EventRetentionCount: 50, MaxEventStreams: 3, EventCatchUp: 7}, nil},
		{"all bad at once", map[string]string{EnvEventRetention: "10s", EnvEventRetentionCount: "0", EnvEventStreamsMax: "many", EnvEventCatchUpMax: "1e3"}, core.Config{}, []string{
			`SUPERVAIZER_EVENT_RETENTION="10s": must be a duration such as 30s, 5m or 1h, from 1m0s to 720h0m0s`,
			`SUPERVAIZER_EVENT_RETENTION_COUNT="0": must be a whole number from 1 to 1000000`,
			`SUPERVAIZER_EVENT_STREAMS_MAX="many": must be a whole number from 1 to 10000`,
			`SUPERVAIZER_EVENT_CATCHUP_MAX="1e3": must be a whole number from 1 to 100000`,
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
			got := [4]int64{int64(cfg.EventRetention), int64(cfg.EventRetentionCount), int64(cfg.MaxEventStreams), int64(cfg.EventCatchUp)}
			want := [4]int64{int64(tc.want.EventRetention), int64(tc.want.EventRetentionCount), int64(tc.want.MaxEventStreams), int64(tc.want.EventCatchUp)}
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
