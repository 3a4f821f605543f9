package config

import (
	"errors"
	"fmt"
	"time"

	"github.com/supervaize/svz/core"
	"github.com/supervaize/svz/internal/envvar"
)

// Settings of the effect log and stream (core/events.go, docs/events.md).
const (
	EnvEventRetention      = "SUPERVAIZER_EVENT_RETENTION"
	EnvEventRetentionCount = "SUPERVAIZER_EVENT_RETENTION_COUNT"
	EnvEventRetentionBytes = "SUPERVAIZER_EVENT_RETENTION_BYTES"
	EnvEventMaxBytes       = "SUPERVAIZER_EVENT_MAX_BYTES"
	EnvEventStreamsMax     = "SUPERVAIZER_EVENT_STREAMS_MAX"
	EnvEventCatchUpMax     = "SUPERVAIZER_EVENT_CATCHUP_MAX"
)

// eventSettings reads the effect log settings into cfg, reporting every bad one.
func eventSettings(getenv func(string) string, cfg *core.Config) error {
	retention, err1 := envvar.Duration(getenv, EnvEventRetention, core.DefaultEventRetention, time.Minute, 30*24*time.Hour)
	count, err2 := envvar.Int(getenv, EnvEventRetentionCount, core.DefaultEventRetentionCount, 1, 1_000_000)
	streams, err3 := envvar.Int(getenv, EnvEventStreamsMax, core.DefaultMaxEventStreams, 1, 10_000)
	catchUp, err4 := envvar.Int(getenv, EnvEventCatchUpMax, core.DefaultEventCatchUp, 1, 100_000)
	// An event (at most 1 MiB) never exceeds the log (at least 1 MiB).
	bytes, err5 := envvar.Int(getenv, EnvEventRetentionBytes, core.DefaultEventRetentionBytes, 1<<20, 1<<36)
	maxBytes, err6 := envvar.Int(getenv, EnvEventMaxBytes, core.DefaultEventMaxBytes, 1<<10, 1<<20)
	for _, err := range []*error{&err5, &err6} {
		if *err != nil {
			*err = fmt.Errorf("%w bytes", *err)
		}
	}
	if err := errors.Join(err1, err2, err3, err4, err5, err6); err != nil {
		return err
	}
	cfg.EventRetention, cfg.EventRetentionCount = retention, int(count)
	cfg.EventRetentionBytes, cfg.EventMaxBytes = bytes, maxBytes
	cfg.MaxEventStreams, cfg.EventCatchUp = int(streams), int(catchUp)
	return nil
}
