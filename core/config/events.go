package config

import (
	"errors"
	"time"

	"github.com/supervaize/svz/core"
	"github.com/supervaize/svz/internal/envvar"
)

// Settings of the effect log and stream (core/events.go, docs/events.md).
const (
	EnvEventRetention      = "SUPERVAIZER_EVENT_RETENTION"
	EnvEventRetentionCount = "SUPERVAIZER_EVENT_RETENTION_COUNT"
	EnvEventStreamsMax     = "SUPERVAIZER_EVENT_STREAMS_MAX"
	EnvEventCatchUpMax     = "SUPERVAIZER_EVENT_CATCHUP_MAX"
)

// eventSettings reads the effect log settings into cfg, reporting every bad one.
func eventSettings(getenv func(string) string, cfg *core.Config) error {
	retention, err1 := envvar.Duration(getenv, EnvEventRetention, core.DefaultEventRetention, time.Minute, 30*24*time.Hour)
	count, err2 := envvar.Int(getenv, EnvEventRetentionCount, core.DefaultEventRetentionCount, 1, 1_000_000)
	streams, err3 := envvar.Int(getenv, EnvEventStreamsMax, core.DefaultMaxEventStreams, 1, 10_000)
	catchUp, err4 := envvar.Int(getenv, EnvEventCatchUpMax, core.DefaultEventCatchUp, 1, 100_000)
	if err := errors.Join(err1, err2, err3, err4); err != nil {
		return err
	}
	cfg.EventRetention, cfg.EventRetentionCount = retention, int(count)
	cfg.MaxEventStreams, cfg.EventCatchUp = int(streams), int(catchUp)
	return nil
}
