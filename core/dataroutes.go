package core

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/supervaize/svz/core/contract"
	"github.com/supervaize/svz/core/grant"
	"github.com/supervaize/svz/core/state"
)

// DataResource routes (spec §8), for agents that declare DataResources:
//
//	GET    /api/agents/{slug}/data/{name}/?skip=0&limit=100  list    (read key)
//	GET    /api/agents/{slug}/data/{name}/{item_id}          get     (read key)
//	POST   /api/agents/{slug}/data/{name}/                   create  (write key) → 201
//	PUT    /api/agents/{slug}/data/{name}/{item_id}          update  (write key)
//	DELETE /api/agents/{slug}/data/{name}/{item_id}          delete  (write key) → {"deleted": true}
//	POST   /api/agents/{slug}/data/{name}/import/            import  (write key)
//
// A call goes through, in order: the route (404, 405, or a 307 to the path with or without its
// trailing slash, as FastAPI's router does, never to the URL asked; a path with an encoded slash,
// %2F, is 404 on every route), the X-API-Key (401/403), the operation (501 when the
// resource does not serve it), the query or body (413, 422 in FastAPI's shape), the workspace grant
// with scope resource.<name>.<op> (403 {"detail": <verifier message>}, never bypassed, not even in
// local mode), the mission headers (400), then the callback.
const dataPrefix = "/api/agents/"

// Headers Studio sends with a DataResource call (build_data_resource_context_headers).
const (
	HeaderWorkspaceID     = "X-Supervaize-Workspace-Id"
	HeaderWorkspaceSlug   = "X-Supervaize-Workspace-Slug"
	HeaderMissionID       = "X-Supervaize-Mission-Id"
	HeaderMissionMetadata = "X-Supervaize-Mission-Metadata"
	HeaderRequestID       = "X-Supervaize-Request-Id"
)

// List bounds and defaults (the reference's Query constraints).
const (
	DefaultDataListLimit = 100
	MaxDataListLimit     = 1000
)

// dataRouteKind is one of the three path shapes of a DataResource.
type dataRouteKind int

const (
	dataCollection dataRouteKind = iota + 1 // {name}/
	dataItem                                // {name}/{item_id}
	dataImport                              // {name}/import/
)

// methods are the HTTP methods a path shape routes, in the reference's route order.
func (k dataRouteKind) methods() []string {
	switch k {
	case dataCollection:
		return []string{http.MethodGet, http.MethodPost}
	case dataItem:
		return []string{http.MethodGet, http.MethodPut, http.MethodDelete}
	}
	return []string{http.MethodPost}
}

// op is the operation method calls on a path of shape k, or "".
func (k dataRouteKind) op(method string) string {
	switch {
	case k == dataCollection && method == http.MethodGet:
		return contract.DataOpList
	case k == dataCollection && method == http.MethodPost:
		return contract.DataOpCreate
	case k == dataItem && method == http.MethodGet:
		return contract.DataOpGet
	case k == dataItem && method == http.MethodPut:
		return contract.DataOpUpdate
	case k == dataItem && method == http.MethodDelete:
		return contract.DataOpDelete
	case k == dataImport && method == http.MethodPost:
		return contract.DataOpImport
	}
	return ""
}

type dataRoute struct {
	agent *boundAgent
	res   *dataResource
	kind  dataRouteKind
	id    string
}

// matchData resolves a decoded path under /api/agents/. Like Starlette's {item_id}, an id is one
// non-empty path segment.
func (c *Controller) matchData(path string) (dataRoute, bool) {
	rest, ok := strings.CutPrefix(path, dataPrefix)
	if !ok {
		return dataRoute{}, false
	}
	slug, rest, _ := strings.Cut(rest, "/")
	a := c.bySlug[slug]
	rest, ok = strings.CutPrefix(rest, "data/")
	if a == nil || !ok {
		return dataRoute{}, false
	}
	name, rest, ok := strings.Cut(rest, "/")
	if !ok {
		return dataRoute{}, false
	}
	var res *dataResource
	for _, d := range a.data {
		if d.decl.Name == name {
			res = d
		}
	}
	if res == nil {
		return dataRoute{}, false
	}
	switch {
	case rest == "":
		return dataRoute{a, res, dataCollection, ""}, true
	case rest == "import/":
		return dataRoute{a, res, dataImport, ""}, true
	case !strings.Contains(rest, "/"):
		return dataRoute{a, res, dataItem, rest}, true
	}
	return dataRoute{}, false
}

// encodedSlash reports whether u's path carries an encoded slash (%2F). RawPath is set only when
// the path's encoding is not the default one, which an encoded slash always makes it: the common
// path costs one comparison.
func encodedSlash(u *url.URL) bool {
	raw := u.RawPath
	for i := strings.IndexByte(raw, '%'); i >= 0 && i+2 < len(raw); i = strings.IndexByte(raw, '%') {
		if raw[i+1] == '2' && (raw[i+2] == 'F' || raw[i+2] == 'f') {
			return true
		}
		raw = raw[i+1:]
	}
	return false
}

// serveData serves a DataResource route (resolved by matchData).
func (c *Controller) serveData(w http.ResponseWriter, r *http.Request, rt dataRoute) {
	op := rt.kind.op(r.Method)
	if op == "" {
		w.Header().Set("Allow", strings.Join(rt.kind.methods(), ", "))
		writeDetail(w, http.StatusMethodNotAllowed, "Method Not Allowed")
		return
	}
	c.serveDataOp(w, r, rt, op)
}

func (c *Controller) serveDataOp(w http.ResponseWriter, r *http.Request, rt dataRoute, op string) {
	started := c.now()
	ctx := r.Context()
	need := scopeWrite
	if op == contract.DataOpList || op == contract.DataOpGet {
		need = scopeRead
	}
	if !c.authorize(w, r, need) {
		return
	}
	res := rt.res
	name := res.decl.Name
	if !res.decl.Operations.Has(op) {
		writeDetail(w, http.StatusNotImplemented, fmt.Sprintf("DataResource '%s' does not support %s: it serves %s",
			name, op, strings.Join(res.decl.Operations.Names(), ", ")))
		return
	}

	// Parameters and body are validated before the grant, as FastAPI validates them before the
	// reference's handler verifies the token.
	var page DataPage
	var input any
	switch op {
	case contract.DataOpList:
		var errs []validationDetail
		if page, errs = parsePage(queryValues(r.URL.RawQuery)); len(errs) > 0 {
			writeJSON(w, http.StatusUnprocessableEntity, validationBody{Detail: errs})
			return
		}
	case contract.DataOpCreate, contract.DataOpUpdate, contract.DataOpImport:
		body, ok := c.readDataBody(w, r)
		if !ok {
			return
		}
		many := op == contract.DataOpImport
		if !utf8.Valid(body) && jsonContentType(r.Header.Get("Content-Type")) {
			// The reference's json.loads cannot decode the bytes (no JSONDecodeError): FastAPI's 400.
			// Read with U+FFFD in their place, two different bodies would store the same item.
			writeDetail(w, http.StatusBadRequest, "There was an error parsing the body")
			return
		}
		if err := checkBodyShape(body, r.Header.Get("Content-Type"), many); err != nil {
			writeJSON(w, http.StatusUnprocessableEntity, validationBody{err.errs, echoBody(body, r.Header.Get("Content-Type"))})
			return
		}
		var err error
		if many {
			input, err = res.decodeItems(body)
		} else {
			input, err = res.decodeItem(body)
		}
		if err != nil {
			u, _ := errors.AsType[*unprocessable](err) // the decoders return nothing else
			writeJSON(w, http.StatusUnprocessableEntity, validationBody{u.errs, echoBody(body, r.Header.Get("Content-Type"))})
			return
		}
	}

	vctx, ok := c.authorizeData(w, r, rt, op)
	if !ok {
		return
	}
	mission, err := missionFromHeaders(r.Header)
	if err != nil {
		writeDetail(w, http.StatusBadRequest, err.Error())
		return
	}
	dc := &DataContext{
		WorkspaceID:   vctx.WorkspaceID,
		WorkspaceSlug: vctx.WorkspaceSlug,
		MissionID:     r.Header.Get(HeaderMissionID),
		Mission:       mission,
		AgentSlug:     rt.agent.slug,
		RequestID:     r.Header.Get(HeaderRequestID),
		Authorization: vctx,
		Store:         c.cfg.Store,
	}
	ctx = state.NewContext(ctx, c.cfg.Store, rt.agent.slug, vctx.WorkspaceID) // callbacks may use package state
	ctx = c.withParameters(ctx, rt.agent.Agent)                               // and read the agent's parameters

	status := http.StatusOK
	var out []byte
	switch op {
	case contract.DataOpList:
		out, err = runData(func() ([]byte, error) { return res.list(ctx, dc, page) })
	case contract.DataOpGet:
		out, err = runData(func() ([]byte, error) { return res.get(ctx, dc, rt.id) })
	case contract.DataOpCreate:
		status = http.StatusCreated
		out, err = runData(func() ([]byte, error) { return res.create(ctx, dc, input) })
		if err == nil && !hasID(out) {
			err = &dataAnswer{status: http.StatusInternalServerError, detail: fmt.Sprintf("on_create for '%s' must return a dict with 'id'", name),
				cause: errors.New("the Create callback returned an item without an \"id\" member")}
		}
	case contract.DataOpUpdate:
		out, err = runData(func() ([]byte, error) { return res.update(ctx, dc, rt.id, input) })
	case contract.DataOpDelete:
		_, err = runData(func() (struct{}, error) { return struct{}{}, res.delete(ctx, dc, rt.id) })
		out = []byte(`{"deleted":true}`)
	case contract.DataOpImport:
		out, err = runData(func() ([]byte, error) { return res.importer(ctx, dc, input) })
	}
	if err != nil {
		status = c.writeDataFailure(w, r, rt, op, err)
	} else {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write(out)
	}
	c.log.InfoContext(ctx, "data resource", "agent_slug", rt.agent.slug, "resource", name, "operation", op,
		"request_id", dc.RequestID, "status", status, "duration", c.now().Sub(started))
}

// authorizeData verifies the workspace grant of a call; on refusal it writes the 403 (or, for an
// authorizer failure, a 500 that leaks nothing) itself.
func (c *Controller) authorizeData(w http.ResponseWriter, r *http.Request, rt dataRoute, op string) (*contract.VerifiedWorkspaceContext, bool) {
	ws := contract.WorkspaceRef{ID: r.Header.Get(HeaderWorkspaceID)}
	if vs := r.Header.Values(HeaderWorkspaceSlug); len(vs) > 0 {
		ws.Slug = &vs[0]
	}
	scope := "resource." + rt.res.decl.Name + "." + op
	vctx, err := c.cfg.Authorizer.Authorize(r.Context(), grant.Call{
		Token:     r.Header.Get(GrantHeader),
		Method:    grant.MethodDataResource,
		Target:    scope,
		AgentSlug: rt.agent.slug,
		Agent:     &grant.Agent{Slug: rt.agent.slug, ID: rt.agent.id, StudioID: rt.agent.studioID},
		Workspace: ws,
	})
	if err == nil && vctx == nil {
		err = errors.New("authorizer returned neither a context nor an error")
	}
	if err != nil {
		if ge, ok := errors.AsType[*grant.Error](err); ok {
			c.log.InfoContext(r.Context(), "data resource call refused", "agent_slug", rt.agent.slug, "scope", scope, "code", ge.Code)
			writeDetail(w, http.StatusForbidden, ge.Message)
			return nil, false
		}
		c.log.ErrorContext(r.Context(), "workspace authorization failed unexpectedly", "agent_slug", rt.agent.slug, "scope", scope, "error", err)
		writeDetail(w, http.StatusInternalServerError, "Internal Server Error")
		return nil, false
	}
	return vctx, true
}

// dataAnswer is an answer the route itself decides after a callback returned (a create result
// without id): status and detail are sent, cause is logged.
type dataAnswer struct {
	status int
	detail string
	cause  error
}

func (e *dataAnswer) Error() string { return e.cause.Error() }

// writeDataFailure answers a callback's error and returns the status sent.
func (c *Controller) writeDataFailure(w http.ResponseWriter, r *http.Request, rt dataRoute, op string, err error) int {
	ctx := r.Context()
	attrs := []any{"agent_slug", rt.agent.slug, "resource", rt.res.decl.Name, "operation", op, "error", err}
	if a, ok := errors.AsType[*dataAnswer](err); ok {
		c.log.ErrorContext(ctx, "data resource callback failed", attrs...)
		writeDetail(w, a.status, a.detail)
		return a.status
	}
	if errors.Is(err, ErrDataNotFound) && rt.kind == dataItem {
		writeDetail(w, http.StatusNotFound, fmt.Sprintf("%s '%s' not found", rt.res.decl.Name, rt.id))
		return http.StatusNotFound
	}
	if de, ok := errors.AsType[*DataError](err); ok && de.Status >= 400 && de.Status <= 499 {
		writeDetail(w, de.Status, de.Detail)
		return de.Status
	}
	c.log.ErrorContext(ctx, "data resource callback failed", attrs...)
	writeDetail(w, http.StatusInternalServerError, "Internal Server Error")
	return http.StatusInternalServerError
}

// hasID reports whether the JSON object b has an "id" member.
func hasID(b []byte) bool {
	var m map[string]json.RawMessage
	if json.Unmarshal(b, &m) != nil {
		return false
	}
	_, ok := m["id"]
	return ok
}

// readDataBody reads a body of at most Config.MaxBodyBytes, answering 413 (or 400) itself.
func (c *Controller) readDataBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	limit := c.cfg.MaxBodyBytes
	if r.ContentLength > limit {
		c.tooLarge(w)
		return nil, false
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			c.tooLarge(w)
			return nil, false
		}
		writeDetail(w, http.StatusBadRequest, "Could not read the request body")
		return nil, false
	}
	return body, true
}

// validationDetail is one error of FastAPI's 422 answer: {"detail": [{type, loc, msg, input, ctx}]}.
type validationDetail struct {
	Type  string          `json:"type"`
	Loc   []any           `json:"loc"`
	Msg   string          `json:"msg"`
	Input json.RawMessage `json:"input"`
	Ctx   map[string]any  `json:"ctx,omitempty"`
}

// validationBody is the reference's 422 answer: FastAPI's errors under "detail" and, under
// "body", the request body as FastAPI read it (null for a query error or an empty body).
type validationBody struct {
	Detail []validationDetail `json:"detail"`
	Body   json.RawMessage    `json:"body"`
}

// echoBody is the body of a 422 as the reference's handler sends it (exc.body): the JSON value
// read, or the text of a body that is not JSON (by content type or syntax); nil (null) when
// empty. The reference cannot encode the bytes of a body that is not JSON by its content type
// (its answer is then a 500): svz sends the text, as for a syntax error.
func echoBody(body []byte, contentType string) json.RawMessage {
	trimmed := bytes.TrimSpace(body)
	switch {
	case len(body) == 0:
		return nil
	case jsonContentType(contentType) && json.Valid(trimmed):
		return trimmed
	}
	return jsonString(strings.ToValidUTF8(string(body), "\uFFFD"))
}

// unprocessable is a body or query FastAPI would refuse with 422.
type unprocessable struct{ errs []validationDetail }

func (u *unprocessable) Error() string { return u.errs[0].Msg }

// jsonString is s as a JSON string.
func jsonString(s string) json.RawMessage {
	b, _ := json.Marshal(s)
	return b
}

// checkBodyShape checks a create/update body (a JSON object) or an import body (a JSON array of
// objects) the way FastAPI reads a Body(...) parameter: an empty body or null is missing, a body
// that is not JSON (by content type or syntax) is refused in pydantic's words.
func checkBodyShape(body []byte, contentType string, many bool) *unprocessable {
	loc := []any{"body"}
	fail := func(typ, msg string, input json.RawMessage, at ...any) *unprocessable {
		return &unprocessable{errs: []validationDetail{{Type: typ, Loc: append(loc, at...), Msg: msg, Input: input}}}
	}
	if len(body) == 0 {
		return fail("missing", "Field required", json.RawMessage("null"))
	}
	if !jsonContentType(contentType) {
		// FastAPI passes a non-JSON body to validation as bytes.
		in := jsonString(strings.ToValidUTF8(string(body), "\uFFFD"))
		if many {
			return fail("list_type", "Input should be a valid list", in)
		}
		return fail("dict_type", "Input should be a valid dictionary", in)
	}
	var v any
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		// The position is where the parser stopped (Python's json gives the offending character's).
		pos := len(body)
		if se, ok := errors.AsType[*json.SyntaxError](err); ok {
			pos = max(int(se.Offset)-1, 0)
		}
		return jsonInvalid(pos, err.Error())
	}
	if end := dec.InputOffset(); len(bytes.TrimLeft(body[end:], " \t\r\n")) > 0 {
		return jsonInvalid(len(body)-len(bytes.TrimLeft(body[end:], " \t\r\n")), "Extra data")
	}
	if v == nil {
		return fail("missing", "Field required", json.RawMessage("null"))
	}
	trimmed := bytes.TrimSpace(body)
	if !many {
		if _, ok := v.(map[string]any); !ok {
			return fail("dict_type", "Input should be a valid dictionary", trimmed)
		}
		return nil
	}
	list, ok := v.([]any)
	if !ok {
		return fail("list_type", "Input should be a valid list", trimmed)
	}
	var raw []json.RawMessage
	_ = json.Unmarshal(trimmed, &raw)
	u := &unprocessable{}
	for i, item := range list {
		if _, ok := item.(map[string]any); !ok {
			u.errs = append(u.errs, validationDetail{Type: "dict_type", Loc: []any{"body", i}, Msg: "Input should be a valid dictionary", Input: raw[i]})
		}
	}
	if len(u.errs) > 0 {
		return u
	}
	return nil
}

func jsonInvalid(pos int, msg string) *unprocessable {
	return &unprocessable{errs: []validationDetail{{Type: "json_invalid", Loc: []any{"body", pos}, Msg: "JSON decode error",
		Input: json.RawMessage("{}"), Ctx: map[string]any{"error": msg}}}}
}

// jsonContentType reports whether FastAPI reads a body with this Content-Type as JSON: no
// Content-Type, application/json, or application/*+json.
func jsonContentType(ct string) bool {
	if ct == "" {
		return true
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return false
	}
	sub, ok := strings.CutPrefix(mt, "application/")
	return ok && (sub == "json" || strings.HasSuffix(sub, "+json"))
}

// parsePage reads skip and limit like FastAPI's Query(default=0, ge=0) and
// Query(default=100, ge=1, le=1000): the last value of a repeated parameter, integers in
// pydantic's lax string form ("  7 ", "1_000", "5.0"), every error reported at once.
func parsePage(q url.Values) (DataPage, []validationDetail) {
	page := DataPage{Skip: 0, Limit: DefaultDataListLimit}
	var errs []validationDetail
	if vs := q["skip"]; len(vs) > 0 {
		n, d := queryInt("skip", vs[len(vs)-1], 0, -1)
		if d != nil {
			errs = append(errs, *d)
		}
		page.Skip = n
	}
	if vs := q["limit"]; len(vs) > 0 {
		n, d := queryInt("limit", vs[len(vs)-1], 1, MaxDataListLimit)
		if d != nil {
			errs = append(errs, *d)
		}
		page.Limit = n
	}
	return page, errs
}

// queryValues parses a query string like Starlette (parse_qsl, blank values kept): "+" is a
// space, and an invalid percent escape is kept as sent instead of dropping the parameter.
func queryValues(raw string) url.Values {
	q := url.Values{}
	for pair := range strings.SplitSeq(raw, "&") {
		if pair == "" {
			continue
		}
		k, v, _ := strings.Cut(pair, "=")
		q[unescapeQuery(k)] = append(q[unescapeQuery(k)], unescapeQuery(v))
	}
	return q
}

func unescapeQuery(s string) string {
	if u, err := url.QueryUnescape(s); err == nil {
		return u
	}
	return strings.ReplaceAll(s, "+", " ")
}

// maxDataSkip bounds DataPage.Skip so that Skip+Limit never overflows.
const maxDataSkip = 1 << 53

// queryInt parses v as an integer between lo and hi (hi < 0: no upper bound), in pydantic's words.
// A value above the int range but allowed (a huge skip) is lowered to maxDataSkip.
func queryInt(name, v string, lo, hi int64) (int, *validationDetail) {
	loc := []any{"query", name}
	in := jsonString(v)
	n, err := contract.ParseLaxInt(v)
	switch {
	case errors.Is(err, contract.ErrIntTooLong):
		return 0, &validationDetail{Type: "int_parsing_size", Loc: loc, Msg: "Unable to parse input string as an integer, exceeded maximum size", Input: in}
	case err != nil:
		return 0, &validationDetail{Type: "int_parsing", Loc: loc, Msg: "Input should be a valid integer, unable to parse string as an integer", Input: in}
	case n.Cmp(big.NewInt(lo)) < 0:
		return 0, &validationDetail{Type: "greater_than_equal", Loc: loc, Msg: "Input should be greater than or equal to " + strconv.FormatInt(lo, 10),
			Input: in, Ctx: map[string]any{"ge": lo}}
	case hi >= 0 && n.Cmp(big.NewInt(hi)) > 0:
		return 0, &validationDetail{Type: "less_than_equal", Loc: loc, Msg: "Input should be less than or equal to " + strconv.FormatInt(hi, 10),
			Input: in, Ctx: map[string]any{"le": hi}}
	case !n.IsInt64() || n.Int64() > maxDataSkip:
		return maxDataSkip, nil // only skip has no upper bound: it skips everything
	}
	return int(n.Int64()), nil
}
