package core

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"strconv"
	"strings"
	"sync"

	"github.com/supervaize/svz/core/contract"
	"github.com/supervaize/svz/core/internal/wirejson"
)

// JSON-RPC error codes. Every error the controller answers on /a2a is one of these; the mapping
// from failures to codes lives in this file and dispatch.go only.
const (
	CodeParseError                   = -32700
	CodeInvalidRequest               = -32600
	CodeMethodNotFound               = -32601
	CodeInvalidParams                = -32602
	CodeInternalError                = -32603
	CodeActionNotRegistered          = -32010
	CodeSurfaceNotRegistered         = -32011
	CodeWorkspaceAuthorizationFailed = -32030
)

// rpcError is a JSON-RPC error object; Data is omitted when nil.
type rpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Data    any    `json:"data,omitempty"`
}

// rpcResponse is a JSON-RPC response. ID is omitted when the request had none (or a null one),
// as the reference does; exactly one of Result and Error is set.
type rpcResponse struct {
	ID json.RawMessage
	// NullID writes "id": null: standard JSON-RPC for a request whose id could not be read (a
	// parse error, a batch, a non-object). Other id-less requests get id-less answers, as in the
	// reference.
	NullID bool
	Result json.RawMessage // encoded once, by encodeResult
	Error  *rpcError
	// Replayed marks the result of an idempotency key's recorded run, answered again without
	// running the handler (ReplayedHeader).
	Replayed bool
}

// envelope is a validated JSON-RPC request.
type envelope struct {
	id     json.RawMessage // canonical: a JSON string or integer; nil when absent or null
	method string
	params json.RawMessage // a JSON object
	token  string          // the workspace-grant header, as received

	scratch *[]byte // where the result is encoded (a recycled buffer), nil for a new one
}

// decodeEnvelope validates a JSON-RPC request object (a valid JSON document) the way the
// reference model does: jsonrpc may be omitted but must otherwise be "2.0"; id is a string, an
// integer or null; method is a required string; params is an object (default {}); other members
// are ignored, and of a repeated member the last counts. On failure it returns the id to echo
// (when usable) and pydantic-style errors.
func decodeEnvelope(obj []byte) (envelope, contract.FieldErrors) {
	var jsonrpc, id, method, params []byte
	for name, v := range wirejson.Members(obj) {
		switch string(wirejson.Name(name)) {
		case "jsonrpc":
			jsonrpc = v
		case "id":
			id = v
		case "method":
			method = v
		case "params":
			params = v
		}
	}
	var env envelope
	var errs contract.FieldErrors
	fail := func(typ, msg, loc string) {
		errs = append(errs, contract.FieldError{Type: typ, Loc: []any{loc}, Msg: msg})
	}
	if jsonrpc != nil {
		if s, ok := wirejson.Unquote(jsonrpc); !ok || s != "2.0" {
			fail("literal_error", "Input should be '2.0'", "jsonrpc")
		}
	}
	if id != nil {
		canon, valid := canonicalID(id)
		if !valid {
			fail("id_type", "Input should be a valid string or integer", "id")
		}
		env.id = canon
	}
	if method == nil {
		fail("missing", "Field required", "method")
	} else if m, ok := wirejson.Unquote(method); !ok {
		fail("string_type", "Input should be a valid string", "method")
	} else {
		env.method = m
	}
	env.params = json.RawMessage("{}")
	if params != nil {
		if wirejson.Kind(params) != '{' {
			fail("dict_type", "Input should be a valid dictionary", "params")
		} else {
			env.params = params
		}
	}
	return env, errs
}

// canonicalID returns the id to echo, as the reference's model (id: str | int | None) reads it:
// a JSON string as sent; an integer literal exactly as sent, whatever its size (Python integers
// have none), -0 as 0; a number written with a fraction or an exponent when its value is an
// integer strictly between -2^63 and 2^63 (pydantic's rule for a float), as that integer; nil for
// null; true and false as 1 and 0 (pydantic's lax int takes a bool). valid is false for any other
// value (which is then not echoed). No conversion depends on the platform: a float is only turned
// into an int64 when it fits.
func canonicalID(v json.RawMessage) (id json.RawMessage, valid bool) {
	switch wirejson.Kind(v) {
	case 'n':
		return nil, true
	case '"':
		return v, true
	case 't':
		return json.RawMessage("1"), true
	case 'f':
		return json.RawMessage("0"), true
	case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
	default:
		return nil, false
	}
	if !bytes.ContainsAny(v, ".eE") {
		if strings.Trim(string(v), "-0") == "" { // 0 or -0
			return json.RawMessage("0"), true
		}
		return v, true
	}
	f, err := strconv.ParseFloat(string(v), 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) || math.IsInf(f, 0) || f != math.Trunc(f) ||
		f <= -(1<<63) || f >= 1<<63 {
		return nil, false
	}
	return strconv.AppendInt(nil, int64(f), 10), true
}

// appendTo appends the encoded response to buf. The result was encoded once already (by
// encodeResult); it is copied, not validated again.
func (r rpcResponse) appendTo(buf []byte) ([]byte, error) {
	buf = append(buf, `{"jsonrpc":"2.0"`...)
	switch {
	case r.ID != nil:
		buf = append(buf, `,"id":`...)
		buf = append(buf, r.ID...)
	case r.NullID:
		buf = append(buf, `,"id":null`...)
	}
	if r.Error != nil {
		member, err := json.Marshal(r.Error)
		if err != nil {
			return buf, err
		}
		buf = append(buf, `,"error":`...)
		buf = append(buf, member...)
	} else {
		buf = append(buf, `,"result":`...)
		buf = append(buf, r.Result...)
	}
	return append(buf, '}'), nil
}

// encode returns the encoded response.
func (r rpcResponse) encode() ([]byte, error) { return r.appendTo(make([]byte, 0, 512)) }

// unreadableRequest answers a body whose id cannot be known.
func unreadableRequest(code int, message string, data any) rpcResponse {
	r := errorResponse(nil, code, message, data)
	r.NullID = true
	return r
}

func errorResponse(id json.RawMessage, code int, message string, data any) rpcResponse {
	return rpcResponse{ID: id, Error: &rpcError{Code: code, Message: message, Data: data}}
}

func resultResponse(id json.RawMessage, result json.RawMessage) rpcResponse {
	return rpcResponse{ID: id, Result: result}
}

// buffers recycles the byte slices a call reads and encodes into, so that a warm controller does
// not allocate them on every call. Slices that grew past maxPooledBuffer are left to the
// collector.
type buffers struct{ pool sync.Pool }

const maxPooledBuffer = 64 << 10

func (b *buffers) get() *[]byte {
	if p, ok := b.pool.Get().(*[]byte); ok {
		*p = (*p)[:0]
		return p
	}
	buf := make([]byte, 0, 2048)
	return &buf
}

func (b *buffers) put(p *[]byte) {
	if cap(*p) <= maxPooledBuffer {
		b.pool.Put(p)
	}
}
