package core

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"runtime/debug"
	"strconv"

	"github.com/supervaize/svz/core/contract"
	"github.com/supervaize/svz/core/grant"
)

// GrantHeader carries Studio's workspace-grant token.
const GrantHeader = "X-Supervaize-Workspace-Authorization"

// Bootstrap capabilities: exactly these ids run before a workspace grant exists (spec §4.6).
// Custom ids configured in a registration's workspace_binding block are not exempt.
const (
	bindingOptionsAction = "workspace_binding.options"
	bindingCreateAction  = "workspace_binding.create"
	bindingCreateSurface = "workspace_binding.create"
)

func (c *Controller) serveRPC(w http.ResponseWriter, r *http.Request) {
	if !c.authorize(w, r, scopeWrite) {
		return
	}
	limit := c.cfg.MaxBodyBytes
	if r.ContentLength > limit {
		c.tooLarge(w)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			c.tooLarge(w)
			return
		}
		writeDetail(w, http.StatusBadRequest, "Could not read the request body")
		return
	}
	resp := c.handleRPC(r.Context(), body, r.Header.Get(GrantHeader))
	out, err := resp.encode()
	if err != nil {
		// Results were validated; an encoding failure is a bug, answered as an internal error.
		c.log.ErrorContext(r.Context(), "encode JSON-RPC answer", "error", err)
		out, _ = errorResponse(resp.ID, CodeInternalError, "Internal error", nil).encode()
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(out)
}

func (c *Controller) tooLarge(w http.ResponseWriter) {
	writeDetail(w, http.StatusRequestEntityTooLarge,
		"Request body too large: the limit is "+strconv.FormatInt(c.cfg.MaxBodyBytes, 10)+" bytes")
}

// handleRPC answers one JSON-RPC request body. It never fails: every outcome is a JSON-RPC
// response (sent with HTTP 200).
func (c *Controller) handleRPC(ctx context.Context, body []byte, token string) rpcResponse {
	body = bytes.TrimSpace(body)
	var obj map[string]json.RawMessage
	switch {
	case len(body) > 0 && body[0] == '{':
		if json.Unmarshal(body, &obj) != nil {
			return unreadableRequest(CodeParseError, "Parse error", nil)
		}
	case !json.Valid(body):
		return unreadableRequest(CodeParseError, "Parse error", nil)
	case body[0] == '[':
		return unreadableRequest(CodeInvalidRequest, "Invalid Request",
			map[string]string{"detail": "batch requests are not supported: send one request object per call"})
	default:
		return unreadableRequest(CodeInvalidRequest, "Invalid Request",
			map[string]string{"detail": "the request must be a JSON object"})
	}
	env, errs := decodeEnvelope(obj)
	env.token = token
	if len(errs) > 0 {
		return errorResponse(env.id, CodeInvalidParams, "Invalid JSON-RPC request", map[string]any{"errors": errs})
	}
	switch env.method {
	case grant.MethodActionInvoke:
		return c.invokeAction(ctx, env)
	case grant.MethodSurfaceLoad:
		return c.loadSurface(ctx, env)
	}
	return errorResponse(env.id, CodeMethodNotFound, "Method not found: "+env.method, nil)
}

// unwrap returns the wrapped request object when params carries one under key. Only params that
// mention the key are decoded to look.
func unwrap(params json.RawMessage, key string) json.RawMessage {
	if !bytes.Contains(params, []byte(key)) && !bytes.Contains(params, []byte(`\u`)) {
		return params
	}
	var probe map[string]json.RawMessage
	if json.Unmarshal(params, &probe) == nil {
		if inner, ok := probe[key]; ok {
			return inner
		}
	}
	return params
}

func (c *Controller) invokeAction(ctx context.Context, env envelope) rpcResponse {
	started := c.now()
	req, err := contract.DecodeActionRequest(unwrap(env.params, "action_request"))
	if err != nil {
		return errorResponse(env.id, CodeInvalidParams, "Invalid Supervaizer v2 action request", map[string]any{"errors": fieldErrors(err)})
	}
	agent := c.bySlug[req.AgentSlug]
	req.WorkspaceAuthorization = nil
	if req.Action != bindingOptionsAction && req.Action != bindingCreateAction {
		vctx, resp, ok := c.authorizeCall(ctx, env, grant.MethodActionInvoke, req.Action, req.AgentSlug, agent, req.Workspace)
		if !ok {
			return resp
		}
		req.WorkspaceAuthorization = vctx
	}
	failData := map[string]string{"agent_slug": req.AgentSlug, "action": req.Action}
	var h ActionHandler
	if agent != nil {
		h = agent.actions[req.Action]
	}
	if h == nil {
		return errorResponse(env.id, CodeActionNotRegistered, "Action handler not registered: "+req.Action, failData)
	}
	ran := false
	ctx = c.handlerContext(ctx, agent, req.WorkspaceAuthorization)
	run := func(ctx context.Context) (*contract.ActionResult, error) {
		ran = true
		if res, err := agent.checkInput(req); res != nil || err != nil {
			return res, err
		}
		return c.runAction(ctx, h, req)
	}
	var res *contract.ActionResult
	if c.cfg.Gate != nil && req.IdempotencyKey != nil && *req.IdempotencyKey != "" && agent.gated[req.Action] {
		res, err = c.cfg.Gate.Do(ctx, req, run)
	} else {
		res, err = run(ctx)
	}
	var raw json.RawMessage
	if err == nil {
		raw, err = encodeResult(res)
	}
	if err != nil {
		c.log.ErrorContext(ctx, "action failed", "agent_slug", req.AgentSlug, "action", req.Action,
			"request_id", req.RequestID, "error", err, "duration", c.now().Sub(started))
		return errorResponse(env.id, CodeInternalError, "Action handler failed", failData)
	}
	if ran {
		c.events.appendEffects(ctx, req, res.Effects)
	}
	c.log.InfoContext(ctx, "action", "agent_slug", req.AgentSlug, "action", req.Action, "request_id", req.RequestID,
		"status", res.Status, "replayed", !ran, "duration", c.now().Sub(started))
	return resultResponse(env.id, raw)
}

func (c *Controller) loadSurface(ctx context.Context, env envelope) rpcResponse {
	started := c.now()
	req, err := contract.DecodeSurfaceRequest(unwrap(env.params, "surface_request"))
	if err != nil {
		return errorResponse(env.id, CodeInvalidParams, "Invalid Supervaizer v2 surface request", map[string]any{"errors": fieldErrors(err)})
	}
	agent := c.bySlug[req.AgentSlug]
	req.WorkspaceAuthorization = nil
	if req.Surface != bindingCreateSurface {
		vctx, resp, ok := c.authorizeCall(ctx, env, grant.MethodSurfaceLoad, req.Surface, req.AgentSlug, agent, req.Workspace)
		if !ok {
			return resp
		}
		req.WorkspaceAuthorization = vctx
	}
	failData := map[string]string{"agent_slug": req.AgentSlug, "surface": req.Surface}
	var h SurfaceHandler
	if agent != nil {
		h = agent.surfaces[req.Surface]
	}
	if h == nil {
		return errorResponse(env.id, CodeSurfaceNotRegistered, "Surface handler not registered: "+req.Surface, failData)
	}
	res, err := c.runSurface(c.handlerContext(ctx, agent, req.WorkspaceAuthorization), h, req)
	var raw json.RawMessage
	if err == nil {
		raw, err = encodeResult(res)
	}
	if err != nil {
		c.log.ErrorContext(ctx, "surface failed", "agent_slug", req.AgentSlug, "surface", req.Surface,
			"request_id", req.RequestID, "error", err, "duration", c.now().Sub(started))
		return errorResponse(env.id, CodeInternalError, "Surface handler failed", failData)
	}
	c.log.InfoContext(ctx, "surface", "agent_slug", req.AgentSlug, "surface", req.Surface, "request_id", req.RequestID,
		"duration", c.now().Sub(started))
	return resultResponse(env.id, raw)
}

// authorizeCall asks the Authorizer; on refusal it returns the JSON-RPC answer to send.
func (c *Controller) authorizeCall(ctx context.Context, env envelope, method, target, slug string, agent *boundAgent, ws contract.WorkspaceRef) (*contract.VerifiedWorkspaceContext, rpcResponse, bool) {
	call := grant.Call{
		Token:     env.token,
		Method:    method,
		Target:    target,
		AgentSlug: slug,
		Workspace: ws,
	}
	if agent != nil {
		call.Agent = &grant.Agent{Slug: agent.slug, ID: agent.id, StudioID: agent.studioID}
	}
	vctx, err := c.cfg.Authorizer.Authorize(ctx, call)
	if err == nil && vctx == nil {
		err = errors.New("authorizer returned neither a context nor an error")
	}
	if err != nil {
		if ge, ok := errors.AsType[*grant.Error](err); ok {
			return nil, errorResponse(env.id, CodeWorkspaceAuthorizationFailed, ge.Message, map[string]string{"code": string(ge.Code)}), false
		}
		c.log.ErrorContext(ctx, "workspace authorization failed unexpectedly", "agent_slug", slug, "target", target, "error", err)
		return nil, errorResponse(env.id, CodeInternalError, "Internal error", nil), false
	}
	return vctx, rpcResponse{}, true
}

// runAction runs an action handler, turning a panic or an invalid result into an error.
func (c *Controller) runAction(ctx context.Context, h ActionHandler, req *contract.ActionRequest) (*contract.ActionResult, error) {
	return runHandler(ctx, func(ctx context.Context) (*contract.ActionResult, error) { return h.ServeAction(ctx, req) },
		(*contract.ActionResult).Validate)
}

// runSurface runs a surface handler, turning a panic or an invalid result into an error.
func (c *Controller) runSurface(ctx context.Context, h SurfaceHandler, req *contract.SurfaceRequest) (*contract.SurfaceResult, error) {
	return runHandler(ctx, func(ctx context.Context) (*contract.SurfaceResult, error) { return h.ServeSurface(ctx, req) },
		(*contract.SurfaceResult).Validate)
}

func runHandler[T any](ctx context.Context, serve func(context.Context) (*T, error), validate func(*T) error) (res *T, err error) {
	defer func() {
		if p := recover(); p != nil {
			res, err = nil, fmt.Errorf("handler panicked: %v\n%s", p, debug.Stack())
		}
	}()
	res, err = serve(ctx)
	if err != nil {
		return nil, err
	}
	if res == nil {
		return nil, errors.New("handler returned no result")
	}
	if verr := validate(res); verr != nil {
		return nil, fmt.Errorf("handler returned an invalid result: %w", verr)
	}
	return res, nil
}

// encodeResult encodes a validated result once, for the answer; a value JSON cannot hold (a NaN
// in a free-form member...) makes it an invalid result.
func encodeResult(res any) (json.RawMessage, error) {
	b, err := json.Marshal(res)
	if err != nil {
		return nil, fmt.Errorf("handler returned a result that cannot be encoded: %w", err)
	}
	return b, nil
}

func fieldErrors(err error) contract.FieldErrors {
	if fe, ok := errors.AsType[contract.FieldErrors](err); ok {
		return fe
	}
	return contract.FieldErrors{{Type: "value_error", Loc: []any{}, Msg: err.Error()}}
}
