package rie

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/aws/aws-lambda-go/events"
)

// maxRequestBody is the largest request a Function URL accepts (6 MB payload quota).
const maxRequestBody = 6 << 20

// FunctionURL plays a Lambda Function URL in front of an emulator: each HTTP request becomes a
// Function URL event (payload 2.0) and the function's answer an HTTP response. A failed
// invocation (an init error, a crash) answers 502, as a Function URL does. It is an
// http.RoundTripper (a client's transport, whatever host the URL names) and an http.Handler (a
// local server).
type FunctionURL struct {
	Emulator *Emulator
	// Domain is the event's domain name; the function recognises a Function URL by its
	// ".lambda-url." part. Empty: the request's host when it has that part, else
	// "local.lambda-url.us-east-1.on.aws".
	Domain string

	seq atomic.Int64
}

var (
	_ http.RoundTripper = (*FunctionURL)(nil)
	_ http.Handler      = (*FunctionURL)(nil)
)

// streamDelimiter separates the prelude from the body in the RESPONSE_STREAM framing.
var streamDelimiter = []byte{0, 0, 0, 0, 0, 0, 0, 0}

// RoundTrip invokes the function with req.
func (f *FunctionURL) RoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil {
		b, err := io.ReadAll(io.LimitReader(req.Body, maxRequestBody+1))
		req.Body.Close()
		if err != nil {
			return nil, err
		}
		if len(b) > maxRequestBody {
			return &http.Response{StatusCode: http.StatusRequestEntityTooLarge, Header: http.Header{}, Body: io.NopCloser(strings.NewReader("Request Entity Too Large")), Request: req}, nil
		}
		body = b
	}
	payload, err := json.Marshal(f.event(req, body))
	if err != nil {
		return nil, err
	}
	inv, err := f.Emulator.Invoke(req.Context(), payload)
	if err != nil {
		return nil, err
	}
	resp, err := Response(inv)
	if err != nil {
		return nil, err
	}
	resp.Request = req
	return resp, nil
}

// ServeHTTP answers a request as the Function URL would.
func (f *FunctionURL) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	out := r.Clone(r.Context())
	out.URL.Scheme, out.URL.Host = "http", r.Host
	resp, err := f.RoundTrip(out)
	if err != nil {
		http.Error(w, "invoke: "+err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, resp.Body)
}

// event builds the Function URL event of a request.
func (f *FunctionURL) event(req *http.Request, body []byte) events.LambdaFunctionURLRequest {
	headers := map[string]string{}
	var cookies []string
	for k, v := range req.Header {
		if strings.EqualFold(k, "Cookie") {
			for _, c := range v {
				cookies = append(cookies, strings.Split(c, "; ")...)
			}
			continue
		}
		headers[strings.ToLower(k)] = strings.Join(v, ",")
	}
	headers["host"] = req.URL.Host
	domain := f.Domain
	if domain == "" {
		domain = "local.lambda-url.us-east-1.on.aws"
		if strings.Contains(req.URL.Host, ".lambda-url.") {
			domain = req.URL.Host
		}
	}
	now := time.Now()
	return events.LambdaFunctionURLRequest{
		Version: "2.0", RawPath: req.URL.EscapedPath(), RawQueryString: req.URL.RawQuery, Headers: headers, Cookies: cookies,
		Body: base64.StdEncoding.EncodeToString(body), IsBase64Encoded: true,
		RequestContext: events.LambdaFunctionURLRequestContext{
			AccountID: "123456789012", RequestID: fmt.Sprintf("local-%d-%d", now.UnixNano(), f.seq.Add(1)), APIID: "local",
			DomainName: domain, DomainPrefix: strings.SplitN(domain, ".", 2)[0], TimeEpoch: now.UnixMilli(),
			Time: now.UTC().Format("02/Jan/2006:15:04:05 +0000"),
			HTTP: events.LambdaFunctionURLRequestContextHTTPDescription{
				Method: req.Method, Path: req.URL.Path, Protocol: "HTTP/1.1", SourceIP: "127.0.0.1", UserAgent: req.UserAgent(),
			},
		},
	}
}

// Response turns an invocation into the HTTP response a Function URL gives: 502 for a failed
// invocation, else the function's status, headers, cookies and body, buffered or streamed.
func Response(inv Invocation) (*http.Response, error) {
	if inv.Status != http.StatusOK {
		return &http.Response{StatusCode: http.StatusBadGateway, Header: http.Header{"Content-Type": {"application/json"}},
			Body: io.NopCloser(bytes.NewReader(inv.Payload))}, nil
	}
	var fr events.LambdaFunctionURLResponse
	var body []byte
	if prelude, rest, ok := bytes.Cut(inv.Payload, streamDelimiter); ok && bytes.HasPrefix(prelude, []byte("{")) {
		if err := json.Unmarshal(prelude, &fr); err != nil {
			return nil, fmt.Errorf("streaming prelude: %w", err)
		}
		body = rest
	} else {
		if err := json.Unmarshal(inv.Payload, &fr); err != nil {
			return nil, fmt.Errorf("function URL response: %w: %s", err, excerpt(inv.Payload))
		}
		body = []byte(fr.Body)
		if fr.IsBase64Encoded {
			b, err := base64.StdEncoding.DecodeString(fr.Body)
			if err != nil {
				return nil, fmt.Errorf("function URL response body: %w", err)
			}
			body = b
		}
	}
	h := http.Header{}
	for k, v := range fr.Headers {
		h.Set(k, v)
	}
	for _, c := range fr.Cookies {
		h.Add("Set-Cookie", c)
	}
	switch {
	case fr.StatusCode == 0:
		fr.StatusCode = http.StatusOK
	case fr.StatusCode < 100 || fr.StatusCode > 599:
		return nil, fmt.Errorf("function URL response: status code %d", fr.StatusCode)
	}
	return &http.Response{StatusCode: fr.StatusCode, Header: h, Body: io.NopCloser(bytes.NewReader(body)), ContentLength: int64(len(body))}, nil
}

func excerpt(b []byte) string {
	if len(b) > 200 {
		return string(b[:200]) + "…"
	}
	return string(b)
}
