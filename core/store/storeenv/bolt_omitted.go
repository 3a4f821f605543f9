//go:build svz_nobolt

package storeenv

import (
	"context"

	"github.com/supervaize/svz/core/store"
)

func openBolt(context.Context, func(string) string) (store.Store, error) { return nil, omitted("bolt") }
