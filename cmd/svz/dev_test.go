package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/supervaize/svz/core/contract"
	"github.com/supervaize/svz/core/grant"
)

// runDev runs `svz dev args...` and returns stdout.
func runDev(t *testing.T, env map[string]string, args ...string) (string, error) {
	t.Helper()
	for k, v := range env {
		t.Setenv(k, v)
	}
	cmd := newRootCmd()
	var out, errOut bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetArgs(append([]string{"dev"}, args...))
	err := cmd.ExecuteContext(context.Background())
	return out.String(), err
}

// sourceExports runs the printed lines in a real shell and returns the variables they set.
func sourceExports(t *testing.T, script string, names ...string) map[string]string {
	t.Helper()
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("bash not found")
	}
	var probe strings.Builder
	probe.WriteString(script + "\n")
	for _, n := range names {
		probe.WriteString(`printf '%s\0' "$` + n + `"` + "\n")
	}
	out, err := exec.Command(bash, "-c", probe.String()).Output()
	if err != nil {
		t.Fatalf("bash: %v", err)
	}
	vals := strings.Split(string(out), "\x00")
	got := map[string]string{}
	for i, n := range names {
		got[n] = vals[i]
	}
	return got
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func TestDevKeygenAndToken(t *testing.T) {
	dir := t.TempDir()
	out, err := runDev(t, nil, "keygen", "--dir", dir, "--issuer", "https://studio.example")
	if err != nil {
		t.Fatal(err)
	}
	priv := filepath.Join(dir, "studio-grant.key")
	st, err := os.Stat(priv)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("private key %v, mode %v; want 0600", err, st.Mode())
	}
	keyPEM, _ := os.ReadFile(priv)
	envFile, _ := os.ReadFile(filepath.Join(dir, "studio-grant.env"))
	for _, text := range []string{out, string(envFile)} {
		if strings.Contains(text, strings.TrimSpace(string(keyPEM))) || strings.Contains(text, "PRIVATE KEY-----") {
			t.Fatal("keygen printed or wrote the private key in the settings")
		}
	}
	if !strings.HasSuffix(out, "  . "+filepath.Join(dir, "studio-grant.env")+"\n") {
		t.Fatalf("keygen does not say how to load the settings:\n%s", out)
	}
	pubPEM, _ := os.ReadFile(filepath.Join(dir, "studio-grant.pub"))

	env := sourceExports(t, ". "+filepath.Join(dir, "studio-grant.env"), grant.EnvRequired, grant.EnvIssuer, grant.EnvPublicKey,
		"SUPERVAIZER_SERVER_ID", grant.EnvStudioAgentIDs)
	if env[grant.EnvRequired] != "true" || env[grant.EnvIssuer] != "https://studio.example" ||
		env[grant.EnvPublicKey] != strings.TrimRight(string(pubPEM), "\n") || env["SUPERVAIZER_SERVER_ID"] != "dev-server-1" ||
		env[grant.EnvStudioAgentIDs] != "hello-world-ai-agent=dev-agent-1" {
		t.Fatalf("the settings file gives %q", env)
	}
	settings, err := grant.SettingsFromEnv(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	verifier, err := grant.NewVerifier(context.Background(), settings, "01SERVER", grant.WithLogger(quiet))
	if err != nil {
		t.Fatalf("the printed settings do not configure a verifier: %v", err)
	}

	tokEnv := map[string]string{
		grant.EnvIssuer:         "https://studio.example",
		"SUPERVAIZER_SERVER_ID": "01SERVER",
		grant.EnvStudioAgentIDs: "hello-world-ai-agent=dev-agent-1",
	}
	out, err = runDev(t, tokEnv, "token", "--key", priv, "--agent", "hello-world-ai-agent", "--workspace", "team-1",
		"--workspace-slug", "team", "--scopes", "supervaizer/action.invoke,job.start", "--scopes", "resource.contacts.list",
		"--agent-workspace-ref", "ref-9")
	if err != nil {
		t.Fatal(err)
	}
	tok := strings.TrimSuffix(out, "\n")
	if strings.ContainsAny(tok, " \n") || strings.Count(tok, ".") != 2 {
		t.Fatalf("stdout is not just the token: %q", out)
	}
	call := grant.Call{
		Token: "Bearer " + tok, Method: grant.MethodActionInvoke, Target: "job.start", AgentSlug: "hello-world-ai-agent",
		Agent:     &grant.Agent{Slug: "hello-world-ai-agent", ID: "ZbdXaxVurYBVbDcr9cDhXS", StudioID: "dev-agent-1"},
		Workspace: contract.WorkspaceRef{ID: "team-1"},
	}
	got, err := verifier.Authorize(context.Background(), call)
	if err != nil {
		t.Fatalf("the real verifier refuses the dev token: %v", err)
	}
	b, _ := json.Marshal(got)
	const want = `{"grant_id":"dev-grant","workspace_id":"team-1","workspace_slug":"team","agent_id":"dev-agent-1",` +
		`"agent_slug":"hello-world-ai-agent","server_id":"01SERVER","scopes":["supervaizer/action.invoke","job.start","resource.contacts.list"],` +
		`"agent_workspace_ref":"ref-9"}`
	if string(b) != want {
		t.Fatalf("context\n got %s\nwant %s", b, want)
	}

	// Header and lifetime as Studio sends them.
	var hdr map[string]any
	raw, _ := base64.RawURLEncoding.DecodeString(strings.Split(tok, ".")[0])
	if err := json.Unmarshal(raw, &hdr); err != nil || hdr["alg"] != "EdDSA" || hdr["typ"] != "JWT" || hdr["kid"] == "" {
		t.Fatalf("header %s", raw)
	}
	var claims struct{ Iat, Exp int64 }
	raw, _ = base64.RawURLEncoding.DecodeString(strings.Split(tok, ".")[1])
	if err := json.Unmarshal(raw, &claims); err != nil || claims.Exp-claims.Iat != 600 || time.Since(time.Unix(claims.Iat, 0)) > time.Minute {
		t.Fatalf("claims %s", raw)
	}

	// The JWKS file serves the same key under the token's kid.
	jwks, _ := os.ReadFile(filepath.Join(dir, "studio-grant.jwks.json"))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(jwks) }))
	defer srv.Close()
	settings.PublicKeyPEM, settings.JWKSURL = "", srv.URL+"/jwks.json"
	jv, err := grant.NewVerifier(context.Background(), settings, "01SERVER", grant.WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := jv.Authorize(context.Background(), call); err != nil {
		t.Fatalf("JWKS verifier refuses the dev token: %v", err)
	}
	var set struct {
		Keys []map[string]string `json:"keys"`
	}
	if err := json.Unmarshal(jwks, &set); err != nil || len(set.Keys) != 1 || set.Keys[0]["kid"] != hdr["kid"] ||
		set.Keys[0]["kty"] != "OKP" || set.Keys[0]["crv"] != "Ed25519" || set.Keys[0]["d"] != "" {
		t.Fatalf("JWKS %s", jwks)
	}
	block, _ := pem.Decode(pubPEM)
	pub, err := x509.ParsePKIXPublicKey(block.Bytes)
	if x, _ := base64.RawURLEncoding.DecodeString(set.Keys[0]["x"]); err != nil || !pub.(ed25519.PublicKey).Equal(ed25519.PublicKey(x)) {
		t.Fatal("JWKS key differs from the .pub file")
	}

	if _, err := verifier.Authorize(context.Background(), call); err != nil {
		t.Fatalf("old verifier, old token: %v", err)
	}
}

// TestDevKeygenRerun: running the walkthrough again keeps the key and its settings as they are
// (the settings file is never emptied or half written); an incomplete set is refused; --force
// replaces everything with a new key whose settings match it.
func TestDevKeygenRerun(t *testing.T) {
	dir := t.TempDir()
	if _, err := runDev(t, nil, "keygen", "--dir", dir); err != nil {
		t.Fatal(err)
	}
	read := func() map[string]string {
		files := map[string]string{}
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			b, _ := os.ReadFile(filepath.Join(dir, e.Name()))
			files[e.Name()] = string(b)
		}
		return files
	}
	first := read()
	if len(first) != 4 {
		t.Fatalf("keygen wrote %d files: %v", len(first), first)
	}
	out, err := runDev(t, nil, "keygen", "--dir", dir)
	if err != nil || !strings.HasPrefix(out, "Kept the existing key pair and settings (--force replaces them):") {
		t.Fatalf("second keygen: %v\n%s", err, out)
	}
	if again := read(); !maps.Equal(again, first) {
		t.Fatal("a second keygen without --force changed the files")
	}

	if err := os.Remove(filepath.Join(dir, "studio-grant.env")); err != nil {
		t.Fatal(err)
	}
	_, err = runDev(t, nil, "keygen", "--dir", dir)
	if err == nil || !strings.Contains(err.Error(), "studio-grant.env do(es) not: the set is incomplete") || !strings.Contains(err.Error(), "--force") {
		t.Fatalf("incomplete set: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "studio-grant.env")); !os.IsNotExist(err) {
		t.Fatalf("a refused keygen wrote the settings: %v", err)
	}

	if _, err := runDev(t, nil, "keygen", "--dir", dir, "--force", "--agent", "my-agent", "--server-id", "my-server-1"); err != nil {
		t.Fatal(err)
	}
	forced := read()
	if len(forced) != 4 || forced["studio-grant.key"] == first["studio-grant.key"] || forced["studio-grant.pub"] == first["studio-grant.pub"] {
		t.Fatal("--force did not write a new key pair")
	}
	env := sourceExports(t, ". "+filepath.Join(dir, "studio-grant.env"), grant.EnvPublicKey, "SUPERVAIZER_SERVER_ID", grant.EnvStudioAgentIDs)
	if env[grant.EnvPublicKey] != strings.TrimSpace(forced["studio-grant.pub"]) || env["SUPERVAIZER_SERVER_ID"] != "my-server-1" ||
		env[grant.EnvStudioAgentIDs] != "my-agent=dev-agent-1" {
		t.Fatalf("settings after --force: %q", env)
	}
	if st, err := os.Stat(filepath.Join(dir, "studio-grant.key")); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("private key after --force: %v %v", err, st.Mode())
	}
	for name := range forced {
		if strings.HasSuffix(name, ".tmp") {
			t.Fatalf("a temporary file was left: %s", name)
		}
	}
}

func TestDevTokenErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := runDev(t, nil, "keygen", "--dir", dir); err != nil {
		t.Fatal(err)
	}
	key := filepath.Join(dir, "studio-grant.key")
	base := map[string]string{grant.EnvIssuer: "", "SUPERVAIZER_SERVER_ID": "", grant.EnvAudience: "", grant.EnvStudioAgentIDs: ""}
	cases := []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"nothing", nil, []string{"--key", key}, "--agent is required\n--workspace is required\n--scopes is required (e.g. supervaizer/action.invoke,job.start)\n" +
			"--issuer is required (or set SUPERVAIZER_WORKSPACE_AUTH_ISSUER)\n--server-id is required (or set SUPERVAIZER_SERVER_ID)"},
		{"no studio agent id", map[string]string{grant.EnvIssuer: "I", "SUPERVAIZER_SERVER_ID": "SRV123", grant.EnvStudioAgentIDs: "other=1"},
			[]string{"--key", key, "--agent", "s", "--workspace", "w", "--scopes", "a"},
			`--agent-id is required: SUPERVAIZER_STUDIO_AGENT_IDS has no entry for "s"`},
		{"bad agent ids", map[string]string{grant.EnvIssuer: "I", "SUPERVAIZER_SERVER_ID": "SRV123", grant.EnvStudioAgentIDs: "s=1,"},
			[]string{"--key", key, "--agent", "s", "--workspace", "w", "--scopes", "a"},
			`SUPERVAIZER_STUDIO_AGENT_IDS: entry 2 is empty (expected slug=id,slug=id)`},
		{"ttl", map[string]string{grant.EnvIssuer: "I", "SUPERVAIZER_SERVER_ID": "SRV123"},
			[]string{"--key", key, "--agent", "s", "--agent-id", "1", "--workspace", "w", "--scopes", "a", "--ttl", "48h"},
			"--ttl must be above 0 and at most 24h0m0s, got 48h0m0s"},
		{"empty scope", map[string]string{grant.EnvIssuer: "I", "SUPERVAIZER_SERVER_ID": "SRV123"},
			[]string{"--key", key, "--agent", "s", "--agent-id", "1", "--workspace", "w", "--scopes", "a,,b"},
			"--scopes must not contain empty scopes"},
		{"public key as signing key", map[string]string{grant.EnvIssuer: "I", "SUPERVAIZER_SERVER_ID": "SRV123"},
			[]string{"--key", filepath.Join(dir, "studio-grant.pub"), "--agent", "s", "--agent-id", "1", "--workspace", "w", "--scopes", "a"},
			filepath.Join(dir, "studio-grant.pub") + " is not a PKCS#8 PEM private key (the .key file written by svz dev keygen)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			env := map[string]string{}
			for k, v := range base {
				env[k] = v
			}
			for k, v := range tc.env {
				env[k] = v
			}
			out, err := runDev(t, env, append([]string{"token"}, tc.args...)...)
			if err == nil || err.Error() != tc.want {
				t.Fatalf("err = %v\nwant %q", err, tc.want)
			}
			if out != "" {
				t.Fatalf("stdout %q on error", out)
			}
		})
	}

	// The audience's suffix is the server id (after the handshake, Studio's id).
	env := map[string]string{grant.EnvIssuer: "I", grant.EnvAudience: "supervaizer-server:01STUDIO", "SUPERVAIZER_SERVER_ID": "local-id"}
	out, err := runDev(t, env, "token", "--key", key, "--agent", "s", "--agent-id", "1", "--workspace", "w", "--scopes", "a")
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := base64.RawURLEncoding.DecodeString(strings.Split(strings.TrimSpace(out), ".")[1])
	var c struct {
		Aud      string `json:"aud"`
		ServerID string `json:"server_id"`
	}
	if err := json.Unmarshal(raw, &c); err != nil || c.Aud != "supervaizer-server:01STUDIO" || c.ServerID != "01STUDIO" {
		t.Fatalf("claims %s", raw)
	}
}
