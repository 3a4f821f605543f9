package cloudrun_test

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"testing"

	"cloud.google.com/go/iam/apiv1/iampb"
	"cloud.google.com/go/run/apiv2/runpb"
	"cloud.google.com/go/secretmanager/apiv1/secretmanagerpb"

	"github.com/supervaize/svz/deploy"
	"github.com/supervaize/svz/deploy/cloudrun"
)

// changing lists the calls that change something in a project.
var changing = []string{"CreateSecret", "AddSecretVersion", "DeleteSecret", "SetIamPolicy", "CreateService", "UpdateService",
	"DeleteService", "CreateServiceAccount", "DeleteServiceAccount"}

func changed(calls []string) []string {
	var out []string
	for _, c := range calls {
		if slices.Contains(changing, c) {
			out = append(out, c)
		}
	}
	return out
}

// TestCloudRunLeavesOthersResourcesAlone: a service account, secret or service that has the name
// svz wants but that svz did not create is neither used, changed nor deleted. plan and up refuse
// it, naming it and how to resolve, before changing anything; down keeps it.
func TestCloudRunLeavesOthersResourcesAlone(t *testing.T) {
	ctx := context.Background()
	gen := func(c *deploy.Config) { c.GenerateAPIKey, c.GeneratePrivateKey = true, true }
	advice := " exists but svz deploy did not create it (it lacks the marker managed-by=svz), so svz leaves it alone: choose another --name or --env, or delete that "
	for _, tc := range []struct {
		name    string
		setup   func(t *testing.T, e *env)
		step    string
		want    string
		exists  func(e *env) bool
		kept    string // the down --purge line of the foreign resource
		keptIdx int
	}{
		{
			name:  "service account",
			setup: func(t *testing.T, e *env) { e.fake.AddServiceAccount("svz-hello-dev", "the CI runner") },
			step:  deploy.StepPlan,
			want: "service account " + account + advice + "service account; to let svz manage it, run: " +
				"gcloud iam service-accounts update " + account + " --project proj-1 --description 'managed-by=svz'",
			exists: func(e *env) bool { return e.fake.ServiceAccount(account) != nil },
			kept:   "no-op service-account " + account + " (kept: svz deploy did not create it)",
		},
		{
			name: "secret",
			setup: func(t *testing.T, e *env) {
				_, err := e.clients.Secrets.CreateSecret(ctx, &secretmanagerpb.CreateSecretRequest{Parent: "projects/" + project, SecretId: "hello-dev-api-key",
					Secret: &secretmanagerpb.Secret{Replication: &secretmanagerpb.Replication{Replication: &secretmanagerpb.Replication_Automatic_{Automatic: &secretmanagerpb.Replication_Automatic{}}}}})
				if err != nil {
					t.Fatal(err)
				}
				if _, err := e.clients.Secrets.AddSecretVersion(ctx, &secretmanagerpb.AddSecretVersionRequest{Parent: "projects/" + project + "/secrets/hello-dev-api-key",
					Payload: &secretmanagerpb.SecretPayload{Data: []byte("another team's key, 32 characters long")}}); err != nil {
					t.Fatal(err)
				}
			},
			step: deploy.StepSecrets,
			want: "secret hello-dev-api-key" + advice + "secret; to let svz manage it, run: " +
				"gcloud secrets update hello-dev-api-key --project proj-1 --update-labels managed-by=svz",
			exists: func(e *env) bool {
				v, n, ok := e.fake.SecretValue("hello-dev-api-key")
				return ok && n == 1 && v == "another team's key, 32 characters long"
			},
			kept: "no-op secret hello-dev-api-key (kept: svz deploy did not create it)",
		},
		{
			name: "service",
			setup: func(t *testing.T, e *env) {
				op, err := e.clients.Services.CreateService(ctx, &runpb.CreateServiceRequest{Parent: "projects/" + project + "/locations/" + region, ServiceId: svcName,
					Service: &runpb.Service{Template: &runpb.RevisionTemplate{Containers: []*runpb.Container{{Image: "gcr.io/other/app@sha256:" + digestOf(t, "other")[7:]}}}}})
				if err != nil {
					t.Fatal(err)
				}
				if _, err := op.Wait(ctx); err != nil {
					t.Fatal(err)
				}
			},
			step: deploy.StepPlan,
			want: "cloud run service hello-dev" + advice + "cloud run service; to let svz manage it, run: " +
				"gcloud run services update hello-dev --project proj-1 --region us-central1 --update-labels managed-by=svz",
			exists: func(e *env) bool { return e.fake.Service(svcName) != nil },
			kept:   "no-op cloud-run-service hello-dev (kept: svz deploy did not create it)",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			tc.setup(t, e)
			before := len(e.fake.Calls())
			for _, up := range []bool{false, true} {
				d := e.deployer("v1", gen)
				var err error
				if up {
					_, err = d.Up(ctx)
				} else {
					_, err = d.Plan(ctx)
				}
				if !errors.Is(err, deploy.ErrNotManaged) || deploy.FailedStep(err) != tc.step || err.Error() != "step "+tc.step+": "+tc.want {
					t.Fatalf("up %v: %v\nwant step %s: %s", up, err, tc.step, tc.want)
				}
			}
			if got := changed(e.fake.Calls()[before:]); len(got) > 0 {
				t.Fatalf("plan and up changed the project: %q", got)
			}
			res, err := e.deployer("v1", func(c *deploy.Config) { c.Purge = true }).Down(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var lines []string
			for _, c := range res.Changes {
				lines = append(lines, c.String())
			}
			found := false
			for _, l := range lines {
				found = found || normalize(l) == tc.kept
			}
			if !found || !tc.exists(e) {
				t.Fatalf("down --purge: %q\nwant a line %q and the resource kept (exists: %v)", lines, tc.kept, tc.exists(e))
			}
		})
	}
}

// normalize squeezes the padding of Change.String.
func normalize(s string) string {
	out := []rune{}
	space := false
	for _, r := range s {
		if r == ' ' {
			if space {
				continue
			}
			space = true
		} else {
			space = false
		}
		out = append(out, r)
	}
	return string(out)
}

// TestCloudRunRuntimeAccountAccess: earlier versions let the project's default compute account
// read the secrets; the next up takes that access away and gives it to the runtime account only.
// After down deletes the account, its bindings no longer count, and the next up grants the new
// account again.
func TestCloudRunRuntimeAccountAccess(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	gen := func(c *deploy.Config) { c.GenerateAPIKey, c.GeneratePrivateKey = true, true }
	if _, err := e.deployer("v1", gen).Up(ctx); err != nil {
		t.Fatal(err)
	}
	secret := "projects/" + number + "/secrets/hello-dev-api-key"
	pol, err := e.clients.Secrets.GetIamPolicy(ctx, &iampb.GetIamPolicyRequest{Resource: secret})
	if err != nil {
		t.Fatal(err)
	}
	pol.Bindings[0].Members = append(pol.Bindings[0].Members, "serviceAccount:"+e.fake.DefaultCompute())
	if _, err := e.clients.Secrets.SetIamPolicy(ctx, &iampb.SetIamPolicyRequest{Resource: secret, Policy: pol}); err != nil {
		t.Fatal(err)
	}
	res, err := e.deployer("v1", nil).Plan(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := deploy.Change{Resource: "secret-access", Name: "hello-dev-api-key → " + account, Action: deploy.Update, Detail: "revoke the default compute service account"}
	if !slices.Contains(res.Changes, want) {
		t.Fatalf("plan %+v\nwant %+v", res.Changes, want)
	}
	if _, err := e.deployer("v1", nil).Up(ctx); err != nil {
		t.Fatal(err)
	}
	if got := e.fake.SecretMembers("hello-dev-api-key", cloudrun.SecretAccessor); !reflect.DeepEqual(got, []string{"serviceAccount:" + account}) {
		t.Fatalf("readers after up %q, want only the runtime account", got)
	}

	if _, err := e.deployer("v1", nil).Down(ctx); err != nil {
		t.Fatal(err)
	}
	if got := e.fake.SecretMembers("hello-dev-api-key", cloudrun.SecretAccessor); len(got) != 1 || got[0] == "serviceAccount:"+account {
		t.Fatalf("readers after down %q, want the deleted account's binding", got)
	}
	res, err = e.deployer("v1", nil).Up(ctx)
	if err != nil {
		t.Fatalf("up after down: %v", err)
	}
	for _, w := range []string{"create service-account " + account, "create secret-access hello-dev-api-key → " + account, "create cloud-run-service hello-dev"} {
		if !slices.Contains(actions(res.Changes), w) {
			t.Errorf("up after down: %q lacks %q", actions(res.Changes), w)
		}
	}
	if got := e.fake.SecretMembers("hello-dev-api-key", cloudrun.SecretAccessor); !slices.Contains(got, "serviceAccount:"+account) {
		t.Fatalf("readers after the second up %q", got)
	}
}

// TestServiceAccountID: ids stay within IAM's 6-30 characters, end with a letter or digit, and
// differ between long names that share a prefix.
func TestServiceAccountID(t *testing.T) {
	for service, want := range map[string]string{
		"hello-dev":                     "svz-hello-dev",
		"exactly-twenty-six-chars-x":    "svz-exactly-twenty-six-chars-x",
		"a-very-long-service-name-prod": "svz-a-very-long-service-4100b1",
		"a-very-long-service-name-dev":  "svz-a-very-long-service-2edaea",
		"a-very-long-servi--name-dev":   "svz-a-very-long-servi-a27561",
	} {
		if got := cloudrun.ServiceAccountID(service); got != want {
			t.Errorf("%s: %q, want %q", service, got, want)
		}
	}
}
