package main

import (
	"crypto"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/lestrrat-go/jwx/v3/jwk"
	"github.com/lestrrat-go/jwx/v3/jws"
	"github.com/spf13/cobra"

	"github.com/supervaize/svz/core/grant"
)

// Development defaults: an issuer under .invalid cannot be mistaken for a real Studio.
const (
	devKeyName  = "studio-grant"
	devIssuer   = "https://studio.svz-dev.invalid"
	maxTokenTTL = 24 * time.Hour
)

// newDevCmd is `svz dev keygen|token`: a local stand-in for Studio's workspace-grant signer, so the
// real token verification can be exercised without Studio.
func newDevCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Local development tools: stand-ins for Studio (grant signer, local Studio)",
		Long: `Studio signs a short-lived EdDSA token (X-Supervaize-Workspace-Authorization) for every call it
makes to a controller. These commands play Studio's part locally:

  svz dev keygen                 writes an Ed25519 key pair and the controller settings that trust it
  svz dev token --agent ...      signs a token the controller will accept
  svz dev studio                 runs a local Studio stand-in (registration, tokens, parameters,
                                 context, rule checkpoints) and prints the controller settings
  svz dev rsakey                 writes the controller's RSA key (SUPERVAIZER_PRIVATE_KEY)

The keys are for development only.`,
	}
	cmd.AddCommand(newDevKeygenCmd(), newDevTokenCmd(), newDevStudioCmd(), newDevRSAKeyCmd())
	return cmd
}

func publicKeyPEM(pub ed25519.PublicKey) (string, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return "", fmt.Errorf("encoding the public key: %w", err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})), nil
}

// jwksOf returns the key's RFC 7638 thumbprint (its kid) and a JWKS publishing it as Studio does.
func jwksOf(pub ed25519.PublicKey) (string, []byte, error) {
	k, err := jwk.Import(pub)
	if err != nil {
		return "", nil, fmt.Errorf("building the JWK: %w", err)
	}
	tp, err := k.Thumbprint(crypto.SHA256)
	if err != nil {
		return "", nil, fmt.Errorf("JWK thumbprint: %w", err)
	}
	kid := base64.RawURLEncoding.EncodeToString(tp)
	for name, v := range map[string]any{jwk.KeyIDKey: kid, jwk.AlgorithmKey: jwa.EdDSA(), jwk.KeyUsageKey: "sig"} {
		if err := k.Set(name, v); err != nil {
			return "", nil, fmt.Errorf("JWK %s: %w", name, err)
		}
	}
	set := jwk.NewSet()
	if err := set.AddKey(k); err != nil {
		return "", nil, fmt.Errorf("JWKS: %w", err)
	}
	b, err := json.Marshal(set)
	if err != nil {
		return "", nil, fmt.Errorf("JWKS: %w", err)
	}
	return kid, b, nil
}

// shellQuote quotes s for a POSIX shell (single quotes; newlines kept).
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

type devTokenFlags struct {
	key, agent, agentID, workspace, workspaceSlug string
	issuer, audience, serverID, grantID, ref      string
	scopes                                        []string
	ttl                                           time.Duration
}

func newDevTokenCmd() *cobra.Command {
	f := &devTokenFlags{}
	cmd := &cobra.Command{
		Use:   "token --agent SLUG --workspace ID --scopes SCOPE,...",
		Short: "Sign a workspace-grant token as Studio would, and print it",
		Long: `Sign a workspace-grant token with the key written by svz dev keygen and print it on stdout, ready for
  curl -H "X-Supervaize-Workspace-Authorization: Bearer $(svz dev token ...)"

A call needs two scopes: its method and its target, e.g.
  --scopes supervaizer/action.invoke,job.start     (action job.start)
  --scopes supervaizer/surface.load,job.start      (surface job.start)
A DataResource route needs one: resource.<name>.<op>, e.g.
  --scopes resource.greetings.list,resource.greetings.create

The issuer, audience, server id and Studio agent id default to what the controller expects, read
from the same environment: SUPERVAIZER_WORKSPACE_AUTH_ISSUER, SUPERVAIZER_WORKSPACE_AUTH_AUDIENCE
(else supervaizer-server:<server id>), SUPERVAIZER_SERVER_ID and SUPERVAIZER_STUDIO_AGENT_IDS.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			tok, err := devToken(f, os.Getenv, time.Now())
			if err != nil {
				return err
			}
			_, err = fmt.Fprintln(cmd.OutOrStdout(), tok)
			return err
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.key, "key", keyPaths(".", devKeyName).priv, "private key written by svz dev keygen")
	fl.StringVar(&f.agent, "agent", "", "agent slug (required)")
	fl.StringVar(&f.agentID, "agent-id", "", "Studio agent id (default: the agent's entry in "+grant.EnvStudioAgentIDs+")")
	fl.StringVar(&f.workspace, "workspace", "", "Studio workspace id (required)")
	fl.StringVar(&f.workspaceSlug, "workspace-slug", "", "workspace slug (optional, informational)")
	fl.StringSliceVar(&f.scopes, "scopes", nil, "granted scopes, comma-separated or repeated (required)")
	fl.StringVar(&f.issuer, "issuer", "", "iss (default: $"+grant.EnvIssuer+")")
	fl.StringVar(&f.audience, "audience", "", "aud (default: $"+grant.EnvAudience+", else supervaizer-server:<server id>)")
	fl.StringVar(&f.serverID, "server-id", "", "server_id (default: the audience's suffix, else $SUPERVAIZER_SERVER_ID)")
	fl.StringVar(&f.grantID, "grant-id", "dev-grant", "grant_id")
	fl.StringVar(&f.ref, "agent-workspace-ref", "", "agent_workspace_ref (optional)")
	fl.DurationVar(&f.ttl, "ttl", 10*time.Minute, "lifetime (at most 24h; Studio uses 5 to 15 minutes)")
	return cmd
}

// devToken builds and signs the token of f, defaults read through getenv, issued at now.
func devToken(f *devTokenFlags, getenv func(string) string, now time.Time) (string, error) {
	or := func(v, env string) string {
		if v = strings.TrimSpace(v); v != "" {
			return v
		}
		return strings.TrimSpace(getenv(env))
	}
	var errs []error
	need := func(v, what string) {
		if strings.TrimSpace(v) == "" {
			errs = append(errs, errors.New(what))
		}
	}
	need(f.agent, "--agent is required")
	need(f.workspace, "--workspace is required")
	need(f.grantID, "--grant-id must not be empty")
	scopes := make([]string, 0, len(f.scopes))
	for _, s := range f.scopes {
		if s = strings.TrimSpace(s); s == "" {
			errs = append(errs, errors.New("--scopes must not contain empty scopes"))
			continue
		}
		scopes = append(scopes, s)
	}
	if len(f.scopes) == 0 {
		errs = append(errs, errors.New("--scopes is required (e.g. supervaizer/action.invoke,job.start)"))
	}
	if f.ttl <= 0 || f.ttl > maxTokenTTL {
		errs = append(errs, fmt.Errorf("--ttl must be above 0 and at most %s, got %s", maxTokenTTL, f.ttl))
	}
	issuer := or(f.issuer, grant.EnvIssuer)
	need(issuer, "--issuer is required (or set "+grant.EnvIssuer+")")
	serverID := or(f.serverID, "")
	audience := or(f.audience, grant.EnvAudience)
	if serverID == "" {
		if suffix, ok := strings.CutPrefix(audience, grant.AudiencePrefix); ok {
			serverID = suffix
		} else {
			serverID = strings.TrimSpace(getenv("SUPERVAIZER_SERVER_ID"))
		}
	}
	need(serverID, "--server-id is required (or set SUPERVAIZER_SERVER_ID)")
	if audience == "" && serverID != "" {
		audience = grant.AudiencePrefix + serverID
	}
	agentID := strings.TrimSpace(f.agentID)
	if agentID == "" && f.agent != "" {
		ids, err := grant.ParseStudioAgentIDs(getenv(grant.EnvStudioAgentIDs))
		if err != nil {
			errs = append(errs, err)
		} else if agentID = ids[f.agent]; agentID == "" {
			errs = append(errs, fmt.Errorf("--agent-id is required: %s has no entry for %q", grant.EnvStudioAgentIDs, f.agent))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return "", err
	}
	priv, err := readPrivateKey(f.key)
	if err != nil {
		return "", err
	}
	kid, _, err := jwksOf(priv.Public().(ed25519.PublicKey))
	if err != nil {
		return "", err
	}
	jti := make([]byte, 12)
	if _, err := rand.Read(jti); err != nil {
		return "", fmt.Errorf("token id: %w", err)
	}
	claims := map[string]any{
		"iss":          issuer,
		"aud":          audience,
		"sub":          "workspace-agent-grant:" + f.grantID,
		"grant_id":     f.grantID,
		"workspace_id": strings.TrimSpace(f.workspace),
		"agent_id":     agentID,
		"agent_slug":   strings.TrimSpace(f.agent),
		"server_id":    serverID,
		"scopes":       scopes,
		"iat":          now.Unix(),
		"exp":          now.Add(f.ttl).Unix(),
		"jti":          base64.RawURLEncoding.EncodeToString(jti),
	}
	if s := strings.TrimSpace(f.workspaceSlug); s != "" {
		claims["workspace_slug"] = s
	}
	if r := strings.TrimSpace(f.ref); r != "" {
		claims["agent_workspace_ref"] = r
	}
	payload, err := json.Marshal(claims)
	if err != nil {
		return "", fmt.Errorf("encoding claims: %w", err)
	}
	h := jws.NewHeaders()
	for name, v := range map[string]any{jws.KeyIDKey: kid, jws.TypeKey: "JWT"} {
		if err := h.Set(name, v); err != nil {
			return "", fmt.Errorf("token header %s: %w", name, err)
		}
	}
	tok, err := jws.Sign(payload, jws.WithKey(jwa.EdDSA(), priv, jws.WithProtectedHeaders(h)))
	if err != nil {
		return "", fmt.Errorf("signing the token: %w", err)
	}
	return string(tok), nil
}

// readPrivateKey loads the PKCS#8 Ed25519 key written by keygen. Errors never quote the file.
func readPrivateKey(path string) (ed25519.PrivateKey, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the signing key (run svz dev keygen, or pass --key): %w", err)
	}
	block, _ := pem.Decode(data)
	if block == nil || block.Type != "PRIVATE KEY" {
		return nil, fmt.Errorf("%s is not a PKCS#8 PEM private key (the .key file written by svz dev keygen)", path)
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	priv, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("%s holds a %T, not an Ed25519 key", path, k)
	}
	return priv, nil
}
