package core

import (
	"bytes"
	"encoding/json"
	"strconv"

	"github.com/supervaize/svz/core/contract"
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
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	// NullID writes "id": null: standard JSON-RPC for a request whose id could not be read (a
	// parse error, a batch, a non-object). Other id-less requests get id-less answers, as in the
	// reference.
	NullID bool      `json:"-"`
	Result any       `json:"result,omitempty"`
	Error  *rpcError `json:"error,omitempty"`
}

// envelope is a validated JSON-RPC request.
type envelope struct {
	id     json.RawMessage // canonical: a JSON string or integer; nil when absent or null
	method string
	params json.RawMessage // a JSON object
	token  string          // the workspace-grant header, as received
}

// decodeEnvelope validates a JSON-RPC request object the way the reference model does: jsonrpc
// may be omitted but must otherwise be "2.0"; id is a string, an integer or null; method is a
// required string; params is an object (default {}); other members are ignored. On failure it
// returns the id to echo (when usable) and pydantic-style errors.
func decodeEnvelope(obj map[string]json.RawMessage) (envelope, contract.FieldErrors) {
	var env envelope
	var errs contract.FieldErrors
	fail := func(typ, msg, loc string) {
		errs = append(errs, contract.FieldError{Type: typ, Loc: []any{loc}, Msg: msg})
	}
	if v, ok := obj["jsonrpc"]; ok {
		var s string
		if json.Unmarshal(v, &s) != nil || s != "2.0" {
			fail("literal_error", "Input should be '2.0'", "jsonrpc")
		}
	}
	if v, ok := obj["id"]; ok {
		id, valid := canonicalID(v)
		if !valid {
			fail("id_type", "Input should be a valid string or integer", "id")
		}
		env.id = id
	}
	if v, ok := obj["method"]; !ok {
		fail("missing", "Field required", "method")
	} else if trimmed := bytes.TrimSpace(v); len(trimmed) == 0 || trimmed[0] != '"' || json.Unmarshal(v, &env.method) != nil {
		fail("string_type", "Input should be a valid string", "method")
	}
	env.params = json.RawMessage("{}")
	if v, ok := obj["params"]; ok {
		if trimmed := bytes.TrimSpace(v); len(trimmed) == 0 || trimmed[0] != '{' {
			fail("dict_type", "Input should be a valid dictionary", "params")
		} else {
			env.params = v
		}
	}
	return env, errs
}

// canonicalID returns the id to echo: a JSON string as is, an integer-valued number as an
// integer (the reference model coerces 7.0 to 7), nil for null. valid is false for any other
// value (which is then not echoed).
func canonicalID(v json.RawMessage) (id json.RawMessage, valid bool) {
	v = bytes.TrimSpace(v)
	if len(v) == 0 {
		return nil, false
	}
	switch v[0] {
	case 'n':
		return nil, string(v) == "null"
	case '"':
		var s string
		if json.Unmarshal(v, &s) != nil {
			return nil, false
		}
		return v, true
	case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		if n, err := strconv.ParseInt(string(v), 10, 64); err == nil {
			return json.RawMessage(strconv.FormatInt(n, 10)), true
		}
		f, err := strconv.ParseFloat(string(v), 64)
		if err != nil || f != float64(int64(f)) {
			return nil, false
		}
		return json.RawMessage(strconv.FormatInt(int64(f), 10)), true
	}
	return nil, false
}

// encode writes the response without a second validation pass over the result (which its own
// MarshalJSON produced).
func (r rpcResponse) encode() ([]byte, error) {
	buf := make([]byte, 0, 512)
	buf = append(buf, `{"jsonrpc":"2.0"`...)
	switch {
	case r.ID != nil:
		buf = append(buf, `,"id":`...)
		buf = append(buf, r.ID...)
	case r.NullID:
		buf = append(buf, `,"id":null`...)
	}
	var member []byte
	var err error
	if r.Error != nil {
		buf = append(buf, `,"error":`...)
		member, err = json.Marshal(r.Error)
	} else if raw, ok := r.Result.(json.RawMessage); ok {
		buf = append(buf, `,"result":`...)
		member = raw // encoded by encodeResult
	} else {
		buf = append(buf, `,"result":`...)
		member, err = json.Marshal(r.Result)
	}
	if err != nil {
		return nil, err
	}
	buf = append(buf, member...)
	return append(buf, '}'), nil
}

// unreadableRequest answers a body whose id cannot be known.
func unreadableRequest(code int, message string, data any) rpcResponse {
	r := errorResponse(nil, code, message, data)
	r.NullID = true
	return r
}

func errorResponse(id json.RawMessage, code int, message string, data any) rpcResponse {
	return rpcResponse{JSONRPC: "2.0", ID: id, Error: &rpcError{Code: code, Message: message, Data: data}}
}

func resultResponse(id json.RawMessage, result any) rpcResponse {
	return rpcResponse{JSONRPC: "2.0", ID: id, Result: result}
}
