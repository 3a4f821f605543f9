package lambda_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	awslambda "github.com/aws/aws-sdk-go-v2/service/lambda"
	lambdatypes "github.com/aws/aws-sdk-go-v2/service/lambda/types"

	"github.com/supervaize/svz/deploy"
	"github.com/supervaize/svz/deploy/awsdeploy"
	"github.com/supervaize/svz/deploy/internal/awstest"
	"github.com/supervaize/svz/deploy/lambda"
)

func newDriver(t *testing.T) *lambda.Driver {
	t.Helper()
	cfg := awstest.Config(t)
	acct, err := awsdeploy.AccountID(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	sqs, err := awsdeploy.NewSQS(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &lambda.Driver{
		Lambda: awslambda.NewFromConfig(cfg), IAM: iam.NewFromConfig(cfg), DynamoDB: dynamodb.NewFromConfig(cfg), SQS: sqs,
		Account: acct, Region: cfg.Region,
	}
}

const (
	imageA = "123456789012.dkr.ecr.us-east-1.amazonaws.com/svc@sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	imageB = "123456789012.dkr.ecr.us-east-1.amazonaws.com/svc@sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
)

func service(name, image string) deploy.Service {
	return deploy.Service{
		Name: name, Image: image, Arch: "arm64",
		Env: map[string]string{"SUPERVAIZER_ENVIRONMENT": "dev", "SUPERVAIZER_SERVER_ID": "srv-1"},
		Secrets: map[string]deploy.SecretRef{
			"SUPERVAIZER_API_KEY": {Name: name + "-api-key", ID: "arn:aws:secretsmanager:us-east-1:123456789012:secret:" + name + "-api-key-AbCdEf", Version: "v1"},
		},
	}
}

func actions(cs []deploy.Change) map[string]deploy.Action {
	m := map[string]deploy.Action{}
	for _, c := range cs {
		m[c.Resource] = c.Action
	}
	return m
}

func TestDeployCreateNoOpUpdateRollbackDelete(t *testing.T) {
	d := newDriver(t)
	ctx := context.Background()
	name := awstest.Name("svzl")
	svc := service(name, imageA)

	plan, err := d.Plan(ctx, svc)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]deploy.Action{"iam-role": deploy.Create, "dynamodb-table": deploy.Create, "sqs-queue": deploy.Create, "lambda-function": deploy.Create,
		"function-url": deploy.Create, "lambda-permission": deploy.Create, "event-source-mapping": deploy.Create}
	if got := actions(plan); !reflect.DeepEqual(got, want) {
		t.Fatalf("plan before create = %v, want %v", got, want)
	}

	dep, err := d.Deploy(ctx, svc)
	if err != nil {
		t.Fatal(err)
	}
	if got := actions(dep.Changes); !reflect.DeepEqual(got, want) {
		t.Fatalf("deploy changes = %v, want %v", got, want)
	}
	if dep.Rollback != nil {
		t.Error("a created function has nothing to roll back to")
	}
	if !strings.HasPrefix(dep.Live.URL, "https://") || strings.HasSuffix(dep.Live.URL, "/") {
		t.Errorf("URL = %q, want https://… without trailing slash", dep.Live.URL)
	}

	// The function as AWS sees it.
	fn, err := d.Lambda.GetFunction(ctx, &awslambda.GetFunctionInput{FunctionName: aws.String(name)})
	if err != nil {
		t.Fatal(err)
	}
	gotEnv := fn.Configuration.Environment.Variables
	wantEnv := map[string]string{
		"SUPERVAIZER_ENVIRONMENT":          "dev",
		"SUPERVAIZER_SERVER_ID":            "srv-1",
		"SUPERVAIZER_API_KEY_SECRET_ARN":   svc.Secrets["SUPERVAIZER_API_KEY"].ID,
		"SUPERVAIZER_STORE":                "dynamodb",
		"SUPERVAIZER_STORE_TABLE":          name,
		"SUPERVAIZER_LAMBDA_INVOKE_MODE":   "RESPONSE_STREAM",
		"SUPERVAIZER_JOBS_QUEUE_URL":       "https://sqs.us-east-1.amazonaws.com/" + d.Account + "/" + name + "-jobs",
		"SUPERVAIZER_JOBS_MAX_RECEIVES":    "5",
		"SUPERVAIZER_JOBS_DEAD_LETTER_ARN": "arn:aws:sqs:us-east-1:" + d.Account + ":" + name + "-jobs-dlq",
	}
	if !reflect.DeepEqual(gotEnv, wantEnv) {
		t.Errorf("env = %v, want %v", gotEnv, wantEnv)
	}
	if got := aws.ToString(fn.Code.ImageUri); got != imageA {
		t.Errorf("image = %s", got)
	}
	if got := string(fn.Configuration.PackageType); got != "Image" {
		t.Errorf("package type = %s", got)
	}
	if got := fn.Configuration.Architectures; len(got) != 1 || got[0] != "arm64" {
		t.Errorf("architectures = %v", got)
	}
	if got := aws.ToString(fn.Configuration.Role); got != "arn:aws:iam::"+d.Account+":role/"+name+"-lambda" {
		t.Errorf("role = %s", got)
	}

	// Least privilege: exactly the log group, the table, the secret and the jobs queues (send to
	// the jobs queue for the controller; receive, delete and read attributes on both for the event
	// source mappings).
	pol, err := d.IAM.GetRolePolicy(ctx, &iam.GetRolePolicyInput{RoleName: aws.String(name + "-lambda"), PolicyName: aws.String("svz")})
	if err != nil {
		t.Fatal(err)
	}
	doc, _ := url.QueryUnescape(aws.ToString(pol.PolicyDocument))
	logs, table, queue := "arn:aws:logs:us-east-1:"+d.Account+":log-group:/aws/lambda/"+name, "arn:aws:dynamodb:us-east-1:"+d.Account+":table/"+name,
		"arn:aws:sqs:us-east-1:"+d.Account+":"+name+"-jobs"
	dlq := queue + "-dlq"
	wantDoc := `{"Version":"2012-10-17","Statement":[` +
		`{"Sid":"Logs","Effect":"Allow","Action":["logs:CreateLogGroup","logs:CreateLogStream","logs:PutLogEvents"],"Resource":["` + logs + `","` + logs + `:*"]},` +
		`{"Sid":"StoreTable","Effect":"Allow","Action":["dynamodb:DescribeTable","dynamodb:GetItem","dynamodb:PutItem","dynamodb:DeleteItem","dynamodb:UpdateItem","dynamodb:BatchGetItem","dynamodb:BatchWriteItem","dynamodb:Query"],"Resource":["` + table + `","` + table + `/index/svz-keys"]},` +
		`{"Sid":"JobsSend","Effect":"Allow","Action":["sqs:SendMessage"],"Resource":["` + queue + `"]},` +
		`{"Sid":"JobsReceive","Effect":"Allow","Action":["sqs:ReceiveMessage","sqs:DeleteMessage","sqs:GetQueueAttributes"],"Resource":["` + queue + `","` + dlq + `"]},` +
		`{"Sid":"Secrets","Effect":"Allow","Action":["secretsmanager:GetSecretValue"],"Resource":["` + svc.Secrets["SUPERVAIZER_API_KEY"].ID + `"]}]}`
	if compactJSON(t, doc) != compactJSON(t, wantDoc) {
		t.Errorf("role policy:\n got %s\nwant %s", compactJSON(t, doc), wantDoc)
	}

	// The jobs queue: visibility 6 times the function timeout, dead-lettered after 5 receives; the
	// dead-letter queue mapped to the function too, so with the same visibility; both queues
	// marked as svz's.
	for qname, wantAttrs := range map[string]map[string]string{
		name + "-jobs": {"VisibilityTimeout": "360", "MessageRetentionPeriod": "345600",
			"RedrivePolicy": `{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:` + d.Account + `:` + name + `-jobs-dlq","maxReceiveCount":5}`},
		name + "-jobs-dlq": {"VisibilityTimeout": "360", "MessageRetentionPeriod": "1209600", "RedrivePolicy": ""},
	} {
		var u struct{ QueueUrl string }
		if err := d.SQS.Call(ctx, "GetQueueUrl", map[string]string{"QueueName": qname}, &u); err != nil {
			t.Fatal(err)
		}
		var attrs struct{ Attributes map[string]string }
		if err := d.SQS.Call(ctx, "GetQueueAttributes", map[string]any{"QueueUrl": u.QueueUrl, "AttributeNames": []string{"All"}}, &attrs); err != nil {
			t.Fatal(err)
		}
		for k, v := range wantAttrs {
			got := attrs.Attributes[k]
			if k == "RedrivePolicy" && got != "" {
				got = compactJSON(t, got)
			}
			if got != v {
				t.Errorf("queue %s: %s = %q, want %q", qname, k, got, v)
			}
		}
		var tags struct{ Tags map[string]string }
		if err := d.SQS.Call(ctx, "ListQueueTags", map[string]string{"QueueUrl": u.QueueUrl}, &tags); err != nil || !reflect.DeepEqual(tags.Tags, map[string]string{"managed-by": "svz"}) {
			t.Errorf("queue %s tags %v %v", qname, tags.Tags, err)
		}
	}
	// The event source mappings: the jobs queue and its dead-letter queue to the function, one
	// message per invocation, partial batch failures reported.
	ms, err := d.Lambda.ListEventSourceMappings(ctx, &awslambda.ListEventSourceMappingsInput{FunctionName: aws.String(name)})
	if err != nil {
		t.Fatal(err)
	}
	if len(ms.EventSourceMappings) != 2 {
		t.Fatalf("mappings %+v", ms.EventSourceMappings)
	}
	var m lambdatypes.EventSourceMappingConfiguration
	sources := map[string]bool{}
	for _, em := range ms.EventSourceMappings {
		sources[aws.ToString(em.EventSourceArn)] = true
		if aws.ToString(em.EventSourceArn) == queue {
			m = em
		}
		if aws.ToInt32(em.BatchSize) != 1 || !strings.HasSuffix(aws.ToString(em.FunctionArn), ":function:"+name) ||
			!reflect.DeepEqual(em.FunctionResponseTypes, []lambdatypes.FunctionResponseType{lambdatypes.FunctionResponseTypeReportBatchItemFailures}) {
			t.Errorf("mapping %s %d %s %v", aws.ToString(em.EventSourceArn), aws.ToInt32(em.BatchSize), aws.ToString(em.FunctionArn), em.FunctionResponseTypes)
		}
	}
	if !reflect.DeepEqual(sources, map[string]bool{queue: true, dlq: true}) {
		t.Errorf("mapped queues %v", sources)
	}

	// Table: key k (S) as core/store/dynamodb checks it, on demand, TTL on the expiry attribute.
	tab, err := d.DynamoDB.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)})
	if err != nil {
		t.Fatal(err)
	}
	if ks := tab.Table.KeySchema; len(ks) != 1 || aws.ToString(ks[0].AttributeName) != "k" || ks[0].KeyType != ddbtypes.KeyTypeHash {
		t.Errorf("key schema = %+v", ks)
	}
	if bm := tab.Table.BillingModeSummary; bm == nil || bm.BillingMode != ddbtypes.BillingModePayPerRequest {
		t.Errorf("billing = %+v", bm)
	}
	ttl, err := d.DynamoDB.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(name)})
	if err != nil {
		t.Fatal(err)
	}
	if a := aws.ToString(ttl.TimeToLiveDescription.AttributeName); a != lambda.TableTTLAttribute {
		t.Errorf("TTL attribute = %q", a)
	}

	// Same service again: nothing changes.
	plan, err = d.Plan(ctx, svc)
	if err != nil {
		t.Fatal(err)
	}
	if deploy.Changed(plan) {
		t.Fatalf("plan after deploy = %v, want all no-op", plan)
	}
	again, err := d.Deploy(ctx, svc)
	if err != nil {
		t.Fatal(err)
	}
	if deploy.Changed(again.Changes) || again.Rollback != nil {
		t.Fatalf("redeploy changes = %v, want all no-op and no rollback", again.Changes)
	}
	if again.Live.URL != dep.Live.URL {
		t.Errorf("URL changed: %s → %s", dep.Live.URL, again.Live.URL)
	}

	// Drift of the queue or the mapping made out of band: planned as an update, converged back.
	var qu struct{ QueueUrl string }
	if err := d.SQS.Call(ctx, "GetQueueUrl", map[string]string{"QueueName": name + "-jobs"}, &qu); err != nil {
		t.Fatal(err)
	}
	if err := d.SQS.Call(ctx, "SetQueueAttributes", map[string]any{"QueueUrl": qu.QueueUrl, "Attributes": map[string]string{"VisibilityTimeout": "30"}}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Lambda.UpdateEventSourceMapping(ctx, &awslambda.UpdateEventSourceMappingInput{UUID: m.UUID, BatchSize: aws.Int32(10)}); err != nil {
		t.Fatal(err)
	}
	plan, err = d.Plan(ctx, svc)
	if err != nil {
		t.Fatal(err)
	}
	var drift []string
	for _, c := range plan {
		if c.Action != deploy.NoOp {
			drift = append(drift, c.String())
		}
	}
	wantDrift := []string{"update  sqs-queue " + name + "-jobs (VisibilityTimeout 30 → 360)", "update  event-source-mapping " + name + "-jobs → " + name + " (batch size 10 → 1)"}
	if !reflect.DeepEqual(drift, wantDrift) {
		t.Fatalf("plan after drift:\n%q\nwant\n%q", drift, wantDrift)
	}
	if _, err := d.Deploy(ctx, svc); err != nil {
		t.Fatal(err)
	}
	if plan, err = d.Plan(ctx, svc); err != nil || deploy.Changed(plan) {
		t.Fatalf("plan after converging the drift: %v %v", plan, err)
	}

	// New image and a new variable: an update, with a rollback to the previous state.
	svc2 := service(name, imageB)
	svc2.Env["SUPERVAIZER_PUBLIC_URL"] = dep.Live.URL
	plan, err = d.Plan(ctx, svc2)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range plan {
		if c.Resource == "lambda-function" {
			if c.Action != deploy.Update || c.Detail != "image sha256:aaaaaaaaaaaa → sha256:bbbbbbbbbbbb, env +SUPERVAIZER_PUBLIC_URL" {
				t.Errorf("function plan = %+v", c)
			}
		} else if c.Action != deploy.NoOp {
			t.Errorf("%s plan = %+v, want no-op", c.Resource, c)
		}
	}
	upd, err := d.Deploy(ctx, svc2)
	if err != nil {
		t.Fatal(err)
	}
	if upd.Rollback == nil {
		t.Fatal("update without rollback")
	}
	live, err := d.Inspect(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if live.Image != imageB || live.Env["SUPERVAIZER_PUBLIC_URL"] != dep.Live.URL {
		t.Fatalf("after update: image %s env %v", live.Image, live.Env)
	}
	if err := upd.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	live, err = d.Inspect(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if live.Image != imageA || !reflect.DeepEqual(live.Env, wantEnv) {
		t.Fatalf("after rollback: image %s env %v", live.Image, live.Env)
	}

	// Down without purge keeps the table; a second down finds nothing.
	cs, err := d.Delete(ctx, name, false)
	if err != nil {
		t.Fatal(err)
	}
	wantDel := map[string]deploy.Action{"event-source-mapping": deploy.Delete, "function-url": deploy.Delete, "lambda-function": deploy.Delete, "iam-role": deploy.Delete,
		"sqs-queue": deploy.Delete, "dynamodb-table": deploy.NoOp}
	if got := actions(cs); !reflect.DeepEqual(got, wantDel) {
		t.Errorf("delete = %v, want %v", got, wantDel)
	}
	if _, err := d.Inspect(ctx, name); !errors.Is(err, deploy.ErrNotFound) {
		t.Errorf("inspect after delete: %v, want ErrNotFound", err)
	}
	cs, err = d.Delete(ctx, name, true)
	if err != nil {
		t.Fatal(err)
	}
	wantDel = map[string]deploy.Action{"event-source-mapping": deploy.NoOp, "function-url": deploy.NoOp, "lambda-function": deploy.NoOp, "iam-role": deploy.NoOp,
		"sqs-queue": deploy.NoOp, "dynamodb-table": deploy.Delete}
	if got := actions(cs); !reflect.DeepEqual(got, wantDel) {
		t.Errorf("second delete = %v, want %v", got, wantDel)
	}
}

// TestDriverLeavesOthersFunctionAlone: a function with the service's name that svz did not create
// (no managed-by=svz tag) is refused by plan and deploy, before its role or table is touched, and
// kept by delete, Function URL included; its table, not created by svz either, survives a purge.
func TestDriverLeavesOthersFunctionAlone(t *testing.T) {
	d := newDriver(t)
	ctx := context.Background()
	name := awstest.Name("theirs")
	role, err := d.IAM.CreateRole(ctx, &iam.CreateRoleInput{RoleName: aws.String(name + "-exec"),
		AssumeRolePolicyDocument: aws.String(awsdeploy.TrustPolicy("lambda.amazonaws.com").JSON())})
	if err != nil {
		t.Fatal(err)
	}
	fn, err := d.Lambda.CreateFunction(ctx, &awslambda.CreateFunctionInput{
		FunctionName: aws.String(name), PackageType: lambdatypes.PackageTypeImage, Code: &lambdatypes.FunctionCode{ImageUri: aws.String(imageA)},
		Role: role.Role.Arn, Environment: &lambdatypes.Environment{Variables: map[string]string{"OWNER": "them"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Lambda.CreateFunctionUrlConfig(ctx, &awslambda.CreateFunctionUrlConfigInput{FunctionName: aws.String(name), AuthType: lambdatypes.FunctionUrlAuthTypeAwsIam}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.DynamoDB.CreateTable(ctx, &dynamodb.CreateTableInput{TableName: aws.String(name), BillingMode: ddbtypes.BillingModePayPerRequest,
		AttributeDefinitions: []ddbtypes.AttributeDefinition{{AttributeName: aws.String("k"), AttributeType: ddbtypes.ScalarAttributeTypeS}},
		KeySchema:            []ddbtypes.KeySchemaElement{{AttributeName: aws.String("k"), KeyType: ddbtypes.KeyTypeHash}}}); err != nil {
		t.Fatal(err)
	}
	msg := "lambda function " + name + " exists but svz deploy did not create it (it lacks the marker managed-by=svz), so svz leaves it alone: " +
		"choose another --name or --env, or delete that lambda function; to let svz manage it, run: " +
		"aws lambda tag-resource --resource " + aws.ToString(fn.FunctionArn) + " --tags managed-by=svz"
	svc := service(name, imageB)
	if _, err := d.Plan(ctx, svc); !errors.Is(err, deploy.ErrNotManaged) || err.Error() != msg {
		t.Fatalf("plan: %v\nwant %s", err, msg)
	}
	if _, err := d.Deploy(ctx, svc); !errors.Is(err, deploy.ErrNotManaged) || err.Error() != msg {
		t.Fatalf("deploy: %v", err)
	}
	if _, err := d.IAM.GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String(lambda.RoleName(name))}); err == nil {
		t.Error("deploy created the execution role of a function it refused")
	}
	cs, err := d.Delete(ctx, name, true)
	if err != nil {
		t.Fatal(err)
	}
	want := []deploy.Change{deploy.KeptChange("function-url", name), deploy.KeptChange("lambda-function", name),
		{Resource: "iam-role", Name: lambda.RoleName(name), Action: deploy.NoOp, Detail: "absent"},
		{Resource: "sqs-queue", Name: name + "-jobs", Action: deploy.NoOp, Detail: "absent"},
		{Resource: "sqs-queue", Name: name + "-jobs-dlq", Action: deploy.NoOp, Detail: "absent"},
		deploy.KeptChange("dynamodb-table", name)}
	if !reflect.DeepEqual(cs, want) {
		t.Fatalf("delete:\n got %+v\nwant %+v", cs, want)
	}
	got, err := d.Lambda.GetFunction(ctx, &awslambda.GetFunctionInput{FunctionName: aws.String(name)})
	if err != nil || aws.ToString(got.Code.ImageUri) != imageA || got.Configuration.Environment.Variables["OWNER"] != "them" {
		t.Fatalf("the function changed: %v", err)
	}
	if _, err := d.Lambda.GetFunctionUrlConfig(ctx, &awslambda.GetFunctionUrlConfigInput{FunctionName: aws.String(name)}); err != nil {
		t.Fatalf("the Function URL is gone: %v", err)
	}
	if _, err := d.DynamoDB.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)}); err != nil {
		t.Fatalf("the table is gone: %v", err)
	}
}

func compactJSON(t *testing.T, s string) string {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("%s: %v", s, err)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// TestDriverLeavesOthersQueueAlone: a jobs queue of the service's name that svz did not create is
// refused by plan and deploy before anything is created, and kept by delete.
func TestDriverLeavesOthersQueueAlone(t *testing.T) {
	d := newDriver(t)
	ctx := context.Background()
	name := awstest.Name("theirq")
	var u struct{ QueueUrl string }
	if err := d.SQS.Call(ctx, "CreateQueue", map[string]any{"QueueName": name + "-jobs"}, &u); err != nil {
		t.Fatal(err)
	}
	msg := "sqs queue " + name + "-jobs exists but svz deploy did not create it (it lacks the marker managed-by=svz), so svz leaves it alone: " +
		"choose another --name or --env, or delete that sqs queue; to let svz manage it, run: aws sqs tag-queue --queue-url " + u.QueueUrl + " --tags managed-by=svz"
	svc := service(name, imageA)
	if _, err := d.Plan(ctx, svc); !errors.Is(err, deploy.ErrNotManaged) || err.Error() != msg {
		t.Fatalf("plan: %v\nwant %s", err, msg)
	}
	if _, err := d.Deploy(ctx, svc); !errors.Is(err, deploy.ErrNotManaged) || err.Error() != msg {
		t.Fatalf("deploy: %v", err)
	}
	if _, err := d.IAM.GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String(lambda.RoleName(name))}); err == nil {
		t.Error("deploy created the execution role of a service it refused")
	}
	cs, err := d.Delete(ctx, name, false)
	if err != nil {
		t.Fatal(err)
	}
	if want := deploy.KeptChange("sqs-queue", name+"-jobs"); !slices.Contains(cs, want) {
		t.Fatalf("delete %+v, want %+v among them", cs, want)
	}
	if err := d.SQS.Call(ctx, "GetQueueUrl", map[string]string{"QueueName": name + "-jobs"}, nil); err != nil {
		t.Fatalf("the queue is gone: %v", err)
	}
	_ = d.SQS.Call(ctx, "DeleteQueue", map[string]string{"QueueUrl": u.QueueUrl}, nil)
}

// tracing drives one service through the tracing tests: the driver's Lambda client records the
// bodies it sends, because moto 5.2.1 keeps the TracingConfig of CreateFunction but ignores it in
// UpdateFunctionConfiguration: updates are checked on the wire.
type tracing struct {
	t    *testing.T
	d    *lambda.Driver
	rec  *recorder
	name string
}

func newTracing(t *testing.T, prefix string) *tracing {
	d := newDriver(t)
	rec := &recorder{}
	d.Lambda = awslambda.NewFromConfig(awstest.Config(t), func(o *awslambda.Options) { o.HTTPClient = &http.Client{Transport: rec} })
	name := awstest.Name(prefix)
	t.Cleanup(func() { _, _ = d.Delete(context.Background(), name, true) })
	return &tracing{t: t, d: d, rec: rec, name: name}
}

func (tr *tracing) service(active bool) deploy.Service {
	s := service(tr.name, imageA)
	s.ActiveTracing = active
	return s
}

func (tr *tracing) deploy(s deploy.Service) deploy.Deployment {
	tr.t.Helper()
	dep, err := tr.d.Deploy(context.Background(), s)
	if err != nil {
		tr.t.Fatal(err)
	}
	return dep
}

// mode is the function's tracing mode as Lambda reports it.
func (tr *tracing) mode() lambdatypes.TracingMode {
	tr.t.Helper()
	cfg, err := tr.d.Lambda.GetFunctionConfiguration(context.Background(), &awslambda.GetFunctionConfigurationInput{FunctionName: aws.String(tr.name)})
	if err != nil {
		tr.t.Fatal(err)
	}
	if cfg.TracingConfig == nil {
		tr.t.Fatal("GetFunctionConfiguration: no TracingConfig")
	}
	return cfg.TracingConfig.Mode
}

// plan returns the plan's changes that are not no-ops.
func (tr *tracing) plan(s deploy.Service) []string {
	tr.t.Helper()
	cs, err := tr.d.Plan(context.Background(), s)
	if err != nil {
		tr.t.Fatal(err)
	}
	got := []string{}
	for _, c := range cs {
		if c.Action != deploy.NoOp {
			got = append(got, c.String())
		}
	}
	return got
}

// sent is the TracingConfig mode of each UpdateFunctionConfiguration since the last call.
func (tr *tracing) sent() []string {
	tr.t.Helper()
	var modes []string
	for _, b := range tr.rec.take(http.MethodPut, "/2015-03-31/functions/"+tr.name+"/configuration") {
		var in struct{ TracingConfig *struct{ Mode string } }
		if err := json.Unmarshal(b, &in); err != nil || in.TracingConfig == nil {
			tr.t.Fatalf("UpdateFunctionConfiguration without TracingConfig: %s %v", b, err)
		}
		modes = append(modes, in.TracingConfig.Mode)
	}
	return modes
}

// xray reports whether the role policy has the XRay statement, and checks that statement exactly.
func (tr *tracing) xray() bool {
	tr.t.Helper()
	pol, err := tr.d.IAM.GetRolePolicy(context.Background(), &iam.GetRolePolicyInput{RoleName: aws.String(lambda.RoleName(tr.name)), PolicyName: aws.String("svz")})
	if err != nil {
		tr.t.Fatal(err)
	}
	doc, _ := url.QueryUnescape(aws.ToString(pol.PolicyDocument))
	p, err := awsdeploy.ParsePolicy(doc)
	if err != nil {
		tr.t.Fatal(err)
	}
	for _, st := range p.Statement {
		if st.Sid == "XRay" {
			want := awsdeploy.Statement{Sid: "XRay", Effect: "Allow", Action: awsdeploy.List{"xray:PutTraceSegments", "xray:PutTelemetryRecords"}, Resource: awsdeploy.List{"*"}}
			if !reflect.DeepEqual(st, want) {
				tr.t.Errorf("XRay statement %+v, want %+v", st, want)
			}
			return true
		}
	}
	return false
}

// TestDeployTracingActive: Service.ActiveTracing (--tracing active) creates the function with
// X-Ray active tracing and lets its role write to X-Ray; the plan reads the mode back, so a second
// plan is empty and a redeploy changes nothing; turning it off plans and sends PassThrough and
// drops the statement.
func TestDeployTracingActive(t *testing.T) {
	tr := newTracing(t, "svzxa")
	active, off := tr.service(true), tr.service(false)
	n := tr.name
	want := []string{"create  iam-role " + n + "-lambda", "create  dynamodb-table " + n, "create  sqs-queue " + n + "-jobs-dlq", "create  sqs-queue " + n + "-jobs",
		"create  lambda-function " + n, "create  function-url " + n, "create  lambda-permission " + n + " public invoke",
		"create  event-source-mapping " + n + "-jobs → " + n, "create  event-source-mapping " + n + "-jobs-dlq → " + n}
	if got := tr.plan(active); !reflect.DeepEqual(got, want) {
		t.Fatalf("plan before create\n%q\nwant\n%q", got, want)
	}
	tr.deploy(active)
	if m := tr.mode(); m != lambdatypes.TracingModeActive {
		t.Errorf("created with tracing %s, want Active", m)
	}
	if !tr.xray() {
		t.Error("the role of an actively traced function cannot write to X-Ray")
	}
	if got := tr.plan(active); len(got) != 0 {
		t.Fatalf("second plan %q, want nothing", got)
	}
	if dep := tr.deploy(active); deploy.Changed(dep.Changes) || tr.sent() != nil {
		t.Fatalf("redeploy changed %v, sent %q", dep.Changes, tr.sent())
	}

	want = []string{"update  iam-role " + n + "-lambda (inline policy)", "update  lambda-function " + n + " (tracing Active → PassThrough)"}
	if got := tr.plan(off); !reflect.DeepEqual(got, want) {
		t.Fatalf("plan turning it off\n%q\nwant\n%q", got, want)
	}
	tr.deploy(off)
	if got := tr.sent(); !reflect.DeepEqual(got, []string{"PassThrough"}) {
		t.Errorf("turning it off sent %q, want [PassThrough]", got)
	}
	if tr.xray() {
		t.Error("the XRay statement outlived --tracing active")
	}
	// What moto cannot show (it keeps Active): the plan after turning it off is empty.
	if tr.mode() == lambdatypes.TracingModePassThrough {
		if got := tr.plan(off); len(got) != 0 {
			t.Fatalf("plan after turning it off %q, want nothing", got)
		}
	} else if got := tr.plan(off); !reflect.DeepEqual(got, want[1:]) {
		t.Fatalf("plan after turning it off %q, want only moto's stale mode %q", got, want[1:])
	}
}

// TestDeployTracingByUpdate: PassThrough (the default) creates the function without X-Ray access;
// turning tracing on later is an update of role and configuration that sends Active.
func TestDeployTracingByUpdate(t *testing.T) {
	tr := newTracing(t, "svzxu")
	tr.deploy(tr.service(false))
	if m := tr.mode(); m != lambdatypes.TracingModePassThrough {
		t.Errorf("created with tracing %s, want PassThrough", m)
	}
	if tr.xray() {
		t.Error("a PassThrough function's role may write to X-Ray")
	}
	if got := tr.plan(tr.service(false)); len(got) != 0 {
		t.Fatalf("second plan %q, want nothing", got)
	}
	n := tr.name
	want := []string{"update  iam-role " + n + "-lambda (inline policy)", "update  lambda-function " + n + " (tracing PassThrough → Active)"}
	if got := tr.plan(tr.service(true)); !reflect.DeepEqual(got, want) {
		t.Fatalf("plan turning it on\n%q\nwant\n%q", got, want)
	}
	dep := tr.deploy(tr.service(true))
	if got := tr.sent(); !reflect.DeepEqual(got, []string{"Active"}) {
		t.Errorf("turning it on sent %q, want [Active]", got)
	}
	if !tr.xray() {
		t.Error("turning tracing on left the role without X-Ray access")
	}
	if dep.Rollback == nil {
		t.Error("an update without rollback")
	}
}

// recorder passes requests on and keeps their bodies.
type recorder struct {
	mu     sync.Mutex
	bodies map[string][][]byte // "METHOD path" → bodies, oldest first
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		b, err := io.ReadAll(req.Body)
		if err != nil {
			return nil, err
		}
		req.Body = io.NopCloser(bytes.NewReader(b))
		r.mu.Lock()
		if r.bodies == nil {
			r.bodies = map[string][][]byte{}
		}
		k := req.Method + " " + req.URL.Path
		r.bodies[k] = append(r.bodies[k], b)
		r.mu.Unlock()
	}
	return http.DefaultTransport.RoundTrip(req)
}

// take returns and forgets the bodies sent with method to path.
func (r *recorder) take(method, path string) [][]byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	k := method + " " + path
	b := r.bodies[k]
	delete(r.bodies, k)
	return b
}
