package deploy

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/subtle"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"strings"

	"github.com/supervaize/svz/internal/fingerprint"
)

// Secret is a secret value. It prints, logs and marshals as its fingerprint only; Reveal returns the
// value for the one place that needs it (the secret store, the health gate, the one-time display).
type Secret struct{ v string }

// NewSecret wraps a value.
func NewSecret(v string) Secret { return Secret{v: v} }

// Reveal returns the value.
func (s Secret) Reveal() string { return s.v }

// IsZero reports whether the secret is empty.
func (s Secret) IsZero() bool { return s.v == "" }

// Equal compares two secrets in constant time.
func (s Secret) Equal(o Secret) bool {
	return subtle.ConstantTimeCompare([]byte(s.v), []byte(o.v)) == 1
}

// Fingerprint is the first 12 hex characters of the SHA-256 of the value.
func (s Secret) Fingerprint() string { return Fingerprint(s.v) }

func (s Secret) String() string   { return "secret:" + s.Fingerprint() }
func (s Secret) GoString() string { return s.String() }

// LogValue keeps the value out of slog output.
func (s Secret) LogValue() slog.Value { return slog.StringValue(s.String()) }

// MarshalJSON keeps the value out of JSON output.
func (s Secret) MarshalJSON() ([]byte, error) { return []byte(`"` + s.String() + `"`), nil }

// Fingerprint is the first 12 hex characters of the SHA-256 of v: how secrets are named in logs and
// errors.
func Fingerprint(v string) string { return fingerprint.Of(v) }

const apiKeyAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"

// APIKeyLength is the length of generated API keys and the minimum accepted from the host.
const APIKeyLength = 32

// GenerateAPIKey returns a random key of 43 alphanumerics (256 bits), above the 32-character floor.
func GenerateAPIKey() (Secret, error) {
	const n = 43
	b := make([]byte, n)
	max := big.NewInt(int64(len(apiKeyAlphabet)))
	for i := range b {
		r, err := rand.Int(rand.Reader, max)
		if err != nil {
			return Secret{}, fmt.Errorf("generate API key: %w", err)
		}
		b[i] = apiKeyAlphabet[r.Int64()]
	}
	return NewSecret(string(b)), nil
}

// GeneratePrivateKey returns a new RSA-2048 private key as a PKCS#8 PEM block, as the reference SDK
// generates it.
func GeneratePrivateKey() (Secret, error) {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return Secret{}, fmt.Errorf("generate RSA key: %w", err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		return Secret{}, fmt.Errorf("encode RSA key: %w", err)
	}
	return NewSecret(string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))), nil
}

// CheckAPIKey rejects an API key that is too short to be a random key.
func CheckAPIKey(s Secret) error {
	if n := len(s.Reveal()); n < APIKeyLength {
		return fmt.Errorf("API key %s is %d characters long; use %d or more", s.Fingerprint(), n, APIKeyLength)
	}
	return nil
}

// CheckPrivateKey accepts an RSA private key in PEM (PKCS#8 or PKCS#1), as the server reads it.
func CheckPrivateKey(s Secret) error {
	block, _ := pem.Decode([]byte(s.Reveal()))
	if block == nil {
		return fmt.Errorf("private key %s is not PEM", s.Fingerprint())
	}
	if k, err := x509.ParsePKCS8PrivateKey(block.Bytes); err == nil {
		if _, ok := k.(*rsa.PrivateKey); !ok {
			return fmt.Errorf("private key %s is a %T, not RSA", s.Fingerprint(), k)
		}
		return nil
	}
	if _, err := x509.ParsePKCS1PrivateKey(block.Bytes); err != nil {
		return fmt.Errorf("private key %s: not an RSA key in PKCS#8 or PKCS#1 form", s.Fingerprint())
	}
	return nil
}

// secretSpec is one secret the controller reads.
type secretSpec struct {
	Var      string                 // variable the server reads
	Suffix   string                 // platform secret name: {name}-{env}-{suffix}
	Generate func() (Secret, error) // nil: only ever taken from the host
	Check    func(Secret) error     // validates a host value
	Flag     string                 // the flag that allows generating it
	Optional bool                   // absent everywhere is fine
	Why      string                 // what the controller needs it for, said when it is missing
	generate func(c *Config) bool   // whether the user asked to generate it
}

// Names of the secret variables.
const (
	EnvAPIKey       = "SUPERVAIZER_API_KEY"
	EnvPrivateKey   = "SUPERVAIZER_PRIVATE_KEY"
	EnvStudioAPIKey = "SUPERVAIZE_API_KEY"
	EnvStoreURL     = "SUPERVAIZER_STORE_URL"
)

// secretSpecs lists, in order, the secrets of a controller.
var secretSpecs = []secretSpec{
	{Var: EnvAPIKey, Suffix: "api-key", Generate: GenerateAPIKey, Check: CheckAPIKey, Flag: "--generate-api-key",
		Why:      "Studio sends it as X-API-Key on every call to the controller",
		generate: func(c *Config) bool { return c.GenerateAPIKey }},
	{Var: EnvPrivateKey, Suffix: "private-key", Generate: GeneratePrivateKey, Check: CheckPrivateKey, Flag: "--generate-private-key",
		Why: "the controller's RSA key: Studio encrypts sensitive data for the agent with its public key, " +
			"so it must stay the same across restarts and instances",
		generate: func(c *Config) bool { return c.GeneratePrivateKey }},
	{Var: EnvStudioAPIKey, Suffix: "studio-api-key", Optional: true},
	{Var: EnvStoreURL, Suffix: "store-url", Optional: true},
}

// secretPlan is the decision for one secret.
type secretPlan struct {
	spec    secretSpec
	name    string
	change  Change
	stored  StoredSecret // valid when the secret exists
	value   Secret       // value to Put when change.Action is Create or Update
	skip    bool         // optional secret set nowhere: not given to the service
	created bool         // value generated here (shown once when asked)
}

// decideSecret applies the rules: create when absent (from the host value, or generated when the
// flag allows), keep when present, replace only with RotateSecrets, and refuse a host value that
// differs from the stored one without RotateSecrets (never silently ignored, never silently applied).
func decideSecret(spec secretSpec, name string, stored *StoredSecret, host Secret, cfg *Config) (secretPlan, error) {
	p := secretPlan{spec: spec, name: name, change: Change{Resource: "secret", Name: name}}
	if !host.IsZero() && spec.Check != nil {
		if err := spec.Check(host); err != nil {
			return p, fmt.Errorf("%s on this host: %w", spec.Var, err)
		}
	}
	wantGen := spec.generate != nil && spec.generate(cfg)
	fresh := func() (Secret, bool, error) {
		if !host.IsZero() {
			return host, false, nil
		}
		if spec.Generate == nil {
			return Secret{}, false, errors.New("no value")
		}
		v, err := spec.Generate()
		return v, true, err
	}
	if stored == nil {
		switch {
		case !host.IsZero() || wantGen:
			v, gen, err := fresh()
			if err != nil {
				return p, fmt.Errorf("%s: %w", spec.Var, err)
			}
			p.value, p.created = v, gen
			p.change.Action = Create
			p.change.Detail = "from host " + spec.Var
			if gen {
				p.change.Detail = "generated"
			}
			return p, nil
		case spec.Optional:
			p.skip = true
			return p, nil
		default:
			return p, fmt.Errorf("secret %s does not exist: pass %s or set %s on this host (%s)", name, spec.Flag, spec.Var, spec.Why)
		}
	}
	p.stored = *stored
	if cfg.RotateSecrets && (spec.Generate != nil || !host.IsZero()) {
		v, gen, err := fresh()
		if err != nil {
			return p, fmt.Errorf("%s: %w", spec.Var, err)
		}
		if !gen && v.Equal(stored.Value) {
			p.change.Action = NoOp
			p.change.Detail = "host value already current"
			return p, nil
		}
		p.value, p.created = v, gen
		p.change.Action = Update
		p.change.Detail = "rotated: new version"
		return p, nil
	}
	if !host.IsZero() && !host.Equal(stored.Value) {
		return p, fmt.Errorf("secret %s holds %s but %s on this host is %s: pass --rotate-secrets to replace it, or unset %s",
			name, stored.Value.Fingerprint(), spec.Var, host.Fingerprint(), spec.Var)
	}
	p.change.Action = NoOp
	return p, nil
}

// problems is several independent failures reported at once (every secret that cannot be used,
// not only the first), each still reachable with errors.Is and errors.As.
type problems []error

func (p problems) Error() string {
	msgs := make([]string, len(p))
	for i, e := range p {
		msgs[i] = e.Error()
	}
	return fmt.Sprintf("%d problems: %s", len(p), strings.Join(msgs, "; "))
}

func (p problems) Unwrap() []error { return p }

// joinProblems returns nil, the one error, or all of them.
func joinProblems(errs []error) error {
	switch len(errs) {
	case 0:
		return nil
	case 1:
		return errs[0]
	}
	return problems(errs)
}
