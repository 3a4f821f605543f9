package awsdeploy_test

import (
	"context"
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/ecr"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/supervaize/svz/deploy"
	"github.com/supervaize/svz/deploy/awsdeploy"
	"github.com/supervaize/svz/deploy/internal/awstest"
)

func TestECR(t *testing.T) {
	cfg := awstest.Config(t)
	ctx := context.Background()
	acct, err := awsdeploy.AccountID(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	r := &awsdeploy.ECR{Client: ecr.NewFromConfig(cfg), Account: acct, Region: cfg.Region}
	name := awstest.Name("repo")
	want := acct + ".dkr.ecr.us-east-1.amazonaws.com/" + name
	repo, exists, err := r.Lookup(ctx, name)
	if err != nil || exists || repo != want {
		t.Fatalf("lookup before create: %s %v %v", repo, exists, err)
	}
	for i := 0; i < 2; i++ {
		repo, auth, err := r.Ensure(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if repo != want {
			t.Fatalf("repo %s, want %s", repo, want)
		}
		a, err := auth.Authorization()
		if err != nil || a.Username != "AWS" || a.Password == "" {
			t.Fatalf("auth %+v %v", a, err)
		}
	}
	if _, exists, err := r.Lookup(ctx, name); err != nil || !exists {
		t.Fatalf("lookup after create: %v %v", exists, err)
	}
	out, err := r.Client.DescribeRepositories(ctx, &ecr.DescribeRepositoriesInput{RepositoryNames: []string{name}})
	if err != nil || len(out.Repositories) != 1 || !out.Repositories[0].ImageScanningConfiguration.ScanOnPush {
		t.Fatalf("repository %+v %v", out, err)
	}
}

func TestDecodeECRToken(t *testing.T) {
	enc := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	a, err := awsdeploy.DecodeECRToken(enc("AWS:pa:ss"))
	if err != nil {
		t.Fatal(err)
	}
	if c, _ := a.Authorization(); c.Username != "AWS" || c.Password != "pa:ss" {
		t.Fatalf("%+v", c)
	}
	for tok, want := range map[string]string{
		"!!!":            "ECR authorization token is not base64",
		enc("nocolon"):   "ECR authorization token is not user:password",
		enc("AWS:"):      "ECR authorization token is not user:password",
		enc(":password"): "ECR authorization token is not user:password",
	} {
		if _, err := awsdeploy.DecodeECRToken(tok); err == nil || err.Error() != want {
			t.Errorf("%q: %v, want %q", tok, err, want)
		}
	}
}

func FuzzDecodeECRToken(f *testing.F) {
	f.Add(base64.StdEncoding.EncodeToString([]byte("AWS:secret")))
	f.Add("")
	f.Add("QVdT")
	f.Fuzz(func(t *testing.T, tok string) {
		a, err := awsdeploy.DecodeECRToken(tok)
		if err != nil {
			if len(tok) > 4 && strings.Contains(err.Error(), tok) {
				t.Fatal("the token is in the error")
			}
			return
		}
		c, _ := a.Authorization()
		if c.Username == "" || c.Password == "" {
			t.Fatalf("accepted empty credentials from %q", tok)
		}
	})
}

func TestSecretsManager(t *testing.T) {
	cfg := awstest.Config(t)
	ctx := context.Background()
	s := &awsdeploy.SecretsManager{Client: secretsmanager.NewFromConfig(cfg)}
	name := awstest.Name("sec")
	if _, err := s.Get(ctx, name); !errors.Is(err, deploy.ErrNotFound) {
		t.Fatalf("get absent: %v", err)
	}
	r1, err := s.Put(ctx, name, deploy.NewSecret("first"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(r1.ID, "arn:aws:secretsmanager:us-east-1:") || !strings.Contains(r1.ID, ":secret:"+name) || r1.Version == "" {
		t.Fatalf("ref %+v", r1)
	}
	r2, err := s.Put(ctx, name, deploy.NewSecret("second"))
	if err != nil {
		t.Fatal(err)
	}
	if r2.ID != r1.ID || r2.Version == r1.Version {
		t.Fatalf("new version: %+v after %+v", r2, r1)
	}
	got, err := s.Get(ctx, name)
	if err != nil || got.Value.Reveal() != "second" || got.Ref != r2 {
		t.Fatalf("get: %+v %v", got.Ref, err)
	}
	if err := s.Delete(ctx, name); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, name); !errors.Is(err, deploy.ErrNotFound) {
		t.Fatalf("get after delete: %v", err)
	}
	// Deleted without a recovery window: the name can be used again at once.
	if _, err := s.Put(ctx, name, deploy.NewSecret("again")); err != nil {
		t.Fatalf("re-create after delete: %v", err)
	}
	if err := s.Delete(ctx, name); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, name); !errors.Is(err, deploy.ErrNotFound) {
		t.Fatalf("delete absent: %v", err)
	}
}

func TestRoles(t *testing.T) {
	cfg := awstest.Config(t)
	ctx := context.Background()
	r := &awsdeploy.Roles{Client: iam.NewFromConfig(cfg)}
	name := awstest.Name("role")
	pol := awsdeploy.NewPolicy(awsdeploy.Statement{Sid: "A", Action: awsdeploy.List{"s3:GetObject"}, Resource: awsdeploy.List{"arn:aws:s3:::b/*"}})
	want := awsdeploy.Role{Name: name, Trust: awsdeploy.TrustPolicy("lambda.amazonaws.com"), Inline: &pol}

	step := func(label string, do func() (deploy.Change, error), action deploy.Action, detail string) {
		t.Helper()
		c, err := do()
		if err != nil {
			t.Fatalf("%s: %v", label, err)
		}
		if c.Action != action || c.Detail != detail {
			t.Fatalf("%s: %+v, want %s %q", label, c, action, detail)
		}
	}
	plan := func() (deploy.Change, error) { return r.Plan(ctx, want) }
	ensure := func() (deploy.Change, error) { _, c, err := r.Ensure(ctx, want); return c, err }

	step("plan absent", plan, deploy.Create, "")
	step("create", ensure, deploy.Create, "")
	step("plan after create", plan, deploy.NoOp, "")
	step("ensure again", ensure, deploy.NoOp, "")

	pol2 := awsdeploy.NewPolicy(awsdeploy.Statement{Sid: "A", Action: awsdeploy.List{"s3:GetObject", "s3:PutObject"}, Resource: awsdeploy.List{"arn:aws:s3:::b/*"}})
	want.Inline = &pol2
	want.Managed = []string{"arn:aws:iam::aws:policy/AWSLambdaExecute"}
	step("plan changed", plan, deploy.Update, "inline policy, managed policies")
	step("update", ensure, deploy.Update, "inline policy, managed policies")
	step("plan after update", plan, deploy.NoOp, "")

	want.Trust = awsdeploy.TrustPolicy("tasks.apprunner.amazonaws.com")
	want.Managed = nil
	step("update trust", ensure, deploy.Update, "trust policy, managed policies")
	step("plan after trust", plan, deploy.NoOp, "")

	step("delete", func() (deploy.Change, error) { return r.Delete(ctx, name) }, deploy.Delete, "")
	step("delete absent", func() (deploy.Change, error) { return r.Delete(ctx, name) }, deploy.NoOp, "absent")
}
