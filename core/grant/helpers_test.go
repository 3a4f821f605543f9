package grant

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/supervaize/svz/core/contract"
	"github.com/supervaize/svz/core/grant/granttest"
)

const testIssuer = "https://studio.test"

// t0 is the tests' "now".
var t0 = time.Date(2026, 5, 18, 11, 30, 0, 0, time.UTC)

// clock is a settable test clock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *clock { return &clock{now: t0} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func pemSettings(iss *granttest.Issuer) Settings {
	return Settings{Required: true, Issuer: testIssuer, PublicKeyPEM: iss.PublicKeyPEM(), Leeway: DefaultLeeway}
}

// newPEMVerifier is the verifier of spec §12.2: PEM key, issuer testIssuer, server SRV.
func newPEMVerifier(t testing.TB, iss *granttest.Issuer, clk *clock, opts ...Option) *verifier {
	t.Helper()
	opts = append([]Option{WithClock(clk.Now), WithLogger(quietLog())}, opts...)
	a, err := NewVerifier(context.Background(), pemSettings(iss), "SRV", opts...)
	if err != nil {
		t.Fatalf("NewVerifier: %v", err)
	}
	return a.(*verifier)
}

func ptr[T any](v T) *T { return &v }

// jobStart is spec §12.2's default call: action job.start for agent s in workspace-1, with the
// header "Bearer <token>" (no header when token is "").
func jobStart(token string) Call {
	header := ""
	if token != "" {
		header = "Bearer " + token
	}
	return Call{
		Token:     header,
		Method:    MethodActionInvoke,
		Target:    "job.start",
		AgentSlug: "s",
		Agent:     &Agent{Slug: "s", ID: "LMKyPAS2Q8sKWBY34DS37a", StudioID: "studio-agent-1"},
		Workspace: contract.WorkspaceRef{ID: "workspace-1", Slug: ptr("workspace")},
	}
}

var fullScopes = []string{MethodActionInvoke, "job.start"}

// wantRefusal checks that err is a *Error with exactly code and message.
func wantRefusal(t testing.TB, err error, code Code, msg string) {
	t.Helper()
	var ge *Error
	if !errors.As(err, &ge) {
		t.Fatalf("error = %v (%T), want *Error %s", err, err, code)
	}
	if ge.Code != code || ge.Message != msg {
		t.Fatalf("refusal = {%s, %q}\n                want {%s, %q}", ge.Code, ge.Message, code, msg)
	}
}

func contractWorkspace(id, slug string) contract.WorkspaceRef {
	return contract.WorkspaceRef{ID: id, Slug: &slug}
}

func sha256Sum(s string) [32]byte { return sha256.Sum256([]byte(s)) }

func mustECDSA(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func mustRSA(t testing.TB) *rsa.PrivateKey {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// publicPEM is a SubjectPublicKeyInfo PEM of any public key.
func publicPEM(t testing.TB, pub any) string {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
}

func mustJSON(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
