package checkpoint

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/supervaize/svz/core/internal/packed"

	"github.com/supervaize/svz/core/store"
)

// Request is a rule-checkpoint call to Studio (RuleCheckpointRequest, spec §6.3).
type Request struct {
	OccurrenceID string
	Phase        string // before or after
	SnapshotHash string
	JobID        string
	CaseID       string
	StepID       string
	Context      json.RawMessage // a JSON object
	SecretRefs   []string
}

// Response is Studio's decision (RuleCheckpointResponse).
type Response struct {
	CheckpointID string
	Status       string // allow, pause or stop
	SnapshotHash string
	InputHash    string
}

// Studio is how guarded steps reach Studio: package core/config adapts core/studio's client
// (POST {SUPERVAIZE_API_URL}/api/v1/rule-checkpoints/, never a URL from the snapshot).
type Studio interface {
	// RuleCheckpoint posts r with token in X-Rule-Checkpoint-Token. Its errors never contain the
	// token; an answer whose snapshot_hash is not r's is an error.
	RuleCheckpoint(ctx context.Context, token string, r Request) (Response, error)
	// TokenSecret is the secret the checkpoint tokens are sealed with in the store (every
	// instance that can call Studio has it: SUPERVAIZE_API_KEY). It is never stored or logged.
	TokenSecret() []byte
}

// Defaults of a Service.
const (
	// DefaultLease is how long an instance holds a running occurrence unless it renews its lease
	// (every quarter lease while it waits on Studio, an effect or an advance). An occurrence whose
	// instance died is free again DefaultLease + SkewMargin after the last renewal.
	DefaultLease = 20 * time.Second
	// SkewMargin keeps a lease alive past its end for instances whose clocks disagree.
	SkewMargin = 2 * time.Second
	// DecisionRetention is how long a decision that arrived before its checkpoint is kept.
	DecisionRetention = 7 * 24 * time.Hour
	// writeTimeout bounds the writes that end a run after its caller's context is done.
	writeTimeout = 10 * time.Second
)

// Config configures a Service.
type Config struct {
	// Store keeps the gates, steps and early decisions (the controller's store).
	Store store.Store
	// Studio is the checkpoint call; nil when the controller has no Studio connection (local
	// mode, tests): governed steps are then refused with an error naming the fix.
	Studio Studio
	Logger *slog.Logger
	// Now is the clock (time.Now).
	Now func() time.Time
	// Lease is the lease of a running occurrence (DefaultLease).
	Lease time.Duration
	// After is the timer (time.After) of lease renewals and of a resume waiting out another
	// instance's lease; tests replace it to fire on demand.
	After func(time.Duration) <-chan time.Time
}

// Service runs guarded steps for the agents of one controller. It keeps nothing in memory: any
// instance with the same store and Studio connection continues any step.
type Service struct {
	store  store.Store
	studio Studio
	log    *slog.Logger
	now    func() time.Time
	lease  time.Duration
	after  func(time.Duration) <-chan time.Time
	// packer stores occurrence records deflated (core/internal/packed): an occurrence is
	// rewritten at each phase, and DynamoDB bills each write by the record's started KB.
	packer packed.Packer
}

// NewService returns a Service for cfg.
func NewService(cfg Config) *Service {
	s := &Service{store: cfg.Store, studio: cfg.Studio, log: cfg.Logger, now: cfg.Now, lease: cfg.Lease, after: cfg.After}
	if s.log == nil {
		s.log = slog.Default()
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.lease <= 0 {
		s.lease = DefaultLease
	}
	if s.after == nil {
		s.after = time.After
	}
	return s
}

// ErrNoStudio: the controller has no Studio connection, so governed steps cannot run.
var ErrNoStudio = errors.New("rule checkpoints need a Studio connection: checkpoints are posted to SUPERVAIZE_API_URL with SUPERVAIZE_API_KEY, and this controller has none (local mode never calls Studio); set SUPERVAIZE_API_KEY, SUPERVAIZE_WORKSPACE_ID and SUPERVAIZE_API_URL (for development, the ones `svz dev studio` prints)")

// ErrNoScope: the context is not a handler's context of an agent that declares rule checkpoints.
var ErrNoScope = errors.New("checkpoint: no rule-checkpoint scope in this context: use the context the controller passes to a handler of an agent whose registration declares rule_checkpoints")

// ready reports why s cannot run governed steps.
func (s *Service) ready() error {
	switch {
	case s.studio == nil:
		return ErrNoStudio
	case s.store == nil:
		return errors.New("rule checkpoints need the controller's store (core.Config.Store; package config opens the one SUPERVAIZER_STORE names)")
	}
	return nil
}

// scope is what a handler's context carries: the service, the agent's steps and the verified
// workspace of the call.
type scope struct {
	svc       *Service
	reg       *Registry
	agent     string
	workspace string
}

type scopeKey struct{}

// NewContext returns ctx carrying the rule-checkpoint scope of one call: the controller calls it
// for every handler of an agent that declares rule checkpoints, with the VERIFIED workspace id.
func NewContext(ctx context.Context, svc *Service, reg *Registry, agentSlug, workspaceID string) context.Context {
	return context.WithValue(ctx, scopeKey{}, &scope{svc: svc, reg: reg, agent: agentSlug, workspace: workspaceID})
}

func scopeOf(ctx context.Context) (*scope, error) {
	sc, _ := ctx.Value(scopeKey{}).(*scope)
	switch {
	case sc == nil || sc.svc == nil || sc.reg == nil:
		return nil, ErrNoScope
	case sc.workspace == "":
		return nil, fmt.Errorf("%w (this call has no verified workspace)", ErrNoScope)
	}
	return sc, sc.svc.ready()
}
