package core_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/supervaize/svz/core"
	"github.com/supervaize/svz/core/grant/granttest"
)

// FuzzMissionMetadata feeds arbitrary X-Supervaize-Mission-Metadata values to the decoder, and
// arbitrary metadata to an encoder playing Studio. An accepted value is at most 4096 bytes, decodes
// (strict base64url, exact padding) to the compact form of a UTF-8 JSON object; every object
// Studio encodes within the limit, padded or not, is accepted with the same meaning.
func FuzzMissionMetadata(f *testing.F) {
	for _, s := range []string{
		`eyJhIjoxfQ`, `eyJhIjoxfQ==`, `e30`, `e31`, `W10`, `bnVsbA`, ``, `=`, `====`, `eyJh IjoxfQ`, `eyJhIjox$Q`,
		`+/+/`, `eyJhIjoxfQAAA`, strings.Repeat("A", 4097), `{"region":"eu"}`, `{"a":[1,"é",{"b":null}]}`, "{\"a\":\"\xff\"}",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		// s as a header value.
		if got, err := core.DecodeMissionMetadata(s); err == nil {
			if len(s) > core.MaxMissionMetadataBytes {
				t.Fatalf("accepted %d bytes", len(s))
			}
			raw, derr := base64.RawURLEncoding.Strict().DecodeString(strings.TrimRight(s, "="))
			if derr != nil || !utf8.Valid(raw) {
				t.Fatalf("accepted %q, which is not strict base64url of UTF-8 (%v)", s, derr)
			}
			var compact bytes.Buffer
			if json.Compact(&compact, raw) != nil || !bytes.Equal(compact.Bytes(), got) || got[0] != '{' {
				t.Fatalf("accepted %q as %s", s, got)
			}
		} else if len(s) > 16 && strings.Contains(err.Error(), s) {
			t.Fatalf("the error echoes the value: %v", err)
		}

		// s as metadata Studio encodes.
		var obj map[string]any
		if json.Unmarshal([]byte(s), &obj) != nil || !utf8.ValidString(s) || obj == nil {
			return
		}
		for _, enc := range []*base64.Encoding{base64.RawURLEncoding, base64.URLEncoding} {
			v := enc.EncodeToString([]byte(s))
			got, err := core.DecodeMissionMetadata(v)
			if len(v) > core.MaxMissionMetadataBytes {
				if err == nil {
					t.Fatalf("accepted %d bytes", len(v))
				}
				continue
			}
			if err != nil {
				t.Fatalf("refused Studio's encoding %q of %s: %v", v, s, err)
			}
			var back map[string]any
			if json.Unmarshal(got, &back) != nil || len(back) != len(obj) {
				t.Fatalf("%s decoded as %s", s, got)
			}
		}
	})
}

// FuzzDataRoute sends hostile requests to the DataResource routes of a controller with a valid
// grant: any method, path (as a decoded path, and as the escaped path a client sends, %2F
// included), query, body, content type and mission headers. Every answer has a status of the
// routes' contract and a JSON body (a redirect has none, and never points at the URL asked), and
// no callback's secret ever leaks.
func FuzzDataRoute(f *testing.F) {
	for _, s := range [][6]string{
		{"GET", "notes/", "skip=1&limit=2", "", "", ""},
		{"POST", "notes/", "", `{"text":"x"}`, "application/json", "eyJhIjoxfQ"},
		{"PUT", "notes/n1", "", `{"text":5}`, "", ""},
		{"DELETE", "notes/secret", "", "", "", ""},
		{"POST", "notes/import/", "", `[{"text":"a"},1]`, "text/plain", "$$"},
		{"GET", "notes", "skip=-1", "", "", ""},
		{"PATCH", "logs/x/", "limit=1e3", "{", "application/x+json", "e30="},
		{"GET", "bags/", "limit=99999999999999999999", "", "", "W10"},
		{"GET", "notes/panic", "", "", "", ""},
		{"GET", "notes/secret-a%2F", "", "", "", ""},
		{"GET", "notes%2F", "x=1", "", "", ""},
		{"POST", "notes/", "", "{\"text\":\"\xff\"}", "", ""},
		{"PUT", "notes/n1", "", "{\"text\":\"\xed\xa0\x80\"}", "application/json", ""},
	} {
		f.Add(s[0], s[1], s[2], s[3], s[4], s[5])
	}
	studio := granttest.NewIssuer("k1")
	tok := studio.Token(granttest.Valid(dataNow, dataIssuer, allNoteScopes...))
	h := dataController(f, studio, &recorder{}, nil)
	allowed := map[int]bool{200: true, 201: true, 307: true, 400: true, 403: true, 404: true, 405: true, 409: true, 413: true, 422: true, 500: true, 501: true}
	f.Fuzz(func(t *testing.T, method, path, query, body, contentType, metadata string) {
		urls := []*url.URL{{Path: dataPath + path, RawQuery: query}}
		if decoded, err := url.PathUnescape(path); err == nil {
			urls = append(urls, &url.URL{Path: dataPath + decoded, RawPath: dataPath + path, RawQuery: query})
		}
		for _, u := range urls {
			fuzzDataRequest(t, h, tok, allowed, u, method, body, contentType, metadata)
		}
	})
}

func fuzzDataRequest(t *testing.T, h http.Handler, tok string, allowed map[int]bool, u *url.URL, method, body, contentType, metadata string) {
	{
		req, err := http.NewRequest(method, u.String(), strings.NewReader(body))
		if err != nil {
			return // not a request a client could send
		}
		req.Header.Set("X-API-Key", testKey)
		req.Header.Set(core.GrantHeader, "Bearer "+tok)
		req.Header.Set(core.HeaderWorkspaceID, "workspace-1")
		req.Header.Set(core.HeaderMissionID, "mission-1")
		req.Header.Set("Content-Type", contentType)
		if metadata != "" {
			req.Header.Set(core.HeaderMissionMetadata, metadata)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if !allowed[rec.Code] {
			t.Fatalf("%s %s: status %d %s", method, u, rec.Code, rec.Body)
		}
		if (method == "POST" || method == "PUT") && !utf8.ValidString(body) && rec.Code < 300 {
			t.Fatalf("%s %s: a body that is not UTF-8 was accepted (%d %s)", method, u, rec.Code, rec.Body)
		}
		if rec.Code == 307 {
			loc := rec.Header().Get("Location")
			if rec.Body.Len() != 0 || !strings.HasPrefix(loc, dataPath) || loc == req.URL.RequestURI() {
				t.Fatalf("%s: redirect %q body %q", req.URL.RequestURI(), loc, rec.Body)
			}
			return
		}
		if !json.Valid(rec.Body.Bytes()) {
			t.Fatalf("%s %s: %d not JSON: %q", method, u, rec.Code, rec.Body)
		}
		if strings.Contains(rec.Body.String(), "hunter2") {
			t.Fatalf("leak: %s", rec.Body)
		}
	}
}
