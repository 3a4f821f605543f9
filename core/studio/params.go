package studio

import (
	"context"
	"crypto/rsa"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/supervaize/svz/core/contract"
)

// EnvParametersTTL bounds how long an instance keeps the parameters it looked up.
const EnvParametersTTL = "SUPERVAIZER_STUDIO_PARAMETERS_TTL"

// DefaultParametersTTL is the lifetime of looked-up parameters: an operator's change in Studio
// reaches running instances within it.
const DefaultParametersTTL = 5 * time.Minute

// AgentParameters is what Parameters needs to know of one agent.
type AgentParameters struct {
	Slug string
	// StudioID is the agent's Studio id (from the handshake or SUPERVAIZER_STUDIO_AGENT_IDS); the
	// lookup is by slug when it is empty.
	StudioID string
	Declared []contract.Parameter
}

// ParametersConfig configures NewParameters.
type ParametersConfig struct {
	Client *Client
	// Key decrypts parameters_encrypted; nil refuses every agent Studio says is configured.
	Key    *rsa.PrivateKey
	Agents []AgentParameters
	// TTL is how long looked-up values are used before the next need looks them up again
	// (DefaultParametersTTL when 0).
	TTL time.Duration
	// Export puts an environment parameter's value in the process environment, as the reference
	// does (os.Setenv when nil).
	Export func(name, value string) error
	Now    func() time.Time
	Logger *slog.Logger
}

// Parameters gives each agent's parameter values (core.ParameterSource). It looks an agent up at
// most once per TTL per instance, on the first need, sharing one lookup between concurrent
// callers; a failed lookup is not kept, so the next need tries again. Calls that read no parameter
// never reach it.
type Parameters struct {
	cfg    ParametersConfig
	agents map[string]AgentParameters

	mu       sync.Mutex
	cache    map[string]paramEntry
	inflight map[string]*paramFlight
}

type paramEntry struct {
	values  map[string]string
	fetched time.Time
}

type paramFlight struct {
	done   chan struct{}
	values map[string]string
	err    error
}

// NewParameters returns the parameter source of agents.
func NewParameters(cfg ParametersConfig) (*Parameters, error) {
	if cfg.Client == nil {
		return nil, errors.New("studio: parameters need a Studio client")
	}
	if cfg.TTL <= 0 {
		cfg.TTL = DefaultParametersTTL
	}
	if cfg.Export == nil {
		cfg.Export = os.Setenv
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	p := &Parameters{cfg: cfg, agents: map[string]AgentParameters{}, cache: map[string]paramEntry{}, inflight: map[string]*paramFlight{}}
	for _, a := range cfg.Agents {
		p.agents[a.Slug] = a
	}
	return p, nil
}

// AgentParameters returns the values of slug's parameters that have one.
func (p *Parameters) AgentParameters(ctx context.Context, slug string) (map[string]string, error) {
	a, ok := p.agents[slug]
	if !ok {
		return nil, fmt.Errorf("studio: agent %q declares no parameters", slug)
	}
	p.mu.Lock()
	if e, ok := p.cache[slug]; ok && p.cfg.Now().Sub(e.fetched) < p.cfg.TTL {
		p.mu.Unlock()
		return e.values, nil
	}
	f := p.inflight[slug]
	if f == nil {
		f = &paramFlight{done: make(chan struct{})}
		p.inflight[slug] = f
		// The lookup outlives a caller that gives up: the others wait for it. The client's
		// timeouts bound it.
		go p.fetch(context.WithoutCancel(ctx), a, f)
	}
	p.mu.Unlock()
	select {
	case <-f.done:
		return f.values, f.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Prefetch looks every agent up now (a long-running server does it at start, as the reference).
func (p *Parameters) Prefetch(ctx context.Context) error {
	var errs []error
	for _, a := range p.cfg.Agents {
		if _, err := p.AgentParameters(ctx, a.Slug); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (p *Parameters) fetch(ctx context.Context, a AgentParameters, f *paramFlight) {
	start := p.cfg.Now()
	values, err := p.lookup(ctx, a)
	// Logged before the waiters are released: nothing of the lookup outlives the call that needed it.
	if err != nil {
		p.cfg.Logger.WarnContext(ctx, "Studio parameters lookup failed", "agent_slug", a.Slug, "error", err)
	} else {
		p.cfg.Logger.InfoContext(ctx, "Studio parameters looked up", "agent_slug", a.Slug, "parameters", len(values),
			"duration", p.cfg.Now().Sub(start))
	}
	p.mu.Lock()
	f.values, f.err = values, err
	delete(p.inflight, a.Slug)
	if err == nil {
		p.cache[a.Slug] = paramEntry{values: values, fetched: start}
	}
	p.mu.Unlock()
	close(f.done)
}

// lookup asks Studio for the agent and decrypts its parameters when it is configured.
func (p *Parameters) lookup(ctx context.Context, a AgentParameters) (map[string]string, error) {
	rec, err := p.cfg.Client.Agent(ctx, a.StudioID, a.Slug)
	if err != nil {
		return nil, err
	}
	values := map[string]string{}
	if rec.OnboardingStatus != OnboardingConfigured || rec.ParametersEncrypted == "" {
		return values, nil
	}
	if p.cfg.Key == nil {
		return nil, fmt.Errorf("agent %q: %s is required to decrypt the parameters Studio sends", a.Slug, EnvPrivateKey)
	}
	plain, err := Decrypt(p.cfg.Key, rec.ParametersEncrypted)
	if err != nil {
		return nil, fmt.Errorf("agent %q: parameters_encrypted: %w", a.Slug, err)
	}
	pvs, err := DecodeParameterValues(plain)
	if err != nil {
		return nil, fmt.Errorf("agent %q: %w", a.Slug, err)
	}
	declared := make(map[string]contract.Parameter, len(a.Declared))
	for _, d := range a.Declared {
		declared[d.Name] = d
	}
	for _, pv := range pvs {
		d, ok := declared[pv.Name]
		if !ok {
			return nil, fmt.Errorf("agent %q: Studio sent parameter %q, which the agent does not declare: add it to AgentConfig.Parameters", a.Slug, pv.Name)
		}
		if !pv.Set {
			continue
		}
		values[pv.Name] = pv.Value
		if d.IsEnvironment {
			if err := p.cfg.Export(pv.Name, pv.Value); err != nil {
				return nil, fmt.Errorf("agent %q: export parameter %q to the environment: %w", a.Slug, pv.Name, err)
			}
		}
	}
	return values, nil
}
