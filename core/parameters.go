package core

import (
	"context"
	"errors"
	"fmt"
)

// ParameterSource gives the values the operator configured in Studio for an agent's declared
// parameters (package core/studio implements it: agent lookup, decryption, a bounded cache). It
// is asked only when a handler reads a parameter, never on a call that does not.
type ParameterSource interface {
	// AgentParameters returns name → value for the agent's parameters that have a value.
	AgentParameters(ctx context.Context, agentSlug string) (map[string]string, error)
}

// paramScope is what Parameter needs from the call in progress.
type paramScope struct {
	agent *Agent
	src   ParameterSource
}

type paramScopeKey struct{}

// withParameters lets the handlers of a's call read its parameters. Agents that declare none pay
// nothing.
func (c *Controller) withParameters(ctx context.Context, a *Agent) context.Context {
	if a == nil || len(a.cfg.Parameters) == 0 {
		return ctx
	}
	return context.WithValue(ctx, paramScopeKey{}, &paramScope{agent: a, src: c.cfg.Parameters})
}

// ErrNoCall is returned by Parameter outside a handler of an agent that declares parameters.
var ErrNoCall = errors.New("core.Parameter: no call of an agent that declares parameters in this context (declare them in AgentConfig.Parameters and read them inside a handler)")

// Parameter returns the value the operator configured in Studio for the declared parameter name
// of the agent whose handler ctx belongs to, and whether it has one. A controller without a
// Studio connection has no values (ok is false). Reading a parameter the agent does not declare
// is an error naming it, and so is a failed lookup; errors never contain a value.
func Parameter(ctx context.Context, name string) (value string, ok bool, err error) {
	sc, _ := ctx.Value(paramScopeKey{}).(*paramScope)
	if sc == nil {
		return "", false, ErrNoCall
	}
	declared := false
	for _, p := range sc.agent.cfg.Parameters {
		if p.Name == name {
			declared = true
			break
		}
	}
	if !declared {
		return "", false, fmt.Errorf("agent %q declares no parameter %q: add it to AgentConfig.Parameters", sc.agent.slug, name)
	}
	if sc.src == nil {
		return "", false, nil
	}
	values, err := sc.src.AgentParameters(ctx, sc.agent.slug)
	if err != nil {
		return "", false, fmt.Errorf("parameters of agent %q: %w", sc.agent.slug, err)
	}
	value, ok = values[name]
	return value, ok, nil
}
