package lambda

import (
	"bytes"
	"encoding/base64"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"
)

// bufferedWriter collects a whole response, as the buffered invoke modes require. It does not
// flush (http.ResponseController reports http.ErrNotSupported), so an event stream answers in
// poll mode: what is ready now, then the end of the response.
type bufferedWriter struct {
	header http.Header
	sent   http.Header // the header as of the first write, as net/http snapshots it
	status int
	head   bool // a HEAD request: the body is discarded
	body   bytes.Buffer
}

func newBufferedWriter(method string) *bufferedWriter {
	return &bufferedWriter{header: make(http.Header), head: method == http.MethodHead}
}

func (w *bufferedWriter) Header() http.Header { return w.header }

func (w *bufferedWriter) WriteHeader(code int) {
	if w.status != 0 || code < 200 {
		return // a second status is ignored and 1xx responses cannot be relayed, as on a server
	}
	w.status = code
	w.sent = w.header.Clone()
}

func (w *bufferedWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	if !bodyAllowed(w.status) {
		return 0, http.ErrBodyNotAllowed
	}
	if w.head {
		return len(p), nil
	}
	return w.body.Write(p)
}

// reset discards the response (after a panic) for a fresh one.
func (w *bufferedWriter) reset() {
	w.header = make(http.Header)
	w.sent, w.status = nil, 0
	w.body.Reset()
}

// finish completes the response once the handler has returned: the default status, and the
// sniffed Content-Type when the handler set none, as net/http does when it sends the headers.
func (w *bufferedWriter) finish() {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	sniff(w.sent, w.status, w.body.Bytes())
}

// The buffered response payloads. Each source has its own shape; fields the source does not
// know are left out rather than sent as null.
type (
	v2Response struct { // Function URL (buffered) and HTTP API payload 2.0
		StatusCode      int               `json:"statusCode"`
		Headers         map[string]string `json:"headers,omitempty"`
		Cookies         []string          `json:"cookies,omitempty"`
		Body            string            `json:"body"`
		IsBase64Encoded bool              `json:"isBase64Encoded"`
	}
	v1Response struct { // REST API and HTTP API payload 1.0
		StatusCode        int                 `json:"statusCode"`
		MultiValueHeaders map[string][]string `json:"multiValueHeaders,omitempty"`
		Body              string              `json:"body"`
		IsBase64Encoded   bool                `json:"isBase64Encoded"`
	}
	albResponse struct {
		StatusCode        int                 `json:"statusCode"`
		StatusDescription string              `json:"statusDescription"`
		Headers           map[string]string   `json:"headers,omitempty"`
		MultiValueHeaders map[string][]string `json:"multiValueHeaders,omitempty"`
		Body              string              `json:"body"`
		IsBase64Encoded   bool                `json:"isBase64Encoded"`
	}
)

// response returns the payload answering an event of kind k.
func (w *bufferedWriter) response(k source, multiValue bool, log *slog.Logger) any {
	body, b64 := encodeBody(w.body.Bytes())
	switch k {
	case srcRESTAPI:
		return &v1Response{StatusCode: w.status, MultiValueHeaders: w.sent, Body: body, IsBase64Encoded: b64}
	case srcALB:
		r := &albResponse{StatusCode: w.status, StatusDescription: statusLine(w.status), Body: body, IsBase64Encoded: b64}
		if multiValue {
			r.MultiValueHeaders = w.sent
		} else {
			// A target group without multi-value headers takes one value per name.
			r.Headers = joinHeaders(w.sent, true)
			if n := len(w.sent["Set-Cookie"]); n > 1 {
				log.Warn("an ALB without multi-value headers relays one Set-Cookie header: enable multi-value headers on the target group", "dropped", n-1)
			}
		}
		return r
	default:
		return &v2Response{StatusCode: w.status, Headers: joinHeaders(w.sent, false), Cookies: w.sent["Set-Cookie"], Body: body, IsBase64Encoded: b64}
	}
}

// joinHeaders folds each header's values into one, comma-separated. Set-Cookie values cannot be
// folded: payload 2.0 carries them as cookies, so they are left out, or, when keepCookie, the
// first is kept.
func joinHeaders(h http.Header, keepCookie bool) map[string]string {
	if len(h) == 0 {
		return nil
	}
	out := make(map[string]string, len(h))
	for k, vs := range h {
		switch {
		case len(vs) == 0:
		case k == "Set-Cookie":
			if keepCookie {
				out[k] = vs[0]
			}
		case len(vs) == 1:
			out[k] = vs[0]
		default:
			out[k] = strings.Join(vs, ",")
		}
	}
	return out
}

// encodeBody returns the body as a JSON string: as is when it is valid UTF-8 (a JSON string then
// carries it byte for byte), else base64.
func encodeBody(b []byte) (string, bool) {
	if utf8.Valid(b) {
		return string(b), false
	}
	return base64.StdEncoding.EncodeToString(b), true
}

func statusLine(code int) string {
	text := http.StatusText(code)
	if text == "" {
		return strconv.Itoa(code)
	}
	return strconv.Itoa(code) + " " + text
}

// sniff sets the Content-Type net/http would have set: the sniffed type of the first bytes of the
// body when the handler set none.
func sniff(h http.Header, status int, p []byte) {
	if _, ok := h["Content-Type"]; ok || len(p) == 0 || !bodyAllowed(status) {
		return
	}
	h.Set("Content-Type", http.DetectContentType(p))
}

func bodyAllowed(status int) bool {
	return status >= 200 && status != http.StatusNoContent && status != http.StatusNotModified
}
