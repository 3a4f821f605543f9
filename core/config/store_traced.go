//go:build !svz_nootel

package config

import (
	"github.com/supervaize/svz/core/store"
	"github.com/supervaize/svz/core/store/traced"
	"github.com/supervaize/svz/core/telemetry"
)

// measured is s measured (package traced) as p asks.
func measured(s store.Store, backend string, p telemetry.Providers) store.Store {
	return traced.Wrap(s, backend, p)
}
