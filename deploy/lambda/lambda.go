// Package lambda deploys the controller as an AWS Lambda image function behind a Function URL.
//
// Per service it owns: the function {name}-{env} (image by digest, arm64 by default), its Function
// URL (auth NONE: Studio authenticates with X-API-Key and grant tokens) with the two public-invoke
// permissions AWS requires, an execution role {name}-{env}-lambda whose inline policy allows exactly
// its log group, GetSecretValue on its own secrets, item access to its store table, and its jobs
// queue (send; receive, delete and read attributes for the event source mapping), and with
// --tracing active X-Ray's two write actions (the function then has X-Ray active tracing), that
// DynamoDB table {name}-{env} (on demand, partition key "k" of type S, TTL on "ttl": the schema
// core/store/dynamodb checks, see awsdeploy.StoreTable), and the SQS queue of background work
// {name}-{env}-jobs with its dead-letter queue {name}-{env}-jobs-dlq (awsdeploy.JobsQueues) and
// the event source mappings that deliver the messages of both to the function (batch size 1,
// partial batch failures reported): a task message runs its task, a dead-lettered one fails its
// job saying why. svz cannot tell cheaply whether the agent defines background work
// (that takes running the binary), so the queues exist for every Lambda service; they cost
// nothing while empty. Secrets reach the function as *_SECRET_ARN variables the controller
// resolves at init.
//
// Rollback restores the image and configuration the function had before the update.
package lambda

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/ecr"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	awslambda "github.com/aws/aws-sdk-go-v2/service/lambda"
	lambdatypes "github.com/aws/aws-sdk-go-v2/service/lambda/types"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/supervaize/svz/deploy"
	"github.com/supervaize/svz/deploy/awsdeploy"
	"github.com/supervaize/svz/internal/awsapi"
)

// Store table schema: the one core/store/dynamodb checks at start.
const (
	TableKey          = awsdeploy.TableKey
	TableTTLAttribute = awsdeploy.TableTTLAttribute
)

// Function settings.
const (
	MemoryMB       = 512
	TimeoutSeconds = 60
	// SecretARNSuffix is appended to a secret variable's name to pass its ARN.
	SecretARNSuffix = "_SECRET_ARN"
	// EnvInvokeMode tells the controller the Function URL's invoke mode.
	EnvInvokeMode = "SUPERVAIZER_LAMBDA_INVOKE_MODE"
	// EnvJobsQueueURL, EnvJobsMaxReceives and EnvJobsDeadLetterARN tell the controller its jobs
	// queue, the queue's maxReceiveCount and its dead-letter queue (adapters/lambda reads them).
	EnvJobsQueueURL      = "SUPERVAIZER_JOBS_QUEUE_URL"
	EnvJobsMaxReceives   = "SUPERVAIZER_JOBS_MAX_RECEIVES"
	EnvJobsDeadLetterARN = "SUPERVAIZER_JOBS_DEAD_LETTER_ARN"
	// JobsBatchSize is how many messages one invocation gets: one, so every delivery has the
	// whole function timeout.
	JobsBatchSize = 1
)

// SecretVars are the secrets the controller resolves from *_SECRET_ARN at init on Lambda (the
// Studio key lets an instance look its agents' parameters up).
var SecretVars = []string{deploy.EnvAPIKey, deploy.EnvPrivateKey, deploy.EnvStudioAPIKey}

// Statement ids of the Function URL permissions.
const (
	sidURL    = "svz-function-url"
	sidInvoke = "svz-function-url-invoke"
)

// Driver deploys to Lambda.
type Driver struct {
	Lambda   *awslambda.Client
	IAM      *iam.Client
	DynamoDB *dynamodb.Client
	SQS      *awsapi.Client
	Account  string
	Region   string
	// InvokeMode of the Function URL; empty means RESPONSE_STREAM (SSE at /a2a/events streams).
	InvokeMode lambdatypes.InvokeMode
	// RoleWait bounds retries of CreateFunction while a new role propagates; 0 means 2 minutes.
	RoleWait time.Duration
}

var _ deploy.Driver = (*Driver)(nil)

func (d *Driver) roles() *awsdeploy.Roles { return &awsdeploy.Roles{Client: d.IAM} }

func (d *Driver) table() *awsdeploy.StoreTable { return &awsdeploy.StoreTable{Client: d.DynamoDB} }

func (d *Driver) queues() *awsdeploy.JobsQueues {
	return &awsdeploy.JobsQueues{Client: d.SQS, Region: d.Region, Account: d.Account}
}

func (d *Driver) queueARN(service string) string {
	return awsdeploy.QueueARN(d.Region, d.Account, awsdeploy.JobsQueueName(service))
}

func (d *Driver) deadLetterARN(service string) string {
	return awsdeploy.QueueARN(d.Region, d.Account, awsdeploy.JobsDeadLetterName(service))
}

// mapped are the queues whose event source mappings deliver to the function: the jobs queue,
// then its dead-letter queue, by name.
func mapped(service string) []string {
	return []string{awsdeploy.JobsQueueName(service), awsdeploy.JobsDeadLetterName(service)}
}

func (d *Driver) invokeMode() lambdatypes.InvokeMode {
	if d.InvokeMode == "" {
		return lambdatypes.InvokeModeResponseStream
	}
	return d.InvokeMode
}

// RoleName is the execution role of a service.
func RoleName(service string) string { return service + "-lambda" }

// role is the least-privilege execution role of the service.
func (d *Driver) role(s deploy.Service) awsdeploy.Role {
	logGroup := fmt.Sprintf("arn:aws:logs:%s:%s:log-group:/aws/lambda/%s", d.Region, d.Account, s.Name)
	st := []awsdeploy.Statement{
		{Sid: "Logs", Action: awsdeploy.List{"logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents"},
			Resource: awsdeploy.List{logGroup, logGroup + ":*"}},
		awsdeploy.TableStatement(awsdeploy.TableARN(d.Region, d.Account, s.Name)),
	}
	st = append(st, awsdeploy.JobsStatements(d.queueARN(s.Name), d.deadLetterARN(s.Name))...)
	if arns := awsdeploy.SecretARNs(s); len(arns) > 0 {
		st = append(st, awsdeploy.Statement{Sid: "Secrets", Action: awsdeploy.List{"secretsmanager:GetSecretValue"}, Resource: arns})
	}
	if s.ActiveTracing {
		// Active tracing sends Lambda's segments with the function's role; X-Ray's write actions
		// take no resource narrower than "*".
		st = append(st, awsdeploy.Statement{Sid: "XRay", Action: awsdeploy.List{"xray:PutTraceSegments", "xray:PutTelemetryRecords"}, Resource: awsdeploy.List{"*"}})
	}
	p := awsdeploy.NewPolicy(st...)
	return awsdeploy.Role{Name: RoleName(s.Name), Trust: awsdeploy.TrustPolicy("lambda.amazonaws.com"), Inline: &p}
}

// Env is the function's environment: plain variables, secret ARNs, the store settings and the
// invoke mode.
func (d *Driver) Env(s deploy.Service) map[string]string {
	env := make(map[string]string, len(s.Env)+len(s.Secrets)+2)
	for k, v := range s.Env {
		env[k] = v
	}
	for k, ref := range s.Secrets {
		env[k+SecretARNSuffix] = ref.ID
	}
	env["SUPERVAIZER_STORE"] = "dynamodb"
	env["SUPERVAIZER_STORE_TABLE"] = s.Name
	env[EnvInvokeMode] = string(d.invokeMode())
	env[EnvJobsQueueURL] = awsdeploy.QueueURL(d.Region, d.Account, awsdeploy.JobsQueueName(s.Name))
	env[EnvJobsMaxReceives] = strconv.Itoa(awsdeploy.JobsMaxReceives)
	env[EnvJobsDeadLetterARN] = d.deadLetterARN(s.Name)
	return env
}

func lambdaArch(a string) lambdatypes.Architecture {
	if a == "arm64" {
		return lambdatypes.ArchitectureArm64
	}
	return lambdatypes.ArchitectureX8664
}

// tracingMode is the function's TracingConfig mode for s: Active (X-Ray active tracing) or
// PassThrough, Lambda's default.
func tracingMode(s deploy.Service) lambdatypes.TracingMode {
	if s.ActiveTracing {
		return lambdatypes.TracingModeActive
	}
	return lambdatypes.TracingModePassThrough
}

// fnState is the part of a function svz manages.
type fnState struct {
	ours   bool // tagged managed-by=svz
	arn    string
	image  string
	arch   lambdatypes.Architecture
	role   string
	memory int32
	tmo    int32
	env    map[string]string
	trace  lambdatypes.TracingMode
}

func (d *Driver) readFunction(ctx context.Context, name string) (*fnState, *awslambda.GetFunctionOutput, error) {
	out, err := d.Lambda.GetFunction(ctx, &awslambda.GetFunctionInput{FunctionName: aws.String(name)})
	var nf *lambdatypes.ResourceNotFoundException
	switch {
	case errors.As(err, &nf):
		return nil, nil, nil
	case err != nil:
		return nil, nil, fmt.Errorf("lambda:GetFunction %s: %w", name, err)
	}
	c := out.Configuration
	st := &fnState{arn: aws.ToString(c.FunctionArn),
		role: aws.ToString(c.Role), memory: aws.ToInt32(c.MemorySize), tmo: aws.ToInt32(c.Timeout), env: map[string]string{}}
	// GetFunction returns tags only to callers allowed lambda:ListTags; asking explicitly turns a
	// missing permission into an error instead of "not svz's".
	tags, err := d.Lambda.ListTags(ctx, &awslambda.ListTagsInput{Resource: c.FunctionArn})
	if err != nil {
		return nil, nil, fmt.Errorf("lambda:ListTags %s: %w", name, err)
	}
	st.ours = tags.Tags[awsdeploy.ManagedByTag] == awsdeploy.ManagedByValue
	if out.Code != nil {
		st.image = aws.ToString(out.Code.ImageUri)
	}
	if len(c.Architectures) > 0 {
		st.arch = c.Architectures[0]
	}
	if c.Environment != nil && c.Environment.Variables != nil {
		st.env = c.Environment.Variables
	}
	if c.TracingConfig != nil {
		st.trace = c.TracingConfig.Mode
	}
	return st, out, nil
}

// notOurs refuses to change or delete a function svz did not create.
func notOurs(name, arn string) error {
	return &deploy.NotManagedError{Kind: "lambda function", Name: name,
		Adopt: "aws lambda tag-resource --resource " + arn + " --tags " + awsdeploy.ManagedByTag + "=" + awsdeploy.ManagedByValue}
}

func (d *Driver) want(s deploy.Service, roleARN string) fnState {
	return fnState{image: s.Image, arch: lambdaArch(s.Arch), role: roleARN, memory: MemoryMB, tmo: TimeoutSeconds, env: d.Env(s),
		trace: tracingMode(s)}
}

// codeDiff and configDiff describe what an update changes ("" when nothing).
func codeDiff(live, want fnState) string {
	var d []string
	if live.image != want.image {
		d = append(d, "image "+deploy.ShortDigest(live.image)+" → "+deploy.ShortDigest(want.image))
	}
	if live.arch != want.arch {
		d = append(d, fmt.Sprintf("architecture %s → %s", live.arch, want.arch))
	}
	return strings.Join(d, ", ")
}

func configDiff(live, want fnState) string {
	var d []string
	if live.role != want.role {
		d = append(d, "role")
	}
	if live.memory != want.memory || live.tmo != want.tmo {
		d = append(d, "memory/timeout")
	}
	if e := deploy.DiffEnv(live.env, want.env); e != "" {
		d = append(d, "env "+e)
	}
	if live.trace != want.trace {
		d = append(d, fmt.Sprintf("tracing %s → %s", live.trace, want.trace))
	}
	return strings.Join(d, ", ")
}

func joinDiff(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + ", " + b
}

// Plan reports what Deploy would change.
func (d *Driver) Plan(ctx context.Context, s deploy.Service) ([]deploy.Change, error) {
	role := d.role(s)
	rc, err := d.roles().Plan(ctx, role)
	if err != nil {
		return nil, err
	}
	changes := []deploy.Change{rc}
	tc, err := d.table().Plan(ctx, s.Name)
	if err != nil {
		return nil, err
	}
	changes = append(changes, tc)
	qc, err := d.queues().Plan(ctx, s.Name, awsdeploy.JobsVisibility(TimeoutSeconds))
	if err != nil {
		return nil, err
	}
	changes = append(changes, qc...)

	fc := deploy.Change{Resource: "lambda-function", Name: s.Name}
	live, _, err := d.readFunction(ctx, s.Name)
	if err != nil {
		return nil, err
	}
	if live != nil && !live.ours {
		return nil, notOurs(s.Name, live.arn)
	}
	roleARN := fmt.Sprintf("arn:aws:iam::%s:role/%s", d.Account, role.Name)
	if live == nil {
		fc.Action = deploy.Create
	} else {
		w := d.want(s, roleARN)
		fc.Detail = joinDiff(codeDiff(*live, w), configDiff(*live, w))
		fc.Action = deploy.NoOp
		if fc.Detail != "" {
			fc.Action = deploy.Update
		}
	}
	changes = append(changes, fc)
	uc, err := d.planURL(ctx, s.Name, live != nil)
	if err != nil {
		return nil, err
	}
	changes = append(changes, uc...)
	for _, queue := range mapped(s.Name) {
		mc := deploy.Change{Resource: "event-source-mapping", Name: mappingName(queue, s.Name), Action: deploy.Create}
		if live != nil {
			m, err := d.readMapping(ctx, s.Name, queue)
			if err != nil {
				return nil, err
			}
			if m != nil {
				mc.Action, mc.Detail = deploy.NoOp, mappingDiff(m)
				if mc.Detail != "" {
					mc.Action = deploy.Update
				}
			}
		}
		changes = append(changes, mc)
	}
	return changes, nil
}

// mappingName names an event source mapping in plans: the queue and the function.
func mappingName(queue, service string) string { return queue + " → " + service }

// readMapping returns the event source mapping from the service's queue to its function, nil
// when there is none.
func (d *Driver) readMapping(ctx context.Context, name, queue string) (*lambdatypes.EventSourceMappingConfiguration, error) {
	out, err := d.Lambda.ListEventSourceMappings(ctx, &awslambda.ListEventSourceMappingsInput{
		FunctionName: aws.String(name), EventSourceArn: aws.String(awsdeploy.QueueARN(d.Region, d.Account, queue)),
	})
	var nf *lambdatypes.ResourceNotFoundException
	switch {
	case errors.As(err, &nf):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("lambda:ListEventSourceMappings %s: %w", name, err)
	case len(out.EventSourceMappings) == 0:
		return nil, nil
	}
	return &out.EventSourceMappings[0], nil
}

// mappingDiff says what differs from the mapping svz wants ("" when nothing).
func mappingDiff(m *lambdatypes.EventSourceMappingConfiguration) string {
	var d []string
	if n := aws.ToInt32(m.BatchSize); n != JobsBatchSize {
		d = append(d, fmt.Sprintf("batch size %d → %d", n, JobsBatchSize))
	}
	if len(m.FunctionResponseTypes) != 1 || m.FunctionResponseTypes[0] != lambdatypes.FunctionResponseTypeReportBatchItemFailures {
		d = append(d, "response types → ReportBatchItemFailures")
	}
	return strings.Join(d, ", ")
}

// ensureMapping creates or fixes the event source mapping from the service's queue to the
// function.
func (d *Driver) ensureMapping(ctx context.Context, name, queue string) (deploy.Change, error) {
	c := deploy.Change{Resource: "event-source-mapping", Name: mappingName(queue, name), Action: deploy.NoOp}
	m, err := d.readMapping(ctx, name, queue)
	if err != nil {
		return c, err
	}
	types := []lambdatypes.FunctionResponseType{lambdatypes.FunctionResponseTypeReportBatchItemFailures}
	switch {
	case m == nil:
		in := &awslambda.CreateEventSourceMappingInput{
			FunctionName: aws.String(name), EventSourceArn: aws.String(awsdeploy.QueueARN(d.Region, d.Account, queue)), Enabled: aws.Bool(true),
			BatchSize: aws.Int32(JobsBatchSize), FunctionResponseTypes: types,
			Tags: map[string]string{awsdeploy.ManagedByTag: awsdeploy.ManagedByValue},
		}
		// Lambda checks that the function's role may poll the queue: a role policy just written
		// may not have propagated yet (IAM is eventually consistent).
		deadline := time.Now().Add(d.roleWait())
		for {
			_, err := d.Lambda.CreateEventSourceMapping(ctx, in)
			var ip *lambdatypes.InvalidParameterValueException
			if err != nil && errors.As(err, &ip) && strings.Contains(aws.ToString(ip.Message), "permissions") && time.Now().Before(deadline) {
				select {
				case <-ctx.Done():
					return c, fmt.Errorf("lambda:CreateEventSourceMapping %s: %w", name, ctx.Err())
				case <-time.After(3 * time.Second):
					continue
				}
			}
			if err != nil {
				return c, fmt.Errorf("lambda:CreateEventSourceMapping %s: %w", name, err)
			}
			break
		}
		c.Action = deploy.Create
	case mappingDiff(m) != "":
		c.Action, c.Detail = deploy.Update, mappingDiff(m)
		if _, err := d.Lambda.UpdateEventSourceMapping(ctx, &awslambda.UpdateEventSourceMappingInput{
			UUID: m.UUID, BatchSize: aws.Int32(JobsBatchSize), FunctionResponseTypes: types,
		}); err != nil {
			return c, fmt.Errorf("lambda:UpdateEventSourceMapping %s: %w", name, err)
		}
	}
	return c, nil
}

// deleteMapping removes the event source mapping from the service's queue to svz's function.
func (d *Driver) deleteMapping(ctx context.Context, name, queue string) (deploy.Change, error) {
	c := deploy.Change{Resource: "event-source-mapping", Name: mappingName(queue, name), Action: deploy.NoOp, Detail: "absent"}
	m, err := d.readMapping(ctx, name, queue)
	if err != nil || m == nil {
		return c, err
	}
	var nf *lambdatypes.ResourceNotFoundException
	if _, err := d.Lambda.DeleteEventSourceMapping(ctx, &awslambda.DeleteEventSourceMappingInput{UUID: m.UUID}); err != nil && !errors.As(err, &nf) {
		return c, fmt.Errorf("lambda:DeleteEventSourceMapping %s: %w", name, err)
	}
	c.Action, c.Detail = deploy.Delete, ""
	return c, nil
}

// planURL compares the Function URL and its permissions.
func (d *Driver) planURL(ctx context.Context, name string, fnExists bool) ([]deploy.Change, error) {
	uc := deploy.Change{Resource: "function-url", Name: name, Action: deploy.Create}
	pc := deploy.Change{Resource: "lambda-permission", Name: name + " public invoke", Action: deploy.Create}
	if !fnExists {
		return []deploy.Change{uc, pc}, nil
	}
	cfg, err := d.readURL(ctx, name)
	if err != nil {
		return nil, err
	}
	if cfg != nil {
		uc.Action, uc.Detail = deploy.NoOp, urlDiff(cfg, d.invokeMode())
		if uc.Detail != "" {
			uc.Action = deploy.Update
		}
	}
	sids, err := d.policySids(ctx, name)
	if err != nil {
		return nil, err
	}
	if sids[sidURL] && sids[sidInvoke] {
		pc.Action = deploy.NoOp
	}
	return []deploy.Change{uc, pc}, nil
}

func urlDiff(cfg *awslambda.GetFunctionUrlConfigOutput, mode lambdatypes.InvokeMode) string {
	var d []string
	if cfg.AuthType != lambdatypes.FunctionUrlAuthTypeNone {
		d = append(d, "auth "+string(cfg.AuthType)+" → NONE")
	}
	if !strings.EqualFold(string(cfg.InvokeMode), string(mode)) && !(cfg.InvokeMode == "" && mode == lambdatypes.InvokeModeBuffered) {
		d = append(d, "invoke mode "+string(cfg.InvokeMode)+" → "+string(mode))
	}
	return strings.Join(d, ", ")
}

func (d *Driver) readURL(ctx context.Context, name string) (*awslambda.GetFunctionUrlConfigOutput, error) {
	out, err := d.Lambda.GetFunctionUrlConfig(ctx, &awslambda.GetFunctionUrlConfigInput{FunctionName: aws.String(name)})
	var nf *lambdatypes.ResourceNotFoundException
	switch {
	case errors.As(err, &nf):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("lambda:GetFunctionUrlConfig %s: %w", name, err)
	}
	return out, nil
}

func (d *Driver) policySids(ctx context.Context, name string) (map[string]bool, error) {
	out, err := d.Lambda.GetPolicy(ctx, &awslambda.GetPolicyInput{FunctionName: aws.String(name)})
	var nf *lambdatypes.ResourceNotFoundException
	switch {
	case errors.As(err, &nf):
		return map[string]bool{}, nil
	case err != nil:
		return nil, fmt.Errorf("lambda:GetPolicy %s: %w", name, err)
	}
	var pol struct {
		Statement []struct {
			Sid string `json:"Sid"`
		} `json:"Statement"`
	}
	if err := json.Unmarshal([]byte(aws.ToString(out.Policy)), &pol); err != nil {
		return nil, fmt.Errorf("lambda:GetPolicy %s: parse: %w", name, err)
	}
	sids := map[string]bool{}
	for _, s := range pol.Statement {
		sids[s.Sid] = true
	}
	return sids, nil
}

// Deploy converges role, table, function, URL and permissions.
func (d *Driver) Deploy(ctx context.Context, s deploy.Service) (deploy.Deployment, error) {
	var dep deploy.Deployment
	// Someone else's function is refused before anything is created for it.
	if live, _, err := d.readFunction(ctx, s.Name); err != nil {
		return dep, err
	} else if live != nil && !live.ours {
		return dep, notOurs(s.Name, live.arn)
	}
	// So are queues of its names that svz did not create.
	if _, err := d.queues().Plan(ctx, s.Name, awsdeploy.JobsVisibility(TimeoutSeconds)); err != nil {
		return dep, err
	}
	roleARN, rc, err := d.roles().Ensure(ctx, d.role(s))
	if err != nil {
		return dep, err
	}
	dep.Changes = append(dep.Changes, rc)
	tc, err := d.table().Ensure(ctx, s.Name)
	if err != nil {
		return dep, err
	}
	dep.Changes = append(dep.Changes, tc)
	qc, _, err := d.queues().Ensure(ctx, s.Name, awsdeploy.JobsVisibility(TimeoutSeconds))
	dep.Changes = append(dep.Changes, qc...)
	if err != nil {
		return dep, err
	}

	want := d.want(s, roleARN)
	live, _, err := d.readFunction(ctx, s.Name)
	if err != nil {
		return dep, err
	}
	fc := deploy.Change{Resource: "lambda-function", Name: s.Name, Action: deploy.NoOp}
	if live == nil {
		if err := d.create(ctx, s.Name, want); err != nil {
			return dep, err
		}
		fc.Action = deploy.Create
	} else if fc.Detail = joinDiff(codeDiff(*live, want), configDiff(*live, want)); fc.Detail != "" {
		fc.Action = deploy.Update
		prev := *live
		if err := d.apply(ctx, s.Name, *live, want); err != nil {
			return dep, d.restoreAfter(ctx, s.Name, prev, err)
		}
		dep.Rollback = func(ctx context.Context) error {
			cur, _, err := d.readFunction(ctx, s.Name)
			if err != nil {
				return err
			}
			if cur == nil {
				return fmt.Errorf("function %s: %w", s.Name, deploy.ErrNotFound)
			}
			return d.apply(ctx, s.Name, *cur, prev)
		}
	}
	dep.Changes = append(dep.Changes, fc)

	ucs, url, err := d.ensureURL(ctx, s.Name)
	if err != nil {
		return dep, err
	}
	dep.Changes = append(dep.Changes, ucs...)
	for _, queue := range mapped(s.Name) {
		mc, err := d.ensureMapping(ctx, s.Name, queue)
		if err != nil {
			return dep, err
		}
		dep.Changes = append(dep.Changes, mc)
	}
	dep.Live, err = d.Inspect(ctx, s.Name)
	if err != nil {
		return dep, err
	}
	dep.Live.URL = url
	return dep, nil
}

// restoreAfter puts prev back when an update failed half way, and reports both.
func (d *Driver) restoreAfter(ctx context.Context, name string, prev fnState, cause error) error {
	cur, _, err := d.readFunction(ctx, name)
	if err == nil && cur != nil {
		err = d.apply(ctx, name, *cur, prev)
	}
	if err != nil {
		return errors.Join(cause, fmt.Errorf("restore %s: %w", name, err))
	}
	return fmt.Errorf("%w (previous version restored)", cause)
}

func (d *Driver) roleWait() time.Duration {
	if d.RoleWait > 0 {
		return d.RoleWait
	}
	return 2 * time.Minute
}

// create makes the function, retrying while a new role is not yet assumable (IAM is eventually
// consistent).
func (d *Driver) create(ctx context.Context, name string, w fnState) error {
	in := &awslambda.CreateFunctionInput{
		FunctionName:  aws.String(name),
		PackageType:   lambdatypes.PackageTypeImage,
		Code:          &lambdatypes.FunctionCode{ImageUri: aws.String(w.image)},
		Role:          aws.String(w.role),
		Architectures: []lambdatypes.Architecture{w.arch},
		MemorySize:    aws.Int32(w.memory),
		Timeout:       aws.Int32(w.tmo),
		Environment:   &lambdatypes.Environment{Variables: w.env},
		TracingConfig: &lambdatypes.TracingConfig{Mode: w.trace},
		Description:   aws.String("Supervaizer controller, managed by svz deploy"),
		Tags:          map[string]string{awsdeploy.ManagedByTag: awsdeploy.ManagedByValue},
	}
	deadline := time.Now().Add(d.roleWait())
	for {
		_, err := d.Lambda.CreateFunction(ctx, in)
		var ip *lambdatypes.InvalidParameterValueException
		if err != nil && errors.As(err, &ip) && strings.Contains(aws.ToString(ip.Message), "cannot be assumed") && time.Now().Before(deadline) {
			select {
			case <-ctx.Done():
				return fmt.Errorf("lambda:CreateFunction %s: %w", name, ctx.Err())
			case <-time.After(3 * time.Second):
				continue
			}
		}
		if err != nil {
			return fmt.Errorf("lambda:CreateFunction %s: %w", name, err)
		}
		break
	}
	if err := awslambda.NewFunctionActiveV2Waiter(d.Lambda).Wait(ctx, &awslambda.GetFunctionInput{FunctionName: aws.String(name)}, 5*time.Minute); err != nil {
		return fmt.Errorf("wait for function %s to be active: %w", name, err)
	}
	return nil
}

// apply updates code then configuration, each only when it differs, waiting for each update.
func (d *Driver) apply(ctx context.Context, name string, live, w fnState) error {
	wait := func() error {
		if err := awslambda.NewFunctionUpdatedV2Waiter(d.Lambda).Wait(ctx, &awslambda.GetFunctionInput{FunctionName: aws.String(name)}, 5*time.Minute); err != nil {
			return fmt.Errorf("wait for function %s update: %w", name, err)
		}
		return nil
	}
	if codeDiff(live, w) != "" {
		if _, err := d.Lambda.UpdateFunctionCode(ctx, &awslambda.UpdateFunctionCodeInput{
			FunctionName: aws.String(name), ImageUri: aws.String(w.image), Architectures: []lambdatypes.Architecture{w.arch},
		}); err != nil {
			return fmt.Errorf("lambda:UpdateFunctionCode %s: %w", name, err)
		}
		if err := wait(); err != nil {
			return err
		}
	}
	if configDiff(live, w) != "" {
		if _, err := d.Lambda.UpdateFunctionConfiguration(ctx, &awslambda.UpdateFunctionConfigurationInput{
			FunctionName: aws.String(name), Role: aws.String(w.role),
			MemorySize: aws.Int32(w.memory), Timeout: aws.Int32(w.tmo),
			Environment: &lambdatypes.Environment{Variables: w.env}, TracingConfig: &lambdatypes.TracingConfig{Mode: w.trace},
		}); err != nil {
			return fmt.Errorf("lambda:UpdateFunctionConfiguration %s: %w", name, err)
		}
		if err := wait(); err != nil {
			return err
		}
	}
	return nil
}

// ensureURL creates or fixes the Function URL and its public-invoke permissions. Since October
// 2025 a public URL needs both lambda:InvokeFunctionUrl and lambda:InvokeFunction (the latter
// limited to calls made through the URL).
func (d *Driver) ensureURL(ctx context.Context, name string) ([]deploy.Change, string, error) {
	uc := deploy.Change{Resource: "function-url", Name: name, Action: deploy.NoOp}
	cfg, err := d.readURL(ctx, name)
	if err != nil {
		return nil, "", err
	}
	var url string
	switch {
	case cfg == nil:
		out, err := d.Lambda.CreateFunctionUrlConfig(ctx, &awslambda.CreateFunctionUrlConfigInput{
			FunctionName: aws.String(name), AuthType: lambdatypes.FunctionUrlAuthTypeNone, InvokeMode: d.invokeMode(),
		})
		if err != nil {
			return nil, "", fmt.Errorf("lambda:CreateFunctionUrlConfig %s: %w", name, err)
		}
		uc.Action, url = deploy.Create, aws.ToString(out.FunctionUrl)
	case urlDiff(cfg, d.invokeMode()) != "":
		uc.Action, uc.Detail = deploy.Update, urlDiff(cfg, d.invokeMode())
		out, err := d.Lambda.UpdateFunctionUrlConfig(ctx, &awslambda.UpdateFunctionUrlConfigInput{
			FunctionName: aws.String(name), AuthType: lambdatypes.FunctionUrlAuthTypeNone, InvokeMode: d.invokeMode(),
		})
		if err != nil {
			return nil, "", fmt.Errorf("lambda:UpdateFunctionUrlConfig %s: %w", name, err)
		}
		url = aws.ToString(out.FunctionUrl)
	default:
		url = aws.ToString(cfg.FunctionUrl)
	}
	pc := deploy.Change{Resource: "lambda-permission", Name: name + " public invoke", Action: deploy.NoOp}
	sids, err := d.policySids(ctx, name)
	if err != nil {
		return nil, "", err
	}
	perms := []*awslambda.AddPermissionInput{
		{FunctionName: aws.String(name), StatementId: aws.String(sidURL), Action: aws.String("lambda:InvokeFunctionUrl"),
			Principal: aws.String("*"), FunctionUrlAuthType: lambdatypes.FunctionUrlAuthTypeNone},
		{FunctionName: aws.String(name), StatementId: aws.String(sidInvoke), Action: aws.String("lambda:InvokeFunction"),
			Principal: aws.String("*"), InvokedViaFunctionUrl: aws.Bool(true)},
	}
	for _, p := range perms {
		if sids[aws.ToString(p.StatementId)] {
			continue
		}
		_, err := d.Lambda.AddPermission(ctx, p)
		var conflict *lambdatypes.ResourceConflictException
		if err != nil && !errors.As(err, &conflict) {
			return nil, "", fmt.Errorf("lambda:AddPermission %s %s: %w", name, aws.ToString(p.StatementId), err)
		}
		pc.Action = deploy.Create
	}
	return []deploy.Change{uc, pc}, strings.TrimRight(url, "/"), nil
}

// Inspect reads the function and its URL.
func (d *Driver) Inspect(ctx context.Context, name string) (deploy.Live, error) {
	st, out, err := d.readFunction(ctx, name)
	if err != nil {
		return deploy.Live{}, err
	}
	if st == nil {
		return deploy.Live{}, fmt.Errorf("function %s: %w", name, deploy.ErrNotFound)
	}
	c := out.Configuration
	live := deploy.Live{
		Name: name, Image: st.image, Env: st.env,
		Revision: shortSHA(aws.ToString(c.CodeSha256)),
		Ready:    c.State == lambdatypes.StateActive && (c.LastUpdateStatus == "" || c.LastUpdateStatus == lambdatypes.LastUpdateStatusSuccessful),
	}
	cfg, err := d.readURL(ctx, name)
	if err != nil {
		return deploy.Live{}, err
	}
	if cfg != nil {
		live.URL = strings.TrimRight(aws.ToString(cfg.FunctionUrl), "/")
	}
	return live, nil
}

func shortSHA(s string) string {
	if len(s) > 12 {
		return s[:12]
	}
	return s
}

// Delete removes the event source mapping, URL, function, role and jobs queues; with purge also
// the store table. What svz did not create is kept and reported as such.
func (d *Driver) Delete(ctx context.Context, name string, purge bool) ([]deploy.Change, error) {
	var cs []deploy.Change
	live, _, err := d.readFunction(ctx, name)
	if err != nil {
		return nil, err
	}
	if live != nil && !live.ours {
		cs = append(cs, deploy.KeptChange("function-url", name), deploy.KeptChange("lambda-function", name))
		return d.deleteRest(ctx, name, purge, cs)
	}
	// The mappings first: a function's mappings outlive it otherwise.
	for _, queue := range mapped(name) {
		mc, err := d.deleteMapping(ctx, name, queue)
		if err != nil {
			return cs, err
		}
		cs = append(cs, mc)
	}
	var nf *lambdatypes.ResourceNotFoundException
	uc := deploy.Change{Resource: "function-url", Name: name, Action: deploy.Delete}
	if _, err := d.Lambda.DeleteFunctionUrlConfig(ctx, &awslambda.DeleteFunctionUrlConfigInput{FunctionName: aws.String(name)}); errors.As(err, &nf) {
		uc.Action, uc.Detail = deploy.NoOp, "absent"
	} else if err != nil {
		return cs, fmt.Errorf("lambda:DeleteFunctionUrlConfig %s: %w", name, err)
	}
	cs = append(cs, uc)
	fc := deploy.Change{Resource: "lambda-function", Name: name, Action: deploy.Delete}
	if _, err := d.Lambda.DeleteFunction(ctx, &awslambda.DeleteFunctionInput{FunctionName: aws.String(name)}); errors.As(err, &nf) {
		fc.Action, fc.Detail = deploy.NoOp, "absent"
	} else if err != nil {
		return cs, fmt.Errorf("lambda:DeleteFunction %s: %w", name, err)
	}
	cs = append(cs, fc)
	return d.deleteRest(ctx, name, purge, cs)
}

// deleteRest removes the role, the jobs queues and, with purge, the store table, each only when
// svz created it.
func (d *Driver) deleteRest(ctx context.Context, name string, purge bool, cs []deploy.Change) ([]deploy.Change, error) {
	rc, err := d.roles().Delete(ctx, RoleName(name))
	cs = append(cs, rc)
	if err != nil {
		return cs, err
	}
	qc, err := d.queues().Delete(ctx, name)
	cs = append(cs, qc...)
	if err != nil {
		return cs, err
	}
	tc := deploy.Change{Resource: "dynamodb-table", Name: name, Action: deploy.NoOp, Detail: "kept (pass --purge to delete stored data)"}
	if purge {
		if tc, err = d.table().Delete(ctx, name, true); err != nil {
			return cs, err
		}
	}
	return append(cs, tc), nil
}

// NewPlatform assembles the Lambda platform from an AWS configuration.
func NewPlatform(ctx context.Context, cfg aws.Config) (deploy.Platform, error) {
	acct, err := awsdeploy.AccountID(ctx, cfg)
	if err != nil {
		return deploy.Platform{}, err
	}
	sqs, err := awsdeploy.NewSQS(cfg)
	if err != nil {
		return deploy.Platform{}, err
	}
	return deploy.Platform{
		Name:     deploy.PlatformLambda,
		Scope:    acct,
		Region:   cfg.Region,
		Registry: &awsdeploy.ECR{Client: ecr.NewFromConfig(cfg), Account: acct, Region: cfg.Region},
		Secrets:  &awsdeploy.SecretsManager{Client: secretsmanager.NewFromConfig(cfg)},
		Driver: &Driver{
			Lambda: awslambda.NewFromConfig(cfg), IAM: iam.NewFromConfig(cfg), DynamoDB: dynamodb.NewFromConfig(cfg), SQS: sqs,
			Account: acct, Region: cfg.Region,
		},
		DefaultArch: "arm64",
		SecretVars:  SecretVars,
	}, nil
}
