package core_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/supervaize/svz/core"
	"github.com/supervaize/svz/core/contract"
	"github.com/supervaize/svz/core/grant"
	"github.com/supervaize/svz/core/grant/granttest"
	"github.com/supervaize/svz/core/state"
	"github.com/supervaize/svz/core/store/memory"
)

const (
	readKey     = "K-read-only-key"
	dataIssuer  = "https://studio.test"
	dataPath    = "/api/agents/s/data/"
	studioAgent = "studio-agent-1"
)

var dataNow = time.Date(2026, 5, 18, 11, 30, 0, 0, time.UTC)

// note is the item type of the "notes" resource.
type note struct {
	ID   string   `json:"id"`
	Text string   `json:"text"`
	Tags []string `json:"tags,omitempty"`
}

// recorder is the agent side of the tests: it records every callback call and the context it got.
type recorder struct {
	mu    sync.Mutex
	calls []string
	dc    *core.DataContext
	input any
	page  core.DataPage
}

func (r *recorder) record(call string, dc *core.DataContext, input any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, call)
	r.dc, r.input = dc, input
}

func (r *recorder) snapshot() ([]string, *core.DataContext, any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.calls), r.dc, r.input
}

// outcome turns a magic id or text into the callback error the tests need.
func outcome(key string) error {
	switch key {
	case "missing":
		return core.ErrDataNotFound
	case "wrapped":
		return fmt.Errorf("lookup: %w", core.ErrDataNotFound)
	case "denied":
		return core.PermissionDenied("workspace denied")
	case "secret":
		return errors.New("database password hunter2 rejected")
	case "panic":
		panic("hunter2 in a panic")
	case "conflict":
		return &core.DataError{Status: http.StatusConflict, Detail: "note 'conflict' already exists"}
	case "unavailable":
		return &core.DataError{Status: http.StatusServiceUnavailable, Detail: "hunter2 is down"}
	}
	return nil
}

func notesResource(rec *recorder) core.DataResource[note] {
	all := []note{{ID: "n1", Text: "one"}, {ID: "n2", Text: "two"}, {ID: "n3", Text: "three"}, {ID: "n4", Text: "four"}, {ID: "n5", Text: "five"}}
	return core.DataResource[note]{
		Name:        "notes",
		Description: "Notes kept by the agent",
		Fields: []contract.DataResourceField{
			{Name: "id", Editable: contract.EditableNever, VisibleOn: []string{"list", "detail"}},
			{Name: "text", FieldType: contract.DataFieldText, Required: true},
		},
		List: func(_ context.Context, dc *core.DataContext) ([]note, error) {
			rec.record("list", dc, nil)
			if dc.MissionID == "secret" {
				return nil, outcome("secret")
			}
			return all, nil
		},
		Get: func(_ context.Context, dc *core.DataContext, id string) (note, error) {
			rec.record("get "+id, dc, nil)
			if err := outcome(id); err != nil {
				return note{}, err
			}
			return note{ID: id, Text: "found"}, nil
		},
		Create: func(_ context.Context, dc *core.DataContext, n note) (note, error) {
			rec.record("create", dc, n)
			if err := outcome(n.Text); err != nil {
				return note{}, err
			}
			n.ID = "n6"
			return n, nil
		},
		Update: func(_ context.Context, dc *core.DataContext, id string, n note) (note, error) {
			rec.record("update "+id, dc, n)
			if err := outcome(id); err != nil {
				return note{}, err
			}
			n.ID = id
			return n, nil
		},
		Delete: func(_ context.Context, dc *core.DataContext, id string) error {
			rec.record("delete "+id, dc, nil)
			return outcome(id)
		},
		Import: func(_ context.Context, dc *core.DataContext, ns []note) (any, error) {
			rec.record("import", dc, ns)
			if len(ns) > 0 {
				if err := outcome(ns[0].Text); err != nil {
					return nil, err
				}
			}
			return map[string]any{"created": len(ns)}, nil
		},
	}
}

// logsResource is read-only: List only, over free-form items.
func logsResource(rec *recorder) core.DataResource[map[string]any] {
	return core.DataResource[map[string]any]{
		Name:  "logs",
		Scope: contract.ScopeMission,
		List: func(_ context.Context, dc *core.DataContext) ([]map[string]any, error) {
			rec.record("list", dc, nil)
			return []map[string]any{{"id": "l1", "line": "started"}}, nil
		},
	}
}

// bagsResource lists page by page and returns what the tests need to see refused: a created item
// without id, an import summary that is not an object, list items that are not objects.
func bagsResource(rec *recorder) core.DataResource[any] {
	return core.DataResource[any]{
		Name: "bags",
		ListPage: func(_ context.Context, dc *core.DataContext, page core.DataPage) ([]any, error) {
			rec.mu.Lock()
			rec.page = page
			rec.mu.Unlock()
			rec.record("list", dc, nil)
			if dc.MissionID == "strings" {
				return []any{"not an object"}, nil
			}
			items := make([]any, 0, page.Limit+1)
			for i := range page.Limit + 1 { // one too many: the route keeps Limit
				items = append(items, map[string]any{"id": fmt.Sprintf("b%d", page.Skip+i+1)})
			}
			return items, nil
		},
		Create: func(_ context.Context, dc *core.DataContext, item any) (any, error) {
			rec.record("create", dc, item)
			return item, nil // no id unless the caller sent one
		},
		Import: func(_ context.Context, dc *core.DataContext, items []any) (any, error) {
			rec.record("import", dc, items)
			return "imported", nil
		},
	}
}

var allNoteScopes = []string{"resource.notes.list", "resource.notes.get", "resource.notes.create", "resource.notes.update",
	"resource.notes.delete", "resource.notes.import", "resource.logs.list", "resource.logs.create", "resource.bags.list",
	"resource.bags.create", "resource.bags.import"}

// dataController is the real controller serving agent S (slug s, Studio id studio-agent-1) with
// the notes, logs and bags resources, verifying tokens of studio with grant.New's verifier.
func dataController(t testing.TB, studio *granttest.Issuer, rec *recorder, log io.Writer) *core.Controller {
	t.Helper()
	if log == nil {
		log = io.Discard
	}
	logger := slog.New(slog.NewTextHandler(log, nil))
	authz, err := grant.New(context.Background(), grant.Config{ServerID: "SRV",
		Settings: grant.Settings{Required: true, Issuer: dataIssuer, PublicKeyPEM: studio.PublicKeyPEM(), Leeway: grant.DefaultLeeway},
		Options:  []grant.Option{grant.WithClock(func() time.Time { return dataNow }), grant.WithLogger(logger)}})
	if err != nil {
		t.Fatal(err)
	}
	return dataControllerWith(t, authz, map[string]string{"s": studioAgent}, logger, rec)
}

func dataControllerWith(t testing.TB, authz grant.Authorizer, studioIDs map[string]string, logger *slog.Logger, rec *recorder) *core.Controller {
	t.Helper()
	a := newAgent(t, handlers{})
	a.AddDataResource(notesResource(rec))
	a.AddDataResource(logsResource(rec))
	a.AddDataResource(bagsResource(rec))
	st := memory.New()
	c, err := core.New(core.Config{APIKey: testKey, ReadAPIKeys: []string{readKey}, ServerID: "SRV", Authorizer: authz,
		StudioAgentIDs: studioIDs, Logger: logger, Store: st, MaxBodyBytes: 4096}, a)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(); _ = st.Close() })
	return c
}

// dreq is one request to a data route. hdr overrides the default headers (a valid token for every
// resource scope, workspace-1/workspace, mission-1, request-1); "" deletes a header, "<empty>"
// sends it empty.
type dreq struct {
	method, path string
	hdr          map[string]string
	body         string
}

func (q dreq) do(t testing.TB, h http.Handler, tok string) *httptest.ResponseRecorder {
	t.Helper()
	var body io.Reader
	if q.body != "" {
		body = strings.NewReader(q.body)
	}
	req := httptest.NewRequest(q.method, q.path, body)
	for k, v := range map[string]string{
		"X-API-Key":              testKey,
		core.GrantHeader:         "Bearer " + tok,
		core.HeaderWorkspaceID:   "workspace-1",
		core.HeaderWorkspaceSlug: "workspace",
		core.HeaderMissionID:     "mission-1",
		core.HeaderRequestID:     "request-1",
		"Content-Type":           "application/json",
	} {
		req.Header.Set(k, v)
	}
	for k, v := range q.hdr {
		switch v {
		case "":
			req.Header.Del(k)
		case "<empty>":
			req.Header.Set(k, "")
		default:
			req.Header.Set(k, v)
		}
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// TestDataRoutes drives every route, status and message of the DataResource routes through the
// real controller, with exact bodies, and checks which callbacks ran.
func TestDataRoutes(t *testing.T) {
	studio := granttest.NewIssuer("k1")
	tok := studio.Token(granttest.Valid(dataNow, dataIssuer, allNoteScopes...))
	notes := dataPath + "notes/"
	big := `{"text":"` + strings.Repeat("a", 5000) + `"}`

	cases := []struct {
		name    string
		req     dreq
		status  int
		want    string            // exact JSON; "" = empty body
		wantHdr map[string]string // headers that must be set
		calls   []string          // callbacks that must have run, in order
	}{
		// Routing, before any authentication (FastAPI's router).
		{"collection without slash redirects", dreq{"GET", dataPath + "notes?skip=1", map[string]string{"X-API-Key": ""}, ""},
			307, "", map[string]string{"Location": dataPath + "notes/?skip=1"}, nil},
		{"item with slash redirects", dreq{"GET", notes + "n%201/", nil, ""},
			307, "", map[string]string{"Location": notes + "n%201"}, nil},
		{"import without slash is an item id", dreq{"GET", notes + "import", nil, ""}, 200, `{"id":"import","text":"found"}`, nil, []string{"get import"}},
		{"unknown resource", dreq{"GET", dataPath + "nope/", nil, ""}, 404, `{"detail":"Not Found"}`, nil, nil},
		{"unknown agent", dreq{"GET", "/api/agents/nope/data/notes/", nil, ""}, 404, `{"detail":"Not Found"}`, nil, nil},
		{"not a data path", dreq{"GET", "/api/agents/s/jobs/", nil, ""}, 404, `{"detail":"Not Found"}`, nil, nil},
		{"two segments", dreq{"GET", notes + "a/b", nil, ""}, 404, `{"detail":"Not Found"}`, nil, nil},
		{"encoded slash is not a segment", dreq{"GET", notes + "a%2Fb", nil, ""}, 404, `{"detail":"Not Found"}`, nil, nil},
		// Decoded, n1%2F is n1/ (an item with a trailing slash), whose 307 pointed at itself.
		{"encoded trailing slash is no redirect", dreq{"GET", notes + "n1%2F", nil, ""}, 404, `{"detail":"Not Found"}`, nil, nil},
		{"encoded trailing slash, lower case", dreq{"GET", notes + "n1%2f?skip=1", nil, ""}, 404, `{"detail":"Not Found"}`, nil, nil},
		{"encoded slash before a segment", dreq{"GET", dataPath + "notes%2F", nil, ""}, 404, `{"detail":"Not Found"}`, nil, nil},
		{"encoded slash across the route", dreq{"GET", "/api/agents/s%2Fdata/notes/", nil, ""}, 404, `{"detail":"Not Found"}`, nil, nil},
		{"encoded percent is a character", dreq{"GET", notes + "n%252F", nil, ""}, 200, `{"id":"n%2F","text":"found"}`, nil, []string{"get n%2F"}},
		{"double slash", dreq{"GET", notes + "/", nil, ""}, 404, `{"detail":"Not Found"}`, nil, nil},
		{"PATCH an item", dreq{"PATCH", notes + "n1", nil, `{}`}, 405, `{"detail":"Method Not Allowed"}`, map[string]string{"Allow": "GET, PUT, DELETE"}, nil},
		{"POST an item", dreq{"POST", notes + "n1", nil, `{}`}, 405, `{"detail":"Method Not Allowed"}`, map[string]string{"Allow": "GET, PUT, DELETE"}, nil},
		{"PUT the collection", dreq{"PUT", notes, nil, `{}`}, 405, `{"detail":"Method Not Allowed"}`, map[string]string{"Allow": "GET, POST"}, nil},
		{"HEAD the collection", dreq{"HEAD", notes, nil, ""}, 405, `{"detail":"Method Not Allowed"}`, map[string]string{"Allow": "GET, POST"}, nil},
		{"GET import", dreq{"GET", notes + "import/", nil, ""}, 405, `{"detail":"Method Not Allowed"}`, map[string]string{"Allow": "POST"}, nil},

		// X-API-Key: read for list and get, write for the rest.
		{"no key", dreq{"GET", notes, map[string]string{"X-API-Key": ""}, ""}, 401, `{"detail":"Invalid or missing API key"}`, nil, nil},
		{"wrong key", dreq{"GET", notes + "n1", map[string]string{"X-API-Key": "nope"}, ""}, 401, `{"detail":"Invalid or missing API key"}`, nil, nil},
		{"read key lists", dreq{"GET", notes + "?limit=1", map[string]string{"X-API-Key": readKey}, ""}, 200, `[{"id":"n1","text":"one"}]`, nil, []string{"list"}},
		{"read key gets", dreq{"GET", notes + "n2", map[string]string{"X-API-Key": readKey}, ""}, 200, `{"id":"n2","text":"found"}`, nil, []string{"get n2"}},
		{"read key cannot create", dreq{"POST", notes, map[string]string{"X-API-Key": readKey}, `{"text":"x"}`}, 403, `{"detail":"Insufficient scope"}`, nil, nil},
		{"read key cannot update", dreq{"PUT", notes + "n1", map[string]string{"X-API-Key": readKey}, `{"text":"x"}`}, 403, `{"detail":"Insufficient scope"}`, nil, nil},
		{"read key cannot delete", dreq{"DELETE", notes + "n1", map[string]string{"X-API-Key": readKey}, ""}, 403, `{"detail":"Insufficient scope"}`, nil, nil},
		{"read key cannot import", dreq{"POST", notes + "import/", map[string]string{"X-API-Key": readKey}, `[]`}, 403, `{"detail":"Insufficient scope"}`, nil, nil},

		// Operations the resource does not serve.
		{"create on a read-only resource", dreq{"POST", dataPath + "logs/", nil, `{"line":"x"}`}, 501,
			`{"detail":"DataResource 'logs' does not support create: it serves list"}`, nil, nil},
		{"get without Get", dreq{"GET", dataPath + "logs/l1", nil, ""}, 501, `{"detail":"DataResource 'logs' does not support get: it serves list"}`, nil, nil},
		{"update without Update", dreq{"PUT", dataPath + "bags/b1", nil, `{}`}, 501,
			`{"detail":"DataResource 'bags' does not support update: it serves list, create, import"}`, nil, nil},
		{"delete without Delete", dreq{"DELETE", dataPath + "logs/l1", nil, ""}, 501, `{"detail":"DataResource 'logs' does not support delete: it serves list"}`, nil, nil},
		{"import without Import", dreq{"POST", dataPath + "logs/import/", nil, `[]`}, 501, `{"detail":"DataResource 'logs' does not support import: it serves list"}`, nil, nil},
		{"501 needs the key first", dreq{"POST", dataPath + "logs/", map[string]string{"X-API-Key": ""}, `{}`}, 401, `{"detail":"Invalid or missing API key"}`, nil, nil},

		// List: skip and limit.
		{"list", dreq{"GET", notes, nil, ""}, 200,
			`[{"id":"n1","text":"one"},{"id":"n2","text":"two"},{"id":"n3","text":"three"},{"id":"n4","text":"four"},{"id":"n5","text":"five"}]`, nil, []string{"list"}},
		{"list window", dreq{"GET", notes + "?skip=1&limit=2", nil, ""}, 200, `[{"id":"n2","text":"two"},{"id":"n3","text":"three"}]`, nil, []string{"list"}},
		{"list past the end", dreq{"GET", notes + "?skip=5", nil, ""}, 200, `[]`, nil, []string{"list"}},
		{"list huge skip", dreq{"GET", notes + "?skip=99999999999999999999999999", nil, ""}, 200, `[]`, nil, []string{"list"}},
		{"list invalid escape kept", dreq{"GET", notes + "?skip=%zz&limit=1", nil, ""}, 422,
			`{"detail":[{"type":"int_parsing","loc":["query","skip"],"msg":"Input should be a valid integer, unable to parse string as an integer","input":"%zz"}],"body":null}`, nil, nil},
		{"list plus is a space", dreq{"GET", notes + "?skip=+4+&limit=1&other", nil, ""}, 200, `[{"id":"n5","text":"five"}]`, nil, []string{"list"}},
		{"list last value wins", dreq{"GET", notes + "?skip=4&skip=3&limit=1", nil, ""}, 200, `[{"id":"n4","text":"four"}]`, nil, []string{"list"}},
		{"list lax integers", dreq{"GET", notes + "?skip=%203%20&limit=1.0", nil, ""}, 200, `[{"id":"n4","text":"four"}]`, nil, []string{"list"}},
		{"list underscores", dreq{"GET", notes + "?skip=0_4&limit=1_000", nil, ""}, 200, `[{"id":"n5","text":"five"}]`, nil, []string{"list"}},
		{"skip below 0", dreq{"GET", notes + "?skip=-1", nil, ""}, 422,
			`{"detail":[{"type":"greater_than_equal","loc":["query","skip"],"msg":"Input should be greater than or equal to 0","input":"-1","ctx":{"ge":0}}],"body":null}`, nil, nil},
		{"limit 0", dreq{"GET", notes + "?limit=0", nil, ""}, 422,
			`{"detail":[{"type":"greater_than_equal","loc":["query","limit"],"msg":"Input should be greater than or equal to 1","input":"0","ctx":{"ge":1}}],"body":null}`, nil, nil},
		{"limit 1001", dreq{"GET", notes + "?limit=1001", nil, ""}, 422,
			`{"detail":[{"type":"less_than_equal","loc":["query","limit"],"msg":"Input should be less than or equal to 1000","input":"1001","ctx":{"le":1000}}],"body":null}`, nil, nil},
		{"limit 1000", dreq{"GET", notes + "?limit=1000&skip=4", nil, ""}, 200, `[{"id":"n5","text":"five"}]`, nil, []string{"list"}},
		{"skip and limit not integers", dreq{"GET", notes + "?skip=abc&limit=", nil, ""}, 422,
			`{"detail":[{"type":"int_parsing","loc":["query","skip"],"msg":"Input should be a valid integer, unable to parse string as an integer","input":"abc"},` +
				`{"type":"int_parsing","loc":["query","limit"],"msg":"Input should be a valid integer, unable to parse string as an integer","input":""}],"body":null}`, nil, nil},
		{"fractional skip", dreq{"GET", notes + "?skip=1.5", nil, ""}, 422,
			`{"detail":[{"type":"int_parsing","loc":["query","skip"],"msg":"Input should be a valid integer, unable to parse string as an integer","input":"1.5"}],"body":null}`, nil, nil},
		{"query checked before the grant", dreq{"GET", notes + "?skip=-1", map[string]string{core.GrantHeader: ""}, ""}, 422,
			`{"detail":[{"type":"greater_than_equal","loc":["query","skip"],"msg":"Input should be greater than or equal to 0","input":"-1","ctx":{"ge":0}}],"body":null}`, nil, nil},
		{"ListPage gets the window and is cut to it", dreq{"GET", dataPath + "bags/?skip=3&limit=2", nil, ""}, 200,
			`[{"id":"b4"},{"id":"b5"}]`, nil, []string{"list"}},
		{"list item not an object", dreq{"GET", dataPath + "bags/", map[string]string{core.HeaderMissionID: "strings"}, ""}, 500,
			`{"detail":"Internal Server Error"}`, nil, []string{"list"}},

		// Get.
		{"get", dreq{"GET", notes + "n1", nil, ""}, 200, `{"id":"n1","text":"found"}`, nil, []string{"get n1"}},
		{"get escaped id", dreq{"GET", notes + "a%20b%C3%A9", nil, ""}, 200, `{"id":"a bé","text":"found"}`, nil, []string{"get a bé"}},
		{"get not found", dreq{"GET", notes + "missing", nil, ""}, 404, `{"detail":"notes 'missing' not found"}`, nil, []string{"get missing"}},
		{"get wrapped not found", dreq{"GET", notes + "wrapped", nil, ""}, 404, `{"detail":"notes 'wrapped' not found"}`, nil, []string{"get wrapped"}},

		// Create.
		{"create", dreq{"POST", notes, nil, `{"text":"hello","tags":["a"],"extra":1}`}, 201, `{"id":"n6","text":"hello","tags":["a"]}`, nil, []string{"create"}},
		{"create without content type", dreq{"POST", notes, map[string]string{"Content-Type": ""}, `{"text":"hello"}`}, 201, `{"id":"n6","text":"hello"}`, nil, []string{"create"}},
		{"create with +json", dreq{"POST", notes, map[string]string{"Content-Type": "application/merge-patch+json; charset=utf-8"}, `{"text":"x"}`}, 201, `{"id":"n6","text":"x"}`, nil, []string{"create"}},
		{"create result without id", dreq{"POST", dataPath + "bags/", nil, `{"name":"No ID"}`}, 500,
			`{"detail":"on_create for 'bags' must return a dict with 'id'"}`, nil, []string{"create"}},
		{"create result with id", dreq{"POST", dataPath + "bags/", nil, `{"id":null,"n":12345678901234567890}`}, 201, `{"id":null,"n":12345678901234567890}`, nil, []string{"create"}},
		{"create body a list", dreq{"POST", notes, nil, `[1]`}, 422,
			`{"detail":[{"type":"dict_type","loc":["body"],"msg":"Input should be a valid dictionary","input":[1]}],"body":[1]}`, nil, nil},
		{"create empty body", dreq{"POST", notes, nil, ``}, 422, `{"detail":[{"type":"missing","loc":["body"],"msg":"Field required","input":null}],"body":null}`, nil, nil},
		{"create null body", dreq{"POST", notes, nil, `null`}, 422, `{"detail":[{"type":"missing","loc":["body"],"msg":"Field required","input":null}],"body":null}`, nil, nil},
		{"create invalid JSON", dreq{"POST", notes, nil, `{"text":`}, 422,
			`{"detail":[{"type":"json_invalid","loc":["body",8],"msg":"JSON decode error","input":{},"ctx":{"error":"unexpected EOF"}}],"body":"{\"text\":"}`, nil, nil},
		{"create syntax error", dreq{"POST", notes, nil, `{"a" 1}`}, 422,
			`{"detail":[{"type":"json_invalid","loc":["body",5],"msg":"JSON decode error","input":{},"ctx":{"error":"invalid character '1' after object key"}}],"body":"{\"a\" 1}"}`, nil, nil},
		{"create whitespace body", dreq{"POST", notes, nil, ` `}, 422,
			`{"detail":[{"type":"json_invalid","loc":["body",1],"msg":"JSON decode error","input":{},"ctx":{"error":"EOF"}}],"body":" "}`, nil, nil},
		{"create trailing data", dreq{"POST", notes, nil, `{} {}`}, 422,
			`{"detail":[{"type":"json_invalid","loc":["body",3],"msg":"JSON decode error","input":{},"ctx":{"error":"Extra data"}}],"body":"{} {}"}`, nil, nil},
		{"create not UTF-8", dreq{"POST", notes, nil, "{\"text\":\"\xff\"}"}, 400, `{"detail":"There was an error parsing the body"}`, nil, nil},
		{"create not UTF-8 without content type", dreq{"POST", notes, map[string]string{"Content-Type": ""}, "{\"text\":\"a\xc3\"}"}, 400,
			`{"detail":"There was an error parsing the body"}`, nil, nil},
		{"create text/plain not UTF-8", dreq{"POST", notes, map[string]string{"Content-Type": "text/plain"}, "\xff"}, 422,
			`{"detail":[{"type":"dict_type","loc":["body"],"msg":"Input should be a valid dictionary","input":"\ufffd"}],"body":"\ufffd"}`, nil, nil},
		{"create text/plain", dreq{"POST", notes, map[string]string{"Content-Type": "text/plain"}, `{"text":"x"}`}, 422,
			`{"detail":[{"type":"dict_type","loc":["body"],"msg":"Input should be a valid dictionary","input":"{\"text\":\"x\"}"}],"body":"{\"text\":\"x\"}"}`, nil, nil},
		{"create wrong member type", dreq{"POST", notes, nil, `{"text":5}`}, 422,
			`{"detail":[{"type":"string_type","loc":["body","text"],"msg":"Input should be a valid string","input":5}],"body":{"text":5}}`, nil, nil},
		{"create wrong list type", dreq{"POST", notes, nil, `{"text":"x","tags":"a"}`}, 422,
			`{"detail":[{"type":"list_type","loc":["body","tags"],"msg":"Input should be a valid list","input":"a"}],"body":{"text":"x","tags":"a"}}`, nil, nil},
		{"create body checked before the grant", dreq{"POST", notes, map[string]string{core.GrantHeader: ""}, `[1]`}, 422,
			`{"detail":[{"type":"dict_type","loc":["body"],"msg":"Input should be a valid dictionary","input":[1]}],"body":[1]}`, nil, nil},
		{"create body too large", dreq{"POST", notes, nil, big}, 413, `{"detail":"Request body too large: the limit is 4096 bytes"}`, nil, nil},
		{"create conflict", dreq{"POST", notes, nil, `{"text":"conflict"}`}, 409, `{"detail":"note 'conflict' already exists"}`, nil, []string{"create"}},

		// Update and delete.
		{"update", dreq{"PUT", notes + "n2", nil, `{"text":"new"}`}, 200, `{"id":"n2","text":"new"}`, nil, []string{"update n2"}},
		{"update not found", dreq{"PUT", notes + "missing", nil, `{"text":"new"}`}, 404, `{"detail":"notes 'missing' not found"}`, nil, []string{"update missing"}},
		{"update not UTF-8", dreq{"PUT", notes + "n2", nil, "{\"text\":\"\xed\xa0\x80\"}"}, 400, `{"detail":"There was an error parsing the body"}`, nil, nil},
		{"update body not an object", dreq{"PUT", notes + "n2", nil, `"x"`}, 422,
			`{"detail":[{"type":"dict_type","loc":["body"],"msg":"Input should be a valid dictionary","input":"x"}],"body":"x"}`, nil, nil},
		{"delete", dreq{"DELETE", notes + "n3", nil, ""}, 200, `{"deleted":true}`, nil, []string{"delete n3"}},
		{"delete ignores a body", dreq{"DELETE", notes + "n3", nil, "garbage"}, 200, `{"deleted":true}`, nil, []string{"delete n3"}},
		{"delete not found", dreq{"DELETE", notes + "missing", nil, ""}, 404, `{"detail":"notes 'missing' not found"}`, nil, []string{"delete missing"}},

		// Import.
		{"import", dreq{"POST", notes + "import/", nil, `[{"text":"a"},{"text":"b"}]`}, 200, `{"created":2}`, nil, []string{"import"}},
		{"import not UTF-8", dreq{"POST", notes + "import/", nil, "[{\"text\":\"a\"},{\"text\":\"\xc0\xaf\"}]"}, 400, `{"detail":"There was an error parsing the body"}`, nil, nil},
		{"import empty", dreq{"POST", notes + "import/", nil, `[]`}, 200, `{"created":0}`, nil, []string{"import"}},
		{"import not a list", dreq{"POST", notes + "import/", nil, `{"text":"a"}`}, 422,
			`{"detail":[{"type":"list_type","loc":["body"],"msg":"Input should be a valid list","input":{"text":"a"}}],"body":{"text":"a"}}`, nil, nil},
		{"import non-object records", dreq{"POST", notes + "import/", nil, `[{"text":"a"},1,"x"]`}, 422,
			`{"detail":[{"type":"dict_type","loc":["body",1],"msg":"Input should be a valid dictionary","input":1},` +
				`{"type":"dict_type","loc":["body",2],"msg":"Input should be a valid dictionary","input":"x"}],"body":[{"text":"a"},1,"x"]}`, nil, nil},
		{"import wrong member type", dreq{"POST", notes + "import/", nil, `[{"text":"a"},{"text":true}]`}, 422,
			`{"detail":[{"type":"string_type","loc":["body",1,"text"],"msg":"Input should be a valid string","input":true}],"body":[{"text":"a"},{"text":true}]}`, nil, nil},
		{"import: each record's first error, at its index", dreq{"POST", notes + "import/", nil, `[{"text":1},{"text":"ok"},{"text":"x","tags":"t"}]`}, 422,
			`{"detail":[{"type":"string_type","loc":["body",0,"text"],"msg":"Input should be a valid string","input":1},` +
				`{"type":"list_type","loc":["body",2,"tags"],"msg":"Input should be a valid list","input":"t"}],"body":[{"text":1},{"text":"ok"},{"text":"x","tags":"t"}]}`, nil, nil},
		{"import text/plain", dreq{"POST", notes + "import/", map[string]string{"Content-Type": "text/csv"}, "text\na"}, 422,
			`{"detail":[{"type":"list_type","loc":["body"],"msg":"Input should be a valid list","input":"text\na"}],"body":"text\na"}`, nil, nil},
		{"import result not an object", dreq{"POST", dataPath + "bags/import/", nil, `[{"a":1}]`}, 500, `{"detail":"Internal Server Error"}`, nil, []string{"import"}},

		// Callback errors.
		{"permission error", dreq{"GET", notes + "denied", nil, ""}, 403, `{"detail":"workspace denied"}`, nil, []string{"get denied"}},
		{"permission error on create", dreq{"POST", notes, nil, `{"text":"denied"}`}, 403, `{"detail":"workspace denied"}`, nil, []string{"create"}},
		{"permission error on import", dreq{"POST", notes + "import/", nil, `[{"text":"denied"}]`}, 403, `{"detail":"workspace denied"}`, nil, []string{"import"}},
		{"internal error", dreq{"DELETE", notes + "secret", nil, ""}, 500, `{"detail":"Internal Server Error"}`, nil, []string{"delete secret"}},
		{"internal error on list", dreq{"GET", notes, map[string]string{core.HeaderMissionID: "secret"}, ""}, 500, `{"detail":"Internal Server Error"}`, nil, []string{"list"}},
		{"panic", dreq{"PUT", notes + "panic", nil, `{"text":"x"}`}, 500, `{"detail":"Internal Server Error"}`, nil, []string{"update panic"}},
		{"5xx DataError is internal", dreq{"GET", notes + "unavailable", nil, ""}, 500, `{"detail":"Internal Server Error"}`, nil, []string{"get unavailable"}},
		{"not found from create is internal", dreq{"POST", notes, nil, `{"text":"missing"}`}, 500, `{"detail":"Internal Server Error"}`, nil, []string{"create"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recorder{}
			var log bytes.Buffer
			h := dataController(t, studio, rec, &log)
			resp := tc.req.do(t, h, tok)
			if resp.Code != tc.status {
				t.Fatalf("status %d, want %d: %s", resp.Code, tc.status, resp.Body)
			}
			if tc.want == "" {
				if resp.Body.Len() != 0 {
					t.Errorf("body %q, want none", resp.Body)
				}
			} else {
				if ct := resp.Header().Get("Content-Type"); ct != "application/json" {
					t.Errorf("Content-Type %q", ct)
				}
				jsonEq(t, resp.Body.Bytes(), tc.want)
			}
			for k, v := range tc.wantHdr {
				if got := resp.Header().Get(k); got != v {
					t.Errorf("header %s = %q, want %q", k, got, v)
				}
			}
			if resp.Header().Get("X-Content-Type-Options") != "nosniff" {
				t.Error("security headers missing")
			}
			calls, _, _ := rec.snapshot()
			if !slices.Equal(calls, tc.calls) {
				t.Errorf("callbacks %q, want %q", calls, tc.calls)
			}
			mustContainNot(t, resp.Body.Bytes(), "hunter2")
			if resp.Code == 500 && tc.want == `{"detail":"Internal Server Error"}` && !strings.Contains(log.String(), "data resource callback failed") {
				t.Errorf("the failure is not logged: %s", log.String())
			}
		})
	}
}

// TestDataContext: callbacks get the verified workspace (never the headers' claims), the request
// headers Studio sends, the decoded input, the controller's store, and the mission only with its
// metadata header.
func TestDataContext(t *testing.T) {
	studio := granttest.NewIssuer("k1")
	claims := granttest.Valid(dataNow, dataIssuer, allNoteScopes...).With("agent_workspace_ref", "ref-1")
	tok := studio.Token(claims)
	rec := &recorder{}
	h := dataController(t, studio, rec, nil)

	// No slug header: the token's slug is the context's.
	resp := dreq{"POST", dataPath + "notes/", map[string]string{core.HeaderWorkspaceSlug: "", "X-Supervaize-Agent-Slug": "other"}, `{"text":"hi"}`}.do(t, h, tok)
	if resp.Code != 201 {
		t.Fatalf("%d %s", resp.Code, resp.Body)
	}
	_, dc, input := rec.snapshot()
	if input.(note).Text != "hi" {
		t.Errorf("input %+v", input)
	}
	auth, _ := json.Marshal(dc.Authorization)
	const wantAuth = `{"grant_id":"grant-1","workspace_id":"workspace-1","workspace_slug":"workspace","agent_id":"studio-agent-1","agent_slug":"s",` +
		`"server_id":"SRV","scopes":["resource.notes.list","resource.notes.get","resource.notes.create","resource.notes.update","resource.notes.delete",` +
		`"resource.notes.import","resource.logs.list","resource.logs.create","resource.bags.list","resource.bags.create","resource.bags.import"],"agent_workspace_ref":"ref-1"}`
	if string(auth) != wantAuth {
		t.Errorf("authorization %s", auth)
	}
	if dc.WorkspaceID != "workspace-1" || dc.WorkspaceSlug == nil || *dc.WorkspaceSlug != "workspace" || dc.AgentSlug != "s" ||
		dc.MissionID != "mission-1" || dc.RequestID != "request-1" || dc.Mission != nil || dc.Store == nil {
		t.Errorf("context %+v", dc)
	}

	// With metadata: the mission carries it; without a mission id header the context has none.
	meta := base64.RawURLEncoding.EncodeToString([]byte(` {"region": "eu", "n": 12345678901234567890, "nested": {"k": [1, "é"]}} `))
	resp = dreq{"GET", dataPath + "logs/", map[string]string{core.HeaderMissionMetadata: meta, core.HeaderRequestID: ""}, ""}.do(t, h, tok)
	if resp.Code != 200 {
		t.Fatalf("%d %s", resp.Code, resp.Body)
	}
	_, dc, _ = rec.snapshot()
	m, _ := json.Marshal(dc.Mission)
	if string(m) != `{"id":"mission-1","metadata":{"region":"eu","n":12345678901234567890,"nested":{"k":[1,"é"]}}}` || dc.RequestID != "" {
		t.Errorf("mission %s, request id %q", m, dc.RequestID)
	}

	// The local-mode authorizer never lets a DataResource call through.
	rec = &recorder{}
	h = dataControllerWith(t, grant.LocalBypass{ServerID: "SRV"}, nil, slog.New(slog.DiscardHandler), rec)
	resp = dreq{"GET", dataPath + "notes/", map[string]string{core.GrantHeader: ""}, ""}.do(t, h, "")
	if resp.Code != 403 || resp.Body.String() != `{"detail":"Workspace authorization is required but is not configured for this Supervaizer server"}` {
		t.Errorf("local mode: %d %s", resp.Code, resp.Body)
	}
	if calls, _, _ := rec.snapshot(); len(calls) != 0 {
		t.Errorf("callbacks ran: %q", calls)
	}
}

// metadataOf returns a base64url value of exactly n bytes (padded or not) of a JSON object.
func metadataOf(t *testing.T, n int, padded bool) string {
	t.Helper()
	enc := base64.RawURLEncoding
	if padded {
		enc = base64.URLEncoding
	}
	for size := 10; size < 4*n; size++ {
		raw := []byte(`{"k":"` + strings.Repeat("x", size-8) + `"}`)
		if v := enc.EncodeToString(raw); len(v) == n && (!padded || strings.HasSuffix(v, "=")) {
			return v
		}
	}
	t.Fatalf("no %d-byte value (padded %v)", n, padded)
	return ""
}

// TestMissionMetadataHeader: the header's limits. Every refusal is a 400 with no callback run.
func TestMissionMetadataHeader(t *testing.T) {
	studio := granttest.NewIssuer("k1")
	tok := studio.Token(granttest.Valid(dataNow, dataIssuer, allNoteScopes...))
	b64 := base64.RawURLEncoding.EncodeToString
	const (
		badB64     = `{"detail":"X-Supervaize-Mission-Metadata must be base64url (A-Z a-z 0-9 - _, padding optional) of a UTF-8 JSON object"}`
		notObject  = `{"detail":"X-Supervaize-Mission-Metadata must decode to a JSON object (the mission's metadata)"}`
		noMission  = `{"detail":"X-Supervaize-Mission-Metadata was sent without X-Supervaize-Mission-Id: send the mission's id with its metadata"}`
		tooLargeAt = `{"detail":"X-Supervaize-Mission-Metadata is %d bytes: at most 4096 bytes of base64url are accepted"}`
	)
	v4096 := metadataOf(t, 4096, false)
	p4096 := metadataOf(t, 4096, true)
	cases := []struct {
		name      string
		value     string
		missionID string
		want      string // "" = accepted
	}{
		{"unpadded", b64([]byte(`{"a":1}`)), "m1", ""},
		{"padded", base64.URLEncoding.EncodeToString([]byte(`{"a":1}`)), "m1", ""},
		{"empty object", b64([]byte(`{}`)), "m1", ""},
		{"4096 unpadded", v4096, "m1", ""},
		{"4096 padded", p4096, "m1", ""},
		{"4097 (4096 and one more =)", v4096 + "=", "m1", fmt.Sprintf(tooLargeAt, 4097)},
		{"4097 padded", p4096 + "A", "m1", fmt.Sprintf(tooLargeAt, 4097)},
		{"4098 unpadded", metadataOf(t, 4098, false), "m1", fmt.Sprintf(tooLargeAt, 4098)},
		{"4100 padded", metadataOf(t, 4100, true), "m1", fmt.Sprintf(tooLargeAt, 4100)},
		{"too large before the mission id", metadataOf(t, 4098, false), "", fmt.Sprintf(tooLargeAt, 4098)},
		{"no mission id", b64([]byte(`{"a":1}`)), "", noMission},
		{"blank mission id", b64([]byte(`{"a":1}`)), "  ", noMission},
		{"array", b64([]byte(`[{"a":1}]`)), "m1", notObject},
		{"string", b64([]byte(`"x"`)), "m1", notObject},
		{"null", b64([]byte(`null`)), "m1", notObject},
		{"truncated object", b64([]byte(`{"a":`)), "m1", notObject},
		{"two values", b64([]byte(`{} {}`)), "m1", notObject},
		{"empty header", "<empty>", "m1", notObject},
		{"standard alphabet", base64.StdEncoding.EncodeToString([]byte(`{"a":"???>>>"}`)), "m1", badB64},
		{"invalid characters", "eyJhIjox$Q", "m1", badB64},
		{"space inside", "eyJh IjoxfQ", "m1", badB64},
		{"exact padding", b64([]byte(`{"a":1}`)) + "==", "m1", ""},
		{"wrong padding", b64([]byte(`{"a":1}`)) + "=", "m1", badB64},
		{"padding inside", "eyJhIjox=fQ=", "m1", badB64},
		{"too much padding", base64.URLEncoding.EncodeToString([]byte(`{"a":12}`)) + "===", "m1", badB64},
		{"impossible length", "eyJhIjoxfQAAA", "m1", badB64},
		{"non-zero trailing bits", "e30", "m1", ""},
		{"non-zero trailing bits refused", "e31", "m1", badB64},
		{"not UTF-8", b64([]byte("{\"a\":\"\xff\"}")), "m1", `{"detail":"X-Supervaize-Mission-Metadata must decode to UTF-8 text: a JSON object"}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recorder{}
			h := dataController(t, studio, rec, nil)
			resp := dreq{"GET", dataPath + "notes/?limit=1", map[string]string{core.HeaderMissionMetadata: tc.value, core.HeaderMissionID: tc.missionID}, ""}.do(t, h, tok)
			calls, dc, _ := rec.snapshot()
			if tc.want != "" {
				if resp.Code != 400 || len(calls) != 0 {
					t.Fatalf("%d %s, callbacks %q", resp.Code, resp.Body, calls)
				}
				jsonEq(t, resp.Body.Bytes(), tc.want)
				return
			}
			if resp.Code != 200 || len(calls) != 1 || dc.Mission == nil || dc.Mission.ID != tc.missionID || !json.Valid(dc.Mission.Metadata) {
				t.Fatalf("%d %s, callbacks %q, context %+v", resp.Code, resp.Body, calls, dc)
			}
		})
	}

	t.Run("sent twice", func(t *testing.T) {
		rec := &recorder{}
		h := dataController(t, studio, rec, nil)
		req := httptest.NewRequest("GET", dataPath+"notes/", nil)
		req.Header.Set("X-API-Key", testKey)
		req.Header.Set(core.GrantHeader, "Bearer "+tok)
		req.Header.Set(core.HeaderWorkspaceID, "workspace-1")
		req.Header.Set(core.HeaderMissionID, "m1")
		req.Header.Add(core.HeaderMissionMetadata, b64([]byte(`{}`)))
		req.Header.Add(core.HeaderMissionMetadata, b64([]byte(`{}`)))
		resp := httptest.NewRecorder()
		h.ServeHTTP(resp, req)
		if calls, _, _ := rec.snapshot(); resp.Code != 400 || len(calls) != 0 {
			t.Fatalf("%d %s", resp.Code, resp.Body)
		}
		jsonEq(t, resp.Body.Bytes(), `{"detail":"X-Supervaize-Mission-Metadata was sent more than once: send it once"}`)
	})

	t.Run("the grant comes first", func(t *testing.T) {
		rec := &recorder{}
		h := dataController(t, studio, rec, nil)
		resp := dreq{"GET", dataPath + "notes/", map[string]string{core.HeaderMissionMetadata: "$$$", core.GrantHeader: ""}, ""}.do(t, h, tok)
		if resp.Code != 403 {
			t.Fatalf("%d %s", resp.Code, resp.Body)
		}
	})
}

// TestDataResourceDeclaration: every declaration mistake is reported by New, with the
// reference's message for a duplicate name.
func TestDataResourceDeclaration(t *testing.T) {
	list := func(context.Context, *core.DataContext) ([]note, error) { return nil, nil }
	create := func(_ context.Context, _ *core.DataContext, n note) (note, error) { return n, nil }
	for _, tc := range []struct {
		name string
		add  []core.DataResourceDeclaration
		want string
	}{
		{"bad name", []core.DataResourceDeclaration{core.DataResource[note]{Name: "Bad Name", List: list}},
			`agent "s": DataResource 'Bad Name': name: String should match pattern '^[a-z0-9][a-z0-9_-]*$'`},
		{"leading dash", []core.DataResourceDeclaration{core.DataResource[note]{Name: "-x", List: list}},
			`agent "s": DataResource '-x': name: String should match pattern '^[a-z0-9][a-z0-9_-]*$'`},
		{"no list", []core.DataResourceDeclaration{core.DataResource[note]{Name: "notes"}}, `agent "s": DataResource 'notes' must define List or ListPage`},
		{"both lists", []core.DataResourceDeclaration{core.DataResource[note]{Name: "notes", List: list,
			ListPage: func(context.Context, *core.DataContext, core.DataPage) ([]note, error) { return nil, nil }}},
			`agent "s": DataResource 'notes' defines both List and ListPage: keep one`},
		{"delete without create", []core.DataResourceDeclaration{core.DataResource[note]{Name: "notes", List: list,
			Delete: func(context.Context, *core.DataContext, string) error { return nil }}},
			`agent "s": DataResource 'notes' defines Update or Delete but not Create: a writable DataResource must define Create`},
		{"bad field and scope", []core.DataResourceDeclaration{core.DataResource[note]{Name: "notes", List: list, Scope: "team",
			Fields: []contract.DataResourceField{{Name: "a", FieldType: "money"}, {Name: "a", Editable: "sometimes"}, {}}}},
			`agent "s": DataResource 'notes': scope: Input should be 'workspace', 'mission' or 'job'` + "\n" +
				`fields[0].field_type: Input should be 'string', 'integer', 'boolean', 'date', 'datetime', 'text', 'email' or 'url'` + "\n" +
				`fields[1].editable: Input should be 'always', 'create_only' or 'never'` + "\n" +
				`fields[1].name: field 'a' is declared twice; each field must have a unique name` + "\n" +
				`fields[2].name: String should have at least 1 character`},
		{"duplicate", []core.DataResourceDeclaration{core.DataResource[note]{Name: "notes", List: list, Create: create}, core.DataResource[map[string]any]{Name: "notes",
			List: func(context.Context, *core.DataContext) ([]map[string]any, error) { return nil, nil }}},
			`Duplicate DataResource name 'notes' on agent 'S'; each data resource must have a unique name per agent.`},
		{"nil", []core.DataResourceDeclaration{nil}, `agent "s": nil DataResource`},
		{"invalid field extra", []core.DataResourceDeclaration{core.DataResource[note]{Name: "notes", List: list,
			Fields: []contract.DataResourceField{{Name: "a", Extra: contract.Extra{"x_hint": json.RawMessage(`nope`)}}}}},
			`agent "s": DataResource 'notes': json: error calling MarshalJSON for type contract.DataResource: json: error calling MarshalJSON for type contract.DataResourceField: extra member "x_hint" is not valid JSON`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := newAgent(t, handlers{})
			for _, d := range tc.add {
				a.AddDataResource(d)
			}
			_, err := core.New(core.Config{APIKey: testKey, Authorizer: grant.NotConfigured{}}, a)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v\nwant it to contain %s", err, tc.want)
			}
		})
	}
}

// TestDataResourceRegistration: the declarations appear in the registration's data_resources (the
// agent info route), in declaration order, with the reference's defaults; the Agent Card is
// unchanged (the reference's card has no data resources).
func TestDataResourceRegistration(t *testing.T) {
	rec := &recorder{}
	h := dataControllerWith(t, grant.NotConfigured{}, map[string]string{"s": studioAgent}, slog.New(slog.DiscardHandler), rec)
	status, _, body := get(t, h, "/api/supervaizer/agents/s/", map[string]string{"X-API-Key": testKey})
	if status != 200 {
		t.Fatalf("%d %s", status, body)
	}
	var info struct {
		DataResources json.RawMessage `json:"data_resources"`
	}
	if err := json.Unmarshal(body, &info); err != nil {
		t.Fatal(err)
	}
	jsonEq(t, info.DataResources, `[
	 {"name":"notes","display_name":"Notes","description":"Notes kept by the agent","fields":[
	   {"name":"id","field_type":"string","label":null,"required":false,"editable":"never","visible_on":["list","detail"],"description":null,"related_resource":null,"sensitive":false,"display_label":"Id"},
	   {"name":"text","field_type":"text","label":null,"required":true,"editable":"always","visible_on":["list","detail","create","edit"],"description":null,"related_resource":null,"sensitive":false,"display_label":"Text"}],
	  "read_only":false,"importable":true,"operations":{"list":true,"get":true,"create":true,"update":true,"delete":true,"import":true},
	  "scope":"workspace","requires_context":["workspace_id"]},
	 {"name":"logs","display_name":"Logs","description":"","fields":[],"read_only":true,"importable":false,
	  "operations":{"list":true,"get":false,"create":false,"update":false,"delete":false,"import":false},"scope":"mission","requires_context":["workspace_id"]},
	 {"name":"bags","display_name":"Bags","description":"","fields":[],"read_only":false,"importable":true,
	  "operations":{"list":true,"get":false,"create":true,"update":false,"delete":false,"import":true},"scope":"workspace","requires_context":["workspace_id"]}]`)

	var back []contract.DataResource
	if err := json.Unmarshal(info.DataResources, &back); err != nil || len(back) != 3 || !back[0].Operations.Import || back[1].Scope != "mission" {
		t.Fatalf("decode: %v %+v", err, back)
	}
	if got := h.Agents()[0].DataResources(); len(got) != 3 || got[2].Name != "bags" {
		t.Errorf("Agent.DataResources %+v", got)
	}
	_, _, card := get(t, h, "/.well-known/agents/v1.0/s_agent.json", nil)
	if bytes.Contains(card, []byte("data_resources")) || bytes.Contains(card, []byte(`"notes"`)) {
		t.Errorf("the card carries data resources: %s", card)
	}
}

// TestDataListPage: ListPage gets the request's window, defaults 0/100, and a skip beyond any
// collection lowered to 2^53 so that Skip+Limit cannot overflow.
func TestDataListPage(t *testing.T) {
	studio := granttest.NewIssuer("k1")
	tok := studio.Token(granttest.Valid(dataNow, dataIssuer, allNoteScopes...))
	for query, want := range map[string]core.DataPage{
		"":                               {Skip: 0, Limit: 100},
		"?skip=3&limit=2":                {Skip: 3, Limit: 2},
		"?skip=9007199254740993&limit=1": {Skip: 1 << 53, Limit: 1},
		"?skip=99999999999999999999999&limit=1000": {Skip: 1 << 53, Limit: 1000},
	} {
		rec := &recorder{}
		h := dataController(t, studio, rec, nil)
		if resp := (dreq{"GET", dataPath + "bags/" + query, nil, ""}).do(t, h, tok); resp.Code != 200 {
			t.Fatalf("%s: %d %s", query, resp.Code, resp.Body)
		}
		rec.mu.Lock()
		got := rec.page
		rec.mu.Unlock()
		if got != want {
			t.Errorf("%q: page %+v, want %+v", query, got, want)
		}
	}
}

// fixedAuthorizer verifies every call as the workspace it names, whatever the request's headers
// say (a custom authorizer), and records the calls it got.
type fixedAuthorizer struct {
	mu    sync.Mutex
	vctx  contract.VerifiedWorkspaceContext
	calls []grant.Call
}

func (a *fixedAuthorizer) Authorize(_ context.Context, call grant.Call) (*contract.VerifiedWorkspaceContext, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.calls = append(a.calls, call)
	if a.vctx.WorkspaceID == "" {
		return nil, nil // a broken authorizer: neither a context nor an error
	}
	v := a.vctx
	return &v, nil
}

// TestDataContextIsTheVerifiedWorkspace: a callback's DataContext and its package state scope
// are the workspace the authorizer verified, never the one the request's headers claim.
func TestDataContextIsTheVerifiedWorkspace(t *testing.T) {
	slug := "verified-slug"
	authz := &fixedAuthorizer{vctx: contract.VerifiedWorkspaceContext{GrantID: "grant-v", WorkspaceID: "ws-verified", WorkspaceSlug: &slug,
		AgentID: studioAgent, AgentSlug: "s", ServerID: "SRV", Scopes: []string{"resource.notes.list", "resource.notes.create"}}}
	var mu sync.Mutex
	var seen []*core.DataContext
	a := newAgent(t, handlers{})
	a.AddDataResource(core.DataResource[note]{
		Name:   "notes",
		Fields: []contract.DataResourceField{{Name: "text", FieldType: contract.DataFieldText, Required: true}},
		List: func(ctx context.Context, dc *core.DataContext) ([]note, error) {
			mu.Lock()
			seen = append(seen, dc)
			mu.Unlock()
			var out []note
			for r, err := range state.Of[note](ctx, "notes").All(ctx, "") {
				if err != nil {
					return nil, err
				}
				out = append(out, r.Value)
			}
			return out, nil
		},
		Create: func(ctx context.Context, dc *core.DataContext, n note) (note, error) {
			mu.Lock()
			seen = append(seen, dc)
			mu.Unlock()
			n.ID = "n1"
			return n, state.Of[note](ctx, "notes").Create(ctx, n.ID, n)
		},
	})
	st := memory.New()
	c, err := core.New(core.Config{APIKey: testKey, ServerID: "SRV", Authorizer: authz, StudioAgentIDs: map[string]string{"s": studioAgent},
		Logger: slog.New(slog.DiscardHandler), Store: st}, a)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(); _ = st.Close() })

	resp := dreq{"POST", dataPath + "notes/", nil, `{"text":"hi"}`}.do(t, c, "any")
	if resp.Code != 201 || resp.Body.String() != `{"id":"n1","text":"hi"}` {
		t.Fatalf("create: %d %s", resp.Code, resp.Body)
	}
	resp = dreq{"GET", dataPath + "notes/", map[string]string{core.HeaderWorkspaceID: "ws-verified"}, ""}.do(t, c, "any")
	if resp.Code != 200 || !strings.Contains(resp.Body.String(), `"id":"n1"`) {
		t.Fatalf("list from the verified workspace: %d %s", resp.Code, resp.Body)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 2 {
		t.Fatalf("%d callbacks ran, want 2", len(seen))
	}
	for i, dc := range seen {
		if dc.WorkspaceID != "ws-verified" || dc.WorkspaceSlug == nil || *dc.WorkspaceSlug != slug || dc.Authorization == nil ||
			dc.Authorization.GrantID != "grant-v" || dc.Authorization.WorkspaceID != "ws-verified" {
			t.Errorf("callback %d got workspace %q (slug %v, authorization %+v); want the verified ws-verified", i, dc.WorkspaceID, dc.WorkspaceSlug, dc.Authorization)
		}
	}
	// The authorizer was asked about the workspace the headers claim; the record is the verified
	// workspace's, not the claimed one's.
	if len(authz.calls) != 2 || authz.calls[0].Workspace.ID != "workspace-1" || authz.calls[0].Target != "resource.notes.create" {
		t.Errorf("authorizer calls %+v", authz.calls)
	}
	ctx := context.Background()
	if _, err := state.Of[note](state.NewContext(ctx, st, "s", "ws-verified"), "notes").Get(state.NewContext(ctx, st, "s", "ws-verified"), "n1"); err != nil {
		t.Errorf("the verified workspace's record: %v", err)
	}
	claimed := state.NewContext(ctx, st, "s", "workspace-1")
	if _, err := state.Of[note](claimed, "notes").Get(claimed, "n1"); !errors.Is(err, state.ErrNotFound) {
		t.Errorf("the claimed workspace holds the record: %v", err)
	}
}

// TestDataAuthorizerWithoutAnswer: an authorizer that returns neither a context nor an error is
// a failure (500, nothing leaked), never a call let through.
func TestDataAuthorizerWithoutAnswer(t *testing.T) {
	rec := &recorder{}
	h := dataControllerWith(t, &fixedAuthorizer{}, map[string]string{"s": studioAgent}, slog.New(slog.DiscardHandler), rec)
	for _, q := range []dreq{{"GET", dataPath + "notes/", nil, ""}, {"POST", dataPath + "notes/", nil, `{"text":"hi"}`}, {"DELETE", dataPath + "notes/n1", nil, ""}} {
		if resp := q.do(t, h, "any"); resp.Code != 500 || resp.Body.String() != `{"detail":"Internal Server Error"}` {
			t.Errorf("%s %s: %d %s", q.method, q.path, resp.Code, resp.Body)
		}
	}
	if calls, _, _ := rec.snapshot(); len(calls) != 0 {
		t.Errorf("callbacks ran: %q", calls)
	}
}

// TestEncodedSlashNotFound: an encoded slash is 404 on every route, not only the data routes: a
// router that decodes first would otherwise serve /a2a%2Fevents as /a2a/events.
func TestEncodedSlashNotFound(t *testing.T) {
	h := dataController(t, granttest.NewIssuer("k1"), &recorder{}, nil)
	// POST: each decoded path is a GET route, which answers 405 to it (a GET of /a2a/events would
	// stream until the test ends).
	for _, path := range []string{"/a2a%2Fevents", "/a2a%2fevents", "/.well-known%2Fhealth", "/api/supervaizer/agents%2Fs"} {
		req := httptest.NewRequest(http.MethodPost, path, nil)
		req.Header.Set("X-API-Key", testKey)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusNotFound || rec.Body.String() != `{"detail":"Not Found"}` || rec.Header().Get("Location") != "" {
			t.Errorf("POST %s: %d %v %s", path, rec.Code, rec.Header(), rec.Body)
		}
	}
}
