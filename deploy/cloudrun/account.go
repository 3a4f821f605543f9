package cloudrun

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	admin "cloud.google.com/go/iam/admin/apiv1"
	"cloud.google.com/go/iam/admin/apiv1/adminpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/supervaize/svz/deploy"
)

// Each service runs as its own service account, which holds nothing but
// roles/secretmanager.secretAccessor on the service's own secrets: not the project's default
// compute account (often Editor, and shared by every service that does not name another).
// Service accounts carry no labels, so svz marks the ones it creates in their description.

// maxAccountID is the longest service account id IAM accepts (6 to 30 characters).
const maxAccountID = 30

// ServiceAccountID is the id of a service's runtime account: svz-{service}, shortened with a hash
// of the service name when longer than IAM allows.
func ServiceAccountID(service string) string {
	id := "svz-" + service
	if len(id) <= maxAccountID {
		return id
	}
	sum := sha256.Sum256([]byte(service))
	return strings.TrimRight(id[:maxAccountID-7], "-") + "-" + hex.EncodeToString(sum[:3])
}

// ServiceAccountEmail is the email of a service's runtime account in project.
func ServiceAccountEmail(project, service string) string {
	return ServiceAccountID(service) + "@" + project + ".iam.gserviceaccount.com"
}

// accountDescription marks a runtime account svz created.
func accountDescription(service string) string {
	return "Runtime identity of Cloud Run service " + service + " (" + deploy.ManagedBy + ")"
}

// accounts converges the runtime service accounts of one project.
type accounts struct {
	client  *admin.IamClient
	project string
}

func (a accounts) name(email string) string {
	return "projects/" + a.project + "/serviceAccounts/" + email
}

// get returns the account, nil when absent, or a NotManagedError when svz did not create it.
func (a accounts) get(ctx context.Context, email string) (*adminpb.ServiceAccount, error) {
	sa, err := a.client.GetServiceAccount(ctx, &adminpb.GetServiceAccountRequest{Name: a.name(email)})
	switch status.Code(err) {
	case codes.OK:
	case codes.NotFound:
		return nil, nil
	default:
		return nil, fmt.Errorf("iam GetServiceAccount %s: %w", email, err)
	}
	if !strings.Contains(sa.GetDescription(), deploy.ManagedBy) {
		return nil, &deploy.NotManagedError{Kind: "service account", Name: email,
			Adopt: "gcloud iam service-accounts update " + email + " --project " + a.project + " --description '" + deploy.ManagedBy + "'"}
	}
	return sa, nil
}

// plan says whether ensure would create the account.
func (a accounts) plan(ctx context.Context, service string) (deploy.Change, error) {
	email := ServiceAccountEmail(a.project, service)
	c := deploy.Change{Resource: "service-account", Name: email, Action: deploy.NoOp}
	sa, err := a.get(ctx, email)
	if err != nil {
		return c, err
	}
	if sa == nil {
		c.Action, c.Detail = deploy.Create, "runtime identity, no role but access to its own secrets"
	}
	return c, nil
}

// ensure creates the account when absent.
func (a accounts) ensure(ctx context.Context, service string) (deploy.Change, error) {
	c, err := a.plan(ctx, service)
	if err != nil || c.Action == deploy.NoOp {
		return c, err
	}
	_, err = a.client.CreateServiceAccount(ctx, &adminpb.CreateServiceAccountRequest{
		Name:      "projects/" + a.project,
		AccountId: ServiceAccountID(service),
		ServiceAccount: &adminpb.ServiceAccount{
			DisplayName: "svz " + service,
			Description: accountDescription(service),
		},
	})
	if err != nil {
		return c, fmt.Errorf("iam CreateServiceAccount %s: %w", c.Name, err)
	}
	return c, nil
}

// delete removes the account when svz created it; another account of that name is kept.
func (a accounts) delete(ctx context.Context, service string) (deploy.Change, error) {
	email := ServiceAccountEmail(a.project, service)
	c := deploy.Change{Resource: "service-account", Name: email, Action: deploy.Delete}
	sa, err := a.get(ctx, email)
	switch {
	case errors.Is(err, deploy.ErrNotManaged):
		return deploy.KeptChange("service-account", email), nil
	case err != nil:
		return c, err
	case sa == nil:
		c.Action, c.Detail = deploy.NoOp, "absent"
		return c, nil
	}
	err = a.client.DeleteServiceAccount(ctx, &adminpb.DeleteServiceAccountRequest{Name: a.name(email)})
	switch status.Code(err) {
	case codes.OK:
	case codes.NotFound:
		c.Action, c.Detail = deploy.NoOp, "absent"
	default:
		return c, fmt.Errorf("iam DeleteServiceAccount %s: %w", email, err)
	}
	return c, nil
}
