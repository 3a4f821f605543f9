// Package apprunnerfake is an in-process HTTP server speaking App Runner's wire protocol (awsJson1_0:
// POST / with X-Amz-Target AppRunner.<Operation>, JSON bodies, errors as HTTP 400 with
// {"__type","Message"}), for tests: no emulator of App Runner exists. It implements the operations
// svz calls (CreateService, DescribeService, UpdateService, DeleteService, ListServices,
// ListOperations) with App Runner's asynchronous behaviour: an operation is IN_PROGRESS for one poll,
// then ends; a deployment whose image is in FailImage ends CREATE_FAILED on create, or is rolled back
// by App Runner itself on update (ROLLBACK_SUCCEEDED, previous configuration kept). It validates what
// App Runner validates where svz could get it wrong: names, an ECR access role for private ECR
// images, an instance role when secrets are referenced, secret references as ARNs, CPU and memory
// values, and no update while an operation is in progress.
package apprunnerfake

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Fake is the App Runner service state.
type Fake struct {
	Account string
	Region  string
	// URLHost, when set, is the ServiceUrl of every service (host:port of a test server).
	URLHost string
	// FailImage lists images whose deployments fail their health checks.
	FailImage map[string]bool

	URL string // endpoint for the SDK

	mu       sync.Mutex
	services map[string]*service // by ARN
	ops      []*operation
	seq      int
	calls    []string
}

type imageConfiguration struct {
	Port                        string            `json:"Port,omitempty"`
	RuntimeEnvironmentVariables map[string]string `json:"RuntimeEnvironmentVariables,omitempty"`
	RuntimeEnvironmentSecrets   map[string]string `json:"RuntimeEnvironmentSecrets,omitempty"`
	StartCommand                string            `json:"StartCommand,omitempty"`
}

type imageRepository struct {
	ImageIdentifier     string              `json:"ImageIdentifier"`
	ImageRepositoryType string              `json:"ImageRepositoryType"`
	ImageConfiguration  *imageConfiguration `json:"ImageConfiguration,omitempty"`
}

type authenticationConfiguration struct {
	AccessRoleArn string `json:"AccessRoleArn,omitempty"`
	ConnectionArn string `json:"ConnectionArn,omitempty"`
}

type sourceConfiguration struct {
	ImageRepository             *imageRepository             `json:"ImageRepository,omitempty"`
	CodeRepository              json.RawMessage              `json:"CodeRepository,omitempty"`
	AutoDeploymentsEnabled      *bool                        `json:"AutoDeploymentsEnabled,omitempty"`
	AuthenticationConfiguration *authenticationConfiguration `json:"AuthenticationConfiguration,omitempty"`
}

type instanceConfiguration struct {
	Cpu             string `json:"Cpu,omitempty"`
	Memory          string `json:"Memory,omitempty"`
	InstanceRoleArn string `json:"InstanceRoleArn,omitempty"`
}

type healthCheckConfiguration struct {
	Protocol string `json:"Protocol,omitempty"`
	Path     string `json:"Path,omitempty"`
}

type config struct {
	Source   sourceConfiguration      `json:"SourceConfiguration"`
	Instance instanceConfiguration    `json:"InstanceConfiguration"`
	Health   healthCheckConfiguration `json:"HealthCheckConfiguration"`
}

type service struct {
	tags                       map[string]string
	name, id, arn, url, status string
	created, updated           float64
	cfg                        config
}

type operation struct {
	ID, Type, Status, TargetArn string
	StartedAt, EndedAt          float64
	polls                       int
	next                        *config // update: configuration being deployed
}

// Start serves the fake until the test ends.
func Start(t testing.TB, account, region string) *Fake {
	f := &Fake{Account: account, Region: region, FailImage: map[string]bool{}, services: map[string]*service{}}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	f.URL = srv.URL
	return f
}

// Calls returns the operations called so far.
func (f *Fake) Calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

// Running returns the image, plain variables and secret references of the running configuration.
func (f *Fake) Running(name string) (image string, env, secrets map[string]string, ok bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, s := range f.services {
		if s.name == name && s.status == "RUNNING" {
			ir := s.cfg.Source.ImageRepository
			ic := ir.ImageConfiguration
			if ic == nil {
				ic = &imageConfiguration{}
			}
			return ir.ImageIdentifier, ic.RuntimeEnvironmentVariables, ic.RuntimeEnvironmentSecrets, true
		}
	}
	return "", nil, nil, false
}

type apiError struct {
	status int
	typ    string
	msg    string
}

func errorf(typ, format string, a ...any) *apiError {
	return &apiError{status: http.StatusBadRequest, typ: typ, msg: fmt.Sprintf(format, a...)}
}

func (f *Fake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	target := r.Header.Get("X-Amz-Target")
	op, ok := strings.CutPrefix(target, "AppRunner.")
	var out any
	var aerr *apiError
	switch {
	case r.Method != http.MethodPost || r.URL.Path != "/":
		aerr = &apiError{status: http.StatusNotFound, typ: "UnknownOperationException", msg: "not found"}
	case !ok:
		aerr = errorf("UnknownOperationException", "unknown target %q", target)
	case !strings.HasPrefix(r.Header.Get("Content-Type"), "application/x-amz-json-1.0"):
		aerr = errorf("SerializationException", "unexpected content type %q", r.Header.Get("Content-Type"))
	case !strings.HasPrefix(r.Header.Get("Authorization"), "AWS4-HMAC-SHA256 "):
		aerr = &apiError{status: http.StatusForbidden, typ: "MissingAuthenticationTokenException", msg: "Missing Authentication Token"}
	default:
		body, err := io.ReadAll(r.Body)
		if err != nil {
			aerr = errorf("SerializationException", "read body: %v", err)
			break
		}
		f.mu.Lock()
		f.calls = append(f.calls, op)
		out, aerr = f.dispatch(op, body)
		f.mu.Unlock()
	}
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	w.Header().Set("X-Amzn-Requestid", "req-"+strconv.FormatInt(time.Now().UnixNano(), 36))
	if aerr != nil {
		w.Header().Set("X-Amzn-Errortype", aerr.typ)
		w.WriteHeader(aerr.status)
		_ = json.NewEncoder(w).Encode(map[string]string{"__type": "com.amazonaws.apprunner#" + aerr.typ, "Message": aerr.msg})
		return
	}
	_ = json.NewEncoder(w).Encode(out)
}

func (f *Fake) dispatch(op string, body []byte) (any, *apiError) {
	var in struct {
		ServiceName              string                        `json:"ServiceName"`
		ServiceArn               string                        `json:"ServiceArn"`
		SourceConfiguration      *sourceConfiguration          `json:"SourceConfiguration"`
		InstanceConfiguration    *instanceConfiguration        `json:"InstanceConfiguration"`
		HealthCheckConfiguration *healthCheckConfiguration     `json:"HealthCheckConfiguration"`
		ResourceArn              string                        `json:"ResourceArn"`
		Tags                     []struct{ Key, Value string } `json:"Tags"`
	}
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, errorf("SerializationException", "cannot parse request: %v", err)
	}
	f.advance()
	switch op {
	case "CreateService":
		tags := map[string]string{}
		for _, t := range in.Tags {
			tags[t.Key] = t.Value
		}
		return f.create(in.ServiceName, tags, in.SourceConfiguration, in.InstanceConfiguration, in.HealthCheckConfiguration)
	case "ListTagsForResource":
		s, err := f.get(in.ResourceArn)
		if err != nil {
			return nil, err
		}
		tags := []map[string]string{}
		for k, v := range s.tags {
			tags = append(tags, map[string]string{"Key": k, "Value": v})
		}
		return map[string]any{"Tags": tags}, nil
	case "DescribeService":
		s, err := f.get(in.ServiceArn)
		if err != nil {
			return nil, err
		}
		return map[string]any{"Service": s.wire()}, nil
	case "UpdateService":
		return f.update(in.ServiceArn, in.SourceConfiguration, in.InstanceConfiguration, in.HealthCheckConfiguration)
	case "DeleteService":
		s, err := f.get(in.ServiceArn)
		if err != nil {
			return nil, err
		}
		if s.status == "OPERATION_IN_PROGRESS" {
			return nil, errorf("InvalidStateException", "You can't delete service %s while an operation is in progress.", s.arn)
		}
		s.status = "OPERATION_IN_PROGRESS"
		o := f.start("DELETE_SERVICE", s.arn, nil)
		return map[string]any{"Service": s.wire(), "OperationId": o.ID}, nil
	case "ListServices":
		var list []map[string]any
		for _, s := range f.services {
			if s.status != "DELETED" {
				list = append(list, map[string]any{"ServiceName": s.name, "ServiceId": s.id, "ServiceArn": s.arn,
					"ServiceUrl": s.url, "Status": s.status, "CreatedAt": s.created, "UpdatedAt": s.updated})
			}
		}
		return map[string]any{"ServiceSummaryList": list}, nil
	case "ListOperations":
		if _, err := f.get(in.ServiceArn); err != nil {
			return nil, err
		}
		var list []map[string]any
		for i := len(f.ops) - 1; i >= 0; i-- { // newest first, as App Runner lists them
			o := f.ops[i]
			if o.TargetArn == in.ServiceArn {
				m := map[string]any{"Id": o.ID, "Type": o.Type, "Status": o.Status, "TargetArn": o.TargetArn, "StartedAt": o.StartedAt}
				if o.EndedAt > 0 {
					m["EndedAt"] = o.EndedAt
				}
				list = append(list, m)
			}
		}
		return map[string]any{"OperationSummaryList": list}, nil
	}
	return nil, errorf("UnknownOperationException", "operation %s is not supported by this fake", op)
}

func now() float64 { return float64(time.Now().UnixMilli()) / 1000 }

func (s *service) wire() map[string]any {
	return map[string]any{
		"ServiceName": s.name, "ServiceId": s.id, "ServiceArn": s.arn, "ServiceUrl": s.url, "Status": s.status,
		"CreatedAt": s.created, "UpdatedAt": s.updated,
		"SourceConfiguration": s.cfg.Source, "InstanceConfiguration": s.cfg.Instance, "HealthCheckConfiguration": s.cfg.Health,
	}
}

func (f *Fake) get(arn string) (*service, *apiError) {
	s, ok := f.services[arn]
	if !ok {
		return nil, errorf("ResourceNotFoundException", "Service with arn %q does not exist.", arn)
	}
	return s, nil
}

var (
	nameRE   = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9-_]{3,39}$`)
	envRE    = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	cpus     = map[string]bool{"256": true, "512": true, "1024": true, "2048": true, "4096": true, "0.25 vCPU": true, "0.5 vCPU": true, "1 vCPU": true, "2 vCPU": true, "4 vCPU": true}
	memories = map[string]bool{"512": true, "1024": true, "2048": true, "3072": true, "4096": true, "6144": true, "8192": true, "10240": true, "12288": true, "0.5 GB": true, "1 GB": true, "2 GB": true, "3 GB": true, "4 GB": true}
)

func validate(src *sourceConfiguration, inst *instanceConfiguration) *apiError {
	if src == nil || src.ImageRepository == nil {
		return errorf("InvalidRequestException", "SourceConfiguration must specify an ImageRepository (code repositories are not supported by this fake).")
	}
	ir := src.ImageRepository
	if ir.ImageIdentifier == "" {
		return errorf("InvalidRequestException", "ImageIdentifier is required.")
	}
	switch ir.ImageRepositoryType {
	case "ECR":
		if src.AuthenticationConfiguration == nil || src.AuthenticationConfiguration.AccessRoleArn == "" {
			return errorf("InvalidRequestException", "Authentication configuration is invalid: an AccessRoleArn is required for a private ECR image.")
		}
	case "ECR_PUBLIC":
	default:
		return errorf("InvalidRequestException", "ImageRepositoryType %q is invalid.", ir.ImageRepositoryType)
	}
	if ic := ir.ImageConfiguration; ic != nil {
		if _, err := strconv.Atoi(ic.Port); ic.Port != "" && err != nil {
			return errorf("InvalidRequestException", "Port %q is invalid.", ic.Port)
		}
		for k := range ic.RuntimeEnvironmentVariables {
			// Reserved: PORT and the AWSAPPRUNNER prefix (App Runner's developer guide and API
			// reference); AWS_* names such as AWS_REGION are accepted.
			if !envRE.MatchString(k) || k == "PORT" || strings.HasPrefix(k, "AWSAPPRUNNER") {
				return errorf("InvalidRequestException", "Environment variable name %q is invalid or reserved.", k)
			}
		}
		for k, v := range ic.RuntimeEnvironmentSecrets {
			if !strings.HasPrefix(v, "arn:aws:secretsmanager:") && !strings.HasPrefix(v, "arn:aws:ssm:") {
				return errorf("InvalidRequestException", "RuntimeEnvironmentSecrets %s: %q is not a Secrets Manager or SSM parameter ARN.", k, v)
			}
		}
		if len(ic.RuntimeEnvironmentSecrets) > 0 && (inst == nil || inst.InstanceRoleArn == "") {
			return errorf("InvalidRequestException", "An InstanceRoleArn is required to reference secrets in RuntimeEnvironmentSecrets.")
		}
	}
	if inst != nil {
		if inst.Cpu != "" && !cpus[inst.Cpu] {
			return errorf("InvalidRequestException", "Cpu %q is invalid.", inst.Cpu)
		}
		if inst.Memory != "" && !memories[inst.Memory] {
			return errorf("InvalidRequestException", "Memory %q is invalid.", inst.Memory)
		}
	}
	return nil
}

func (f *Fake) create(name string, tags map[string]string, src *sourceConfiguration, inst *instanceConfiguration, hc *healthCheckConfiguration) (any, *apiError) {
	if !nameRE.MatchString(name) {
		return nil, errorf("InvalidRequestException", "ServiceName %q is invalid.", name)
	}
	for _, s := range f.services {
		if s.name == name && s.status != "DELETED" {
			return nil, errorf("InvalidRequestException", "Service with the provided name already exists: %s", name)
		}
	}
	if err := validate(src, inst); err != nil {
		return nil, err
	}
	f.seq++
	id := fmt.Sprintf("%032x", f.seq)
	s := &service{name: name, tags: tags, id: id, status: "OPERATION_IN_PROGRESS", created: now(), updated: now(),
		arn: fmt.Sprintf("arn:aws:apprunner:%s:%s:service/%s/%s", f.Region, f.Account, name, id)}
	s.url = f.URLHost
	if s.url == "" {
		s.url = id[:10] + "." + f.Region + ".awsapprunner.com"
	}
	s.cfg.Source = *src
	if inst != nil {
		s.cfg.Instance = *inst
	}
	if hc != nil {
		s.cfg.Health = *hc
	}
	f.services[s.arn] = s
	o := f.start("CREATE_SERVICE", s.arn, nil)
	return map[string]any{"Service": s.wire(), "OperationId": o.ID}, nil
}

func (f *Fake) update(arn string, src *sourceConfiguration, inst *instanceConfiguration, hc *healthCheckConfiguration) (any, *apiError) {
	s, err := f.get(arn)
	if err != nil {
		return nil, err
	}
	if s.status != "RUNNING" {
		return nil, errorf("InvalidStateException", "Service cannot be updated in the current state: %s.", s.status)
	}
	next := s.cfg
	if src != nil {
		next.Source = *src
	}
	if inst != nil {
		next.Instance = *inst
	}
	if hc != nil {
		next.Health = *hc
	}
	if err := validate(&next.Source, &next.Instance); err != nil {
		return nil, err
	}
	s.status = "OPERATION_IN_PROGRESS"
	o := f.start("UPDATE_SERVICE", arn, &next)
	return map[string]any{"Service": s.wire(), "OperationId": o.ID}, nil
}

func (f *Fake) start(typ, arn string, next *config) *operation {
	f.seq++
	o := &operation{ID: fmt.Sprintf("op%030x", f.seq), Type: typ, Status: "IN_PROGRESS", TargetArn: arn, StartedAt: now(), next: next}
	f.ops = append(f.ops, o)
	return o
}

// advance ends operations that have been observed once in progress.
func (f *Fake) advance() {
	for _, o := range f.ops {
		if o.Status != "IN_PROGRESS" {
			continue
		}
		if o.polls++; o.polls < 2 {
			continue
		}
		s := f.services[o.TargetArn]
		o.EndedAt = now()
		s.updated = now()
		switch o.Type {
		case "CREATE_SERVICE":
			if f.FailImage[s.cfg.Source.ImageRepository.ImageIdentifier] {
				s.status, o.Status = "CREATE_FAILED", "FAILED"
			} else {
				s.status, o.Status = "RUNNING", "SUCCEEDED"
			}
		case "UPDATE_SERVICE":
			s.status = "RUNNING"
			if f.FailImage[o.next.Source.ImageRepository.ImageIdentifier] {
				o.Status = "ROLLBACK_SUCCEEDED"
			} else {
				s.cfg, o.Status = *o.next, "SUCCEEDED"
			}
		case "DELETE_SERVICE":
			s.status, o.Status = "DELETED", "SUCCEEDED"
		}
	}
}
