package grant

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/supervaize/svz/internal/envvar"
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

// SettingsFromEnv reads the settings strictly (package envvar: REQUIRED is a boolean, the leeway
// a whole number of seconds from 0 to 600) and checks them (Settings.Check). Every mistake is
// reported at once, each naming its variable; values that may hold a secret are never quoted.
func SettingsFromEnv(getenv func(string) string) (Settings, error) {
	required, rerr := envvar.Bool(getenv, EnvRequired, false)
	leeway, lerr := envvar.Int(getenv, EnvLeeway, int64(DefaultLeeway/time.Second), 0, int64(MaxLeeway/time.Second))
	s := Settings{
		Required:     required,
		Issuer:       strings.TrimSpace(getenv(EnvIssuer)),
		Audience:     strings.TrimSpace(getenv(EnvAudience)),
		PublicKeyPEM: strings.TrimSpace(getenv(EnvPublicKey)),
		JWKSURL:      strings.TrimSpace(getenv(EnvJWKSURL)),
		Leeway:       time.Duration(leeway) * time.Second,
	}
	if err := errors.Join(rerr, lerr, s.Check()); err != nil {
		return Settings{}, err
	}
	return s, nil
}

// Check refuses settings that cannot work, whether or not verification is on:
//   - a public key that is not an Ed25519 SubjectPublicKeyInfo PEM, or a JWKS URL that is not
//     https (plain http only to a loopback IP), whenever they are set;
//   - trust settings without SUPERVAIZER_WORKSPACE_AUTH_REQUIRED=true. Such a controller would
//     start and then refuse every call as workspace_authorization_not_configured (spec §4.7: any
//     trust setting also switches the local-mode bypass off), so it does not start at all.
//
// grant.New itself keeps the reference's behaviour for such settings (not_configured answers);
// the binaries configured from the environment (package config) refuse them at start.
func (s Settings) Check() error {
	var errs []error
	if s.PublicKeyPEM != "" {
		if _, err := parsePublicKeyPEM(s.PublicKeyPEM); err != nil {
			errs = append(errs, fmt.Errorf("%w (set it to Studio's Ed25519 public key: a -----BEGIN PUBLIC KEY----- block; svz dev keygen writes one)", err))
		}
	}
	if s.JWKSURL != "" {
		if err := checkJWKSSetting(s.JWKSURL); err != nil {
			errs = append(errs, err)
		}
	}
	if !s.Required {
		var set []string
		for _, v := range [...]struct{ name, value string }{
			{EnvIssuer, s.Issuer}, {EnvAudience, s.Audience}, {EnvPublicKey, s.PublicKeyPEM}, {EnvJWKSURL, s.JWKSURL},
		} {
			if v.value != "" {
				set = append(set, v.name)
			}
		}
		if len(set) > 0 {
			errs = append(errs, fmt.Errorf("workspace authorization is half configured: %s %s set but %s is not true, so every /a2a call "+
				"would be refused as workspace_authorization_not_configured (any trust setting also switches the local-mode bypass off). "+
				"Set %s=true to verify tokens, or unset %s to run without verification",
				strings.Join(set, ", "), isAre(len(set)), EnvRequired, EnvRequired, strings.Join(set, ", ")))
		}
	}
	return errors.Join(errs...)
}

func isAre(n int) string {
	if n == 1 {
		return "is"
	}
	return "are"
}

// checkJWKSSetting checks SUPERVAIZER_WORKSPACE_AUTH_JWKS_URL. The value is never quoted: a URL
// may carry a password or a token.
func checkJWKSSetting(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("%s is not a valid URL (value not shown: it may hold a credential); Studio's is "+
			"https://app.supervaize.com/w/<workspace-slug>/api/v1/workspace-agent-grants/jwks/", EnvJWKSURL)
	}
	if err := checkJWKSURL(u); err != nil {
		return fmt.Errorf("%s: %w", EnvJWKSURL, err)
	}
	return nil
}

// HasKeySource reports whether a public key or a JWKS URL is configured.
func (s Settings) HasKeySource() bool { return s.PublicKeyPEM != "" || s.JWKSURL != "" }

// HasTrustMaterial reports whether any verification setting is present (leeway does not count):
// any of them switches the local-mode bypass off.
func (s Settings) HasTrustMaterial() bool {
	return s.Required || s.Issuer != "" || s.Audience != "" || s.HasKeySource()
}
