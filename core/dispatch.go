package core

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strconv"

	"github.com/supervaize/svz/core/contract"
	"github.com/supervaize/svz/core/grant"
	"github.com/supervaize/svz/core/idempotency"
	"github.com/supervaize/svz/core/internal/wirejson"
	"github.com/supervaize/svz/core/telemetry"
)

// GrantHeader carries Studio's workspace-grant token.
const GrantHeader = "X-Supervaize-Workspace-Authorization"

// ReplayedHeader is set ("true") on the answer to an action the idempotency gate replayed: the
// recorded result of the key's first run, the handler not run again. The result's
// replay_safety.strictly_idempotent_response says that a retry would get this same answer, on
// the first run too; only this header says that this answer is a replay (as Stripe's
// Idempotent-Replayed). It is absent on every other answer.
const ReplayedHeader = "Idempotent-Replayed"

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
	// The body, the encoded result and the answer live in recycled buffers: nothing a handler
	// receives points into them (requests are decoded into their own memory).
	in, res, out := c.bufs.get(), c.bufs.get(), c.bufs.get()
	defer func() { c.bufs.put(in); c.bufs.put(res); c.bufs.put(out) }()
	body := bytes.NewBuffer(*in)
	_, err := body.ReadFrom(http.MaxBytesReader(w, r.Body, limit))
	*in = body.Bytes()
	if err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			c.tooLarge(w)
			return
		}
		writeDetail(w, http.StatusBadRequest, "Could not read the request body")
		return
	}
	ctx, call := c.tel.start(r, c.now())
	resp := c.handleRPC(ctx, *in, r.Header.Get(GrantHeader), res)
	*out, err = resp.appendTo(*out)
	if err != nil {
		// Results were validated; an encoding failure is a bug, answered as an internal error.
		c.log.ErrorContext(ctx, "encode JSON-RPC answer", "error", err)
		resp = errorResponse(resp.ID, CodeInternalError, "Internal error", nil)
		*out, _ = resp.appendTo((*out)[:0])
	}
	c.tel.end(ctx, call, resp, c.now())
	w.Header().Set("Content-Type", "application/json")
	if resp.Replayed {
		w.Header().Set(ReplayedHeader, "true")
	}
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(*out)
}

func (c *Controller) tooLarge(w http.ResponseWriter) {
	writeDetail(w, http.StatusRequestEntityTooLarge,
		"Request body too large: the limit is "+strconv.FormatInt(c.cfg.MaxBodyBytes, 10)+" bytes")
}

// handleRPC answers one JSON-RPC request body. It never fails: every outcome is a JSON-RPC
// response (sent with HTTP 200). The body is read once: validated (JSON in valid UTF-8, else a
// parse error), then the envelope and the v2 request are decoded from it. A result is encoded
// into *scratch when given (a recycled buffer), else into a new one.
func (c *Controller) handleRPC(ctx context.Context, body []byte, token string, scratch *[]byte) rpcResponse {
	if !wirejson.Valid(body) {
		return unreadableRequest(CodeParseError, "Parse error", nil)
	}
	switch wirejson.Kind(body) {
	case '{':
	case '[':
		return unreadableRequest(CodeInvalidRequest, "Invalid Request",
			map[string]string{"detail": "batch requests are not supported: send one request object per call"})
	default:
		return unreadableRequest(CodeInvalidRequest, "Invalid Request",
			map[string]string{"detail": "the request must be a JSON object"})
	}
	env, errs := decodeEnvelope(body)
	env.token = token
	env.scratch = scratch
	callOf(ctx).envelope(env.method, env.id)
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

// unwrap returns the wrapped request object when params (a valid object) carries one under key.
func unwrap(params json.RawMessage, key string) json.RawMessage {
	inner := params
	for name, v := range wirejson.Members(params) {
		if string(wirejson.Name(name)) == key {
			inner = v // the last one counts, as when decoding into a map
		}
	}
	return inner
}

func (c *Controller) invokeAction(ctx context.Context, env envelope) rpcResponse {
	started := c.now()
	req, err := contract.DecodeActionRequest(unwrap(env.params, "action_request"))
	if err != nil {
		return errorResponse(env.id, CodeInvalidParams, "Invalid Supervaizer v2 action request", map[string]any{"errors": fieldErrors(err)})
	}
	agent := c.bySlug[req.AgentSlug]
	callOf(ctx).request(telemetry.Action, req.Action, agent != nil && agent.actions[req.Action] != nil, req.AgentSlug, req.RequestID, req.JobID, req.Workspace.ID)
	req.WorkspaceAuthorization = nil
	if req.Action != bindingOptionsAction && req.Action != bindingCreateAction {
		vctx, resp, ok := c.authorizeCall(ctx, env, grant.MethodActionInvoke, req.Action, req.AgentSlug, agent, req.Workspace)
		if !ok {
			return resp
		}
		req.WorkspaceAuthorization = vctx
	}
	failData := func() map[string]string { return map[string]string{"agent_slug": req.AgentSlug, "action": req.Action} }
	var h ActionHandler
	if agent != nil {
		h = agent.actions[req.Action]
	}
	if h == nil {
		return errorResponse(env.id, CodeActionNotRegistered, "Action handler not registered: "+req.Action, failData())
	}
	ctx = c.handlerContext(ctx, agent, req.WorkspaceAuthorization)
	var res *contract.ActionResult
	ran, appended := true, false
	if c.cfg.Gate != nil && req.IdempotencyKey != nil && *req.IdempotencyKey != "" && agent.gated[req.Action] {
		res, ran, appended, err = c.runGated(ctx, agent, h, req)
	} else {
		res, err = c.checkAndRun(ctx, agent, h, req)
	}
	var raw json.RawMessage
	if err == nil {
		raw, err = encodeResult(env.scratch, res)
	}
	if err != nil {
		c.log.ErrorContext(ctx, "action failed", "agent_slug", req.AgentSlug, "action", req.Action,
			"request_id", req.RequestID, "error", err, "duration", c.now().Sub(started))
		return errorResponse(env.id, CodeInternalError, "Action handler failed", failData())
	}
	// A replay is an answer of the gate whose handler did not run and that the gate did not
	// decline (a conflict, a retry in progress): never the first run, appended with its record
	// or not.
	replayed := !ran && !idempotency.Declined(res)
	callOf(ctx).result(res.Status, res.Errors, replayed)
	if ran && !appended {
		c.events.appendEffects(ctx, req, verifiedWorkspace(req), res.Effects)
	}
	if c.log.Enabled(ctx, slog.LevelInfo) { // the arguments cost allocations even when dropped
		c.log.InfoContext(ctx, "action", "agent_slug", req.AgentSlug, "action", req.Action, "request_id", req.RequestID,
			"status", res.Status, "replayed", replayed, "duration", c.now().Sub(started))
	}
	resp := resultResponse(env.id, raw)
	resp.Replayed = replayed
	return resp
}

// runGated runs the action through the idempotency gate; ran reports whether the handler ran
// (false for a replayed or declined retry). A gate that appends the effect event with the
// run's record (AppendingGate) saves a store call; appended then reports that the event is in
// the log, so that it is not appended again.
func (c *Controller) runGated(ctx context.Context, agent *boundAgent, h ActionHandler, req *contract.ActionRequest) (res *contract.ActionResult, ran, appended bool, err error) {
	run := func(ctx context.Context) (*contract.ActionResult, error) {
		ran = true
		return c.checkAndRun(ctx, agent, h, req)
	}
	ag, ok := c.cfg.Gate.(AppendingGate)
	if !ok {
		res, err = c.cfg.Gate.Do(ctx, req, run)
		return res, ran, false, err
	}
	res, appended, err = ag.DoAppending(ctx, req, run, c.events.gateEvent(ctx, req))
	return res, ran, appended, err
}

// checkAndRun checks the request's input against the action's declared fields, then runs the
// handler: an input that does not fit is answered without it.
func (c *Controller) checkAndRun(ctx context.Context, agent *boundAgent, h ActionHandler, req *contract.ActionRequest) (*contract.ActionResult, error) {
	if res, err := agent.checkInput(req); res != nil || err != nil {
		return res, err
	}
	res, err := c.runAction(ctx, h, req)
	if refused := refusal(req, err); refused != nil {
		return refused, nil
	}
	return res, err
}

func (c *Controller) loadSurface(ctx context.Context, env envelope) rpcResponse {
	started := c.now()
	req, err := contract.DecodeSurfaceRequest(unwrap(env.params, "surface_request"))
	if err != nil {
		return errorResponse(env.id, CodeInvalidParams, "Invalid Supervaizer v2 surface request", map[string]any{"errors": fieldErrors(err)})
	}
	agent := c.bySlug[req.AgentSlug]
	callOf(ctx).request(telemetry.Surface, req.Surface, agent != nil && agent.surfaces[req.Surface] != nil, req.AgentSlug, req.RequestID, req.JobID, req.Workspace.ID)
	req.WorkspaceAuthorization = nil
	if req.Surface != bindingCreateSurface {
		vctx, resp, ok := c.authorizeCall(ctx, env, grant.MethodSurfaceLoad, req.Surface, req.AgentSlug, agent, req.Workspace)
		if !ok {
			return resp
		}
		req.WorkspaceAuthorization = vctx
	}
	failData := func() map[string]string {
		return map[string]string{"agent_slug": req.AgentSlug, "surface": req.Surface}
	}
	var h SurfaceHandler
	if agent != nil {
		h = agent.surfaces[req.Surface]
	}
	if h == nil {
		return errorResponse(env.id, CodeSurfaceNotRegistered, "Surface handler not registered: "+req.Surface, failData())
	}
	res, err := c.runSurface(c.handlerContext(ctx, agent, req.WorkspaceAuthorization), h, req)
	var raw json.RawMessage
	if err == nil {
		raw, err = encodeResult(env.scratch, res)
	}
	if err != nil {
		c.log.ErrorContext(ctx, "surface failed", "agent_slug", req.AgentSlug, "surface", req.Surface,
			"request_id", req.RequestID, "error", err, "duration", c.now().Sub(started))
		return errorResponse(env.id, CodeInternalError, "Surface handler failed", failData())
	}
	if c.log.Enabled(ctx, slog.LevelInfo) {
		c.log.InfoContext(ctx, "surface", "agent_slug", req.AgentSlug, "surface", req.Surface, "request_id", req.RequestID,
			"duration", c.now().Sub(started))
	}
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
		call.Agent = &agent.grant
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

// runAction runs an action handler, turning a panic or an invalid result into an error. A draft
// must also fit the setup field it targets in the agent's registration.
func (c *Controller) runAction(ctx context.Context, h ActionHandler, req *contract.ActionRequest) (*contract.ActionResult, error) {
	return runHandler(ctx, func(ctx context.Context) (*contract.ActionResult, error) { return h.ServeAction(ctx, req) },
		func(res *contract.ActionResult) error {
			if err := res.Validate(); err != nil {
				return err
			}
			if a := c.bySlug[req.AgentSlug]; a != nil && res.Draft != nil {
				return a.cfg.Registration.CheckDraft(res.Draft)
			}
			return nil
		})
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

// encodeResult encodes a validated result once, for the answer, into *scratch when given; a
// value JSON cannot hold (a NaN in a free-form member...) makes it an invalid result.
func encodeResult(scratch *[]byte, res any) (json.RawMessage, error) {
	var buf []byte
	if scratch != nil {
		buf = (*scratch)[:0]
	}
	b, err := contract.AppendJSON(buf, res)
	if err != nil {
		return nil, fmt.Errorf("handler returned a result that cannot be encoded: %w", err)
	}
	if scratch != nil {
		*scratch = b
	}
	return b, nil
}

func fieldErrors(err error) contract.FieldErrors {
	if fe, ok := errors.AsType[contract.FieldErrors](err); ok {
		return fe
	}
	return contract.FieldErrors{{Type: "value_error", Loc: []any{}, Msg: err.Error()}}
}
