package grant

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Settings are the workspace-authorization settings (V2WorkspaceAuthorizationSettings).
type Settings struct {
	// Required turns verification on (SUPERVAIZER_WORKSPACE_AUTH_REQUIRED).
	Required bool
	// Issuer is the expected iss (SUPERVAIZER_WORKSPACE_AUTH_ISSUER).
	Issuer string
	// Audience overrides the expected aud, "supervaizer-server:<server id>" by default
	// (SUPERVAIZER_WORKSPACE_AUTH_AUDIENCE).
	Audience string
	// PublicKeyPEM is Studio's Ed25519 public key, SubjectPublicKeyInfo PEM
	// (SUPERVAIZER_WORKSPACE_AUTH_PUBLIC_KEY). When set, JWKSURL is not used.
	PublicKeyPEM string
	// JWKSURL is Studio's JWKS endpoint (SUPERVAIZER_WORKSPACE_AUTH_JWKS_URL).
	JWKSURL string
	// Leeway is the clock-skew tolerance (SUPERVAIZER_WORKSPACE_AUTH_LEEWAY_SECONDS, 30 s).
	Leeway time.Duration
}

// Leeway bounds: a larger skew tolerance would turn short-lived tokens into long-lived ones.
const (
	DefaultLeeway = 30 * time.Second
	MaxLeeway     = 10 * time.Minute
)

// Environment variables of the settings.
const (
	EnvRequired  = "SUPERVAIZER_WORKSPACE_AUTH_REQUIRED"
	EnvIssuer    = "SUPERVAIZER_WORKSPACE_AUTH_ISSUER"
	EnvAudience  = "SUPERVAIZER_WORKSPACE_AUTH_AUDIENCE"
	EnvPublicKey = "SUPERVAIZER_WORKSPACE_AUTH_PUBLIC_KEY"
	EnvJWKSURL   = "SUPERVAIZER_WORKSPACE_AUTH_JWKS_URL"
	EnvLeeway    = "SUPERVAIZER_WORKSPACE_AUTH_LEEWAY_SECONDS"
)

// SettingsFromEnv reads the settings. A leeway that is not a whole number of seconds between 0
// and 600 is an error naming the variable.
func SettingsFromEnv(getenv func(string) string) (Settings, error) {
	s := Settings{
		Required:     parseBool(getenv(EnvRequired)),
		Issuer:       strings.TrimSpace(getenv(EnvIssuer)),
		Audience:     strings.TrimSpace(getenv(EnvAudience)),
		PublicKeyPEM: strings.TrimSpace(getenv(EnvPublicKey)),
		JWKSURL:      strings.TrimSpace(getenv(EnvJWKSURL)),
		Leeway:       DefaultLeeway,
	}
	if v := strings.TrimSpace(getenv(EnvLeeway)); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			return Settings{}, fmt.Errorf("%s must be a whole number of seconds, got %q", EnvLeeway, v)
		}
		d := time.Duration(n) * time.Second
		if n < 0 || d > MaxLeeway {
			return Settings{}, fmt.Errorf("%s must be between 0 and %d seconds, got %d", EnvLeeway, int(MaxLeeway/time.Second), n)
		}
		s.Leeway = d
	}
	return s, nil
}

// HasKeySource reports whether a public key or a JWKS URL is configured.
func (s Settings) HasKeySource() bool { return s.PublicKeyPEM != "" || s.JWKSURL != "" }

// HasTrustMaterial reports whether any verification setting is present (leeway does not count):
// any of them switches the local-mode bypass off.
func (s Settings) HasTrustMaterial() bool {
	return s.Required || s.Issuer != "" || s.Audience != "" || s.HasKeySource()
}
