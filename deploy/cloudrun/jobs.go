package cloudrun

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"cloud.google.com/go/iam"
	admin "cloud.google.com/go/iam/admin/apiv1"
	"cloud.google.com/go/iam/admin/apiv1/adminpb"
	"cloud.google.com/go/iam/apiv1/iampb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/supervaize/svz/deploy"
	"github.com/supervaize/svz/internal/cloudtasks"
)

// Background work (deploy.Service.BackgroundWork) runs on a Cloud Tasks queue that pushes each
// task to the service's own URL with an OIDC token of a dedicated invoker account (package
// adapters/cloudrun verifies it). svz creates, for a service with background work:
//
//   - the queue {service}-jobs, with its retry configuration; Cloud Tasks queues carry no labels,
//     so svz marks its own with a header override, X-Supervaizer-Managed-By: svz;
//   - the invoker account svz-{service}-tasks, which holds only roles/run.invoker on the service;
//   - for the service's runtime account: roles/cloudtasks.enqueuer on the queue (not the
//     project) and roles/iam.serviceAccountUser on the invoker account (to name it in a task's
//     token), nothing wider.
//
// A service that stops defining background work keeps them (its running jobs may still be
// delivered); down deletes them with the service.

// Roles of background work.
const (
	RunInvoker     = "roles/run.invoker"
	TasksEnqueuer  = "roles/cloudtasks.enqueuer"
	AccountUser    = "roles/iam.serviceAccountUser"
	queueMarkerKey = "X-Supervaizer-Managed-By"
)

// Settings the service gets (adapters/cloudrun reads them).
const (
	EnvJobsQueue   = "SUPERVAIZER_JOBS_QUEUE"
	EnvJobsInvoker = "SUPERVAIZER_JOBS_INVOKER"
)

// Retry configuration of the queue: a delivery answered with an error (the store down, the task
// held by another instance) is retried with backoff; the delivery at the last attempt fails the
// job, as Cloud Tasks then drops the task. QueueMaxAttempts is adapters/cloudrun's
// DefaultMaxAttempts.
const (
	QueueMaxAttempts  = 10
	QueueMinBackoff   = 10 * time.Second
	QueueMaxBackoff   = 5 * time.Minute
	QueueMaxDoublings = 5
)

// QueueID is the id of a service's queue.
func QueueID(service string) string { return service + "-jobs" }

// QueueName is the full name of a service's queue.
func QueueName(project, region, service string) string {
	return "projects/" + project + "/locations/" + region + "/queues/" + QueueID(service)
}

// InvokerAccountID is the id of a service's invoker account: svz-{service}-tasks, shortened
// with a hash of the service name when longer than IAM allows.
func InvokerAccountID(service string) string {
	id := "svz-" + service + "-tasks"
	if len(id) <= maxAccountID {
		return id
	}
	sum := sha256.Sum256([]byte("tasks:" + service))
	return strings.TrimRight(id[:maxAccountID-7], "-") + "-" + hex.EncodeToString(sum[:3])
}

// InvokerAccountEmail is the email of a service's invoker account in project.
func InvokerAccountEmail(project, service string) string {
	return InvokerAccountID(service) + "@" + project + ".iam.gserviceaccount.com"
}

func invokerDescription(service string) string {
	return "Cloud Tasks invoker of Cloud Run service " + service + "'s background work (" + deploy.ManagedBy + ")"
}

// wantQueue is the queue svz makes for service.
func wantQueue(name string) cloudtasks.Queue {
	return cloudtasks.Queue{
		Name: name,
		RetryConfig: &cloudtasks.RetryConfig{MaxAttempts: QueueMaxAttempts, MinBackoff: cloudtasks.Duration(QueueMinBackoff),
			MaxBackoff: cloudtasks.Duration(QueueMaxBackoff), MaxDoublings: QueueMaxDoublings},
		HTTPTarget: &cloudtasks.HTTPTarget{HeaderOverrides: []cloudtasks.HeaderOverride{{Header: cloudtasks.Header{Key: queueMarkerKey, Value: "svz"}}}},
	}
}

func queueOurs(q *cloudtasks.Queue) bool {
	if q.HTTPTarget == nil {
		return false
	}
	return slices.ContainsFunc(q.HTTPTarget.HeaderOverrides, func(h cloudtasks.HeaderOverride) bool {
		return h.Header.Key == queueMarkerKey && h.Header.Value == "svz"
	})
}

func queueDiff(live *cloudtasks.Queue, want cloudtasks.Queue) string {
	if l, w := live.RetryConfig, want.RetryConfig; l == nil || *l != *w {
		return "retry configuration"
	}
	return ""
}

// withJobsEnv gives a service with background work the settings of its queue.
func (d *Driver) withJobsEnv(s deploy.Service) deploy.Service {
	if !s.BackgroundWork {
		return s
	}
	s.Env = maps.Clone(s.Env)
	if s.Env == nil {
		s.Env = map[string]string{}
	}
	s.Env[EnvJobsQueue] = QueueName(d.Project, d.Region, s.Name)
	s.Env[EnvJobsInvoker] = InvokerAccountEmail(d.Project, s.Name)
	return s
}

func (d *Driver) notOurQueue(name string) error {
	return &deploy.NotManagedError{Kind: "cloud tasks queue", Name: name,
		Adopt: "delete it (gcloud tasks queues delete " + name[strings.LastIndex(name, "/")+1:] + " --project " + d.Project + " --location " + d.Region + ") or deploy under another --name"}
}

// invokerAccount is the accounts helper for the invoker account of service.
func (d *Driver) invokerChange(ctx context.Context, service string, create bool) (deploy.Change, error) {
	a := d.accounts()
	email := InvokerAccountEmail(d.Project, service)
	c := deploy.Change{Resource: "service-account", Name: email, Action: deploy.NoOp}
	sa, err := a.get(ctx, email)
	if err != nil || sa != nil {
		return c, err
	}
	c.Action, c.Detail = deploy.Create, "Cloud Tasks invoker of the background work, no role but run.invoker on the service"
	if !create {
		return c, nil
	}
	_, err = d.IAM.CreateServiceAccount(ctx, &adminpb.CreateServiceAccountRequest{
		Name:           "projects/" + d.Project,
		AccountId:      InvokerAccountID(service),
		ServiceAccount: &adminpb.ServiceAccount{DisplayName: "svz " + service + " tasks", Description: invokerDescription(service)},
	})
	if err != nil {
		return c, fmt.Errorf("iam CreateServiceAccount %s: %w", email, err)
	}
	return c, nil
}

// queueChange plans, and with apply makes, the queue.
func (d *Driver) queueChange(ctx context.Context, service string, apply bool) (deploy.Change, bool, error) {
	name := QueueName(d.Project, d.Region, service)
	c := deploy.Change{Resource: "cloud-tasks-queue", Name: QueueID(service), Action: deploy.NoOp}
	live, err := d.Tasks.GetQueue(ctx, name)
	if err != nil {
		return c, false, fmt.Errorf("cloudtasks GetQueue %s: %w", name, err)
	}
	want := wantQueue(name)
	switch {
	case live == nil:
		c.Action, c.Detail = deploy.Create, fmt.Sprintf("%d attempts, backoff %s to %s", QueueMaxAttempts, QueueMinBackoff, QueueMaxBackoff)
		if apply {
			if err := d.Tasks.CreateQueue(ctx, want); err != nil {
				hint := ""
				if cloudtasks.IsAlreadyExists(err) {
					hint = " (Cloud Tasks keeps the name of a deleted queue reserved for up to 7 days: wait, or deploy under another --name)"
				}
				return c, false, fmt.Errorf("cloudtasks CreateQueue %s: %w%s", name, err, hint)
			}
		}
		return c, false, nil
	case !queueOurs(live):
		return c, true, d.notOurQueue(name)
	}
	if c.Detail = queueDiff(live, want); c.Detail != "" {
		c.Action = deploy.Update
		if apply {
			if err := d.Tasks.UpdateQueue(ctx, want); err != nil {
				return c, true, fmt.Errorf("cloudtasks UpdateQueue %s: %w", name, err)
			}
		}
	}
	return c, true, nil
}

func bindingName(role, member, on string) string {
	return role + " → " + strings.TrimPrefix(member, "serviceAccount:") + " on " + on
}

// queueBinding plans, and with apply sets, the runtime account's enqueuer role on the queue.
func (d *Driver) queueBinding(ctx context.Context, service string, exists, apply bool) (deploy.Change, error) {
	name, member := QueueName(d.Project, d.Region, service), d.member(service)
	c := deploy.Change{Resource: "iam-binding", Name: bindingName(TasksEnqueuer, member, "queue "+QueueID(service)), Action: deploy.Create}
	if !exists && !apply {
		return c, nil
	}
	p, err := d.Tasks.GetIamPolicy(ctx, name)
	if err != nil {
		return c, fmt.Errorf("cloudtasks GetIamPolicy %s: %w", name, err)
	}
	for _, b := range p.Bindings {
		if b.Role == TasksEnqueuer && slices.Contains(b.Members, member) {
			c.Action = deploy.NoOp
			return c, nil
		}
	}
	if !apply {
		return c, nil
	}
	i := slices.IndexFunc(p.Bindings, func(b cloudtasks.Binding) bool { return b.Role == TasksEnqueuer })
	if i < 0 {
		p.Bindings = append(p.Bindings, cloudtasks.Binding{Role: TasksEnqueuer})
		i = len(p.Bindings) - 1
	}
	p.Bindings[i].Members = append(p.Bindings[i].Members, member)
	err = retryNewAccount(ctx, func() error { return d.Tasks.SetIamPolicy(ctx, name, p) }, func(err error) bool {
		var ae *cloudtasks.APIError
		return errors.As(err, &ae) && ae.Code == 400 && strings.Contains(ae.Message, "does not exist")
	})
	if err != nil {
		return c, fmt.Errorf("cloudtasks SetIamPolicy %s: %w", name, err)
	}
	return c, nil
}

// iamBinding plans, and with apply sets, role for member on a resource whose policy get and set
// read and write (a service, an account).
func iamBinding(ctx context.Context, c deploy.Change, role, member string, apply bool,
	get func(context.Context) (*iampb.Policy, error), set func(context.Context, *iampb.Policy) error) (deploy.Change, error) {
	p, err := get(ctx)
	if err != nil {
		return c, err
	}
	if hasMember(p, role, member) {
		c.Action = deploy.NoOp
		return c, nil
	}
	c.Action = deploy.Create
	if !apply {
		return c, nil
	}
	addMember(p, role, member)
	err = retryNewAccount(ctx, func() error { return set(ctx, p) }, func(err error) bool {
		return status.Code(err) == codes.InvalidArgument && strings.Contains(status.Convert(err).Message(), "does not exist")
	})
	return c, err
}

// accountUserBinding: the runtime account may name the invoker account in a task's OIDC token.
func (d *Driver) accountUserBinding(ctx context.Context, service string, exists, apply bool) (deploy.Change, error) {
	invoker := InvokerAccountEmail(d.Project, service)
	resource := d.accounts().name(invoker)
	c := deploy.Change{Resource: "iam-binding", Name: bindingName(AccountUser, d.member(service), "service account "+invoker), Action: deploy.Create}
	if !exists && !apply {
		return c, nil
	}
	c, err := iamBinding(ctx, c, AccountUser, d.member(service), apply,
		func(ctx context.Context) (*iampb.Policy, error) {
			p, err := d.IAM.GetIamPolicy(ctx, &iampb.GetIamPolicyRequest{Resource: resource})
			if err != nil {
				return nil, err
			}
			return p.InternalProto, nil
		},
		func(ctx context.Context, p *iampb.Policy) error {
			_, err := d.IAM.SetIamPolicy(ctx, &admin.SetIamPolicyRequest{Resource: resource, Policy: &iam.Policy{InternalProto: p}})
			return err
		})
	if err != nil {
		return c, fmt.Errorf("iam policy of %s: %w", invoker, err)
	}
	return c, nil
}

// invokerBinding: the invoker account may call the service.
func (d *Driver) invokerBinding(ctx context.Context, service string, exists, apply bool) (deploy.Change, error) {
	member := "serviceAccount:" + InvokerAccountEmail(d.Project, service)
	c := deploy.Change{Resource: "iam-binding", Name: bindingName(RunInvoker, member, "cloud run service "+service), Action: deploy.Create}
	if !exists && !apply {
		return c, nil
	}
	c, err := iamBinding(ctx, c, RunInvoker, member, apply,
		func(ctx context.Context) (*iampb.Policy, error) {
			return d.Services.GetIamPolicy(ctx, &iampb.GetIamPolicyRequest{Resource: d.name(service)})
		},
		func(ctx context.Context, p *iampb.Policy) error {
			_, err := d.Services.SetIamPolicy(ctx, &iampb.SetIamPolicyRequest{Resource: d.name(service), Policy: p})
			return err
		})
	if err != nil {
		return c, fmt.Errorf("run policy of %s: %w", service, err)
	}
	return c, nil
}

// retryNewAccount runs set until it succeeds, fails otherwise than newAccount says, or a new
// account had accountWait to propagate.
func retryNewAccount(ctx context.Context, set func() error, newAccount func(error) bool) error {
	deadline := time.Now().Add(accountWait)
	for {
		err := set()
		if err == nil || !newAccount(err) || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(2 * time.Second):
		}
	}
}

// planJobs lists (apply false) or makes (apply true) what the background work of s needs before
// its service is deployed: the invoker account, the queue, and the runtime account's roles on
// them. serviceExists says whether the service exists (for the run.invoker binding, listed here
// and set by jobsAfter).
func (d *Driver) planJobs(ctx context.Context, s deploy.Service, serviceExists, apply bool) ([]deploy.Change, error) {
	if !s.BackgroundWork {
		return nil, nil
	}
	if d.Tasks == nil {
		return nil, errors.New("cloud run: this service defines background work but the driver has no Cloud Tasks client")
	}
	inv, err := d.invokerChange(ctx, s.Name, apply)
	if err != nil {
		return nil, err
	}
	q, qExists, err := d.queueChange(ctx, s.Name, apply)
	if err != nil {
		return nil, err
	}
	enq, err := d.queueBinding(ctx, s.Name, qExists, apply)
	if err != nil {
		return nil, err
	}
	runtimeExists := true
	if !apply {
		ac, err := d.accounts().get(ctx, ServiceAccountEmail(d.Project, s.Name))
		if err != nil {
			return nil, err
		}
		runtimeExists = ac != nil
	}
	user, err := d.accountUserBinding(ctx, s.Name, inv.Action == deploy.NoOp && runtimeExists, apply)
	if err != nil {
		return nil, err
	}
	changes := []deploy.Change{inv, q, enq, user}
	if !apply {
		run, err := d.invokerBinding(ctx, s.Name, serviceExists && inv.Action == deploy.NoOp, false)
		if err != nil {
			return nil, err
		}
		changes = append(changes, run)
	}
	return changes, nil
}

// jobsAfter sets the invoker's run.invoker role on the service, once it exists.
func (d *Driver) jobsAfter(ctx context.Context, s deploy.Service) ([]deploy.Change, error) {
	if !s.BackgroundWork {
		return nil, nil
	}
	c, err := d.invokerBinding(ctx, s.Name, true, true)
	if err != nil {
		return nil, err
	}
	return []deploy.Change{c}, nil
}

// deleteJobs deletes the queue and the invoker account of service when svz created them; they
// are not listed when absent (a service without background work has none).
func (d *Driver) deleteJobs(ctx context.Context, service string) ([]deploy.Change, error) {
	var changes []deploy.Change
	if d.Tasks != nil {
		name := QueueName(d.Project, d.Region, service)
		q, err := d.Tasks.GetQueue(ctx, name)
		switch {
		case err != nil:
			return nil, fmt.Errorf("cloudtasks GetQueue %s: %w", name, err)
		case q == nil:
		case !queueOurs(q):
			changes = append(changes, deploy.KeptChange("cloud-tasks-queue", QueueID(service)))
		default:
			if err := d.Tasks.DeleteQueue(ctx, name); err != nil && !cloudtasks.IsNotFound(err) {
				return nil, fmt.Errorf("cloudtasks DeleteQueue %s: %w", name, err)
			}
			changes = append(changes, deploy.Change{Resource: "cloud-tasks-queue", Name: QueueID(service), Action: deploy.Delete})
		}
	}
	email := InvokerAccountEmail(d.Project, service)
	sa, err := d.accounts().get(ctx, email)
	switch {
	case errors.Is(err, deploy.ErrNotManaged):
		return append(changes, deploy.KeptChange("service-account", email)), nil
	case err != nil:
		return nil, err
	case sa == nil:
		return changes, nil
	}
	err = d.IAM.DeleteServiceAccount(ctx, &adminpb.DeleteServiceAccountRequest{Name: d.accounts().name(email)})
	if err != nil && status.Code(err) != codes.NotFound {
		return nil, fmt.Errorf("iam DeleteServiceAccount %s: %w", email, err)
	}
	return append(changes, deploy.Change{Resource: "service-account", Name: email, Action: deploy.Delete}), nil
}
