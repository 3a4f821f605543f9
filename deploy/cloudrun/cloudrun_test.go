package cloudrun_test

import (
	"context"
	"errors"
	"io"
	"log"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/run/apiv2/runpb"
	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/supervaize/svz/deploy"
	"github.com/supervaize/svz/deploy/cloudrun"
	"github.com/supervaize/svz/deploy/health"
	"github.com/supervaize/svz/deploy/image"
	"github.com/supervaize/svz/deploy/internal/fleet"
	"github.com/supervaize/svz/deploy/internal/gcpfake"
)

const (
	project = "proj-1"
	number  = "123456789"
	region  = "us-central1"
	svcName = "hello-dev"
	account = "svz-hello-dev@proj-1.iam.gserviceaccount.com"
)

// env is a test's world: the fake APIs, the instances behind the service URL, a local registry.
type env struct {
	t       *testing.T
	fake    *gcpfake.Fake
	clients *cloudrun.Clients
	repo    string
	gate    *health.Gate
	down    map[string]bool // images whose instances start but never answer
	events  []deploy.Event
}

func newEnv(t *testing.T) *env {
	t.Helper()
	e := &env{t: t, fake: gcpfake.Start(t, project, number, region), down: map[string]bool{}}
	fl := &fleet.Fleet{Serving: func() (fleet.Revision, bool) {
		rev, vars, ok := e.fake.ServingRevision(svcName)
		return fleet.Revision{Key: rev, Env: vars, Down: e.down[e.fake.Serving(svcName)]}, ok
	}}
	inst := httptest.NewTLSServer(fl)
	t.Cleanup(inst.Close)
	e.fake.URL = inst.URL
	e.gate = &health.Gate{Client: inst.Client(), Timeout: 2 * time.Second, Interval: 20 * time.Millisecond}
	reg := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(reg.Close)
	e.repo = strings.TrimPrefix(reg.URL, "http://") + "/team"
	var err error
	e.clients, err = cloudrun.NewClients(context.Background(), e.fake.ClientOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	e.clients.Tasks.Endpoint = e.fake.TasksURL
	t.Cleanup(func() { _ = e.clients.Close() })
	return e
}

// testImage is a tiny image whose digest depends on version.
func testImage(version string) func(context.Context, string) (v1.Image, error) {
	return func(_ context.Context, arch string) (v1.Image, error) {
		return image.New(image.Spec{Binary: []byte("controller " + version), Arch: arch, CACerts: []byte("ca"), Created: time.Unix(0, 0)})
	}
}

func digestOf(t *testing.T, version string) string {
	img, err := testImage(version)(context.Background(), "amd64")
	if err != nil {
		t.Fatal(err)
	}
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d.String()
}

func (e *env) deployer(version string, mod func(*deploy.Config)) *deploy.Deployer {
	cfg := deploy.Config{
		Platform: deploy.PlatformCloudRun, Name: "hello", Env: "dev", Region: region, ProjectID: project,
		ImageRepo: e.repo, MinInstances: 1,
	}
	if mod != nil {
		mod(&cfg)
	}
	// A forwarded setting, and one that is not forwarded.
	host := map[string]string{"SUPERVAIZER_LOG_LEVEL": "WARNING", "UNRELATED": "x"}
	return &deploy.Deployer{
		Config:   cfg,
		Platform: e.clients.Platform(project, region, func(context.Context) (string, error) { return "token", nil }),
		Getenv:   func(k string) string { return host[k] },
		Gate:     e.gate,
		Image:    testImage(version),
		Keychain: authn.NewMultiKeychain(),
		Progress: func(ev deploy.Event) { e.events = append(e.events, ev) },
	}
}

func actions(cs []deploy.Change) []string {
	var out []string
	for _, c := range cs {
		out = append(out, string(c.Action)+" "+c.Resource+" "+c.Name)
	}
	return out
}

func count(calls []string, m string) int {
	n := 0
	for _, c := range calls {
		if c == m {
			n++
		}
	}
	return n
}

func TestCloudRunLifecycle(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	gen := func(c *deploy.Config) { c.GenerateAPIKey, c.GeneratePrivateKey = true, true }

	// plan on an empty project: everything is created.
	res, err := e.deployer("v1", gen).Plan(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"no-op image-repository " + e.repo + "/hello-dev",
		"create secret hello-dev-api-key",
		"create secret hello-dev-private-key",
		"create service-account " + account,
		"create secret-access hello-dev-api-key → " + account,
		"create secret-access hello-dev-private-key → " + account,
		"create cloud-run-service hello-dev",
	}
	if got := actions(res.Changes); !reflect.DeepEqual(got, want) {
		t.Fatalf("plan:\n got %q\nwant %q", got, want)
	}
	if calls := e.fake.Calls(); slices.ContainsFunc(calls, func(c string) bool {
		return c == "CreateSecret" || c == "AddSecretVersion" || c == "CreateService" || c == "SetIamPolicy" || c == "CreateServiceAccount"
	}) {
		t.Fatalf("plan changed something: %v", calls)
	}

	// up: create, then a second update sets the public URL; the gate reaches the real controller.
	res, err = e.deployer("v1", gen).Up(ctx)
	if err != nil {
		t.Fatalf("up: %v (events %+v)", err, e.events)
	}
	if res.URL != e.fake.URL || res.Health == nil || res.Health.RPC != "error -32601" {
		t.Fatalf("up result: url %s health %+v", res.URL, res.Health)
	}
	if res.NewAPIKey.IsZero() || len(res.NewAPIKey.Reveal()) < 32 {
		t.Fatal("the generated API key is not returned for display")
	}
	stored, version, _ := e.fake.SecretValue("hello-dev-api-key")
	if stored != res.NewAPIKey.Reveal() || version != 1 {
		t.Fatalf("stored API key differs from the one shown, or version %d", version)
	}
	wantImage := e.repo + "/hello-dev@" + digestOf(t, "v1")
	if res.Image != wantImage || e.fake.Serving(svcName) != wantImage {
		t.Fatalf("image %s, serving %s, want %s", res.Image, e.fake.Serving(svcName), wantImage)
	}
	svc := e.fake.Service(svcName)
	// The service runs as its own account, which alone reads its secrets.
	if svc.Template.ServiceAccount != account || e.fake.ServiceAccount(account) == nil {
		t.Errorf("service account %q (exists: %v), want %s", svc.Template.ServiceAccount, e.fake.ServiceAccount(account) != nil, account)
	}
	for _, id := range []string{"hello-dev-api-key", "hello-dev-private-key"} {
		if got := e.fake.SecretMembers(id, cloudrun.SecretAccessor); !reflect.DeepEqual(got, []string{"serviceAccount:" + account}) {
			t.Errorf("%s readers %q, want only the runtime account", id, got)
		}
	}
	if !svc.InvokerIamDisabled || svc.Template.Scaling.MinInstanceCount != 1 || svc.Template.Scaling.MaxInstanceCount != 10 {
		t.Errorf("service access/scaling: %+v %+v", svc.InvokerIamDisabled, svc.Template.Scaling)
	}
	gotEnv := map[string]string{}
	for _, ev := range svc.Template.Containers[0].Env {
		if ref := ev.GetValueSource().GetSecretKeyRef(); ref != nil {
			gotEnv[ev.Name] = "secret " + ref.Secret + " v" + ref.Version
		} else {
			gotEnv[ev.Name] = ev.GetValue()
		}
	}
	serverID := deploy.DeriveServerID(deploy.PlatformCloudRun, project, region, svcName)
	wantEnv := map[string]string{
		"SUPERVAIZER_API_KEY":         "secret hello-dev-api-key v1",
		"SUPERVAIZER_PRIVATE_KEY":     "secret hello-dev-private-key v1",
		"SUPERVAIZER_ENVIRONMENT":     "dev",
		"SUPERVAIZER_SERVER_ID":       serverID,
		"SUPERVAIZER_PUBLIC_URL":      e.fake.URL,
		"SUPERVAIZER_LOG_LEVEL":       "WARNING",
		"SUPERVAIZER_SECRETS_VERSION": gotEnv["SUPERVAIZER_SECRETS_VERSION"],
	}
	if !reflect.DeepEqual(gotEnv, wantEnv) {
		t.Errorf("container env:\n got %v\nwant %v", gotEnv, wantEnv)
	}
	if len(gotEnv["SUPERVAIZER_SECRETS_VERSION"]) != 12 {
		t.Errorf("secrets version %q", gotEnv["SUPERVAIZER_SECRETS_VERSION"])
	}
	if n := count(e.fake.Calls(), "CreateService"); n != 1 {
		t.Errorf("CreateService called %d times", n)
	}
	if n := count(e.fake.Calls(), "UpdateService"); n != 1 {
		t.Errorf("UpdateService called %d times, want 1 (public URL)", n)
	}

	// up again with the same image and settings: a no-op that touches nothing.
	before := len(e.fake.Calls())
	res, err = e.deployer("v1", gen).Up(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if deploy.Changed(res.Changes) {
		t.Fatalf("second up changed: %q", actions(res.Changes))
	}
	if !res.NewAPIKey.IsZero() {
		t.Error("an existing API key is shown again")
	}
	after := e.fake.Calls()[before:]
	for _, m := range []string{"UpdateService", "CreateService", "AddSecretVersion", "CreateSecret", "SetIamPolicy"} {
		if count(after, m) > 0 {
			t.Errorf("no-op up called %s", m)
		}
	}
	if _, v, _ := e.fake.SecretValue("hello-dev-api-key"); v != 1 {
		t.Errorf("API key version %d after a no-op", v)
	}

	// a new image: update in place.
	res, err = e.deployer("v2", nil).Up(ctx)
	if err != nil {
		t.Fatal(err)
	}
	v2 := e.repo + "/hello-dev@" + digestOf(t, "v2")
	if e.fake.Serving(svcName) != v2 {
		t.Fatalf("serving %s, want v2", e.fake.Serving(svcName))
	}
	if got := actions(res.Changes); !slices.Contains(got, "update cloud-run-service hello-dev") {
		t.Errorf("changes %q", got)
	}

	// a revision that cannot start: the deploy step fails, traffic stays on v2.
	v3 := e.repo + "/hello-dev@" + digestOf(t, "v3")
	e.fake.FailImage[v3] = "exec format error"
	_, err = e.deployer("v3", nil).Up(ctx)
	if deploy.FailedStep(err) != deploy.StepDeploy || !strings.Contains(err.Error(), "exec format error") {
		t.Fatalf("failing revision: step %q err %v", deploy.FailedStep(err), err)
	}
	if e.fake.Serving(svcName) != v2 {
		t.Fatalf("after a failed revision serving %s, want v2", e.fake.Serving(svcName))
	}

	// a revision that starts but never answers: the gate fails and traffic goes back to v2.
	v4 := e.repo + "/hello-dev@" + digestOf(t, "v4")
	e.down[v4] = true
	res, err = e.deployer("v4", nil).Up(ctx)
	if deploy.FailedStep(err) != deploy.StepHealth || !res.RolledBack {
		t.Fatalf("unhealthy revision: step %q rolled back %v err %v", deploy.FailedStep(err), res.RolledBack, err)
	}
	if e.fake.Serving(svcName) != v2 {
		t.Fatalf("after rollback serving %s, want v2", e.fake.Serving(svcName))
	}
	if tr := e.fake.Service(svcName).Traffic; len(tr) != 1 || tr[0].Type != runpb.TrafficTargetAllocationType_TRAFFIC_TARGET_ALLOCATION_TYPE_REVISION {
		t.Errorf("traffic after rollback: %v", tr)
	}

	// deploying v2 again returns traffic to the latest revision.
	if _, err := e.deployer("v2", nil).Up(ctx); err != nil {
		t.Fatal(err)
	}
	if tr := e.fake.Service(svcName).Traffic; len(tr) != 1 || tr[0].Type != runpb.TrafficTargetAllocationType_TRAFFIC_TARGET_ALLOCATION_TYPE_LATEST {
		t.Errorf("traffic after redeploy: %v", tr)
	}

	// rotation: new secret versions, pinned in a new revision that the gate checks with the new key.
	res, err = e.deployer("v2", func(c *deploy.Config) { c.RotateSecrets = true }).Up(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rotated, v, _ := e.fake.SecretValue("hello-dev-api-key")
	if v != 2 || rotated == stored {
		t.Fatalf("rotation: version %d, changed %v", v, rotated != stored)
	}
	if !res.NewAPIKey.IsZero() {
		t.Error("a rotated key is shown without --generate-api-key")
	}

	// status reports the live service, the secrets by fingerprint, and health.
	st, err := e.deployer("v2", nil).Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !st.Deployed || !st.Healthy || st.Live.URL != e.fake.URL || st.Live.Image != v2 {
		t.Fatalf("status %+v", st)
	}
	wantSecrets := []deploy.SecretStatus{
		{Var: "SUPERVAIZER_API_KEY", Name: "hello-dev-api-key", Present: true, Version: "2", Fingerprint: deploy.Fingerprint(rotated)},
		{Var: "SUPERVAIZER_PRIVATE_KEY", Name: "hello-dev-private-key", Present: true, Version: "2", Fingerprint: st.Secrets[1].Fingerprint},
	}
	if !reflect.DeepEqual(st.Secrets, wantSecrets) {
		t.Errorf("status secrets:\n got %+v\nwant %+v", st.Secrets, wantSecrets)
	}

	// down keeps the secrets; down --purge removes them.
	res, err = e.deployer("v2", nil).Down(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := actions(res.Changes); !reflect.DeepEqual(got, []string{"delete cloud-run-service hello-dev", "delete service-account " + account}) {
		t.Errorf("down: %q", got)
	}
	if e.fake.ServiceAccount(account) != nil {
		t.Error("down kept the runtime account")
	}
	if _, _, ok := e.fake.SecretValue("hello-dev-api-key"); !ok {
		t.Error("down without --purge deleted the API key")
	}
	if _, err := e.deployer("v2", nil).Status(ctx); deploy.FailedStep(err) != deploy.StepInspect {
		t.Errorf("status after down: %v", err)
	}
	res, err = e.deployer("v2", func(c *deploy.Config) { c.Purge = true }).Down(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want = []string{"no-op cloud-run-service hello-dev", "no-op service-account " + account, "delete secret hello-dev-api-key", "delete secret hello-dev-private-key",
		"no-op secret hello-dev-studio-api-key", "no-op secret hello-dev-store-url"}
	if got := actions(res.Changes); !reflect.DeepEqual(got, want) {
		t.Errorf("down --purge:\n got %q\nwant %q", got, want)
	}
	if _, _, ok := e.fake.SecretValue("hello-dev-api-key"); ok {
		t.Error("down --purge kept the API key")
	}
}

func TestCloudRunUpWithoutKeyFailsBeforeDeploying(t *testing.T) {
	e := newEnv(t)
	_, err := e.deployer("v1", nil).Up(context.Background())
	if deploy.FailedStep(err) != deploy.StepSecrets {
		t.Fatalf("step %q, err %v", deploy.FailedStep(err), err)
	}
	want := "step secrets: 2 problems: " +
		"secret hello-dev-api-key does not exist: pass --generate-api-key or set SUPERVAIZER_API_KEY on this host " +
		"(Studio sends it as X-API-Key on every call to the controller); " +
		"secret hello-dev-private-key does not exist: pass --generate-private-key or set SUPERVAIZER_PRIVATE_KEY on this host " +
		"(the controller's RSA key: Studio encrypts sensitive data for the agent with its public key, so it must stay the same across restarts and instances)"
	if err.Error() != want {
		t.Fatalf("error:\n got %s\nwant %s", err, want)
	}
	if n := count(e.fake.Calls(), "CreateService"); n != 0 {
		t.Errorf("service created despite the missing key")
	}
}

func TestArtifactRegistryEnsure(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	r := &cloudrun.ArtifactRegistry{Client: e.clients.Registry, Project: project, Region: region,
		Token: func(context.Context) (string, error) { return "ya29.token", nil }}
	repo, exists, err := r.Lookup(ctx, svcName)
	if err != nil || exists || repo != "us-central1-docker.pkg.dev/proj-1/hello-dev/hello-dev" {
		t.Fatalf("lookup: %s %v %v", repo, exists, err)
	}
	for i := 0; i < 2; i++ { // second call finds it
		repo, auth, err := r.Ensure(ctx, svcName)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := auth.Authorization()
		if err != nil || cfg.Username != "oauth2accesstoken" || cfg.Password != "ya29.token" {
			t.Fatalf("auth %+v %v", cfg, err)
		}
		if repo != "us-central1-docker.pkg.dev/proj-1/hello-dev/hello-dev" {
			t.Fatalf("repo %s", repo)
		}
	}
	if n := count(e.fake.Calls(), "CreateRepository"); n != 1 {
		t.Errorf("CreateRepository called %d times", n)
	}
	bad := &cloudrun.ArtifactRegistry{Client: e.clients.Registry, Project: "other", Region: region}
	if _, _, err := bad.Lookup(ctx, svcName); err == nil || !strings.Contains(err.Error(), "PermissionDenied") {
		t.Errorf("lookup in a foreign project: %v", err)
	}
}

func TestSecretManagerStore(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	s := &cloudrun.SecretManager{Client: e.clients.Secrets, Project: project}
	if _, err := s.Get(ctx, "x"); !errors.Is(err, deploy.ErrNotFound) {
		t.Fatalf("get absent: %v", err)
	}
	ref, err := s.Put(ctx, "x", deploy.NewSecret("one"))
	if err != nil {
		t.Fatal(err)
	}
	if ref != (deploy.SecretRef{Name: "x", ID: "projects/" + number + "/secrets/x", Version: "1"}) {
		t.Fatalf("ref %+v", ref)
	}
	if ref, err = s.Put(ctx, "x", deploy.NewSecret("two")); err != nil || ref.Version != "2" {
		t.Fatalf("second put: %+v %v", ref, err)
	}
	got, err := s.Get(ctx, "x")
	if err != nil || got.Value.Reveal() != "two" || got.Ref.Version != "2" {
		t.Fatalf("get: %+v %v", got.Ref, err)
	}
	if err := s.Delete(ctx, "x"); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "x"); !errors.Is(err, deploy.ErrNotFound) {
		t.Fatalf("delete absent: %v", err)
	}
}
