package main

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/supervaize/svz/core/grant"
)

// Defaults of the identities keygen's settings give the controller: tokens name them.
const (
	devServerID = "dev-server-1"
	devAgentID  = "dev-agent-1"
)

type keygenFlags struct {
	dir, name, issuer, serverID, agent string
	force                              bool
}

func newDevKeygenCmd() *cobra.Command {
	f := &keygenFlags{}
	cmd := &cobra.Command{
		Use:   "keygen",
		Short: "Write an Ed25519 signing key pair and the controller settings that trust it (NAME.env)",
		Long: `Write, in DIR:
  NAME.key        the private key (PKCS#8 PEM, mode 0600): svz dev token signs with it
  NAME.pub        the public key (SubjectPublicKeyInfo PEM)
  NAME.jwks.json  the public key as a JWKS (kid = its RFC 7638 thumbprint)
  NAME.env        the controller settings that verify tokens signed with it; load them with
                  . ./NAME.env

Every file is written whole or not at all. Run again, keygen keeps a complete set as it is (the
settings keep matching the key); --force replaces all four with a new key.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return devKeygen(cmd.OutOrStdout(), f) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.dir, "dir", ".", "directory to write the files to")
	fl.StringVar(&f.name, "name", devKeyName, "base name of the files")
	fl.StringVar(&f.issuer, "issuer", devIssuer, "issuer (iss) the settings expect, "+grant.EnvIssuer)
	fl.StringVar(&f.serverID, "server-id", devServerID, "this controller's id in tokens, SUPERVAIZER_SERVER_ID")
	fl.StringVar(&f.agent, "agent", "hello-world-ai-agent", "slug of the agent given the Studio id "+devAgentID+" in "+grant.EnvStudioAgentIDs)
	fl.BoolVar(&f.force, "force", false, "replace existing files with a new key pair")
	return cmd
}

type devKeyPaths struct{ priv, pub, jwks, env string }

func keyPaths(dir, name string) devKeyPaths {
	return devKeyPaths{
		priv: filepath.Join(dir, name+".key"),
		pub:  filepath.Join(dir, name+".pub"),
		jwks: filepath.Join(dir, name+".jwks.json"),
		env:  filepath.Join(dir, name+".env"),
	}
}

func devKeygen(out io.Writer, f *keygenFlags) error {
	if f.name == "" || strings.ContainsAny(f.name, `/\`) {
		return fmt.Errorf("--name must be a plain file name, got %q", f.name)
	}
	if strings.TrimSpace(f.issuer) == "" {
		return errors.New("--issuer must not be empty")
	}
	if len(strings.TrimSpace(f.serverID)) <= 5 || strings.ContainsAny(f.serverID, " \t\n'") {
		return fmt.Errorf("--server-id must be longer than 5 characters, without spaces or quotes, got %q", f.serverID)
	}
	if _, err := grant.ParseStudioAgentIDs(f.agent + "=" + devAgentID); err != nil {
		return fmt.Errorf("--agent %q is not an agent slug: %w", f.agent, err)
	}
	paths := keyPaths(f.dir, f.name)
	all := []string{paths.priv, paths.pub, paths.jwks, paths.env}
	if !f.force {
		var present, missing []string
		for _, p := range all {
			switch _, err := os.Lstat(p); {
			case err == nil:
				present = append(present, p)
			case errors.Is(err, fs.ErrNotExist):
				missing = append(missing, p)
			default:
				return fmt.Errorf("checking %s: %w", p, err)
			}
		}
		switch {
		case len(present) == len(all):
			_, err := fmt.Fprintf(out, "Kept the existing key pair and settings (--force replaces them):\n  . %s\n", shellPath(paths.env))
			return err
		case len(present) > 0:
			return fmt.Errorf("%s already exist(s) but %s do(es) not: the set is incomplete, so the settings may not match the key; "+
				"run with --force to write a new key pair and its settings", strings.Join(present, ", "), strings.Join(missing, ", "))
		}
	}

	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return fmt.Errorf("generating an Ed25519 key: %w", err)
	}
	privDER, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return fmt.Errorf("encoding the private key: %w", err)
	}
	pubPEM, err := publicKeyPEM(pub)
	if err != nil {
		return err
	}
	kid, jwks, err := jwksOf(pub)
	if err != nil {
		return err
	}
	fp := sha256.Sum256(pub)
	env := fmt.Sprintf(`# Workspace-grant settings for local development, written by svz dev keygen: they make a
# controller verify tokens signed by %s (never use this key for a real Studio).
#   public key  %s  (fingerprint %s)
#   JWKS        %s  (kid %s)
# Load them with: . %s
export %s=true
export %s=%s
export %s=%s
# What tokens name: this server, and the Studio id of the agent (svz dev token reads both).
export SUPERVAIZER_SERVER_ID=%s
export %s=%s
`,
		paths.priv, paths.pub, hex.EncodeToString(fp[:6]), paths.jwks, kid, shellPath(paths.env),
		grant.EnvRequired, grant.EnvIssuer, shellQuote(f.issuer), grant.EnvPublicKey, shellQuote(strings.TrimRight(pubPEM, "\n")),
		shellQuote(f.serverID), grant.EnvStudioAgentIDs, shellQuote(f.agent+"="+devAgentID))
	if err := os.MkdirAll(f.dir, 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", f.dir, err)
	}
	for _, w := range []struct {
		path string
		data []byte
		mode fs.FileMode
	}{
		// The private key first: without it nothing else is of use.
		{paths.priv, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: privDER}), 0o600},
		{paths.pub, []byte(pubPEM), 0o644},
		{paths.jwks, append(jwks, '\n'), 0o644},
		{paths.env, []byte(env), 0o644},
	} {
		if err := writeAtomic(w.path, w.data, w.mode, f.force); err != nil {
			return err
		}
	}
	_, err = fmt.Fprintf(out, `Wrote a workspace-grant signing key for local development (never use it for a real Studio):
  private key  %s  (mode 0600; svz dev token signs with it)
  public key   %s  (fingerprint %s)
  JWKS         %s  (kid %s)
  settings     %s

Load the settings, then start the controller; every /a2a call needs a token (svz dev token):
  . %s
`, paths.priv, paths.pub, hex.EncodeToString(fp[:6]), paths.jwks, kid, paths.env, shellPath(paths.env))
	return err
}

// writeAtomic writes data to path with mode: whole or not at all (a temporary file in the same
// directory, synced, then renamed into place). Without replace an existing path is left alone and
// is an error (the temporary file is linked, which fails when path exists).
func writeAtomic(path string, data []byte, mode fs.FileMode, replace bool) (err error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	defer func() {
		_ = os.Remove(tmp.Name())
		if err != nil {
			err = fmt.Errorf("writing %s: %w", path, err)
		}
	}()
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if replace {
		return os.Rename(tmp.Name(), path)
	}
	return os.Link(tmp.Name(), path)
}

// shellPath is path as a command line may use it: ./path when relative, quoted when needed.
func shellPath(path string) string {
	if !filepath.IsAbs(path) && !strings.HasPrefix(path, ".") {
		path = "./" + path
	}
	if strings.ContainsAny(path, " '\"$`\\") {
		return shellQuote(path)
	}
	return path
}
