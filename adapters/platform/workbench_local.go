//go:build !svz_nolocal

package platform

import (
	"net/http"

	"github.com/supervaize/svz/adapters/platform/workbench"
	"github.com/supervaize/svz/core/grant"
	"github.com/supervaize/svz/internal/fingerprint"
)

// mountWorkbench serves the workbench at /manage beside the controller (local mode only, so
// never in the Lambda bootstrap). The page gets local mode's public key; a key the user chose is
// a secret, which the page asks for and the workbench never hands out.
func mountWorkbench(h http.Handler, info LocalInfo) http.Handler {
	cfg := workbench.Config{Authorization: workbench.Bypassed, Log: info.Log}
	if info.APIKey == localAPIKey {
		cfg.APIKey = info.APIKey
	} else {
		cfg.KeyFingerprint = fingerprint.Of(info.APIKey)
	}
	if info.Controller != nil {
		if svc := info.Controller.Jobs(); svc != nil {
			cfg.Jobs, cfg.APIKeyCheck = svc, workbench.KeyCheck(info.APIKey)
		}
		switch info.Controller.Authorizer().(type) {
		case grant.LocalBypass:
		case grant.NotConfigured:
			cfg.Authorization = workbench.Refused
		case nil:
		default:
			cfg.Authorization = workbench.TokenRequired
		}
	}
	return workbench.New(h, cfg)
}
