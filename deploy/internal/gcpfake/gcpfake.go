// Package gcpfake is an in-process gRPC server speaking the wire protocol of the GCP APIs svz deploy
// calls, for tests (no emulator exists for them): Cloud Run Admin API v2 (services and their
// revisions, traffic, terminal conditions, IAM policies), Artifact Registry repositories, Secret
// Manager (secrets with labels, versions with CRC32C, IAM policies with etags), IAM service
// accounts and their IAM policies, Cloud Tasks (REST, package cloudtasksfake, at TasksURL), and the
// google.longrunning Operations service the clients poll. It checks what the real APIs check where
// svz could get it wrong: resource name formats, service account ids, reserved environment names,
// that a revision's service account exists and can read the secrets it references (the version
// exists and the account holds roles/secretmanager.secretAccessor on the secret), that a policy
// names only existing accounts (a deleted account's bindings turn into deleted:serviceAccount:…,
// as IAM shows them), and it fails a revision whose image is listed in FailImage, keeping traffic
// on the last ready one as Cloud Run does.
package gcpfake

import (
	"context"
	"fmt"
	"hash/crc32"
	"net"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	"cloud.google.com/go/artifactregistry/apiv1/artifactregistrypb"
	"cloud.google.com/go/iam/admin/apiv1/adminpb"
	"cloud.google.com/go/iam/apiv1/iampb"
	"cloud.google.com/go/longrunning/autogen/longrunningpb"
	"cloud.google.com/go/run/apiv2/runpb"
	"cloud.google.com/go/secretmanager/apiv1/secretmanagerpb"
	"github.com/supervaize/svz/internal/cloudtasks/cloudtasksfake"
	"google.golang.org/api/option"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	grpcstatus "google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// Fake is the shared state of the fake APIs.
type Fake struct {
	Project       string
	ProjectNumber string
	Region        string
	// URL is given to every service as its uri (a test server standing in for the instances).
	URL string
	// FailImage maps an image to the start failure of revisions running it.
	FailImage map[string]string

	addr string

	mu       sync.Mutex
	ops      map[string]*longrunningpb.Operation
	opSeq    int
	services map[string]*service
	repos    map[string]*artifactregistrypb.Repository
	secrets  map[string]*secret
	accounts map[string]*adminpb.ServiceAccount // by email
	policies map[string]*policy                 // IAM policies of services and accounts, by resource name
	calls    []string

	// Tasks is the Cloud Tasks API (REST, served at TasksURL): its task OIDC accounts and policy
	// members must be accounts of this fake.
	Tasks    *cloudtasksfake.Fake
	TasksURL string
}

type policy struct {
	p    *iampb.Policy
	etag int
}

type service struct {
	svc       *runpb.Service
	revisions map[string]*runpb.RevisionTemplate
	ready     map[string]bool
	seq       int
}

type secret struct {
	s        *secretmanagerpb.Secret
	versions [][]byte
	policy   *iampb.Policy
	etag     int
}

// Start serves the fake on a loopback port until the test ends.
func Start(t testing.TB, project, number, region string) *Fake {
	t.Helper()
	f := &Fake{
		Project: project, ProjectNumber: number, Region: region, FailImage: map[string]string{},
		ops: map[string]*longrunningpb.Operation{}, services: map[string]*service{},
		repos: map[string]*artifactregistrypb.Repository{}, secrets: map[string]*secret{},
		accounts: map[string]*adminpb.ServiceAccount{}, policies: map[string]*policy{},
	}
	f.Tasks = cloudtasksfake.New()
	f.Tasks.AccountExists = func(email string) bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		return f.accounts[email] != nil
	}
	tasks := httptest.NewServer(f.Tasks.Handler())
	t.Cleanup(tasks.Close)
	f.TasksURL = tasks.URL
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	runpb.RegisterServicesServer(srv, &runServer{f: f})
	artifactregistrypb.RegisterArtifactRegistryServer(srv, &arServer{f: f})
	secretmanagerpb.RegisterSecretManagerServiceServer(srv, &smServer{f: f})
	longrunningpb.RegisterOperationsServer(srv, &opsServer{f: f})
	adminpb.RegisterIAMServer(srv, &iamServer{f: f})
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	f.addr = lis.Addr().String()
	return f
}

// ClientOptions connect a GCP client to the fake without credentials.
func (f *Fake) ClientOptions() []option.ClientOption {
	return []option.ClientOption{
		option.WithEndpoint(f.addr),
		option.WithoutAuthentication(),
		option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())),
	}
}

// Calls returns the RPC methods called so far, in order.
func (f *Fake) Calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

func (f *Fake) call(m string) { f.calls = append(f.calls, m) }

// Serving returns the image of the revision that receives the traffic of a service ("" if none).
func (f *Fake) Serving(serviceID string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	st := f.services[f.serviceName(serviceID)]
	if st == nil {
		return ""
	}
	for _, ts := range st.svc.TrafficStatuses {
		if ts.Percent == 100 {
			return st.revisions[ts.Revision].GetContainers()[0].GetImage()
		}
	}
	return ""
}

// SecretValue returns the latest value of a secret, for assertions.
func (f *Fake) SecretValue(id string) (string, int, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.secrets[id]
	if s == nil || len(s.versions) == 0 {
		return "", 0, false
	}
	return string(s.versions[len(s.versions)-1]), len(s.versions), true
}

// Service returns a copy of a service as the API stores it.
func (f *Fake) Service(serviceID string) *runpb.Service {
	f.mu.Lock()
	defer f.mu.Unlock()
	st := f.services[f.serviceName(serviceID)]
	if st == nil {
		return nil
	}
	return proto.Clone(st.svc).(*runpb.Service)
}

func (f *Fake) serviceName(id string) string {
	return fmt.Sprintf("projects/%s/locations/%s/services/%s", f.Project, f.Region, id)
}

// project accepts a project id or number, as the APIs do.
func (f *Fake) project(p string) error {
	if p != f.Project && p != f.ProjectNumber {
		return grpcstatus.Errorf(codes.PermissionDenied, "Permission denied on resource project %s.", p)
	}
	return nil
}

// operation records a finished operation that GetOperation reports done (the first answer of the
// create/update/delete call is always "not done", as the real APIs answer).
func (f *Fake) operation(parent string, meta, resp proto.Message, opErr error) (*longrunningpb.Operation, error) {
	f.opSeq++
	name := fmt.Sprintf("%s/operations/op-%d", parent, f.opSeq)
	m, err := anypb.New(meta)
	if err != nil {
		return nil, err
	}
	done := &longrunningpb.Operation{Name: name, Metadata: m, Done: true}
	if opErr != nil {
		st := grpcstatus.Convert(opErr)
		done.Result = &longrunningpb.Operation_Error{Error: &status.Status{Code: int32(st.Code()), Message: st.Message()}}
	} else {
		r, err := anypb.New(resp)
		if err != nil {
			return nil, err
		}
		done.Result = &longrunningpb.Operation_Response{Response: r}
	}
	f.ops[name] = done
	return &longrunningpb.Operation{Name: name, Metadata: m}, nil
}

type opsServer struct {
	longrunningpb.UnimplementedOperationsServer
	f *Fake
}

func (s *opsServer) GetOperation(_ context.Context, req *longrunningpb.GetOperationRequest) (*longrunningpb.Operation, error) {
	s.f.mu.Lock()
	defer s.f.mu.Unlock()
	s.f.call("GetOperation")
	op, ok := s.f.ops[req.GetName()]
	if !ok {
		return nil, grpcstatus.Errorf(codes.NotFound, "Operation %s not found.", req.GetName())
	}
	return op, nil
}

// ---- Cloud Run Admin API v2 ----

type runServer struct {
	runpb.UnimplementedServicesServer
	f *Fake
}

var (
	serviceIDRE = regexp.MustCompile(`^[a-z]([-a-z0-9]{0,47}[a-z0-9])?$`)
	parentRE    = regexp.MustCompile(`^projects/([^/]+)/locations/([^/]+)$`)
	serviceRE   = regexp.MustCompile(`^projects/([^/]+)/locations/([^/]+)/services/([^/]+)$`)
)

var reservedEnv = map[string]bool{"PORT": true, "K_SERVICE": true, "K_REVISION": true, "K_CONFIGURATION": true}

func (f *Fake) checkParent(parent string) error {
	m := parentRE.FindStringSubmatch(parent)
	if m == nil {
		return grpcstatus.Errorf(codes.InvalidArgument, "Invalid parent %q: want projects/{project}/locations/{location}.", parent)
	}
	if err := f.project(m[1]); err != nil {
		return err
	}
	if m[2] != f.Region {
		return grpcstatus.Errorf(codes.InvalidArgument, "Location %s is not available.", m[2])
	}
	return nil
}

func (f *Fake) canonicalService(name string) (string, error) {
	m := serviceRE.FindStringSubmatch(name)
	if m == nil {
		return "", grpcstatus.Errorf(codes.InvalidArgument, "Invalid service name %q.", name)
	}
	if err := f.checkParent("projects/" + m[1] + "/locations/" + m[2]); err != nil {
		return "", err
	}
	return f.serviceName(m[3]), nil
}

func notFoundService(name string) error {
	m := serviceRE.FindStringSubmatch(name)
	return grpcstatus.Errorf(codes.NotFound, "Resource '%s' of kind 'SERVICE' in region '%s' in project '%s' does not exist.", m[3], m[2], m[1])
}

// validate checks a service spec as the API does before accepting it.
func validate(svc *runpb.Service) error {
	cs := svc.GetTemplate().GetContainers()
	if len(cs) == 0 {
		return grpcstatus.Error(codes.InvalidArgument, "spec.template.spec.containers: at least one container is required.")
	}
	for i, c := range cs {
		if c.GetImage() == "" {
			return grpcstatus.Errorf(codes.InvalidArgument, "spec.template.spec.containers[%d].image: Image is required.", i)
		}
		var reserved []string
		for j, e := range c.GetEnv() {
			if reservedEnv[e.GetName()] {
				reserved = append(reserved, e.GetName())
			}
			if ref := e.GetValueSource().GetSecretKeyRef(); ref != nil && (ref.GetSecret() == "" || ref.GetVersion() == "") {
				return grpcstatus.Errorf(codes.InvalidArgument, "spec.template.spec.containers[%d].env[%d].value_from.secret_key_ref: secret and version are required.", i, j)
			}
		}
		if len(reserved) > 0 {
			return grpcstatus.Errorf(codes.InvalidArgument, "The following reserved env names were provided: %s. These values are automatically set by the system.", strings.Join(reserved, ", "))
		}
	}
	for _, tt := range svc.GetTraffic() {
		if tt.GetType() == runpb.TrafficTargetAllocationType_TRAFFIC_TARGET_ALLOCATION_TYPE_UNSPECIFIED {
			return grpcstatus.Error(codes.InvalidArgument, "spec.traffic: type is required.")
		}
	}
	return nil
}

// DefaultCompute is the project's default compute account, which runs revisions that name none.
func (f *Fake) DefaultCompute() string {
	return f.ProjectNumber + "-compute@developer.gserviceaccount.com"
}

// checkAccount refuses a template whose service account does not exist, as the API does.
func (f *Fake) checkAccount(svc *runpb.Service) error {
	sa := svc.GetTemplate().GetServiceAccount()
	if sa == "" || sa == f.DefaultCompute() || f.accounts[sa] != nil {
		return nil
	}
	return grpcstatus.Errorf(codes.InvalidArgument, "spec.template.spec.service_account_name: Service account %s does not exist.", sa)
}

// revisionError says why a revision of template t cannot start, as Cloud Run reports it.
func (f *Fake) revisionError(t *runpb.RevisionTemplate) string {
	sa := t.GetServiceAccount()
	if sa == "" {
		sa = f.DefaultCompute()
	}
	for i, e := range t.GetContainers()[0].GetEnv() {
		ref := e.GetValueSource().GetSecretKeyRef()
		if ref == nil {
			continue
		}
		id := ref.GetSecret()[strings.LastIndex(ref.GetSecret(), "/")+1:]
		s := f.secrets[id]
		v, _ := strconv.Atoi(ref.GetVersion())
		if s == nil || (ref.GetVersion() != "latest" && (v < 1 || v > len(s.versions))) {
			return fmt.Sprintf("spec.template.spec.containers[0].env[%d].value_from.secret_key_ref.name: Secret projects/%s/secrets/%s/versions/%s was not found", i, f.ProjectNumber, id, ref.GetVersion())
		}
		if !member(s.policy, "roles/secretmanager.secretAccessor", "serviceAccount:"+sa) {
			return fmt.Sprintf("spec.template.spec.containers[0].env[%d].value_from.secret_key_ref.name: Permission denied on secret: projects/%s/secrets/%s/versions/%s for Revision service account %s. The service account used must be granted the 'Secret Manager Secret Accessor' role (roles/secretmanager.secretAccessor) at the secret, project or higher level.", i, f.ProjectNumber, id, ref.GetVersion(), sa)
		}
	}
	if msg, ok := f.FailImage[t.GetContainers()[0].GetImage()]; ok {
		return "The user-provided container failed to start and listen on the port defined provided by the PORT=8080 environment variable. " + msg
	}
	return ""
}

func member(p *iampb.Policy, role, m string) bool {
	for _, b := range p.GetBindings() {
		if b.GetRole() == role {
			for _, x := range b.GetMembers() {
				if x == m {
					return true
				}
			}
		}
	}
	return false
}

// reconcile rolls out a new revision when the template changed and resolves traffic. It returns
// the error the operation ends with.
func (f *Fake) reconcile(st *service, newTemplate bool) error {
	svc := st.svc
	id := svc.Name[strings.LastIndex(svc.Name, "/")+1:]
	var opErr error
	if newTemplate {
		st.seq++
		rev := fmt.Sprintf("%s-%05d-%s", id, st.seq, "abc")
		if svc.Template.GetRevision() != "" {
			rev = svc.Template.GetRevision()
		}
		t := proto.Clone(svc.Template).(*runpb.RevisionTemplate)
		st.revisions[rev] = t
		svc.LatestCreatedRevision = svc.Name[:strings.LastIndex(svc.Name, "/services/")] + "/services/" + id + "/revisions/" + rev
		if msg := f.revisionError(t); msg != "" {
			svc.TerminalCondition = &runpb.Condition{Type: "Ready", State: runpb.Condition_CONDITION_FAILED,
				Message: fmt.Sprintf("Revision '%s' is not ready and cannot serve traffic. %s", rev, msg)}
			opErr = grpcstatus.Error(codes.FailedPrecondition, svc.TerminalCondition.Message)
		} else {
			st.ready[rev] = true
			svc.LatestReadyRevision = svc.LatestCreatedRevision
		}
	}
	latestReady := svc.LatestReadyRevision[strings.LastIndex(svc.LatestReadyRevision, "/")+1:]
	svc.TrafficStatuses = nil
	for _, tt := range svc.Traffic {
		rev := tt.GetRevision()
		if tt.GetType() == runpb.TrafficTargetAllocationType_TRAFFIC_TARGET_ALLOCATION_TYPE_LATEST {
			rev = latestReady
		}
		if rev == "" {
			continue
		}
		svc.TrafficStatuses = append(svc.TrafficStatuses, &runpb.TrafficTargetStatus{Type: tt.GetType(), Revision: rev, Percent: tt.GetPercent()})
	}
	if opErr == nil {
		svc.TerminalCondition = &runpb.Condition{Type: "Ready", State: runpb.Condition_CONDITION_SUCCEEDED}
	}
	svc.ObservedGeneration = svc.Generation
	return opErr
}

func (s *runServer) CreateService(_ context.Context, req *runpb.CreateServiceRequest) (*longrunningpb.Operation, error) {
	f := s.f
	f.mu.Lock()
	defer f.mu.Unlock()
	f.call("CreateService")
	if err := f.checkParent(req.GetParent()); err != nil {
		return nil, err
	}
	if !serviceIDRE.MatchString(req.GetServiceId()) {
		return nil, grpcstatus.Errorf(codes.InvalidArgument, "service_id %q: must use only lowercase alphanumeric characters and dashes, cannot begin or end with a dash, and cannot be longer than 49 characters.", req.GetServiceId())
	}
	if err := validate(req.GetService()); err != nil {
		return nil, err
	}
	if err := f.checkAccount(req.GetService()); err != nil {
		return nil, err
	}
	name := f.serviceName(req.GetServiceId())
	if _, ok := f.services[name]; ok {
		return nil, grpcstatus.Errorf(codes.AlreadyExists, "Resource '%s' already exists.", req.GetServiceId())
	}
	svc := proto.Clone(req.GetService()).(*runpb.Service)
	svc.Name, svc.Uid, svc.Generation = name, "uid-"+req.GetServiceId(), 1
	svc.CreateTime, svc.UpdateTime = timestamppb.Now(), timestamppb.Now()
	svc.Uri = f.URL
	if svc.Uri == "" {
		svc.Uri = "https://" + req.GetServiceId() + "-" + f.ProjectNumber + "." + f.Region + ".run.app"
	}
	svc.Urls = []string{svc.Uri}
	if len(svc.Traffic) == 0 {
		svc.Traffic = []*runpb.TrafficTarget{{Type: runpb.TrafficTargetAllocationType_TRAFFIC_TARGET_ALLOCATION_TYPE_LATEST, Percent: 100}}
	}
	st := &service{svc: svc, revisions: map[string]*runpb.RevisionTemplate{}, ready: map[string]bool{}}
	f.services[name] = st
	opErr := f.reconcile(st, true)
	return f.operation(req.GetParent(), svc, svc, opErr)
}

func (s *runServer) GetService(_ context.Context, req *runpb.GetServiceRequest) (*runpb.Service, error) {
	f := s.f
	f.mu.Lock()
	defer f.mu.Unlock()
	f.call("GetService")
	name, err := f.canonicalService(req.GetName())
	if err != nil {
		return nil, err
	}
	st, ok := f.services[name]
	if !ok {
		return nil, notFoundService(req.GetName())
	}
	return proto.Clone(st.svc).(*runpb.Service), nil
}

func (s *runServer) UpdateService(_ context.Context, req *runpb.UpdateServiceRequest) (*longrunningpb.Operation, error) {
	f := s.f
	f.mu.Lock()
	defer f.mu.Unlock()
	f.call("UpdateService")
	name, err := f.canonicalService(req.GetService().GetName())
	if err != nil {
		return nil, err
	}
	st, ok := f.services[name]
	if !ok {
		return nil, notFoundService(req.GetService().GetName())
	}
	in := req.GetService()
	if err := validate(in); err != nil {
		return nil, err
	}
	if err := f.checkAccount(in); err != nil {
		return nil, err
	}
	for _, tt := range in.GetTraffic() {
		if tt.GetType() == runpb.TrafficTargetAllocationType_TRAFFIC_TARGET_ALLOCATION_TYPE_REVISION && !st.ready[tt.GetRevision()] {
			return nil, grpcstatus.Errorf(codes.InvalidArgument, "spec.traffic: revision %q is not ready or does not exist.", tt.GetRevision())
		}
	}
	svc := st.svc
	newTemplate := !sameTemplate(svc.Template, in.Template)
	svc.Labels, svc.Annotations, svc.Ingress = in.Labels, in.Annotations, in.Ingress
	svc.InvokerIamDisabled, svc.Scaling = in.InvokerIamDisabled, in.Scaling
	svc.Template, svc.Traffic = proto.Clone(in.Template).(*runpb.RevisionTemplate), in.Traffic
	svc.Generation++
	svc.UpdateTime = timestamppb.Now()
	opErr := f.reconcile(st, newTemplate)
	return f.operation(name[:strings.LastIndex(name, "/services/")], svc, svc, opErr)
}

// sameTemplate compares templates without the revision name, which the API fills in.
func sameTemplate(a, b *runpb.RevisionTemplate) bool {
	a, b = proto.Clone(a).(*runpb.RevisionTemplate), proto.Clone(b).(*runpb.RevisionTemplate)
	a.Revision, b.Revision = "", ""
	return proto.Equal(a, b)
}

func (s *runServer) DeleteService(_ context.Context, req *runpb.DeleteServiceRequest) (*longrunningpb.Operation, error) {
	f := s.f
	f.mu.Lock()
	defer f.mu.Unlock()
	f.call("DeleteService")
	name, err := f.canonicalService(req.GetName())
	if err != nil {
		return nil, err
	}
	st, ok := f.services[name]
	if !ok {
		return nil, notFoundService(req.GetName())
	}
	delete(f.services, name)
	delete(f.policies, name)
	return f.operation(name[:strings.LastIndex(name, "/services/")], st.svc, st.svc, nil)
}

// ---- Artifact Registry ----

type arServer struct {
	artifactregistrypb.UnimplementedArtifactRegistryServer
	f *Fake
}

var (
	repoRE   = regexp.MustCompile(`^projects/([^/]+)/locations/([^/]+)/repositories/([^/]+)$`)
	repoIDRE = regexp.MustCompile(`^[a-z]([a-z0-9-]*[a-z0-9])?$`)
)

func (s *arServer) GetRepository(_ context.Context, req *artifactregistrypb.GetRepositoryRequest) (*artifactregistrypb.Repository, error) {
	f := s.f
	f.mu.Lock()
	defer f.mu.Unlock()
	f.call("GetRepository")
	m := repoRE.FindStringSubmatch(req.GetName())
	if m == nil {
		return nil, grpcstatus.Errorf(codes.InvalidArgument, "Invalid resource field value in the request.")
	}
	if err := f.checkParent("projects/" + m[1] + "/locations/" + m[2]); err != nil {
		return nil, err
	}
	r, ok := f.repos[m[3]]
	if !ok {
		return nil, grpcstatus.Errorf(codes.NotFound, "Requested entity was not found.")
	}
	return proto.Clone(r).(*artifactregistrypb.Repository), nil
}

func (s *arServer) CreateRepository(_ context.Context, req *artifactregistrypb.CreateRepositoryRequest) (*longrunningpb.Operation, error) {
	f := s.f
	f.mu.Lock()
	defer f.mu.Unlock()
	f.call("CreateRepository")
	if err := f.checkParent(req.GetParent()); err != nil {
		return nil, err
	}
	if !repoIDRE.MatchString(req.GetRepositoryId()) {
		return nil, grpcstatus.Errorf(codes.InvalidArgument, "repository_id %q is invalid.", req.GetRepositoryId())
	}
	if req.GetRepository().GetFormat() == artifactregistrypb.Repository_FORMAT_UNSPECIFIED {
		return nil, grpcstatus.Error(codes.InvalidArgument, "repository.format: Format is required.")
	}
	if _, ok := f.repos[req.GetRepositoryId()]; ok {
		return nil, grpcstatus.Errorf(codes.AlreadyExists, "the repository already exists")
	}
	r := proto.Clone(req.GetRepository()).(*artifactregistrypb.Repository)
	r.Name = req.GetParent() + "/repositories/" + req.GetRepositoryId()
	r.CreateTime = timestamppb.Now()
	f.repos[req.GetRepositoryId()] = r
	return f.operation(req.GetParent(), &artifactregistrypb.OperationMetadata{}, r, nil)
}

// ---- Secret Manager ----

type smServer struct {
	secretmanagerpb.UnimplementedSecretManagerServiceServer
	f *Fake
}

var (
	secretRE   = regexp.MustCompile(`^projects/([^/]+)/secrets/([^/]+)$`)
	versionRE  = regexp.MustCompile(`^projects/([^/]+)/secrets/([^/]+)/versions/([^/]+)$`)
	secretIDRE = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,255}$`)
	// Labels: lowercase keys starting with a letter, lowercase values, 63 characters at most.
	labelRE      = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,62}$`)
	labelValueRE = regexp.MustCompile(`^[a-z0-9_-]{0,63}$`)
	castagnoli   = crc32.MakeTable(crc32.Castagnoli)
)

func (f *Fake) secretByName(name string) (string, *secret, error) {
	m := secretRE.FindStringSubmatch(name)
	if m == nil {
		return "", nil, grpcstatus.Errorf(codes.InvalidArgument, "Invalid resource name %q.", name)
	}
	if err := f.project(m[1]); err != nil {
		return "", nil, err
	}
	s, ok := f.secrets[m[2]]
	if !ok {
		return m[2], nil, grpcstatus.Errorf(codes.NotFound, "Secret [projects/%s/secrets/%s] not found or has no versions.", f.ProjectNumber, m[2])
	}
	return m[2], s, nil
}

func (s *smServer) CreateSecret(_ context.Context, req *secretmanagerpb.CreateSecretRequest) (*secretmanagerpb.Secret, error) {
	f := s.f
	f.mu.Lock()
	defer f.mu.Unlock()
	f.call("CreateSecret")
	p := strings.TrimPrefix(req.GetParent(), "projects/")
	if p == req.GetParent() || strings.Contains(p, "/") {
		return nil, grpcstatus.Errorf(codes.InvalidArgument, "Invalid resource name %q.", req.GetParent())
	}
	if err := f.project(p); err != nil {
		return nil, err
	}
	if !secretIDRE.MatchString(req.GetSecretId()) {
		return nil, grpcstatus.Errorf(codes.InvalidArgument, "Secret ID %q is invalid.", req.GetSecretId())
	}
	if req.GetSecret().GetReplication() == nil {
		return nil, grpcstatus.Error(codes.InvalidArgument, "Secret.replication is required.")
	}
	if _, ok := f.secrets[req.GetSecretId()]; ok {
		return nil, grpcstatus.Errorf(codes.AlreadyExists, "Secret [projects/%s/secrets/%s] already exists.", f.ProjectNumber, req.GetSecretId())
	}
	for k, v := range req.GetSecret().GetLabels() {
		if !labelRE.MatchString(k) || !labelValueRE.MatchString(v) {
			return nil, grpcstatus.Errorf(codes.InvalidArgument, "Invalid label %q=%q.", k, v)
		}
	}
	sec := proto.Clone(req.GetSecret()).(*secretmanagerpb.Secret)
	sec.Name = "projects/" + f.ProjectNumber + "/secrets/" + req.GetSecretId()
	sec.CreateTime = timestamppb.Now()
	f.secrets[req.GetSecretId()] = &secret{s: sec, policy: &iampb.Policy{Version: 1}, etag: 1}
	return proto.Clone(sec).(*secretmanagerpb.Secret), nil
}

func (s *smServer) GetSecret(_ context.Context, req *secretmanagerpb.GetSecretRequest) (*secretmanagerpb.Secret, error) {
	f := s.f
	f.mu.Lock()
	defer f.mu.Unlock()
	f.call("GetSecret")
	_, sec, err := f.secretByName(req.GetName())
	if err != nil {
		return nil, err
	}
	return proto.Clone(sec.s).(*secretmanagerpb.Secret), nil
}

func (s *smServer) AddSecretVersion(_ context.Context, req *secretmanagerpb.AddSecretVersionRequest) (*secretmanagerpb.SecretVersion, error) {
	f := s.f
	f.mu.Lock()
	defer f.mu.Unlock()
	f.call("AddSecretVersion")
	_, sec, err := f.secretByName(req.GetParent())
	if err != nil {
		return nil, err
	}
	data := req.GetPayload().GetData()
	if c := req.GetPayload().DataCrc32C; c != nil && int64(crc32.Checksum(data, castagnoli)) != *c {
		return nil, grpcstatus.Error(codes.InvalidArgument, "Checksum mismatch: the data_crc32c of the payload does not match the data.")
	}
	sec.versions = append(sec.versions, append([]byte(nil), data...))
	return &secretmanagerpb.SecretVersion{
		Name:  fmt.Sprintf("%s/versions/%d", sec.s.Name, len(sec.versions)),
		State: secretmanagerpb.SecretVersion_ENABLED, CreateTime: timestamppb.Now(),
	}, nil
}

func (s *smServer) AccessSecretVersion(_ context.Context, req *secretmanagerpb.AccessSecretVersionRequest) (*secretmanagerpb.AccessSecretVersionResponse, error) {
	f := s.f
	f.mu.Lock()
	defer f.mu.Unlock()
	f.call("AccessSecretVersion")
	m := versionRE.FindStringSubmatch(req.GetName())
	if m == nil {
		return nil, grpcstatus.Errorf(codes.InvalidArgument, "Invalid resource name %q.", req.GetName())
	}
	_, sec, err := f.secretByName("projects/" + m[1] + "/secrets/" + m[2])
	if err != nil {
		return nil, err
	}
	n := len(sec.versions)
	if m[3] != "latest" {
		n, err = strconv.Atoi(m[3])
		if err != nil || n < 1 || n > len(sec.versions) {
			return nil, grpcstatus.Errorf(codes.NotFound, "Secret Version [%s/versions/%s] not found.", sec.s.Name, m[3])
		}
	}
	if n == 0 {
		return nil, grpcstatus.Errorf(codes.NotFound, "Secret [%s] not found or has no versions.", sec.s.Name)
	}
	data := sec.versions[n-1]
	crc := int64(crc32.Checksum(data, castagnoli))
	return &secretmanagerpb.AccessSecretVersionResponse{
		Name:    fmt.Sprintf("%s/versions/%d", sec.s.Name, n),
		Payload: &secretmanagerpb.SecretPayload{Data: append([]byte(nil), data...), DataCrc32C: &crc},
	}, nil
}

func (s *smServer) DeleteSecret(_ context.Context, req *secretmanagerpb.DeleteSecretRequest) (*emptypb.Empty, error) {
	f := s.f
	f.mu.Lock()
	defer f.mu.Unlock()
	f.call("DeleteSecret")
	id, _, err := f.secretByName(req.GetName())
	if err != nil {
		return nil, err
	}
	delete(f.secrets, id)
	return &emptypb.Empty{}, nil
}

func (s *smServer) GetIamPolicy(_ context.Context, req *iampb.GetIamPolicyRequest) (*iampb.Policy, error) {
	f := s.f
	f.mu.Lock()
	defer f.mu.Unlock()
	f.call("GetIamPolicy")
	_, sec, err := f.secretByName(req.GetResource())
	if err != nil {
		return nil, err
	}
	p := proto.Clone(sec.policy).(*iampb.Policy)
	p.Etag = []byte(strconv.Itoa(sec.etag))
	return p, nil
}

func (s *smServer) SetIamPolicy(_ context.Context, req *iampb.SetIamPolicyRequest) (*iampb.Policy, error) {
	f := s.f
	f.mu.Lock()
	defer f.mu.Unlock()
	f.call("SetIamPolicy")
	_, sec, err := f.secretByName(req.GetResource())
	if err != nil {
		return nil, err
	}
	if e := req.GetPolicy().GetEtag(); len(e) > 0 && string(e) != strconv.Itoa(sec.etag) {
		return nil, grpcstatus.Error(codes.Aborted, "There were concurrent policy changes. Please retry the whole read-modify-write with exponential backoff.")
	}
	for _, b := range req.GetPolicy().GetBindings() {
		for _, m := range b.GetMembers() {
			email, ok := strings.CutPrefix(m, "serviceAccount:")
			if ok && strings.HasSuffix(email, ".iam.gserviceaccount.com") && f.accounts[email] == nil {
				return nil, grpcstatus.Errorf(codes.InvalidArgument, "Service account %s does not exist.", email)
			}
		}
	}
	sec.policy = proto.Clone(req.GetPolicy()).(*iampb.Policy)
	sec.policy.Etag = nil
	sec.etag++
	p := proto.Clone(sec.policy).(*iampb.Policy)
	p.Etag = []byte(strconv.Itoa(sec.etag))
	return p, nil
}

// ServingRevision returns the serving revision of a service with its environment resolved the way
// Cloud Run resolves it for the container (secret references replaced by the pinned version's value).
func (f *Fake) ServingRevision(serviceID string) (name string, env map[string]string, ok bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	st := f.services[f.serviceName(serviceID)]
	if st == nil {
		return "", nil, false
	}
	for _, ts := range st.svc.TrafficStatuses {
		if ts.Percent != 100 {
			continue
		}
		t := st.revisions[ts.Revision]
		env = map[string]string{"PORT": "8080", "K_SERVICE": serviceID, "K_REVISION": ts.Revision}
		for _, e := range t.GetContainers()[0].GetEnv() {
			ref := e.GetValueSource().GetSecretKeyRef()
			if ref == nil {
				env[e.GetName()] = e.GetValue()
				continue
			}
			s := f.secrets[ref.GetSecret()[strings.LastIndex(ref.GetSecret(), "/")+1:]]
			v, _ := strconv.Atoi(ref.GetVersion())
			if ref.GetVersion() == "latest" {
				v = len(s.versions)
			}
			env[e.GetName()] = string(s.versions[v-1])
		}
		return ts.Revision, env, true
	}
	return "", nil, false
}

// ---- IAM: service accounts ----

type iamServer struct {
	adminpb.UnimplementedIAMServer
	f *Fake
}

var (
	accountIDRE   = regexp.MustCompile(`^[a-z]([-a-z0-9]*[a-z0-9])$`)
	accountNameRE = regexp.MustCompile(`^projects/([^/]+)/serviceAccounts/([^/]+)$`)
)

// AddServiceAccount creates an account as someone else would (gcloud, the console), for tests.
func (f *Fake) AddServiceAccount(accountID, description string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	email := accountID + "@" + f.Project + ".iam.gserviceaccount.com"
	f.opSeq++
	f.accounts[email] = &adminpb.ServiceAccount{
		Name: "projects/" + f.Project + "/serviceAccounts/" + email, ProjectId: f.Project, Email: email,
		UniqueId: fmt.Sprintf("1%020d", f.opSeq), Description: description,
	}
	return email
}

// ServiceAccount returns a copy of an account, nil when absent.
func (f *Fake) ServiceAccount(email string) *adminpb.ServiceAccount {
	f.mu.Lock()
	defer f.mu.Unlock()
	if sa := f.accounts[email]; sa != nil {
		return proto.Clone(sa).(*adminpb.ServiceAccount)
	}
	return nil
}

// SecretMembers lists the members holding role on a secret.
func (f *Fake) SecretMembers(id, role string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.secrets[id]
	if s == nil {
		return nil
	}
	var out []string
	for _, b := range s.policy.GetBindings() {
		if b.GetRole() == role {
			out = append(out, b.GetMembers()...)
		}
	}
	return out
}

// account resolves projects/{project or -}/serviceAccounts/{email}.
func (f *Fake) account(name string) (string, error) {
	m := accountNameRE.FindStringSubmatch(name)
	if m == nil {
		return "", grpcstatus.Errorf(codes.InvalidArgument, "Invalid service account name %q.", name)
	}
	if m[1] != "-" {
		if err := f.project(m[1]); err != nil {
			return "", err
		}
	}
	if f.accounts[m[2]] == nil {
		return "", grpcstatus.Errorf(codes.NotFound, "Unknown service account")
	}
	return m[2], nil
}

func (s *iamServer) GetServiceAccount(_ context.Context, req *adminpb.GetServiceAccountRequest) (*adminpb.ServiceAccount, error) {
	f := s.f
	f.mu.Lock()
	defer f.mu.Unlock()
	f.call("GetServiceAccount")
	email, err := f.account(req.GetName())
	if err != nil {
		return nil, err
	}
	return proto.Clone(f.accounts[email]).(*adminpb.ServiceAccount), nil
}

func (s *iamServer) CreateServiceAccount(_ context.Context, req *adminpb.CreateServiceAccountRequest) (*adminpb.ServiceAccount, error) {
	f := s.f
	f.mu.Lock()
	defer f.mu.Unlock()
	f.call("CreateServiceAccount")
	p, ok := strings.CutPrefix(req.GetName(), "projects/")
	if !ok || strings.Contains(p, "/") {
		return nil, grpcstatus.Errorf(codes.InvalidArgument, "Invalid project name %q.", req.GetName())
	}
	if err := f.project(p); err != nil {
		return nil, err
	}
	id := req.GetAccountId()
	if len(id) < 6 || len(id) > 30 || !accountIDRE.MatchString(id) {
		return nil, grpcstatus.Errorf(codes.InvalidArgument, "Account ID %q must be 6-30 characters: lowercase letters, digits and hyphens, starting with a letter and not ending with a hyphen.", id)
	}
	email := id + "@" + f.Project + ".iam.gserviceaccount.com"
	if f.accounts[email] != nil {
		return nil, grpcstatus.Errorf(codes.AlreadyExists, "Service account %s already exists within project projects/%s.", id, f.Project)
	}
	if len(req.GetServiceAccount().GetDescription()) > 256 || len(req.GetServiceAccount().GetDisplayName()) > 100 {
		return nil, grpcstatus.Error(codes.InvalidArgument, "Description or display name too long.")
	}
	f.opSeq++
	sa := &adminpb.ServiceAccount{
		Name: "projects/" + f.Project + "/serviceAccounts/" + email, ProjectId: f.Project, Email: email,
		UniqueId: fmt.Sprintf("1%020d", f.opSeq), DisplayName: req.GetServiceAccount().GetDisplayName(),
		Description: req.GetServiceAccount().GetDescription(),
	}
	f.accounts[email] = sa
	return proto.Clone(sa).(*adminpb.ServiceAccount), nil
}

// DeleteServiceAccount removes the account; bindings naming it become
// deleted:serviceAccount:{email}?uid={id}, which a new account of the same email does not match.
func (s *iamServer) DeleteServiceAccount(_ context.Context, req *adminpb.DeleteServiceAccountRequest) (*emptypb.Empty, error) {
	f := s.f
	f.mu.Lock()
	defer f.mu.Unlock()
	f.call("DeleteServiceAccount")
	email, err := f.account(req.GetName())
	if err != nil {
		return nil, err
	}
	uid := f.accounts[email].GetUniqueId()
	delete(f.accounts, email)
	delete(f.policies, "projects/"+f.Project+"/serviceAccounts/"+email)
	for _, p := range f.policies {
		for _, b := range p.p.GetBindings() {
			for i, m := range b.Members {
				if m == "serviceAccount:"+email {
					b.Members[i] = "deleted:serviceAccount:" + email + "?uid=" + uid
				}
			}
		}
	}
	for _, sec := range f.secrets {
		for _, b := range sec.policy.GetBindings() {
			for i, m := range b.Members {
				if m == "serviceAccount:"+email {
					b.Members[i] = "deleted:serviceAccount:" + email + "?uid=" + uid
				}
			}
		}
	}
	return &emptypb.Empty{}, nil
}

// ---- IAM policies of services (Cloud Run) and service accounts (IAM) ----

// getPolicy returns the policy of an existing resource with its etag.
func (f *Fake) getPolicy(resource string) *iampb.Policy {
	p := &iampb.Policy{Version: 1}
	if old := f.policies[resource]; old != nil {
		p = proto.Clone(old.p).(*iampb.Policy)
		p.Etag = []byte(strconv.Itoa(old.etag))
	} else {
		p.Etag = []byte("0")
	}
	return p
}

// setPolicy replaces the policy of an existing resource, checking the etag and the members.
func (f *Fake) setPolicy(resource string, want *iampb.Policy) (*iampb.Policy, error) {
	old := f.policies[resource]
	if old == nil {
		old = &policy{p: &iampb.Policy{}}
	}
	if e := want.GetEtag(); len(e) > 0 && string(e) != strconv.Itoa(old.etag) {
		return nil, grpcstatus.Error(codes.Aborted, "There were concurrent policy changes. Please retry the whole read-modify-write with exponential backoff.")
	}
	for _, b := range want.GetBindings() {
		for _, m := range b.GetMembers() {
			email, ok := strings.CutPrefix(m, "serviceAccount:")
			if ok && strings.HasSuffix(email, ".iam.gserviceaccount.com") && f.accounts[email] == nil {
				return nil, grpcstatus.Errorf(codes.InvalidArgument, "Service account %s does not exist.", email)
			}
		}
	}
	p := proto.Clone(want).(*iampb.Policy)
	p.Etag = nil
	f.policies[resource] = &policy{p: p, etag: old.etag + 1}
	return f.getPolicy(resource), nil
}

// Policy returns role → members of the IAM policy of a service (its full name) or an account
// (projects/{project}/serviceAccounts/{email}).
func (f *Fake) Policy(resource string) map[string][]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string][]string{}
	if p := f.policies[resource]; p != nil {
		for _, b := range p.p.GetBindings() {
			out[b.GetRole()] = append(out[b.GetRole()], b.GetMembers()...)
		}
	}
	return out
}

// ServiceName is the full name of a service of the fake's project and region.
func (f *Fake) ServiceName(id string) string { return f.serviceName(id) }

func (s *runServer) GetIamPolicy(_ context.Context, req *iampb.GetIamPolicyRequest) (*iampb.Policy, error) {
	f := s.f
	f.mu.Lock()
	defer f.mu.Unlock()
	f.call("run.GetIamPolicy")
	name, err := f.canonicalService(req.GetResource())
	if err != nil {
		return nil, err
	}
	if f.services[name] == nil {
		return nil, notFoundService(req.GetResource())
	}
	return f.getPolicy(name), nil
}

func (s *runServer) SetIamPolicy(_ context.Context, req *iampb.SetIamPolicyRequest) (*iampb.Policy, error) {
	f := s.f
	f.mu.Lock()
	defer f.mu.Unlock()
	f.call("run.SetIamPolicy")
	name, err := f.canonicalService(req.GetResource())
	if err != nil {
		return nil, err
	}
	if f.services[name] == nil {
		return nil, notFoundService(req.GetResource())
	}
	return f.setPolicy(name, req.GetPolicy())
}

func (s *iamServer) GetIamPolicy(_ context.Context, req *iampb.GetIamPolicyRequest) (*iampb.Policy, error) {
	f := s.f
	f.mu.Lock()
	defer f.mu.Unlock()
	f.call("iam.GetIamPolicy")
	email, err := f.account(req.GetResource())
	if err != nil {
		return nil, err
	}
	return f.getPolicy("projects/" + f.Project + "/serviceAccounts/" + email), nil
}

func (s *iamServer) SetIamPolicy(_ context.Context, req *iampb.SetIamPolicyRequest) (*iampb.Policy, error) {
	f := s.f
	f.mu.Lock()
	defer f.mu.Unlock()
	f.call("iam.SetIamPolicy")
	email, err := f.account(req.GetResource())
	if err != nil {
		return nil, err
	}
	return f.setPolicy("projects/"+f.Project+"/serviceAccounts/"+email, req.GetPolicy())
}
