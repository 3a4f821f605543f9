package apprunner_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http/httptest"
	"net/url"
	"os"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	sdkapprunner "github.com/aws/aws-sdk-go-v2/service/apprunner"
	"github.com/aws/aws-sdk-go-v2/service/apprunner/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/supervaize/svz/deploy"
	"github.com/supervaize/svz/deploy/apprunner"
	"github.com/supervaize/svz/deploy/awsdeploy"
	"github.com/supervaize/svz/deploy/health"
	"github.com/supervaize/svz/deploy/image"
	"github.com/supervaize/svz/deploy/internal/apprunnerfake"
	"github.com/supervaize/svz/deploy/internal/awstest"
	"github.com/supervaize/svz/deploy/internal/fleet"
)

type env struct {
	fake     *apprunnerfake.Fake
	platform deploy.Platform
	iam      *iam.Client
	sm       *secretsmanager.Client
	ddb      *dynamodb.Client
	acct     string
	repo     string
	name     string
	gate     *health.Gate
	down     map[string]bool
	host     map[string]string // the deploying host's environment
}

func newEnv(t *testing.T) *env {
	t.Helper()
	cfg := awstest.Config(t)
	ctx := context.Background()
	acct, err := awsdeploy.AccountID(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{fake: apprunnerfake.Start(t, acct, cfg.Region), iam: iam.NewFromConfig(cfg), sm: secretsmanager.NewFromConfig(cfg),
		ddb: dynamodb.NewFromConfig(cfg), acct: acct, name: awstest.Name("ar"), down: map[string]bool{}, host: map[string]string{}}
	endpoint := os.Getenv("AWS_ENDPOINT_URL") // moto, set by awstest.Config
	fl := &fleet.Fleet{Serving: func() (fleet.Revision, bool) {
		img, vars, secrets, ok := e.fake.Running(e.name + "-dev")
		if !ok {
			return fleet.Revision{}, false
		}
		// What an instance has besides its configuration: the port, and its instance role's
		// credentials (static here, for moto). No AWS_REGION: only svz can set it.
		resolved := map[string]string{"PORT": apprunner.Port, "AWS_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test"}
		for k, v := range vars {
			resolved[k] = v
		}
		for k, arn := range secrets { // what App Runner does at deployment, with the instance role
			out, err := e.sm.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String(arn)})
			if err != nil {
				return fleet.Revision{}, false
			}
			resolved[k] = aws.ToString(out.SecretString)
		}
		key, _ := json.Marshal(resolved)
		return fleet.Revision{Key: img + string(key), Env: resolved, Down: e.down[img]}, true
	}}
	inst := httptest.NewTLSServer(fl)
	t.Cleanup(inst.Close)
	e.fake.URLHost = strings.TrimPrefix(inst.URL, "https://")
	e.gate = &health.Gate{Client: inst.Client(), Timeout: 2 * time.Second, Interval: 20 * time.Millisecond}
	reg := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(reg.Close)
	e.repo = strings.TrimPrefix(reg.URL, "http://") + "/team"

	e.platform, err = apprunner.NewPlatform(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.platform.Driver = &apprunner.Driver{
		AppRunner: sdkapprunner.NewFromConfig(cfg, func(o *sdkapprunner.Options) { o.BaseEndpoint = aws.String(e.fake.URL) }),
		IAM:       e.iam, DynamoDB: e.ddb, Account: acct, Region: cfg.Region, Poll: 5 * time.Millisecond,
	}
	return e
}

func testImage(version string) func(context.Context, string) (v1.Image, error) {
	return func(_ context.Context, arch string) (v1.Image, error) {
		return image.New(image.Spec{Binary: []byte("controller " + version), Arch: arch, CACerts: []byte("ca"), Created: time.Unix(0, 0)})
	}
}

func (e *env) ref(t *testing.T, version string) string {
	img, err := testImage(version)(context.Background(), "amd64")
	if err != nil {
		t.Fatal(err)
	}
	d, _ := img.Digest()
	return e.repo + "/" + e.name + "-dev@" + d.String()
}

func (e *env) deployer(version string, mod func(*deploy.Config)) *deploy.Deployer {
	cfg := deploy.Config{Platform: deploy.PlatformAppRunner, Name: e.name, Env: "dev", ImageRepo: e.repo}
	if mod != nil {
		mod(&cfg)
	}
	return &deploy.Deployer{
		Config: cfg, Platform: e.platform, Getenv: func(k string) string { return e.host[k] }, Gate: e.gate,
		Image: testImage(version), Keychain: authn.NewMultiKeychain(),
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

func TestAppRunnerLifecycle(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	svc := e.name + "-dev"
	gen := func(c *deploy.Config) { c.GenerateAPIKey, c.GeneratePrivateKey = true, true }

	res, err := e.deployer("v1", gen).Plan(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"no-op image-repository " + e.repo + "/" + svc,
		"create secret " + svc + "-api-key", "create secret " + svc + "-private-key",
		"create iam-role " + svc + "-apprunner", "create iam-role " + svc + "-apprunner-ecr",
		"create app-runner-service " + svc,
	}
	if got := actions(res.Changes); !reflect.DeepEqual(got, want) {
		t.Fatalf("plan:\n got %q\nwant %q", got, want)
	}

	res, err = e.deployer("v1", gen).Up(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.URL != "https://"+e.fake.URLHost || res.Health == nil || res.Health.RPC != "error -32601" {
		t.Fatalf("up: url %s health %+v", res.URL, res.Health)
	}
	img, vars, secrets, _ := e.fake.Running(svc)
	if img != e.ref(t, "v1") {
		t.Fatalf("running %s", img)
	}
	if vars["SUPERVAIZER_PUBLIC_URL"] != res.URL || vars["SUPERVAIZER_ENVIRONMENT"] != "dev" || vars["SUPERVAIZER_SERVER_ID"] == "" || vars["SUPERVAIZER_PLATFORM"] != "app-runner" {
		t.Errorf("runtime variables %v", vars)
	}
	var names []string
	for k, arn := range secrets {
		names = append(names, k)
		if !strings.HasPrefix(arn, "arn:aws:secretsmanager:us-east-1:") {
			t.Errorf("secret %s = %s, want an ARN", k, arn)
		}
	}
	sort.Strings(names)
	if !reflect.DeepEqual(names, []string{"SUPERVAIZER_API_KEY", "SUPERVAIZER_PRIVATE_KEY"}) {
		t.Errorf("runtime secrets %v", names)
	}
	// The instance role reads exactly the two secrets; the access role pulls from ECR.
	pol, err := e.iam.GetRolePolicy(ctx, &iam.GetRolePolicyInput{RoleName: aws.String(svc + "-apprunner"), PolicyName: aws.String("svz")})
	if err != nil {
		t.Fatal(err)
	}
	doc, _ := url.QueryUnescape(aws.ToString(pol.PolicyDocument))
	p, err := awsdeploy.ParsePolicy(doc)
	if err != nil {
		t.Fatal(err)
	}
	wantRes := []string{secrets["SUPERVAIZER_API_KEY"], secrets["SUPERVAIZER_PRIVATE_KEY"]}
	sort.Strings(wantRes)
	if len(p.Statement) != 1 || !reflect.DeepEqual([]string(p.Statement[0].Action), []string{"secretsmanager:GetSecretValue"}) ||
		!reflect.DeepEqual([]string(p.Statement[0].Resource), wantRes) {
		t.Errorf("instance role policy %+v", p)
	}
	att, err := e.iam.ListAttachedRolePolicies(ctx, &iam.ListAttachedRolePoliciesInput{RoleName: aws.String(svc + "-apprunner-ecr")})
	if err != nil || len(att.AttachedPolicies) != 1 || aws.ToString(att.AttachedPolicies[0].PolicyArn) != apprunner.ECRAccessPolicy {
		t.Errorf("access role policies %+v %v", att, err)
	}
	if n := count(e.fake.Calls(), "UpdateService"); n != 1 {
		t.Errorf("UpdateService called %d times, want 1 (public URL)", n)
	}

	// Same image and settings: no-op.
	before := len(e.fake.Calls())
	res, err = e.deployer("v1", gen).Up(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if deploy.Changed(res.Changes) {
		t.Fatalf("second up: %q", actions(res.Changes))
	}
	if calls := e.fake.Calls()[before:]; count(calls, "UpdateService")+count(calls, "CreateService") > 0 {
		t.Fatalf("no-op up called %v", calls)
	}

	// New image: update.
	if _, err := e.deployer("v2", nil).Up(ctx); err != nil {
		t.Fatal(err)
	}
	if img, _, _, _ := e.fake.Running(svc); img != e.ref(t, "v2") {
		t.Fatalf("running %s, want v2", img)
	}

	// App Runner's own health check fails: it rolls back itself and up fails at deploy.
	e.fake.FailImage[e.ref(t, "v3")] = true
	_, err = e.deployer("v3", nil).Up(ctx)
	if deploy.FailedStep(err) != deploy.StepDeploy || !strings.Contains(err.Error(), "ROLLBACK_SUCCEEDED") {
		t.Fatalf("v3: step %q err %v", deploy.FailedStep(err), err)
	}
	if img, _, _, _ := e.fake.Running(svc); img != e.ref(t, "v2") {
		t.Fatalf("after App Runner rollback running %s, want v2", img)
	}

	// Running but not answering: the gate fails and svz re-applies v2.
	e.down[e.ref(t, "v4")] = true
	res, err = e.deployer("v4", nil).Up(ctx)
	if deploy.FailedStep(err) != deploy.StepHealth || !res.RolledBack {
		t.Fatalf("v4: step %q rolled back %v err %v", deploy.FailedStep(err), res.RolledBack, err)
	}
	if img, _, _, _ := e.fake.Running(svc); img != e.ref(t, "v2") {
		t.Fatalf("after svz rollback running %s, want v2", img)
	}

	st, err := e.deployer("v2", nil).Status(ctx)
	if err != nil || !st.Healthy || st.Live.Image != e.ref(t, "v2") {
		t.Fatalf("status %+v %v", st, err)
	}

	res, err = e.deployer("v2", func(c *deploy.Config) { c.Purge = true }).Down(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := actions(res.Changes)
	for _, w := range []string{"delete app-runner-service " + svc, "delete iam-role " + svc + "-apprunner", "delete iam-role " + svc + "-apprunner-ecr",
		"delete secret " + svc + "-api-key", "delete secret " + svc + "-private-key"} {
		if !slices.Contains(got, w) {
			t.Errorf("down --purge: missing %q in %q", w, got)
		}
	}
	if _, err := e.platform.Driver.Inspect(ctx, svc); err == nil {
		t.Error("service still found after down")
	}
}

// instancePolicy reads the inline policy of the service's instance role.
func (e *env) instancePolicy(t *testing.T, svc string) awsdeploy.Policy {
	t.Helper()
	pol, err := e.iam.GetRolePolicy(context.Background(), &iam.GetRolePolicyInput{RoleName: aws.String(svc + "-apprunner"), PolicyName: aws.String("svz")})
	if err != nil {
		t.Fatal(err)
	}
	doc, _ := url.QueryUnescape(aws.ToString(pol.PolicyDocument))
	p, err := awsdeploy.ParsePolicy(doc)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// tableState describes a table as DynamoDB reports it: "absent", or its key, TTL attribute and tags.
func (e *env) tableState(t *testing.T, name string) string {
	t.Helper()
	ctx := context.Background()
	out, err := e.ddb.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)})
	var nf *ddbtypes.ResourceNotFoundException
	if errors.As(err, &nf) {
		return "absent"
	}
	if err != nil {
		t.Fatal(err)
	}
	var key []string
	for _, k := range out.Table.KeySchema {
		key = append(key, aws.ToString(k.AttributeName)+" "+string(k.KeyType))
	}
	for _, a := range out.Table.AttributeDefinitions {
		key = append(key, aws.ToString(a.AttributeName)+":"+string(a.AttributeType))
	}
	ttl, err := e.ddb.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(name)})
	if err != nil {
		t.Fatal(err)
	}
	tags, err := e.ddb.ListTagsOfResource(ctx, &dynamodb.ListTagsOfResourceInput{ResourceArn: out.Table.TableArn})
	if err != nil {
		t.Fatal(err)
	}
	var tg []string
	for _, x := range tags.Tags {
		tg = append(tg, aws.ToString(x.Key)+"="+aws.ToString(x.Value))
	}
	d := ttl.TimeToLiveDescription
	return fmt.Sprintf("key %s; ttl %s %s; tags %s", strings.Join(key, ","), aws.ToString(d.AttributeName), d.TimeToLiveStatus, strings.Join(tg, ","))
}

// TestAppRunnerDynamoDBStore: with SUPERVAIZER_STORE=dynamodb svz creates the table, lets the
// instance role use exactly it and sets AWS_REGION, so the real controller opens its store on
// moto at start (its DescribeTable) and passes the gate; down keeps the table, --purge deletes it.
func TestAppRunnerDynamoDBStore(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	svc := e.name + "-dev"
	gen := func(c *deploy.Config) { c.GenerateAPIKey, c.GeneratePrivateKey = true, true }
	e.host["SUPERVAIZER_STORE"] = "dynamodb"
	t.Cleanup(func() {
		_, _ = e.ddb.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(svc)})
	})

	var notices []string
	d := e.deployer("v1", gen)
	d.Progress = func(ev deploy.Event) {
		if ev.State == deploy.StateNote {
			notices = append(notices, ev.Message)
		}
	}
	res, err := d.Plan(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"no-op image-repository " + e.repo + "/" + svc,
		"create secret " + svc + "-api-key", "create secret " + svc + "-private-key",
		"create iam-role " + svc + "-apprunner", "create iam-role " + svc + "-apprunner-ecr",
		"create dynamodb-table " + svc,
		"create app-runner-service " + svc,
	}
	if got := actions(res.Changes); !reflect.DeepEqual(got, want) {
		t.Fatalf("plan:\n got %q\nwant %q", got, want)
	}
	if !reflect.DeepEqual(notices, []string{apprunner.Notice}) {
		t.Errorf("notices %q, want only App Runner's end of sale", notices)
	}

	res, err = e.deployer("v1", gen).Up(ctx)
	if err != nil {
		t.Fatalf("up: %v", err)
	}
	if res.Health == nil || res.Health.RPC != "error -32601" || len(res.Health.Cards) != 1 {
		t.Fatalf("health %+v", res.Health)
	}
	_, vars, _, _ := e.fake.Running(svc)
	if vars["AWS_REGION"] != awstest.Region || vars["SUPERVAIZER_STORE"] != "dynamodb" || vars["SUPERVAIZER_STORE_TABLE"] != svc {
		t.Errorf("runtime variables %v", vars)
	}
	if got, want := e.tableState(t, svc), "key k HASH,k:S,ix:S; ttl ttl ENABLED; tags managed-by=svz"; got != want {
		t.Errorf("table: %s\nwant %s", got, want)
	}
	p := e.instancePolicy(t, svc)
	tableARN := "arn:aws:dynamodb:us-east-1:" + e.acct + ":table/" + svc
	if len(p.Statement) != 2 || p.Statement[1].Sid != "StoreTable" ||
		!reflect.DeepEqual([]string(p.Statement[1].Action), []string{"dynamodb:DescribeTable", "dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:DeleteItem",
			"dynamodb:UpdateItem", "dynamodb:BatchGetItem", "dynamodb:BatchWriteItem", "dynamodb:Query"}) ||
		!reflect.DeepEqual([]string(p.Statement[1].Resource), []string{tableARN, tableARN + "/index/svz-keys"}) {
		t.Errorf("instance role policy %+v", p)
	}

	// Converged: a second up changes nothing.
	res, err = e.deployer("v1", gen).Up(ctx)
	if err != nil || deploy.Changed(res.Changes) {
		t.Fatalf("second up: %q %v", actions(res.Changes), err)
	}

	// Down keeps the data; down --purge (the service already gone) deletes the table svz made.
	res, err = e.deployer("v1", nil).Down(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(actions(res.Changes), "no-op dynamodb-table "+svc) || e.tableState(t, svc) == "absent" {
		t.Fatalf("down: %q, table %s", actions(res.Changes), e.tableState(t, svc))
	}
	res, err = e.deployer("v1", func(c *deploy.Config) { c.Purge = true }).Down(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(actions(res.Changes), "delete dynamodb-table "+svc) || e.tableState(t, svc) != "absent" {
		t.Fatalf("down --purge: %q, table %s", actions(res.Changes), e.tableState(t, svc))
	}
}

// TestAppRunnerDynamoDBUserTable: a table the user names and made (untagged, TTL off) is used,
// gets TTL, and survives down --purge; SUPERVAIZER_STORE is read without regard to case.
func TestAppRunnerDynamoDBUserTable(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	svc := e.name + "-dev"
	table := awstest.Name("usertable")
	if _, err := e.ddb.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName: aws.String(table), BillingMode: ddbtypes.BillingModePayPerRequest,
		AttributeDefinitions: []ddbtypes.AttributeDefinition{{AttributeName: aws.String("k"), AttributeType: ddbtypes.ScalarAttributeTypeS}},
		KeySchema:            []ddbtypes.KeySchemaElement{{AttributeName: aws.String("k"), KeyType: ddbtypes.KeyTypeHash}},
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = e.ddb.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(table)})
	})
	e.host["SUPERVAIZER_STORE"] = "DynamoDB"
	e.host["SUPERVAIZER_STORE_TABLE"] = table
	gen := func(c *deploy.Config) { c.GenerateAPIKey, c.GeneratePrivateKey = true, true }

	res, err := e.deployer("v1", gen).Plan(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := actions(res.Changes); !slices.Contains(got, "update dynamodb-table "+table) {
		t.Fatalf("plan %q", got)
	}
	if _, err := e.deployer("v1", gen).Up(ctx); err != nil {
		t.Fatalf("up: %v", err)
	}
	_, vars, _, _ := e.fake.Running(svc)
	if vars["AWS_REGION"] != awstest.Region || vars["SUPERVAIZER_STORE_TABLE"] != table {
		t.Errorf("runtime variables %v", vars)
	}
	if got, want := e.tableState(t, table), "key k HASH,k:S,ix:S; ttl ttl ENABLED; tags "; got != want {
		t.Errorf("table: %s\nwant %s", got, want)
	}
	if p := e.instancePolicy(t, svc); len(p.Statement) != 2 ||
		!reflect.DeepEqual([]string(p.Statement[1].Resource), []string{"arn:aws:dynamodb:us-east-1:" + e.acct + ":table/" + table,
			"arn:aws:dynamodb:us-east-1:" + e.acct + ":table/" + table + "/index/svz-keys"}) {
		t.Errorf("instance role policy %+v", p)
	}
	res, err = e.deployer("v1", func(c *deploy.Config) { c.Purge = true }).Down(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var tc deploy.Change
	for _, c := range res.Changes {
		if c.Resource == "dynamodb-table" {
			tc = c
		}
	}
	if tc != (deploy.Change{Resource: "dynamodb-table", Name: table, Action: deploy.NoOp, Detail: "kept: svz deploy did not create it"}) || e.tableState(t, table) == "absent" {
		t.Fatalf("down --purge: %+v, table %s", tc, e.tableState(t, table))
	}
}

// TestAppRunnerLeavesOthersServiceAlone: a service with the name svz wants that svz did not create
// (no managed-by=svz tag) is refused by plan and up before anything changes, and kept by down.
func TestAppRunnerLeavesOthersServiceAlone(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	svc := e.name + "-dev"
	client := e.platform.Driver.(*apprunner.Driver).AppRunner
	out, err := client.CreateService(ctx, &sdkapprunner.CreateServiceInput{ServiceName: aws.String(svc),
		SourceConfiguration: &types.SourceConfiguration{ImageRepository: &types.ImageRepository{
			ImageIdentifier: aws.String("public.ecr.aws/them/app:latest"), ImageRepositoryType: types.ImageRepositoryTypeEcrPublic}}})
	if err != nil {
		t.Fatal(err)
	}
	arn := aws.ToString(out.Service.ServiceArn)
	msg := "app runner service " + svc + " exists but svz deploy did not create it (it lacks the marker managed-by=svz), so svz leaves it alone: " +
		"choose another --name or --env, or delete that app runner service; to let svz manage it, run: " +
		"aws apprunner tag-resource --resource-arn " + arn + " --tags Key=managed-by,Value=svz"
	before := len(e.fake.Calls())
	gen := func(c *deploy.Config) { c.GenerateAPIKey, c.GeneratePrivateKey = true, true }
	if _, err := e.deployer("v1", gen).Plan(ctx); !errors.Is(err, deploy.ErrNotManaged) || err.Error() != "step plan: "+msg {
		t.Fatalf("plan: %v\nwant %s", err, msg)
	}
	if _, err := e.deployer("v1", gen).Up(ctx); !errors.Is(err, deploy.ErrNotManaged) || deploy.FailedStep(err) != deploy.StepPlan {
		t.Fatalf("up: %v", err)
	}
	for _, c := range e.fake.Calls()[before:] {
		if c != "ListServices" && c != "DescribeService" && c != "ListTagsForResource" {
			t.Errorf("plan or up called %s", c)
		}
	}
	if _, err := e.sm.DescribeSecret(ctx, &secretsmanager.DescribeSecretInput{SecretId: aws.String(svc + "-api-key")}); err == nil {
		t.Error("up stored a secret for a service it refused")
	}
	res, err := e.deployer("v1", nil).Down(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.Changes[0] != deploy.KeptChange("app-runner-service", svc) {
		t.Errorf("down: %+v", res.Changes)
	}
	if img, _, _, ok := e.fake.Running(svc); !ok || img != "public.ecr.aws/them/app:latest" {
		t.Errorf("down touched the service: running %q %v", img, ok)
	}
}
