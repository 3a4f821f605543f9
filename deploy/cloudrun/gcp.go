package cloudrun

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"strings"

	artifactregistry "cloud.google.com/go/artifactregistry/apiv1"
	"cloud.google.com/go/artifactregistry/apiv1/artifactregistrypb"
	admin "cloud.google.com/go/iam/admin/apiv1"
	run "cloud.google.com/go/run/apiv2"
	secretmanager "cloud.google.com/go/secretmanager/apiv1"
	"cloud.google.com/go/secretmanager/apiv1/secretmanagerpb"
	"github.com/google/go-containerregistry/pkg/authn"
	"google.golang.org/api/option"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/supervaize/svz/deploy"
	"github.com/supervaize/svz/internal/cloudtasks"
)

// ArtifactRegistry is the platform registry on GCP: one Docker-format repository per service,
// {region}-docker.pkg.dev/{project}/{name}/{name}.
type ArtifactRegistry struct {
	Client  *artifactregistry.Client
	Project string
	Region  string
	// Token returns an OAuth2 access token for pushing (Application Default Credentials in the CLI).
	Token func(ctx context.Context) (string, error)
}

var _ deploy.Registry = (*ArtifactRegistry)(nil)

func (r *ArtifactRegistry) name(n string) string {
	return fmt.Sprintf("projects/%s/locations/%s/repositories/%s", r.Project, r.Region, n)
}

func (r *ArtifactRegistry) repo(n string) string {
	return fmt.Sprintf("%s-docker.pkg.dev/%s/%s/%s", r.Region, r.Project, n, n)
}

// Lookup finds the repository.
func (r *ArtifactRegistry) Lookup(ctx context.Context, n string) (string, bool, error) {
	_, err := r.Client.GetRepository(ctx, &artifactregistrypb.GetRepositoryRequest{Name: r.name(n)})
	switch status.Code(err) {
	case codes.OK:
		return r.repo(n), true, nil
	case codes.NotFound:
		return r.repo(n), false, nil
	}
	return "", false, fmt.Errorf("artifactregistry GetRepository %s: %w", r.name(n), err)
}

// Ensure creates the repository when absent and returns push credentials (user
// "oauth2accesstoken", an access token as password).
func (r *ArtifactRegistry) Ensure(ctx context.Context, n string) (string, authn.Authenticator, error) {
	repo, exists, err := r.Lookup(ctx, n)
	if err != nil {
		return "", nil, err
	}
	if !exists {
		op, err := r.Client.CreateRepository(ctx, &artifactregistrypb.CreateRepositoryRequest{
			Parent:       fmt.Sprintf("projects/%s/locations/%s", r.Project, r.Region),
			RepositoryId: n,
			Repository: &artifactregistrypb.Repository{
				Format:      artifactregistrypb.Repository_DOCKER,
				Description: "Supervaizer controller images, managed by svz deploy",
				Labels:      map[string]string{"managed-by": "svz"},
			},
		})
		if status.Code(err) != codes.AlreadyExists {
			if err != nil {
				return "", nil, fmt.Errorf("artifactregistry CreateRepository %s: %w", n, err)
			}
			if _, err := op.Wait(ctx); err != nil {
				return "", nil, fmt.Errorf("artifactregistry CreateRepository %s: %w", n, err)
			}
		}
	}
	if r.Token == nil {
		return "", nil, errors.New("artifact registry: no access token source")
	}
	tok, err := r.Token(ctx)
	if err != nil {
		return "", nil, fmt.Errorf("artifact registry access token: %w", err)
	}
	return repo, &authn.Basic{Username: "oauth2accesstoken", Password: tok}, nil
}

// SecretManager is the secret store on GCP: automatic replication, one version per value. It
// reads, changes and deletes only the secrets it created (label managed-by=svz).
type SecretManager struct {
	Client  *secretmanager.Client
	Project string
}

var _ deploy.SecretStore = (*SecretManager)(nil)

func (s *SecretManager) secret(n string) string { return "projects/" + s.Project + "/secrets/" + n }

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// owned checks that the secret exists and carries svz's label.
func (s *SecretManager) owned(ctx context.Context, n string) error {
	sec, err := s.Client.GetSecret(ctx, &secretmanagerpb.GetSecretRequest{Name: s.secret(n)})
	switch status.Code(err) {
	case codes.OK:
	case codes.NotFound:
		return fmt.Errorf("secret %s: %w", n, deploy.ErrNotFound)
	default:
		return fmt.Errorf("secretmanager GetSecret %s: %w", n, err)
	}
	if sec.GetLabels()["managed-by"] != "svz" {
		return &deploy.NotManagedError{Kind: "secret", Name: n,
			Adopt: "gcloud secrets update " + n + " --project " + s.Project + " --update-labels " + deploy.ManagedBy}
	}
	return nil
}

// Get reads the latest version of a secret svz created and checks its CRC32C.
func (s *SecretManager) Get(ctx context.Context, n string) (deploy.StoredSecret, error) {
	if err := s.owned(ctx, n); err != nil {
		return deploy.StoredSecret{}, err
	}
	out, err := s.Client.AccessSecretVersion(ctx, &secretmanagerpb.AccessSecretVersionRequest{Name: s.secret(n) + "/versions/latest"})
	switch status.Code(err) {
	case codes.OK:
	case codes.NotFound: // no version yet: Put adds the first
		return deploy.StoredSecret{}, fmt.Errorf("secret %s: %w", n, deploy.ErrNotFound)
	default:
		return deploy.StoredSecret{}, fmt.Errorf("secretmanager AccessSecretVersion %s: %w", n, err)
	}
	data := out.GetPayload().GetData()
	if c := out.GetPayload().DataCrc32C; c != nil && int64(crc32.Checksum(data, castagnoli)) != *c {
		return deploy.StoredSecret{}, fmt.Errorf("secret %s: payload checksum mismatch", n)
	}
	ref, err := refFromVersion(n, out.GetName())
	if err != nil {
		return deploy.StoredSecret{}, err
	}
	return deploy.StoredSecret{Ref: ref, Value: deploy.NewSecret(string(data))}, nil
}

// refFromVersion splits projects/{number}/secrets/{name}/versions/{n}.
func refFromVersion(n, version string) (deploy.SecretRef, error) {
	secret, v, ok := strings.Cut(version, "/versions/")
	if !ok || v == "" || !strings.HasPrefix(secret, "projects/") {
		return deploy.SecretRef{}, fmt.Errorf("secret %s: unexpected version name %q", n, version)
	}
	return deploy.SecretRef{Name: n, ID: secret, Version: v}, nil
}

// Put creates the secret (labelled managed-by=svz) when absent and adds a version to it.
func (s *SecretManager) Put(ctx context.Context, n string, value deploy.Secret) (deploy.SecretRef, error) {
	_, err := s.Client.CreateSecret(ctx, &secretmanagerpb.CreateSecretRequest{
		Parent:   "projects/" + s.Project,
		SecretId: n,
		Secret: &secretmanagerpb.Secret{
			Replication: &secretmanagerpb.Replication{Replication: &secretmanagerpb.Replication_Automatic_{Automatic: &secretmanagerpb.Replication_Automatic{}}},
			Labels:      map[string]string{"managed-by": "svz"},
		},
	})
	switch status.Code(err) {
	case codes.OK:
	case codes.AlreadyExists:
		if err := s.owned(ctx, n); err != nil {
			return deploy.SecretRef{}, err
		}
	default:
		return deploy.SecretRef{}, fmt.Errorf("secretmanager CreateSecret %s: %w", n, err)
	}
	data := []byte(value.Reveal())
	crc := int64(crc32.Checksum(data, castagnoli))
	v, err := s.Client.AddSecretVersion(ctx, &secretmanagerpb.AddSecretVersionRequest{
		Parent:  s.secret(n),
		Payload: &secretmanagerpb.SecretPayload{Data: data, DataCrc32C: &crc},
	})
	if err != nil {
		return deploy.SecretRef{}, fmt.Errorf("secretmanager AddSecretVersion %s: %w", n, err)
	}
	return refFromVersion(n, v.GetName())
}

// Delete removes a secret svz created, with all its versions.
func (s *SecretManager) Delete(ctx context.Context, n string) error {
	if err := s.owned(ctx, n); err != nil {
		return err
	}
	err := s.Client.DeleteSecret(ctx, &secretmanagerpb.DeleteSecretRequest{Name: s.secret(n)})
	switch status.Code(err) {
	case codes.OK:
		return nil
	case codes.NotFound:
		return fmt.Errorf("secret %s: %w", n, deploy.ErrNotFound)
	}
	return fmt.Errorf("secretmanager DeleteSecret %s: %w", n, err)
}

// Clients are the GCP API clients of a Cloud Run deployment.
type Clients struct {
	Services *run.ServicesClient
	Registry *artifactregistry.Client
	Secrets  *secretmanager.Client
	IAM      *admin.IamClient
	// Tasks is the Cloud Tasks REST client (its Endpoint may be changed before Platform; Platform
	// gives it the token source when it has none).
	Tasks *cloudtasks.Client
}

// NewClients dials the four APIs. Without options they use Application Default Credentials.
func NewClients(ctx context.Context, opts ...option.ClientOption) (*Clients, error) {
	c := Clients{Tasks: &cloudtasks.Client{}}
	var err error
	if c.Services, err = run.NewServicesClient(ctx, opts...); err != nil {
		return nil, fmt.Errorf("cloud run client: %w", err)
	}
	if c.Registry, err = artifactregistry.NewClient(ctx, opts...); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("artifact registry client: %w", err)
	}
	if c.Secrets, err = secretmanager.NewClient(ctx, opts...); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("secret manager client: %w", err)
	}
	if c.IAM, err = admin.NewIamClient(ctx, opts...); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("iam client: %w", err)
	}
	return &c, nil
}

// Close closes the clients that were opened.
func (c *Clients) Close() error {
	var errs []error
	if c.Services != nil {
		errs = append(errs, c.Services.Close())
	}
	if c.Registry != nil {
		errs = append(errs, c.Registry.Close())
	}
	if c.Secrets != nil {
		errs = append(errs, c.Secrets.Close())
	}
	if c.IAM != nil {
		errs = append(errs, c.IAM.Close())
	}
	return errors.Join(errs...)
}

// Platform assembles the Cloud Run platform. token supplies registry push credentials.
func (c *Clients) Platform(project, region string, token func(context.Context) (string, error)) deploy.Platform {
	return deploy.Platform{
		Name:        deploy.PlatformCloudRun,
		Scope:       project,
		Region:      region,
		Registry:    &ArtifactRegistry{Client: c.Registry, Project: project, Region: region, Token: token},
		Secrets:     &SecretManager{Client: c.Secrets, Project: project},
		Driver:      &Driver{Services: c.Services, Secrets: c.Secrets, IAM: c.IAM, Tasks: c.tasks(token), Project: project, Region: region},
		DefaultArch: "amd64",
	}
}

func (c *Clients) tasks(token func(context.Context) (string, error)) *cloudtasks.Client {
	if c.Tasks == nil {
		c.Tasks = &cloudtasks.Client{}
	}
	if c.Tasks.Token == nil {
		c.Tasks.Token = token
	}
	return c.Tasks
}

// DefaultRegion is used when --region is not given.
const DefaultRegion = "us-central1"
