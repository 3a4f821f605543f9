package lambda

import (
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"

	"github.com/supervaize/svz/adapters/internal/testkit"
)

// echo answers with what it received, so tests see the request the adapter built. Its routes
// also exercise the response side: headers with several values, cookies, a binary body, a
// stream, a panic.
func echo() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/binary", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/octet-stream")
		_, _ = w.Write([]byte{0xff, 0x00, 0x01, 'a'})
	})
	mux.HandleFunc("/panic", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Before-Panic", "1")
		panic("boom: sk-secret-value")
	})
	mux.HandleFunc("/late-panic", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "data: first\n\n")
		_ = http.NewResponseController(w).Flush()
		panic("late boom")
	})
	mux.HandleFunc("/events", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "event: one\ndata: {}\n\n")
		err := http.NewResponseController(w).Flush()
		if err != nil {
			_, _ = io.WriteString(w, "event: poll\ndata: "+err.Error()+"\n\n")
			return
		}
		_, _ = io.WriteString(w, "event: two\ndata: {}\n\n")
	})
	mux.HandleFunc("/nocontent", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNoContent)
		if _, err := w.Write([]byte("x")); err != http.ErrBodyNotAllowed {
			panic("a 204 accepted a body")
		}
	})
	mux.HandleFunc("/deadline", testkit.WriteDeadline)
	mux.HandleFunc("/sniff", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "<html><body>hi</body></html>")
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			panic(err)
		}
		_, hasDeadline := r.Context().Deadline()
		seen := echoed{
			Method:        r.Method,
			RequestURI:    r.RequestURI,
			Path:          r.URL.Path,
			RawPath:       r.URL.RawPath,
			RawQuery:      r.URL.RawQuery,
			Query:         r.URL.Query(),
			Host:          r.Host,
			RemoteAddr:    r.RemoteAddr,
			Header:        r.Header,
			Body:          base64.StdEncoding.EncodeToString(body),
			ContentLength: r.ContentLength,
			HasDeadline:   hasDeadline,
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header()["X-Multi"] = []string{"a", "b"}
		w.Header().Add("Set-Cookie", "session=1; Path=/; HttpOnly")
		w.Header().Add("Set-Cookie", "theme=dark")
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(seen)
		w.Header().Set("X-Too-Late", "ignored") // after the first write, as on a server
	})
	return mux
}

type echoed struct {
	Method        string              `json:"method"`
	RequestURI    string              `json:"request_uri"`
	Path          string              `json:"path"`
	RawPath       string              `json:"raw_path,omitempty"`
	RawQuery      string              `json:"raw_query"`
	Query         map[string][]string `json:"query"`
	Host          string              `json:"host"`
	RemoteAddr    string              `json:"remote_addr"`
	Header        http.Header         `json:"header"`
	Body          string              `json:"body_base64"`
	ContentLength int64               `json:"content_length"`
	HasDeadline   bool                `json:"has_deadline"`
}
