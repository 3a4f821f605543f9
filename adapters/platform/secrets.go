package platform

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"github.com/supervaize/svz/adapters/platform/internal/awssecret"
	"github.com/supervaize/svz/internal/fingerprint"
)

// secretRefSuffix turns a setting's name into the name of its Secrets Manager reference.
const secretRefSuffix = "_SECRET_ARN"

// resolveSecrets returns getenv with the secret references (SUPERVAIZER_API_KEY_SECRET_ARN,
// SUPERVAIZER_PRIVATE_KEY_SECRET_ARN, SUPERVAIZE_API_KEY_SECRET_ARN) replaced by their values.
// Secrets are read concurrently: a cold start waits for one round trip, not one per secret.
func resolveSecrets(ctx context.Context, getenv func(string) string, log *slog.Logger) (func(string) string, error) {
	type ref struct {
		name, id, value string
		err             error
	}
	var refs []*ref
	for _, name := range [...]string{"SUPERVAIZER_API_KEY", "SUPERVAIZER_PRIVATE_KEY", "SUPERVAIZE_API_KEY"} {
		id := getenv(name + secretRefSuffix)
		if id == "" {
			continue
		}
		if getenv(name) != "" {
			return nil, fmt.Errorf("platform: %s and %s are both set: set the value or the secret reference, not both", name, name+secretRefSuffix)
		}
		refs = append(refs, &ref{name: name, id: id})
	}
	if len(refs) == 0 {
		return getenv, nil
	}
	client := awssecret.New(getenv)
	var wg sync.WaitGroup
	for _, r := range refs {
		wg.Go(func() { r.value, r.err = client.GetSecretString(ctx, r.id) })
	}
	wg.Wait()
	resolved := make(map[string]string, len(refs))
	for _, r := range refs {
		if r.err != nil {
			return nil, fmt.Errorf("platform: %s%s: secret %s cannot be read: %w", r.name, secretRefSuffix, r.id, r.err)
		}
		resolved[r.name] = r.value
		log.Info("secret read", "setting", r.name, "secret", r.id, "fingerprint", fingerprint.Of(r.value))
	}
	return func(k string) string {
		if v, ok := resolved[k]; ok {
			return v
		}
		return getenv(k)
	}, nil
}
