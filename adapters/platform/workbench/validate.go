package workbench

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"

	"github.com/supervaize/svz/core/contract"
)

// maxValidateBody bounds what POST /manage/api/validate reads: an agent info payload and its
// Agent Card are a few KiB; a registration with large setup plans stays far below this.
const maxValidateBody = 4 << 20

// validateRequest is what the page sends: the agent info payload and the Agent Card it fetched
// from the controller, as received.
type validateRequest struct {
	Info json.RawMessage `json:"info"`
	Card json.RawMessage `json:"card"`
}

// Problem is one reason a registration is not valid: which document it is in (info: the agent
// info route; card: the Agent Card), where (a JSON path, empty for the whole document) and what.
type Problem struct {
	Source  string `json:"source"`
	Path    string `json:"path"`
	Message string `json:"message"`
}

// Report is the answer of POST /manage/api/validate.
type Report struct {
	Valid    bool      `json:"valid"`
	Problems []Problem `json:"problems"`
}

func serveValidate(w http.ResponseWriter, r *http.Request) {
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		writeDetail(w, http.StatusUnsupportedMediaType, "Send the agent info and Agent Card as JSON (Content-Type: application/json)")
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxValidateBody))
	if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
		writeDetail(w, http.StatusRequestEntityTooLarge, "The body is larger than 4 MiB")
		return
	} else if err != nil {
		writeDetail(w, http.StatusBadRequest, "Could not read the request body")
		return
	}
	var req validateRequest
	if err := json.Unmarshal(body, &req); err != nil {
		writeDetail(w, http.StatusBadRequest, `The body must be {"info": <agent info>, "card": <Agent Card>}: `+decodeProblem(err))
		return
	}
	writeJSON(w, http.StatusOK, Validate(req.Info, req.Card))
}

// Validate checks an agent's registration as Studio receives it: the agent info payload (the
// agent info route, also the server.register entry) with the reference's rules, the Agent Card's
// supervaizer.v2 block with the same rules, and that both carry the same registration. An absent
// document (nil or null) is not checked.
func Validate(info, card json.RawMessage) Report {
	var p []Problem
	add := func(source string, err error) {
		for _, e := range split(err) {
			if ve, ok := errors.AsType[*contract.ValidationError](e); ok {
				p = append(p, Problem{Source: source, Path: ve.Path, Message: ve.Message})
				continue
			}
			p = append(p, Problem{Source: source, Message: e.Error()})
		}
	}
	var fromInfo, fromCard json.RawMessage
	if present(info) {
		var c contract.AgentRegistrationContract
		if err := json.Unmarshal(info, &c); err != nil {
			p = append(p, Problem{Source: "info", Message: "The agent info is not a registration payload: " + decodeProblem(err)})
		} else {
			add("info", c.Validate())
			var raw struct {
				V2 json.RawMessage `json:"supervaizer_v2"`
			}
			_ = json.Unmarshal(info, &raw) // decoded above
			fromInfo = raw.V2
			if !present(fromInfo) {
				p = append(p, Problem{Source: "info", Path: "supervaizer_v2", Message: "The agent declares no Supervaizer v2 registration: Studio cannot drive it over /a2a"})
			}
		}
	}
	if present(card) {
		var members struct {
			Supervaizer json.RawMessage `json:"supervaizer"`
		}
		var ext struct {
			V2 json.RawMessage `json:"v2"`
		}
		switch {
		case json.Unmarshal(card, &members) != nil:
			p = append(p, Problem{Source: "card", Message: "The Agent Card is not a JSON object"})
		case present(members.Supervaizer) && json.Unmarshal(members.Supervaizer, &ext) != nil:
			p = append(p, Problem{Source: "card", Path: "supervaizer", Message: "The Agent Card's supervaizer member is not a JSON object"})
		case !present(ext.V2):
			p = append(p, Problem{Source: "card", Path: "supervaizer.v2", Message: "The Agent Card carries no Supervaizer v2 registration"})
		default:
			fromCard = ext.V2
			var reg contract.Registration
			if err := json.Unmarshal(fromCard, &reg); err != nil {
				p = append(p, Problem{Source: "card", Path: "supervaizer.v2", Message: "The registration is not a registration block: " + decodeProblem(err)})
			} else {
				for _, e := range split(reg.Validate()) {
					add("card", prefixed("supervaizer.v2", e))
				}
			}
		}
	}
	if present(fromInfo) && present(fromCard) && !sameJSON(fromInfo, fromCard) {
		p = append(p, Problem{Source: "card", Path: "supervaizer.v2",
			Message: "The Agent Card's registration differs from the agent info route's supervaizer_v2"})
	}
	return Report{Valid: len(p) == 0, Problems: nonNil(p)}
}

// decodeProblem says why a document did not decode in JSON's terms: encoding/json's type errors
// name Go types and fields ("Go struct field plain.name of type string"), which mean nothing to
// the page and are not the page's business.
func decodeProblem(err error) string {
	te, ok := errors.AsType[*json.UnmarshalTypeError](err)
	if !ok {
		return err.Error()
	}
	where := "the document"
	if te.Field != "" {
		where = te.Field
	}
	return fmt.Sprintf("%s must be %s, not %s", where, jsonKind(te.Type), te.Value)
}

// jsonKind names the JSON value a Go type decodes from.
func jsonKind(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	}
	return "another JSON value"
}

func present(doc json.RawMessage) bool {
	d := bytes.TrimSpace(doc)
	return len(d) > 0 && !bytes.Equal(d, []byte("null"))
}

// prefixed puts a validation error under path.
func prefixed(path string, err error) error {
	if ve, ok := errors.AsType[*contract.ValidationError](err); ok {
		p := path
		switch {
		case ve.Path == "":
		case strings.HasPrefix(ve.Path, "["):
			p += ve.Path
		default:
			p += "." + ve.Path
		}
		return &contract.ValidationError{Path: p, Message: ve.Message}
	}
	return &contract.ValidationError{Path: path, Message: err.Error()}
}

// split returns the errors joined in err (errors.Join), or err alone.
func split(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, split(e)...)
		}
		return out
	}
	return []error{err}
}

// sameJSON reports whether a and b are the same JSON value, whatever their spacing and member
// order.
func sameJSON(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
