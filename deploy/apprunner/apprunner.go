// Package apprunner deploys the controller as an AWS App Runner service from an ECR image.
//
// Per service it owns: the service {name}-{env} (port 8000, health check on /.well-known/health,
// automatic deployments off: svz deploys by digest), an ECR access role {name}-{env}-apprunner-ecr
// (the managed AWSAppRunnerServicePolicyForECRAccess) and an instance role {name}-{env}-apprunner
// allowed GetSecretValue on exactly the service's secrets, which App Runner injects as
// RuntimeEnvironmentSecrets under the names the server reads.
//
// With SUPERVAIZER_STORE=dynamodb it also ensures the store's table (SUPERVAIZER_STORE_TABLE, by
// default {name}-{env}; see awsdeploy.StoreTable), allows the instance role the store's item access
// on exactly that table, and sets AWS_REGION, which the controller's DynamoDB client reads from its
// environment (App Runner's API reserves only PORT and names starting with AWSAPPRUNNER, so
// AWS_REGION can be set, and svz does not rely on the container getting it otherwise). Down with
// purge deletes that table only when svz created it.
//
// App Runner stopped accepting new customers on 2026-04-30: accounts that never used it cannot
// create services. Rollback re-applies the previous image and configuration.
package apprunner

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/apprunner"
	"github.com/aws/aws-sdk-go-v2/service/apprunner/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/ecr"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/supervaize/svz/deploy"
	"github.com/supervaize/svz/deploy/awsdeploy"
)

// Notice is shown before plan and up.
const Notice = "AWS App Runner stopped accepting new customers on 2026-04-30: only accounts that already used it can create services; prefer --platform lambda for new accounts"

// Service settings.
const (
	Port       = "8000"
	CPU        = "1024"
	Memory     = "2048"
	HealthPath = "/.well-known/health"
	// ECRAccessPolicy is the managed policy of the ECR access role.
	ECRAccessPolicy = "arn:aws:iam::aws:policy/service-role/AWSAppRunnerServicePolicyForECRAccess"
	// EnvRegion is set to the service's region when the store is DynamoDB.
	EnvRegion = "AWS_REGION"
)

// Driver deploys to App Runner.
type Driver struct {
	AppRunner *apprunner.Client
	IAM       *iam.Client
	// DynamoDB, Account and Region serve the store table (SUPERVAIZER_STORE=dynamodb).
	DynamoDB *dynamodb.Client
	Account  string
	Region   string
	// Poll is the pause between status checks; 0 means 5 seconds.
	Poll time.Duration
	// Wait bounds one create, update or delete; 0 means 20 minutes.
	Wait time.Duration
}

var _ deploy.Driver = (*Driver)(nil)

func (d *Driver) roles() *awsdeploy.Roles { return &awsdeploy.Roles{Client: d.IAM} }

func (d *Driver) table() *awsdeploy.StoreTable { return &awsdeploy.StoreTable{Client: d.DynamoDB} }

// tableOf is the DynamoDB table of the controller's store given its environment: the
// SUPERVAIZER_STORE_TABLE, by default the service's name; "" when the store is not DynamoDB.
func tableOf(name string, env map[string]string) string {
	if !deploy.StoreIsDynamoDB(env[deploy.EnvStore]) {
		return ""
	}
	if t := strings.TrimSpace(env[deploy.EnvStoreTable]); t != "" {
		return t
	}
	return name
}

// Role names of a service.
func AccessRoleName(service string) string   { return service + "-apprunner-ecr" }
func InstanceRoleName(service string) string { return service + "-apprunner" }

func repoType(image string) types.ImageRepositoryType {
	if strings.HasPrefix(image, "public.ecr.aws/") {
		return types.ImageRepositoryTypeEcrPublic
	}
	return types.ImageRepositoryTypeEcr
}

func (d *Driver) wantRoles(s deploy.Service) []awsdeploy.Role {
	inst := awsdeploy.Role{Name: InstanceRoleName(s.Name), Trust: awsdeploy.TrustPolicy("tasks.apprunner.amazonaws.com")}
	var st []awsdeploy.Statement
	if arns := awsdeploy.SecretARNs(s); len(arns) > 0 {
		st = append(st, awsdeploy.Statement{Sid: "Secrets", Action: awsdeploy.List{"secretsmanager:GetSecretValue"}, Resource: arns})
	}
	if t := tableOf(s.Name, s.Env); t != "" {
		st = append(st, awsdeploy.TableStatement(awsdeploy.TableARN(d.Region, d.Account, t)))
	}
	if len(st) > 0 {
		p := awsdeploy.NewPolicy(st...)
		inst.Inline = &p
	}
	roles := []awsdeploy.Role{inst}
	if repoType(s.Image) == types.ImageRepositoryTypeEcr {
		roles = append(roles, awsdeploy.Role{Name: AccessRoleName(s.Name), Trust: awsdeploy.TrustPolicy("build.apprunner.amazonaws.com"), Managed: []string{ECRAccessPolicy}})
	}
	return roles
}

// spec is the part of a service svz manages.
type spec struct {
	source   types.SourceConfiguration
	instance types.InstanceConfiguration
}

// EnvPlatform tells the controller it runs on App Runner, which its environment does not show
// otherwise: it then refuses background work at start (package platform).
const EnvPlatform = "SUPERVAIZER_PLATFORM"

// Env is the service's plain environment: s.Env, SUPERVAIZER_PLATFORM=app-runner, and with a
// DynamoDB store its table and region.
func (d *Driver) Env(s deploy.Service) map[string]string {
	env := maps.Clone(s.Env)
	env[EnvPlatform] = "app-runner"
	if t := tableOf(s.Name, s.Env); t != "" {
		env[deploy.EnvStoreTable] = t
		env[EnvRegion] = d.Region
	}
	return env
}

func (d *Driver) want(s deploy.Service, instanceRole, accessRole string) spec {
	secrets := map[string]string{}
	for k, ref := range s.Secrets {
		secrets[k] = ref.ID
	}
	src := types.SourceConfiguration{
		AutoDeploymentsEnabled: aws.Bool(false),
		ImageRepository: &types.ImageRepository{
			ImageIdentifier:     aws.String(s.Image),
			ImageRepositoryType: repoType(s.Image),
			ImageConfiguration: &types.ImageConfiguration{
				Port:                        aws.String(Port),
				RuntimeEnvironmentVariables: d.Env(s),
				RuntimeEnvironmentSecrets:   secrets,
			},
		},
	}
	if accessRole != "" {
		src.AuthenticationConfiguration = &types.AuthenticationConfiguration{AccessRoleArn: aws.String(accessRole)}
	}
	return spec{
		source:   src,
		instance: types.InstanceConfiguration{Cpu: aws.String(CPU), Memory: aws.String(Memory), InstanceRoleArn: aws.String(instanceRole)},
	}
}

func healthCheck() *types.HealthCheckConfiguration {
	return &types.HealthCheckConfiguration{Protocol: types.HealthCheckProtocolHttp, Path: aws.String(HealthPath)}
}

func liveSpec(svc *types.Service) spec {
	var sp spec
	if svc.SourceConfiguration != nil {
		sp.source = *svc.SourceConfiguration
	}
	if svc.InstanceConfiguration != nil {
		sp.instance = *svc.InstanceConfiguration
	}
	return sp
}

// diff describes how live differs from want ("" when equal).
func diff(live, want spec) string {
	li, wi := live.source.ImageRepository, want.source.ImageRepository
	if li == nil {
		li = &types.ImageRepository{}
	}
	lc := li.ImageConfiguration
	if lc == nil {
		lc = &types.ImageConfiguration{}
	}
	wc := wi.ImageConfiguration
	var d []string
	if aws.ToString(li.ImageIdentifier) != aws.ToString(wi.ImageIdentifier) {
		d = append(d, "image "+deploy.ShortDigest(aws.ToString(li.ImageIdentifier))+" → "+deploy.ShortDigest(aws.ToString(wi.ImageIdentifier)))
	}
	if e := deploy.DiffEnv(lc.RuntimeEnvironmentVariables, wc.RuntimeEnvironmentVariables); e != "" {
		d = append(d, "env "+e)
	}
	if e := deploy.DiffEnv(lc.RuntimeEnvironmentSecrets, wc.RuntimeEnvironmentSecrets); e != "" {
		d = append(d, "secrets "+e)
	}
	if aws.ToString(lc.Port) != aws.ToString(wc.Port) || aws.ToBool(live.source.AutoDeploymentsEnabled) {
		d = append(d, "port/auto-deploy")
	}
	la, wa := "", ""
	if live.source.AuthenticationConfiguration != nil {
		la = aws.ToString(live.source.AuthenticationConfiguration.AccessRoleArn)
	}
	if want.source.AuthenticationConfiguration != nil {
		wa = aws.ToString(want.source.AuthenticationConfiguration.AccessRoleArn)
	}
	if la != wa || aws.ToString(live.instance.InstanceRoleArn) != aws.ToString(want.instance.InstanceRoleArn) {
		d = append(d, "roles")
	}
	if !sameSize(aws.ToString(live.instance.Cpu), CPU, " vCPU", 1024) || !sameSize(aws.ToString(live.instance.Memory), Memory, " GB", 1024) {
		d = append(d, "cpu/memory")
	}
	return strings.Join(d, ", ")
}

// sameSize compares an App Runner size that DescribeService may report as "1 vCPU" or "2 GB".
func sameSize(live, want, unit string, per float64) bool {
	if live == want {
		return true
	}
	var n float64
	if _, err := fmt.Sscanf(strings.TrimSuffix(live, unit), "%g", &n); err != nil {
		return false
	}
	return fmt.Sprint(int(n*per)) == want
}

// find looks a service up by name.
func (d *Driver) find(ctx context.Context, name string) (*types.Service, error) {
	p := apprunner.NewListServicesPaginator(d.AppRunner, &apprunner.ListServicesInput{})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("apprunner:ListServices: %w", err)
		}
		for _, s := range page.ServiceSummaryList {
			if aws.ToString(s.ServiceName) != name || s.Status == types.ServiceStatusDeleted {
				continue
			}
			out, err := d.AppRunner.DescribeService(ctx, &apprunner.DescribeServiceInput{ServiceArn: s.ServiceArn})
			if err != nil {
				return nil, fmt.Errorf("apprunner:DescribeService %s: %w", name, err)
			}
			return out.Service, nil
		}
	}
	return nil, nil
}

// ours reports whether svz created the service (tag managed-by=svz).
func (d *Driver) ours(ctx context.Context, svc *types.Service) (bool, error) {
	out, err := d.AppRunner.ListTagsForResource(ctx, &apprunner.ListTagsForResourceInput{ResourceArn: svc.ServiceArn})
	if err != nil {
		return false, fmt.Errorf("apprunner:ListTagsForResource %s: %w", aws.ToString(svc.ServiceName), err)
	}
	for _, t := range out.Tags {
		if aws.ToString(t.Key) == awsdeploy.ManagedByTag && aws.ToString(t.Value) == awsdeploy.ManagedByValue {
			return true, nil
		}
	}
	return false, nil
}

// findOurs looks the service up and refuses one svz did not create.
func (d *Driver) findOurs(ctx context.Context, name string) (*types.Service, error) {
	svc, err := d.find(ctx, name)
	if err != nil || svc == nil {
		return svc, err
	}
	ok, err := d.ours(ctx, svc)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, &deploy.NotManagedError{Kind: "app runner service", Name: name,
			Adopt: "aws apprunner tag-resource --resource-arn " + aws.ToString(svc.ServiceArn) + " --tags Key=" + awsdeploy.ManagedByTag + ",Value=" + awsdeploy.ManagedByValue}
	}
	return svc, nil
}

// Plan reports what Deploy would change.
func (d *Driver) Plan(ctx context.Context, s deploy.Service) ([]deploy.Change, error) {
	// Someone else's service is refused before anything else is read.
	if _, err := d.findOurs(ctx, s.Name); err != nil {
		return nil, err
	}
	var changes []deploy.Change
	for _, r := range d.wantRoles(s) {
		c, err := d.roles().Plan(ctx, r)
		if err != nil {
			return nil, err
		}
		changes = append(changes, c)
	}
	if t := tableOf(s.Name, s.Env); t != "" {
		c, err := d.table().Plan(ctx, t)
		if err != nil {
			return nil, err
		}
		changes = append(changes, c)
	}
	c := deploy.Change{Resource: "app-runner-service", Name: s.Name, Action: deploy.Create}
	svc, err := d.find(ctx, s.Name)
	if err != nil {
		return nil, err
	}
	if svc != nil {
		live := liveSpec(svc)
		// Role ARNs are compared by name: the account is in the live ARNs.
		acct := accountOf(aws.ToString(svc.ServiceArn))
		access := ""
		if repoType(s.Image) == types.ImageRepositoryTypeEcr {
			access = roleARN(acct, AccessRoleName(s.Name))
		}
		c.Action, c.Detail = deploy.NoOp, diff(live, d.want(s, roleARN(acct, InstanceRoleName(s.Name)), access))
		if c.Detail != "" {
			c.Action = deploy.Update
		}
		if svc.Status == types.ServiceStatusCreateFailed {
			c.Action, c.Detail = deploy.Update, "service is CREATE_FAILED: run svz deploy down first"
		}
	}
	return append(changes, c), nil
}

func roleARN(account, name string) string { return "arn:aws:iam::" + account + ":role/" + name }

// accountOf reads the account from arn:aws:apprunner:region:account:service/….
func accountOf(arn string) string {
	parts := strings.Split(arn, ":")
	if len(parts) > 4 {
		return parts[4]
	}
	return ""
}

// Deploy converges roles and service, waiting for the service to run the new configuration.
func (d *Driver) Deploy(ctx context.Context, s deploy.Service) (deploy.Deployment, error) {
	var dep deploy.Deployment
	if _, err := d.findOurs(ctx, s.Name); err != nil {
		return dep, err
	}
	var instanceRole, accessRole string
	for _, r := range d.wantRoles(s) {
		arn, c, err := d.roles().Ensure(ctx, r)
		if err != nil {
			return dep, err
		}
		dep.Changes = append(dep.Changes, c)
		if r.Name == InstanceRoleName(s.Name) {
			instanceRole = arn
		} else {
			accessRole = arn
		}
	}
	// The table exists before the controller's start-up DescribeTable.
	if t := tableOf(s.Name, s.Env); t != "" {
		c, err := d.table().Ensure(ctx, t)
		dep.Changes = append(dep.Changes, c)
		if err != nil {
			return dep, err
		}
	}
	want := d.want(s, instanceRole, accessRole)
	svc, err := d.find(ctx, s.Name)
	if err != nil {
		return dep, err
	}
	c := deploy.Change{Resource: "app-runner-service", Name: s.Name}
	switch {
	case svc == nil:
		c.Action = deploy.Create
		if svc, err = d.create(ctx, s.Name, want); err != nil {
			return dep, err
		}
	case svc.Status == types.ServiceStatusCreateFailed:
		return dep, fmt.Errorf("app runner service %s is CREATE_FAILED and cannot be updated: run svz deploy down, then up", s.Name)
	default:
		if c.Detail = diff(liveSpec(svc), want); c.Detail == "" {
			c.Action = deploy.NoOp
			break
		}
		c.Action = deploy.Update
		prev := liveSpec(svc)
		arn := aws.ToString(svc.ServiceArn)
		if svc, err = d.update(ctx, arn, want); err != nil {
			return dep, err
		}
		dep.Rollback = func(ctx context.Context) error {
			_, err := d.update(ctx, arn, prev)
			return err
		}
	}
	dep.Changes = append(dep.Changes, c)
	dep.Live = toLive(svc)
	return dep, nil
}

func (d *Driver) poll() time.Duration {
	if d.Poll > 0 {
		return d.Poll
	}
	return 5 * time.Second
}

func (d *Driver) waitLimit() time.Duration {
	if d.Wait > 0 {
		return d.Wait
	}
	return 20 * time.Minute
}

// create makes the service, retrying while new roles propagate, and waits for RUNNING.
func (d *Driver) create(ctx context.Context, name string, w spec) (*types.Service, error) {
	in := &apprunner.CreateServiceInput{
		ServiceName:              aws.String(name),
		SourceConfiguration:      &w.source,
		InstanceConfiguration:    &w.instance,
		HealthCheckConfiguration: healthCheck(),
		Tags:                     []types.Tag{{Key: aws.String(awsdeploy.ManagedByTag), Value: aws.String(awsdeploy.ManagedByValue)}},
	}
	deadline := time.Now().Add(2 * time.Minute)
	var out *apprunner.CreateServiceOutput
	for {
		var err error
		out, err = d.AppRunner.CreateService(ctx, in)
		var ir *types.InvalidRequestException
		if err != nil && errors.As(err, &ir) && strings.Contains(strings.ToLower(aws.ToString(ir.Message)), "assum") && time.Now().Before(deadline) {
			if err := sleep(ctx, d.poll()); err != nil {
				return nil, err
			}
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("apprunner:CreateService %s: %w", name, err)
		}
		break
	}
	return d.await(ctx, aws.ToString(out.Service.ServiceArn), aws.ToString(out.OperationId))
}

func (d *Driver) update(ctx context.Context, arn string, w spec) (*types.Service, error) {
	out, err := d.AppRunner.UpdateService(ctx, &apprunner.UpdateServiceInput{
		ServiceArn: aws.String(arn), SourceConfiguration: &w.source, InstanceConfiguration: &w.instance,
		HealthCheckConfiguration: healthCheck(),
	})
	if err != nil {
		return nil, fmt.Errorf("apprunner:UpdateService %s: %w", arn, err)
	}
	return d.await(ctx, arn, aws.ToString(out.OperationId))
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// await polls the operation until it ends; App Runner rolls a failed deployment back itself, which
// is still a failure of this deploy.
func (d *Driver) await(ctx context.Context, arn, opID string) (*types.Service, error) {
	ctx, cancel := context.WithTimeout(ctx, d.waitLimit())
	defer cancel()
	for {
		ops, err := d.AppRunner.ListOperations(ctx, &apprunner.ListOperationsInput{ServiceArn: aws.String(arn)})
		if err != nil {
			return nil, fmt.Errorf("apprunner:ListOperations: %w", err)
		}
		var op *types.OperationSummary
		for i := range ops.OperationSummaryList {
			if aws.ToString(ops.OperationSummaryList[i].Id) == opID {
				op = &ops.OperationSummaryList[i]
			}
		}
		if op != nil {
			switch op.Status {
			case types.OperationStatusSucceeded:
				out, err := d.AppRunner.DescribeService(ctx, &apprunner.DescribeServiceInput{ServiceArn: aws.String(arn)})
				if err != nil {
					return nil, fmt.Errorf("apprunner:DescribeService: %w", err)
				}
				return out.Service, nil
			case types.OperationStatusFailed, types.OperationStatusRollbackSucceeded, types.OperationStatusRollbackFailed:
				return nil, fmt.Errorf("app runner %s operation %s ended %s (see the service's event log in the console)", op.Type, opID, op.Status)
			}
		}
		if err := sleep(ctx, d.poll()); err != nil {
			return nil, fmt.Errorf("waiting for App Runner operation %s: %w", opID, err)
		}
	}
}

func toLive(svc *types.Service) deploy.Live {
	l := deploy.Live{Name: aws.ToString(svc.ServiceName), Ready: svc.Status == types.ServiceStatusRunning, Env: map[string]string{}}
	if u := aws.ToString(svc.ServiceUrl); u != "" {
		l.URL = "https://" + u
	}
	if ir := liveSpec(svc).source.ImageRepository; ir != nil {
		l.Image = aws.ToString(ir.ImageIdentifier)
		if ir.ImageConfiguration != nil && ir.ImageConfiguration.RuntimeEnvironmentVariables != nil {
			l.Env = ir.ImageConfiguration.RuntimeEnvironmentVariables
		}
	}
	if id := aws.ToString(svc.ServiceId); id != "" {
		l.Revision = id
	}
	return l
}

// Inspect reads the service.
func (d *Driver) Inspect(ctx context.Context, name string) (deploy.Live, error) {
	svc, err := d.find(ctx, name)
	if err != nil {
		return deploy.Live{}, err
	}
	if svc == nil {
		return deploy.Live{}, fmt.Errorf("app runner service %s: %w", name, deploy.ErrNotFound)
	}
	return toLive(svc), nil
}

// Delete removes the service, waits for it to go, then removes both roles. The store table the
// service used (or, when the service is gone, one named after it) is kept, and with purge deleted
// when svz created it.
func (d *Driver) Delete(ctx context.Context, name string, purge bool) ([]deploy.Change, error) {
	c := deploy.Change{Resource: "app-runner-service", Name: name, Action: deploy.Delete}
	svc, err := d.find(ctx, name)
	if err != nil {
		return nil, err
	}
	table := ""
	ours := true
	if svc != nil {
		if ours, err = d.ours(ctx, svc); err != nil {
			return nil, err
		}
	}
	switch {
	case svc == nil:
		c.Action, c.Detail = deploy.NoOp, "absent"
	case !ours:
		c = deploy.KeptChange("app-runner-service", name)
	default:
		table = tableOf(name, toLive(svc).Env)
		if err := d.delete(ctx, aws.ToString(svc.ServiceArn)); err != nil {
			return nil, err
		}
	}
	cs := []deploy.Change{c}
	for _, r := range []string{InstanceRoleName(name), AccessRoleName(name)} {
		rc, err := d.roles().Delete(ctx, r)
		cs = append(cs, rc)
		if err != nil {
			return cs, err
		}
	}
	known := table != ""
	switch {
	case purge:
		if !known {
			table = name // a table an earlier deployment may have created
		}
		tc, err := d.table().Delete(ctx, table, true)
		if err != nil {
			return append(cs, tc), err
		}
		if known || tc.Detail != "absent" {
			cs = append(cs, tc)
		}
	case known:
		cs = append(cs, deploy.Change{Resource: "dynamodb-table", Name: table, Action: deploy.NoOp, Detail: "kept (pass --purge to delete stored data)"})
	}
	return cs, nil
}

// delete removes the service and waits until App Runner reports it DELETED (or forgets it).
func (d *Driver) delete(ctx context.Context, arn string) error {
	if _, err := d.AppRunner.DeleteService(ctx, &apprunner.DeleteServiceInput{ServiceArn: aws.String(arn)}); err != nil {
		return fmt.Errorf("apprunner:DeleteService %s: %w", arn, err)
	}
	ctx, cancel := context.WithTimeout(ctx, d.waitLimit())
	defer cancel()
	for {
		out, err := d.AppRunner.DescribeService(ctx, &apprunner.DescribeServiceInput{ServiceArn: aws.String(arn)})
		var nf *types.ResourceNotFoundException
		switch {
		case errors.As(err, &nf):
			return nil
		case err != nil:
			return fmt.Errorf("apprunner:DescribeService %s: %w", arn, err)
		case out.Service.Status == types.ServiceStatusDeleted:
			return nil
		case out.Service.Status == types.ServiceStatusDeleteFailed:
			return fmt.Errorf("app runner service %s: DELETE_FAILED", arn)
		}
		if err := sleep(ctx, d.poll()); err != nil {
			return fmt.Errorf("waiting for App Runner to delete %s: %w", arn, err)
		}
	}
}

// NewPlatform assembles the App Runner platform from an AWS configuration.
func NewPlatform(ctx context.Context, cfg aws.Config) (deploy.Platform, error) {
	acct, err := awsdeploy.AccountID(ctx, cfg)
	if err != nil {
		return deploy.Platform{}, err
	}
	return deploy.Platform{
		Name:     deploy.PlatformAppRunner,
		Scope:    acct,
		Region:   cfg.Region,
		Registry: &awsdeploy.ECR{Client: ecr.NewFromConfig(cfg), Account: acct, Region: cfg.Region},
		Secrets:  &awsdeploy.SecretsManager{Client: secretsmanager.NewFromConfig(cfg)},
		Driver: &Driver{
			AppRunner: apprunner.NewFromConfig(cfg), IAM: iam.NewFromConfig(cfg), DynamoDB: dynamodb.NewFromConfig(cfg),
			Account: acct, Region: cfg.Region,
		},
		Notices:     []string{Notice},
		DefaultArch: "amd64",
	}, nil
}
