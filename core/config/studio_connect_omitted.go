//go:build svz_nostudio

package config

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/supervaize/svz/core"
	"github.com/supervaize/svz/core/checkpoint"
	"github.com/supervaize/svz/internal/localmode"
)

// connectStudio of a build without the Studio client (build tag svz_nostudio, the SAM Lambda
// build, whose template gives the function no Studio account): a Studio-connected controller
// serves only when it needs nothing from Studio at run time, and says so otherwise.
func connectStudio(_ context.Context, getenv func(string) string, _ *slog.Logger, agents []*core.Agent) (func(string) string, core.ParameterSource, checkpoint.Studio, error) {
	mode, _, err := studioSettings(getenv)
	if err != nil || !StudioConnected(getenv) {
		return getenv, nil, nil, err
	}
	const omitted = "this controller was built without the Studio client (build tag svz_nostudio)"
	if mode == StudioRegisterAuto && localmode.ServerlessPlatform(getenv) == "" {
		return nil, nil, nil, fmt.Errorf("%s: it cannot register with Studio at start; set %s=%s and register with svz studio register, or build without svz_nostudio",
			omitted, EnvStudioRegister, StudioRegisterOff)
	}
	for _, a := range agents {
		if a != nil && len(a.Config().Parameters) > 0 {
			return nil, nil, nil, fmt.Errorf("%s: agent %q declares parameters, which only the Studio client can look up; build without svz_nostudio", omitted, a.Slug())
		}
		if a != nil && a.Config().Registration.Capabilities.RuleCheckpoints != nil {
			return nil, nil, nil, fmt.Errorf("%s: agent %q declares rule checkpoints, which only the Studio client can post; build without svz_nostudio", omitted, a.Slug())
		}
	}
	return getenv, nil, nil, nil
}
