//go:build svz_nostudioregister

package config

import (
	"context"
	"crypto/rsa"
	"fmt"
	"log/slog"

	"github.com/supervaize/svz/core"
	"github.com/supervaize/svz/core/studio"
)

// registerAtStart is left out of builds tagged svz_nostudioregister (the Lambda build: a
// serverless instance never registers, svz deploy up or svz studio register does it for it).
func registerAtStart(context.Context, func(string) string, map[string]string, *slog.Logger, *studio.Client, *rsa.PrivateKey, []*core.Agent) error {
	return fmt.Errorf("this controller was built without Studio registration (build tag svz_nostudioregister): set %s=%s and register with svz studio register or svz deploy up",
		EnvStudioRegister, StudioRegisterOff)
}
