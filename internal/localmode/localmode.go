// Package localmode reads SUPERVAIZER_LOCAL_MODE, once, the same way for every binary and package
// (core/config, adapters/platform). Local mode serves with a well-known API key and bypasses
// workspace authorization, so it is for this machine only: it is refused on a serverless
// platform unless that platform is a local emulation, and its server binds loopback only.
package localmode

import (
	"fmt"

	"github.com/supervaize/svz/internal/envvar"
)

// Settings read here.
const (
	// Env switches local mode on.
	Env = "SUPERVAIZER_LOCAL_MODE"
	// EnvEmulator says that the serverless runtime the environment shows is a local emulation
	// (the Lambda Runtime Interface Emulator, the Functions Framework on this machine), where
	// local mode may run. sam local says so with AWS_SAM_LOCAL=true.
	EnvEmulator = "SUPERVAIZER_LOCAL_EMULATOR"
)

// FromEnv reports whether local mode is on: SUPERVAIZER_LOCAL_MODE parsed as a boolean (package
// envvar: true/false, 1/0, yes/no, on/off, any case; anything else is an error naming the
// variable). On a serverless platform (AWS_LAMBDA_RUNTIME_API, K_SERVICE or FUNCTION_TARGET set)
// local mode is an error unless AWS_SAM_LOCAL=true or SUPERVAIZER_LOCAL_EMULATOR=true.
func FromEnv(getenv func(string) string) (bool, error) {
	local, err := envvar.Bool(getenv, Env, false)
	if err != nil || !local {
		return false, err
	}
	platform := ServerlessPlatform(getenv)
	if platform == "" {
		return true, nil
	}
	for _, name := range [...]string{"AWS_SAM_LOCAL", EnvEmulator} {
		emulated, err := envvar.Bool(getenv, name, false)
		if err != nil {
			return false, err
		}
		if emulated {
			return true, nil
		}
	}
	return false, fmt.Errorf("%s=true on %s: local mode bypasses workspace authorization behind a public API key, so it never runs on a serverless platform. "+
		"Remove %s from the deployed environment; under a local emulator set AWS_SAM_LOCAL=true (sam local does) or %s=true",
		Env, platform, Env, EnvEmulator)
}

// ServerlessPlatform names the serverless platform the environment shows, or "" on a plain
// server (core/config also uses it: a serverless instance never registers with Studio at start).
func ServerlessPlatform(getenv func(string) string) string {
	for _, p := range [...]struct{ env, name string }{
		{"AWS_LAMBDA_RUNTIME_API", "AWS Lambda"}, {"K_SERVICE", "Cloud Run"}, {"FUNCTION_TARGET", "Cloud Run functions"},
	} {
		if getenv(p.env) != "" {
			return p.name + " (" + p.env + " is set)"
		}
	}
	return ""
}
