//go:build svz_nootel

package config

import (
	"github.com/supervaize/svz/core/store"
	"github.com/supervaize/svz/core/telemetry"
)

// measured is s: a binary built without OpenTelemetry's SDK (svz_nootel) measures nothing.
func measured(s store.Store, _ string, _ telemetry.Providers) store.Store { return s }
