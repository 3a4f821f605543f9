// Package cloudrun deploys the controller as a Cloud Run service through the Admin API v2, with its
// image in Artifact Registry and its secrets in Secret Manager.
//
// The service is public at the network level (invoker IAM check disabled: Studio authenticates with
// X-API-Key and grant tokens), runs 1 CPU / 512 MiB with a minimum of instances kept warm, and reads
// its secrets as environment variables referencing pinned secret versions, so that a rotation rolls
// out a new revision. It runs as its own service account (ServiceAccountEmail), created by svz and
// given roles/secretmanager.secretAccessor on exactly those secrets, and nothing else. Rollback
// sends all traffic back to the revision that served before the update. svz changes and deletes only
// the services, accounts and secrets it created (label or description managed-by=svz).
package cloudrun

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	admin "cloud.google.com/go/iam/admin/apiv1"
	"cloud.google.com/go/iam/apiv1/iampb"
	run "cloud.google.com/go/run/apiv2"
	"cloud.google.com/go/run/apiv2/runpb"
	secretmanager "cloud.google.com/go/secretmanager/apiv1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/supervaize/svz/deploy"
	"github.com/supervaize/svz/internal/cloudtasks"
)

// Service settings.
const (
	CPU          = "1"
	Memory       = "512Mi"
	MaxInstances = 10
	// SecretAccessor is the role the runtime service account needs on each secret.
	SecretAccessor = "roles/secretmanager.secretAccessor"
)

// Driver deploys to Cloud Run.
type Driver struct {
	Services *run.ServicesClient
	Secrets  *secretmanager.Client // IAM bindings on the service's secrets
	IAM      *admin.IamClient      // the runtime service accounts
	// Tasks manages the Cloud Tasks queue of a service with background work (jobs.go).
	Tasks   *cloudtasks.Client
	Project string
	Region  string
}

var _ deploy.Driver = (*Driver)(nil)

func (d *Driver) parent() string { return fmt.Sprintf("projects/%s/locations/%s", d.Project, d.Region) }
func (d *Driver) name(n string) string {
	return d.parent() + "/services/" + n
}

func (d *Driver) accounts() accounts { return accounts{client: d.IAM, project: d.Project} }

// member is the IAM member of a service's runtime account.
func (d *Driver) member(service string) string {
	return "serviceAccount:" + ServiceAccountEmail(d.Project, service)
}

// defaultCompute is the project's default compute account, which earlier versions of svz let
// read the secrets: derived from the project number Secret Manager puts in secret names.
func defaultCompute(ref deploy.SecretRef) string {
	parts := strings.Split(ref.ID, "/")
	if len(parts) >= 2 && parts[0] == "projects" && parts[1] != "" {
		return "serviceAccount:" + parts[1] + "-compute@developer.gserviceaccount.com"
	}
	return ""
}

// notOurs refuses to change or delete a service svz did not create.
func (d *Driver) notOurs(name string) error {
	return &deploy.NotManagedError{Kind: "cloud run service", Name: name,
		Adopt: "gcloud run services update " + name + " --project " + d.Project + " --region " + d.Region + " --update-labels " + deploy.ManagedBy}
}

func ours(svc *runpb.Service) bool { return svc.GetLabels()["managed-by"] == "svz" }

// envMap flattens container env: plain values as they are, secret references as secret:NAME@VERSION.
func envMap(env []*runpb.EnvVar) map[string]string {
	m := make(map[string]string, len(env))
	for _, e := range env {
		if ref := e.GetValueSource().GetSecretKeyRef(); ref != nil {
			m[e.GetName()] = "secret:" + ref.GetSecret() + "@" + ref.GetVersion()
			continue
		}
		m[e.GetName()] = e.GetValue()
	}
	return m
}

// wantEnv is the container env of s, sorted by name.
func wantEnv(s deploy.Service) []*runpb.EnvVar {
	var env []*runpb.EnvVar
	for k, v := range s.Env {
		env = append(env, &runpb.EnvVar{Name: k, Values: &runpb.EnvVar_Value{Value: v}})
	}
	for k, ref := range s.Secrets {
		env = append(env, &runpb.EnvVar{Name: k, Values: &runpb.EnvVar_ValueSource{ValueSource: &runpb.EnvVarSource{
			SecretKeyRef: &runpb.SecretKeySelector{Secret: ref.Name, Version: ref.Version},
		}}})
	}
	sort.Slice(env, func(i, j int) bool { return env[i].Name < env[j].Name })
	return env
}

// apply sets the fields svz manages on svc, keeping the rest as the platform has it; the service
// runs as account.
func apply(svc *runpb.Service, s deploy.Service, account string) {
	if svc.Labels == nil {
		svc.Labels = map[string]string{}
	}
	svc.Labels["managed-by"] = "svz"
	svc.Ingress = runpb.IngressTraffic_INGRESS_TRAFFIC_ALL
	svc.InvokerIamDisabled = true
	if svc.Template == nil {
		svc.Template = &runpb.RevisionTemplate{}
	}
	t := svc.Template
	t.Revision = "" // let Cloud Run name each new revision
	t.ServiceAccount = account
	t.Scaling = &runpb.RevisionScaling{MinInstanceCount: int32(s.MinInstances), MaxInstanceCount: MaxInstances}
	var c *runpb.Container
	if len(t.Containers) > 0 {
		c = t.Containers[0]
	} else {
		c = &runpb.Container{}
		t.Containers = []*runpb.Container{c}
	}
	c.Image = s.Image
	c.Env = wantEnv(s)
	if c.Resources == nil {
		c.Resources = &runpb.ResourceRequirements{}
	}
	c.Resources.Limits = map[string]string{"cpu": CPU, "memory": Memory}
	svc.Traffic = []*runpb.TrafficTarget{{Type: runpb.TrafficTargetAllocationType_TRAFFIC_TARGET_ALLOCATION_TYPE_LATEST, Percent: 100}}
}

// diff describes how the live service differs from s ("" when it already matches).
func diff(live *runpb.Service, s deploy.Service, account string) string {
	want := proto.Clone(live).(*runpb.Service)
	apply(want, s, account)
	var d []string
	if live.GetTemplate().GetServiceAccount() != account {
		d = append(d, "service account → "+account)
	}
	lc, wc := firstContainer(live), firstContainer(want)
	if lc.GetImage() != wc.GetImage() {
		d = append(d, "image "+deploy.ShortDigest(lc.GetImage())+" → "+deploy.ShortDigest(wc.GetImage()))
	}
	if e := deploy.DiffEnv(envMap(lc.GetEnv()), envMap(wc.GetEnv())); e != "" {
		d = append(d, "env "+e)
	}
	if lc.GetResources().GetLimits()["cpu"] != CPU || lc.GetResources().GetLimits()["memory"] != Memory {
		d = append(d, "resources")
	}
	ls, ws := live.GetTemplate().GetScaling(), want.GetTemplate().GetScaling()
	if ls.GetMinInstanceCount() != ws.GetMinInstanceCount() || ls.GetMaxInstanceCount() != ws.GetMaxInstanceCount() {
		d = append(d, fmt.Sprintf("instances %d-%d → %d-%d", ls.GetMinInstanceCount(), ls.GetMaxInstanceCount(), ws.GetMinInstanceCount(), ws.GetMaxInstanceCount()))
	}
	if !live.GetInvokerIamDisabled() || live.GetIngress() != runpb.IngressTraffic_INGRESS_TRAFFIC_ALL {
		d = append(d, "public access")
	}
	if tr := live.GetTraffic(); len(tr) != 1 || tr[0].GetType() != runpb.TrafficTargetAllocationType_TRAFFIC_TARGET_ALLOCATION_TYPE_LATEST || tr[0].GetPercent() != 100 {
		d = append(d, "traffic → latest revision")
	}
	return strings.Join(d, ", ")
}

func firstContainer(s *runpb.Service) *runpb.Container {
	if cs := s.GetTemplate().GetContainers(); len(cs) > 0 {
		return cs[0]
	}
	return nil
}

func (d *Driver) get(ctx context.Context, n string) (*runpb.Service, error) {
	svc, err := d.Services.GetService(ctx, &runpb.GetServiceRequest{Name: d.name(n)})
	switch status.Code(err) {
	case codes.OK:
		return svc, nil
	case codes.NotFound:
		return nil, nil
	}
	return nil, fmt.Errorf("run GetService %s: %w", n, err)
}

// Plan reports what Deploy would change.
func (d *Driver) Plan(ctx context.Context, s deploy.Service) ([]deploy.Change, error) {
	s = d.withJobsEnv(s)
	live, err := d.get(ctx, s.Name)
	if err != nil {
		return nil, err
	}
	if live != nil && !ours(live) {
		return nil, d.notOurs(s.Name)
	}
	ac, err := d.accounts().plan(ctx, s.Name)
	if err != nil {
		return nil, err
	}
	work, err := d.planJobs(ctx, s, live != nil, false)
	if err != nil {
		return nil, err
	}
	access, err := d.planAccess(ctx, s, false)
	if err != nil {
		return nil, err
	}
	changes := append(append([]deploy.Change{ac}, work...), access...)
	c := deploy.Change{Resource: "cloud-run-service", Name: s.Name, Action: deploy.Create}
	if live != nil {
		c.Action, c.Detail = deploy.NoOp, diff(live, s, ServiceAccountEmail(d.Project, s.Name))
		if c.Detail != "" {
			c.Action = deploy.Update
		}
	}
	return append(changes, c), nil
}

// planAccess checks, and with grant sets, the secret access of the service's runtime account: the
// account reads each of the service's secrets, and the project's default compute account, which
// earlier versions of svz let read them, no longer does.
func (d *Driver) planAccess(ctx context.Context, s deploy.Service, grant bool) ([]deploy.Change, error) {
	member := d.member(s.Name)
	vars := make([]string, 0, len(s.Secrets))
	for k := range s.Secrets {
		vars = append(vars, k)
	}
	sort.Strings(vars)
	var changes []deploy.Change
	for _, k := range vars {
		ref := s.Secrets[k]
		c := deploy.Change{Resource: "secret-access", Name: ref.Name + " → " + strings.TrimPrefix(member, "serviceAccount:"), Action: deploy.Create}
		if strings.HasPrefix(ref.ID, "(") { // planned, not created yet
			changes = append(changes, c)
			continue
		}
		pol, err := d.Secrets.GetIamPolicy(ctx, &iampb.GetIamPolicyRequest{Resource: ref.ID})
		if err != nil {
			return nil, fmt.Errorf("secretmanager GetIamPolicy %s: %w", ref.Name, err)
		}
		legacy := defaultCompute(ref)
		has, stale := hasMember(pol, SecretAccessor, member), legacy != "" && hasMember(pol, SecretAccessor, legacy)
		switch {
		case has && !stale:
			c.Action = deploy.NoOp
		case has:
			c.Action, c.Detail = deploy.Update, "revoke the default compute service account"
		case stale:
			c.Detail = "and revoke the default compute service account"
		}
		if grant && c.Action != deploy.NoOp {
			if !has {
				addMember(pol, SecretAccessor, member)
			}
			removeMember(pol, SecretAccessor, legacy)
			if err := d.setPolicy(ctx, ref, pol); err != nil {
				return nil, err
			}
		}
		changes = append(changes, c)
	}
	return changes, nil
}

// accountWait bounds the retries of a policy naming a service account IAM does not know yet:
// a new account takes a few seconds to be usable everywhere.
const accountWait = time.Minute

// setPolicy writes a secret's IAM policy, retrying while a new runtime account propagates.
func (d *Driver) setPolicy(ctx context.Context, ref deploy.SecretRef, pol *iampb.Policy) error {
	deadline := time.Now().Add(accountWait)
	for {
		_, err := d.Secrets.SetIamPolicy(ctx, &iampb.SetIamPolicyRequest{Resource: ref.ID, Policy: pol})
		if err == nil {
			return nil
		}
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), "does not exist") || time.Now().After(deadline) {
			return fmt.Errorf("secretmanager SetIamPolicy %s: %w", ref.Name, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("secretmanager SetIamPolicy %s: %w", ref.Name, ctx.Err())
		case <-time.After(2 * time.Second):
		}
	}
}

func hasMember(p *iampb.Policy, role, member string) bool {
	for _, b := range p.GetBindings() {
		if b.GetRole() == role && b.GetCondition() == nil {
			for _, m := range b.GetMembers() {
				if m == member {
					return true
				}
			}
		}
	}
	return false
}

func removeMember(p *iampb.Policy, role, member string) {
	for _, b := range p.Bindings {
		if b.GetRole() == role && b.GetCondition() == nil {
			b.Members = slices.DeleteFunc(b.Members, func(m string) bool { return m == member })
		}
	}
	p.Bindings = slices.DeleteFunc(p.Bindings, func(b *iampb.Binding) bool { return len(b.Members) == 0 })
}

func addMember(p *iampb.Policy, role, member string) {
	for _, b := range p.Bindings {
		if b.GetRole() == role && b.GetCondition() == nil {
			b.Members = append(b.Members, member)
			return
		}
	}
	p.Bindings = append(p.Bindings, &iampb.Binding{Role: role, Members: []string{member}})
}

// Deploy creates the runtime account, grants it its secrets, then creates or updates the service
// and waits for the revision.
func (d *Driver) Deploy(ctx context.Context, s deploy.Service) (deploy.Deployment, error) {
	s = d.withJobsEnv(s)
	var dep deploy.Deployment
	live, err := d.get(ctx, s.Name)
	if err != nil {
		return dep, err
	}
	if live != nil && !ours(live) {
		return dep, d.notOurs(s.Name)
	}
	ac, err := d.accounts().ensure(ctx, s.Name)
	if err != nil {
		return dep, err
	}
	dep.Changes = append(dep.Changes, ac)
	work, err := d.planJobs(ctx, s, live != nil, true)
	if err != nil {
		return dep, err
	}
	dep.Changes = append(dep.Changes, work...)
	access, err := d.planAccess(ctx, s, true)
	if err != nil {
		return dep, err
	}
	dep.Changes = append(dep.Changes, access...)
	account := ServiceAccountEmail(d.Project, s.Name)
	c := deploy.Change{Resource: "cloud-run-service", Name: s.Name}
	var svc *runpb.Service
	switch {
	case live == nil:
		want := &runpb.Service{}
		apply(want, s, account)
		op, err := d.Services.CreateService(ctx, &runpb.CreateServiceRequest{Parent: d.parent(), ServiceId: s.Name, Service: want})
		if err != nil {
			return dep, fmt.Errorf("run CreateService %s: %w", s.Name, err)
		}
		if svc, err = op.Wait(ctx); err != nil {
			return dep, fmt.Errorf("run CreateService %s: %w", s.Name, err)
		}
		c.Action = deploy.Create
	case diff(live, s, account) != "":
		c.Action, c.Detail = deploy.Update, diff(live, s, account)
		want := proto.Clone(live).(*runpb.Service)
		apply(want, s, account)
		if svc, err = d.update(ctx, want); err != nil {
			return dep, err
		}
		if prev := live.GetLatestReadyRevision(); prev != "" {
			dep.Rollback = func(ctx context.Context) error { return d.pin(ctx, s.Name, prev) }
		}
	default:
		c.Action, svc = deploy.NoOp, live
	}
	dep.Changes = append(dep.Changes, c)
	after, err := d.jobsAfter(ctx, s)
	if err != nil {
		return dep, err
	}
	dep.Changes = append(dep.Changes, after...)
	if err := ready(svc); err != nil {
		return dep, err
	}
	dep.Live = toLive(svc)
	return dep, nil
}

func (d *Driver) update(ctx context.Context, want *runpb.Service) (*runpb.Service, error) {
	n := want.GetName()
	op, err := d.Services.UpdateService(ctx, &runpb.UpdateServiceRequest{Service: want})
	if err != nil {
		return nil, fmt.Errorf("run UpdateService %s: %w", n, err)
	}
	svc, err := op.Wait(ctx)
	if err != nil {
		return nil, fmt.Errorf("run UpdateService %s: %w", n, err)
	}
	return svc, nil
}

// pin sends all traffic to one revision.
func (d *Driver) pin(ctx context.Context, n, revision string) error {
	live, err := d.get(ctx, n)
	if err != nil {
		return err
	}
	if live == nil {
		return fmt.Errorf("service %s: %w", n, deploy.ErrNotFound)
	}
	rev := revision[strings.LastIndex(revision, "/")+1:]
	live.Traffic = []*runpb.TrafficTarget{{Type: runpb.TrafficTargetAllocationType_TRAFFIC_TARGET_ALLOCATION_TYPE_REVISION, Revision: rev, Percent: 100}}
	svc, err := d.update(ctx, live)
	if err != nil {
		return err
	}
	return ready(svc)
}

// ready fails unless the service's terminal condition succeeded.
func ready(svc *runpb.Service) error {
	tc := svc.GetTerminalCondition()
	if tc.GetState() != runpb.Condition_CONDITION_SUCCEEDED {
		return fmt.Errorf("service %s is not ready: %s %s: %s", svc.GetName(), tc.GetType(), tc.GetState(), tc.GetMessage())
	}
	return nil
}

func toLive(svc *runpb.Service) deploy.Live {
	c := firstContainer(svc)
	env := map[string]string{}
	for _, e := range c.GetEnv() {
		if e.GetValueSource() == nil {
			env[e.GetName()] = e.GetValue()
		}
	}
	rev := svc.GetLatestReadyRevision()
	return deploy.Live{
		Name:     svc.GetName()[strings.LastIndex(svc.GetName(), "/")+1:],
		URL:      strings.TrimRight(svc.GetUri(), "/"),
		Image:    c.GetImage(),
		Revision: rev[strings.LastIndex(rev, "/")+1:],
		Ready:    svc.GetTerminalCondition().GetState() == runpb.Condition_CONDITION_SUCCEEDED,
		Env:      env,
	}
}

// Inspect reads the service.
func (d *Driver) Inspect(ctx context.Context, n string) (deploy.Live, error) {
	svc, err := d.get(ctx, n)
	if err != nil {
		return deploy.Live{}, err
	}
	if svc == nil {
		return deploy.Live{}, fmt.Errorf("service %s: %w", n, deploy.ErrNotFound)
	}
	return toLive(svc), nil
}

// Delete removes the service, then its runtime account; what svz did not create is kept. Images
// stay in Artifact Registry; purge has nothing more to remove here (the secrets are deleted by the
// caller).
func (d *Driver) Delete(ctx context.Context, n string, _ bool) ([]deploy.Change, error) {
	c := deploy.Change{Resource: "cloud-run-service", Name: n, Action: deploy.Delete}
	live, err := d.get(ctx, n)
	switch {
	case err != nil:
		return nil, err
	case live == nil:
		c.Action, c.Detail = deploy.NoOp, "absent"
	case !ours(live):
		c = deploy.KeptChange("cloud-run-service", n)
	default:
		op, err := d.Services.DeleteService(ctx, &runpb.DeleteServiceRequest{Name: d.name(n)})
		switch status.Code(err) {
		case codes.OK:
			if _, err := op.Wait(ctx); err != nil {
				return nil, fmt.Errorf("run DeleteService %s: %w", n, err)
			}
		case codes.NotFound:
			c.Action, c.Detail = deploy.NoOp, "absent"
		default:
			return nil, fmt.Errorf("run DeleteService %s: %w", n, err)
		}
	}
	ac, err := d.accounts().delete(ctx, n)
	if err != nil {
		return []deploy.Change{c, ac}, err
	}
	work, err := d.deleteJobs(ctx, n)
	return append([]deploy.Change{c, ac}, work...), err
}
