package config

import (
	"errors"
	"strings"
	"time"

	"github.com/supervaize/svz/core/studio"
	"github.com/supervaize/svz/internal/envvar"
)

// Settings of the Studio connection read here (the account's are in package studio).
const (
	// EnvStudioRegister chooses whether a long-running server registers with Studio at start:
	// auto (the default) registers on a plain HTTP server and never on Lambda or Cloud Run;
	// off never registers (svz deploy sets it: it registers once per deploy and writes the outcome).
	EnvStudioRegister = "SUPERVAIZER_STUDIO_REGISTER"
	EnvPrivateKey     = studio.EnvPrivateKey
)

// Values of SUPERVAIZER_STUDIO_REGISTER.
const (
	StudioRegisterAuto = "auto"
	StudioRegisterOff  = "off"
)

// StudioConnected reports whether the environment connects the controller to Studio
// (SUPERVAIZE_API_KEY is set) outside local mode. An invalid SUPERVAIZER_LOCAL_MODE counts as not
// connected: Load reports it.
func StudioConnected(getenv func(string) string) bool {
	local, err := LocalMode(getenv)
	return err == nil && !local && strings.TrimSpace(getenv(EnvStudioAPIKey)) != ""
}

// studioSettings parses the settings of the Studio connection that are not the account's, strictly
// and whether or not they are used: a misspelt one is an error, never silently ignored.
func studioSettings(getenv func(string) string) (mode string, ttl time.Duration, err error) {
	mode, merr := envvar.Enum(getenv, EnvStudioRegister, StudioRegisterAuto, StudioRegisterAuto, StudioRegisterOff)
	ttl, terr := envvar.Duration(getenv, studio.EnvParametersTTL, studio.DefaultParametersTTL, 10*time.Second, 24*time.Hour)
	return mode, ttl, errors.Join(merr, terr, studio.CheckTuning(getenv))
}
