// Package awsdeploy holds what the Lambda and App Runner drivers share: AWS configuration from the
// default chain (AWS_REGION, AWS_ENDPOINT_URL and profiles honoured), the ECR image registry, Secrets
// Manager as the secret store, and IAM roles converged to an exact trust and inline policy.
package awsdeploy

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/ecr"
	ecrtypes "github.com/aws/aws-sdk-go-v2/service/ecr/types"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	smtypes "github.com/aws/aws-sdk-go-v2/service/secretsmanager/types"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/logging"
	"github.com/google/go-containerregistry/pkg/authn"

	"github.com/supervaize/svz/deploy"
)

// DefaultRegion is used when neither --region nor the AWS configuration name one.
const DefaultRegion = "us-east-1"

// LoadConfig loads the default AWS configuration, with region overriding the configured one. The
// SDK's own log lines (such as its fallback from IMDSv2 to IMDSv1 while it looks for credentials)
// are dropped: svz reports what went wrong in its own words.
func LoadConfig(ctx context.Context, region string) (aws.Config, error) {
	opts := []func(*config.LoadOptions) error{config.WithLogger(logging.Nop{})}
	if region != "" {
		opts = append(opts, config.WithRegion(region))
	}
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return aws.Config{}, fmt.Errorf("load AWS configuration: %w", err)
	}
	if cfg.Region == "" {
		cfg.Region = DefaultRegion
	}
	return cfg, nil
}

// ErrNoCredentials is returned (wrapped) when the default chain found no AWS credentials.
var ErrNoCredentials = errors.New("no AWS credentials found")

// noCredentials is svz's message when the default chain came up empty: every source was tried,
// down to the EC2 instance metadata service, whose failure is all the SDK reports.
const noCredentials = "set AWS_PROFILE (after aws sso login or aws configure), or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY; " +
	"svz deploy reads the AWS default chain (environment, shared config and credentials files, SSO, web identity, container and instance roles)"

// AccountID returns the account of the configured credentials. Credentials are retrieved first, so
// that a missing or unusable source is reported as such, not as an STS failure.
func AccountID(ctx context.Context, cfg aws.Config) (string, error) {
	if err := checkCredentials(ctx, cfg); err != nil {
		return "", err
	}
	out, err := sts.NewFromConfig(cfg).GetCallerIdentity(ctx, &sts.GetCallerIdentityInput{})
	if err != nil {
		return "", fmt.Errorf("AWS credentials: sts:GetCallerIdentity: %w", err)
	}
	return aws.ToString(out.Account), nil
}

// checkCredentials retrieves credentials from the chain. When the chain fell through to the
// instance metadata service and that failed too, only svz's message is shown: the SDK's is about
// IMDS, which is not what the user needs to fix off EC2.
func checkCredentials(ctx context.Context, cfg aws.Config) error {
	if cfg.Credentials == nil {
		return fmt.Errorf("%w: %s", ErrNoCredentials, noCredentials)
	}
	_, err := cfg.Credentials.Retrieve(ctx)
	if err == nil {
		return nil
	}
	var op *smithy.OperationError
	if errors.As(err, &op) && op.ServiceID == "ec2imds" {
		return fmt.Errorf("%w: %s", ErrNoCredentials, noCredentials)
	}
	return fmt.Errorf("AWS credentials cannot be used: %w", err)
}

// ECR is the platform registry on AWS: one private repository per service.
type ECR struct {
	Client  *ecr.Client
	Account string
	Region  string
}

var _ deploy.Registry = (*ECR)(nil)

func (r *ECR) uri(name string) string {
	return fmt.Sprintf("%s.dkr.ecr.%s.amazonaws.com/%s", r.Account, r.Region, name)
}

// Lookup finds the repository.
func (r *ECR) Lookup(ctx context.Context, name string) (string, bool, error) {
	out, err := r.Client.DescribeRepositories(ctx, &ecr.DescribeRepositoriesInput{RepositoryNames: []string{name}})
	var nf *ecrtypes.RepositoryNotFoundException
	switch {
	case errors.As(err, &nf):
		return r.uri(name), false, nil
	case err != nil:
		return "", false, fmt.Errorf("ecr:DescribeRepositories %s: %w", name, err)
	case len(out.Repositories) == 0:
		return r.uri(name), false, nil
	}
	return aws.ToString(out.Repositories[0].RepositoryUri), true, nil
}

// Ensure creates the repository when absent (scan on push, mutable tags: svz pushes {env}-{digest}
// tags and deploys by digest) and returns push credentials from an ECR authorization token.
func (r *ECR) Ensure(ctx context.Context, name string) (string, authn.Authenticator, error) {
	repo, exists, err := r.Lookup(ctx, name)
	if err != nil {
		return "", nil, err
	}
	if !exists {
		out, err := r.Client.CreateRepository(ctx, &ecr.CreateRepositoryInput{
			RepositoryName:             aws.String(name),
			ImageScanningConfiguration: &ecrtypes.ImageScanningConfiguration{ScanOnPush: true},
			ImageTagMutability:         ecrtypes.ImageTagMutabilityMutable,
			Tags:                       []ecrtypes.Tag{{Key: aws.String(ManagedByTag), Value: aws.String(ManagedByValue)}},
		})
		var ae *ecrtypes.RepositoryAlreadyExistsException
		switch {
		case errors.As(err, &ae):
		case err != nil:
			return "", nil, fmt.Errorf("ecr:CreateRepository %s: %w", name, err)
		default:
			repo = aws.ToString(out.Repository.RepositoryUri)
		}
	}
	auth, err := r.Auth(ctx)
	if err != nil {
		return "", nil, err
	}
	return repo, auth, nil
}

// Auth turns an ECR authorization token (base64 of "AWS:password", valid 12 hours) into registry
// credentials.
func (r *ECR) Auth(ctx context.Context) (authn.Authenticator, error) {
	out, err := r.Client.GetAuthorizationToken(ctx, &ecr.GetAuthorizationTokenInput{})
	if err != nil {
		return nil, fmt.Errorf("ecr:GetAuthorizationToken: %w", err)
	}
	if len(out.AuthorizationData) == 0 {
		return nil, errors.New("ecr:GetAuthorizationToken: no authorization data")
	}
	return DecodeECRToken(aws.ToString(out.AuthorizationData[0].AuthorizationToken))
}

// DecodeECRToken decodes an ECR authorization token. The token is a credential: errors never
// include it.
func DecodeECRToken(token string) (authn.Authenticator, error) {
	raw, err := base64.StdEncoding.DecodeString(token)
	if err != nil {
		return nil, errors.New("ECR authorization token is not base64")
	}
	user, pass, ok := strings.Cut(string(raw), ":")
	if !ok || user == "" || pass == "" {
		return nil, errors.New("ECR authorization token is not user:password")
	}
	return &authn.Basic{Username: user, Password: pass}, nil
}

// ManagedByTag marks resources svz created (deploy.ManagedBy): the tag managed-by=svz.
const ManagedByTag = "managed-by"

// ManagedByValue is the value of ManagedByTag on what svz created.
const ManagedByValue = "svz"

// adoptSecret is the command that marks a secret as svz's.
func adoptSecret(name string) string {
	return "aws secretsmanager tag-resource --secret-id " + name + " --tags Key=" + ManagedByTag + ",Value=" + ManagedByValue
}

// SecretsManager is the secret store on AWS. It reads, changes and deletes only the secrets it
// created (tag managed-by=svz).
type SecretsManager struct {
	Client *secretsmanager.Client
}

var _ deploy.SecretStore = (*SecretsManager)(nil)

// owned checks that the secret exists and carries svz's tag.
func (s *SecretsManager) owned(ctx context.Context, name string) error {
	out, err := s.Client.DescribeSecret(ctx, &secretsmanager.DescribeSecretInput{SecretId: aws.String(name)})
	var nf *smtypes.ResourceNotFoundException
	switch {
	case errors.As(err, &nf):
		return fmt.Errorf("secret %s: %w", name, deploy.ErrNotFound)
	case err != nil:
		return fmt.Errorf("secretsmanager:DescribeSecret %s: %w", name, err)
	}
	for _, t := range out.Tags {
		if aws.ToString(t.Key) == ManagedByTag && aws.ToString(t.Value) == ManagedByValue {
			return nil
		}
	}
	return &deploy.NotManagedError{Kind: "secret", Name: name, Adopt: adoptSecret(name)}
}

// Get reads the current (AWSCURRENT) version of a secret svz created.
func (s *SecretsManager) Get(ctx context.Context, name string) (deploy.StoredSecret, error) {
	if err := s.owned(ctx, name); err != nil {
		return deploy.StoredSecret{}, err
	}
	out, err := s.Client.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String(name)})
	var nf *smtypes.ResourceNotFoundException
	switch {
	case errors.As(err, &nf): // deleted meanwhile, or no current version
		return deploy.StoredSecret{}, fmt.Errorf("secret %s: %w", name, deploy.ErrNotFound)
	case err != nil:
		return deploy.StoredSecret{}, fmt.Errorf("secretsmanager:GetSecretValue %s: %w", name, err)
	}
	return deploy.StoredSecret{
		Ref:   deploy.SecretRef{Name: name, ID: aws.ToString(out.ARN), Version: aws.ToString(out.VersionId)},
		Value: deploy.NewSecret(aws.ToString(out.SecretString)),
	}, nil
}

// Put creates the secret (tagged managed-by=svz), or adds a version that becomes AWSCURRENT to a
// secret svz created.
func (s *SecretsManager) Put(ctx context.Context, name string, value deploy.Secret) (deploy.SecretRef, error) {
	out, err := s.Client.CreateSecret(ctx, &secretsmanager.CreateSecretInput{
		Name:         aws.String(name),
		SecretString: aws.String(value.Reveal()),
		Description:  aws.String("Supervaizer controller secret, managed by svz deploy"),
		Tags:         []smtypes.Tag{{Key: aws.String(ManagedByTag), Value: aws.String(ManagedByValue)}},
	})
	var exists *smtypes.ResourceExistsException
	switch {
	case errors.As(err, &exists):
		if err := s.owned(ctx, name); err != nil {
			return deploy.SecretRef{}, err
		}
		put, err := s.Client.PutSecretValue(ctx, &secretsmanager.PutSecretValueInput{
			SecretId: aws.String(name), SecretString: aws.String(value.Reveal()),
		})
		if err != nil {
			return deploy.SecretRef{}, fmt.Errorf("secretsmanager:PutSecretValue %s: %w", name, err)
		}
		return deploy.SecretRef{Name: name, ID: aws.ToString(put.ARN), Version: aws.ToString(put.VersionId)}, nil
	case err != nil:
		return deploy.SecretRef{}, fmt.Errorf("secretsmanager:CreateSecret %s: %w", name, err)
	}
	return deploy.SecretRef{Name: name, ID: aws.ToString(out.ARN), Version: aws.ToString(out.VersionId)}, nil
}

// Delete removes a secret svz created without a recovery window, so that the name can be created
// again. A forced delete succeeds even for an absent secret, so absence is checked first.
func (s *SecretsManager) Delete(ctx context.Context, name string) error {
	if err := s.owned(ctx, name); err != nil {
		return err
	}
	if _, err := s.Client.DeleteSecret(ctx, &secretsmanager.DeleteSecretInput{
		SecretId: aws.String(name), ForceDeleteWithoutRecovery: aws.Bool(true),
	}); err != nil {
		return fmt.Errorf("secretsmanager:DeleteSecret %s: %w", name, err)
	}
	return nil
}
