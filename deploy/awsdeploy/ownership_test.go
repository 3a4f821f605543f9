package awsdeploy_test

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	iamtypes "github.com/aws/aws-sdk-go-v2/service/iam/types"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	smtypes "github.com/aws/aws-sdk-go-v2/service/secretsmanager/types"

	"github.com/supervaize/svz/deploy"
	"github.com/supervaize/svz/deploy/awsdeploy"
	"github.com/supervaize/svz/deploy/internal/awstest"
)

// TestRolesLeaveOthersAlone: a role with the name svz wants but without its tag (someone else's,
// or tagged for another tool) is neither rewritten, stripped of its policies nor deleted.
func TestRolesLeaveOthersAlone(t *testing.T) {
	cfg := awstest.Config(t)
	ctx := context.Background()
	client := iam.NewFromConfig(cfg)
	r := &awsdeploy.Roles{Client: client}
	for _, tags := range [][]iamtypes.Tag{nil, {{Key: aws.String("managed-by"), Value: aws.String("terraform")}}} {
		name := awstest.Name("theirs")
		trust := awsdeploy.TrustPolicy("ec2.amazonaws.com").JSON()
		if _, err := client.CreateRole(ctx, &iam.CreateRoleInput{RoleName: aws.String(name), AssumeRolePolicyDocument: aws.String(trust), Tags: tags}); err != nil {
			t.Fatal(err)
		}
		const managed = "arn:aws:iam::aws:policy/AWSLambdaExecute"
		if _, err := client.AttachRolePolicy(ctx, &iam.AttachRolePolicyInput{RoleName: aws.String(name), PolicyArn: aws.String(managed)}); err != nil {
			t.Fatal(err)
		}
		want := awsdeploy.Role{Name: name, Trust: awsdeploy.TrustPolicy("lambda.amazonaws.com")}
		msg := "iam role " + name + " exists but svz deploy did not create it (it lacks the marker managed-by=svz), so svz leaves it alone: " +
			"choose another --name or --env, or delete that iam role; to let svz manage it, run: " +
			"aws iam tag-role --role-name " + name + " --tags Key=managed-by,Value=svz"
		if _, err := r.Plan(ctx, want); !errors.Is(err, deploy.ErrNotManaged) || err.Error() != msg {
			t.Fatalf("plan: %v\nwant %s", err, msg)
		}
		if _, _, err := r.Ensure(ctx, want); !errors.Is(err, deploy.ErrNotManaged) || err.Error() != msg {
			t.Fatalf("ensure: %v", err)
		}
		c, err := r.Delete(ctx, name)
		if err != nil || c != deploy.KeptChange("iam-role", name) {
			t.Fatalf("delete: %+v %v", c, err)
		}
		got, err := client.GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String(name)})
		if err != nil {
			t.Fatalf("the role is gone: %v", err)
		}
		if p, err := awsdeploy.ParsePolicy(aws.ToString(got.Role.AssumeRolePolicyDocument)); err != nil || !awsdeploy.SamePolicy(p, awsdeploy.TrustPolicy("ec2.amazonaws.com")) {
			t.Errorf("trust policy changed: %s", aws.ToString(got.Role.AssumeRolePolicyDocument))
		}
		att, err := client.ListAttachedRolePolicies(ctx, &iam.ListAttachedRolePoliciesInput{RoleName: aws.String(name)})
		if err != nil || len(att.AttachedPolicies) != 1 || aws.ToString(att.AttachedPolicies[0].PolicyArn) != managed {
			t.Errorf("attached policies changed: %+v %v", att, err)
		}
	}
}

// TestSecretsManagerLeavesOthersAlone: a secret svz did not create is not read, given a new
// version, nor deleted.
func TestSecretsManagerLeavesOthersAlone(t *testing.T) {
	cfg := awstest.Config(t)
	ctx := context.Background()
	client := secretsmanager.NewFromConfig(cfg)
	s := &awsdeploy.SecretsManager{Client: client}
	for _, tags := range [][]smtypes.Tag{nil, {{Key: aws.String("managed-by"), Value: aws.String("someone")}}} {
		name := awstest.Name("theirs")
		if _, err := client.CreateSecret(ctx, &secretsmanager.CreateSecretInput{Name: aws.String(name), SecretString: aws.String("their value"), Tags: tags}); err != nil {
			t.Fatal(err)
		}
		msg := "secret " + name + " exists but svz deploy did not create it (it lacks the marker managed-by=svz), so svz leaves it alone: " +
			"choose another --name or --env, or delete that secret; to let svz manage it, run: " +
			"aws secretsmanager tag-resource --secret-id " + name + " --tags Key=managed-by,Value=svz"
		if _, err := s.Get(ctx, name); !errors.Is(err, deploy.ErrNotManaged) || err.Error() != msg {
			t.Fatalf("get: %v\nwant %s", err, msg)
		}
		if _, err := s.Put(ctx, name, deploy.NewSecret("svz value")); !errors.Is(err, deploy.ErrNotManaged) {
			t.Fatalf("put: %v", err)
		}
		if err := s.Delete(ctx, name); !errors.Is(err, deploy.ErrNotManaged) {
			t.Fatalf("delete: %v", err)
		}
		out, err := client.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String(name)})
		if err != nil || aws.ToString(out.SecretString) != "their value" {
			t.Fatalf("the secret changed: %v", err)
		}
		vs, err := client.ListSecretVersionIds(ctx, &secretsmanager.ListSecretVersionIdsInput{SecretId: aws.String(name)})
		if err != nil || len(vs.Versions) != 1 {
			t.Fatalf("versions %+v %v", vs, err)
		}
	}
	// Tagged by svz: its own.
	name := awstest.Name("ours")
	if _, err := s.Put(ctx, name, deploy.NewSecret("v1")); err != nil {
		t.Fatal(err)
	}
	d, err := client.DescribeSecret(ctx, &secretsmanager.DescribeSecretInput{SecretId: aws.String(name)})
	if err != nil || !reflect.DeepEqual(d.Tags, []smtypes.Tag{{Key: aws.String("managed-by"), Value: aws.String("svz")}}) {
		t.Fatalf("tags of a created secret: %+v %v", d.Tags, err)
	}
}
