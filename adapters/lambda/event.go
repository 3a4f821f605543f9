package lambda

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
)

// source is where an HTTP event comes from, detected from the event itself.
type source int

// The HTTP event sources a function can be invoked by.
const (
	srcFunctionURL source = iota + 1 // Lambda Function URL (payload 2.0, domain *.lambda-url.*)
	srcHTTPAPI                       // API Gateway HTTP API, payload format 2.0
	srcRESTAPI                       // API Gateway REST API, or HTTP API with payload format 1.0
	srcALB                           // Application Load Balancer target group
	srcSQS                           // an SQS queue's event source mapping (background work)
)

func (k source) String() string {
	switch k {
	case srcFunctionURL:
		return "Function URL"
	case srcHTTPAPI:
		return "API Gateway HTTP API"
	case srcRESTAPI:
		return "API Gateway REST API"
	case srcALB:
		return "ALB"
	case srcSQS:
		return "SQS"
	}
	return fmt.Sprintf("source(%d)", int(k))
}

// ErrUnsupportedEvent is returned for an invocation that carries no HTTP request nor SQS messages
// (a direct invoke, a schedule, another event source...).
var ErrUnsupportedEvent = errors.New("lambda: unsupported event: not an HTTP request from a Function URL, API Gateway or an ALB, nor SQS messages")

// event is the union of the HTTP event shapes: one decoding pass serves every source, and the
// fields present tell which source sent it.
type event struct {
	Version                         string              `json:"version"`
	RawPath                         string              `json:"rawPath"`
	RawQueryString                  string              `json:"rawQueryString"`
	Cookies                         []string            `json:"cookies"`
	HTTPMethod                      string              `json:"httpMethod"`
	Path                            string              `json:"path"`
	Headers                         map[string]string   `json:"headers"`
	MultiValueHeaders               map[string][]string `json:"multiValueHeaders"`
	QueryStringParameters           map[string]string   `json:"queryStringParameters"`
	MultiValueQueryStringParameters map[string][]string `json:"multiValueQueryStringParameters"`
	Body                            string              `json:"body"`
	IsBase64Encoded                 bool                `json:"isBase64Encoded"`
	Records                         []sqsRecord         `json:"Records"` // SQS events
	RequestContext                  struct {
		ELB  *struct{} `json:"elb"` // present only in ALB events
		HTTP struct {
			Method   string `json:"method"`
			SourceIP string `json:"sourceIp"`
		} `json:"http"`
		Identity struct {
			SourceIP string `json:"sourceIp"`
		} `json:"identity"`
		DomainName string `json:"domainName"`
		Stage      string `json:"stage"`
	} `json:"requestContext"`
}

func (e *event) detect() (source, error) {
	switch {
	case len(e.Records) > 0:
		for _, r := range e.Records {
			if r.EventSource != "aws:sqs" {
				return 0, ErrUnsupportedEvent
			}
		}
		return srcSQS, nil
	case e.RequestContext.ELB != nil:
		if e.HTTPMethod == "" {
			return 0, errors.New("lambda: ALB event without httpMethod")
		}
		return srcALB, nil
	case e.Version == "2.0":
		if e.RequestContext.HTTP.Method == "" {
			return 0, errors.New("lambda: payload 2.0 event without requestContext.http.method")
		}
		if strings.Contains(e.RequestContext.DomainName, ".lambda-url.") {
			return srcFunctionURL, nil
		}
		return srcHTTPAPI, nil
	case e.HTTPMethod != "":
		return srcRESTAPI, nil
	}
	return 0, ErrUnsupportedEvent
}

// badRequest is an HTTP request in a well-formed event that no server would accept (an invalid
// target or body encoding): it is answered 400, as a server answers a malformed request.
type badRequest struct{ reason string }

func (e *badRequest) Error() string { return "lambda: bad request: " + e.reason }

// request converts the event to the request a server would have read from the wire. hosts are
// the event's Host header values: the request's Host falls back to the event's domain name when
// there is none, which local mode's Host check must not take for a Host the client sent.
func (e *event) request(ctx context.Context, k source) (r *http.Request, hosts []string, err error) {
	var method, path, query, remote string
	var header http.Header
	switch k {
	case srcFunctionURL, srcHTTPAPI:
		method, path, query = e.RequestContext.HTTP.Method, e.RawPath, e.RawQueryString
		if k == srcHTTPAPI {
			path = stripStage(path, e.RequestContext.Stage)
		}
		header = singleValued(e.Headers, 1)
		if len(e.Cookies) > 0 {
			header["Cookie"] = []string{strings.Join(e.Cookies, "; ")}
		}
		remote = e.RequestContext.HTTP.SourceIP
	case srcRESTAPI, srcALB:
		method, path = e.HTTPMethod, e.Path
		// API Gateway decodes query parameters, an ALB passes them as received.
		query = encodeQuery(e.MultiValueQueryStringParameters, e.QueryStringParameters, k == srcRESTAPI)
		header = e.header()
		if k == srcRESTAPI {
			remote = e.RequestContext.Identity.SourceIP
		} else if xff := header.Get("X-Forwarded-For"); xff != "" {
			remote, _, _ = strings.Cut(xff, ",")
			remote = strings.TrimSpace(remote)
		}
	}

	target := escapePath(path)
	if query != "" {
		target += "?" + query
	}
	u, err := url.ParseRequestURI(target)
	if err != nil {
		// The parser's error quotes the whole target, query included: only its cause is kept.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, nil, &badRequest{reason: "invalid request target: " + err.Error()}
	}
	var body io.ReadCloser = http.NoBody
	n := int64(len(e.Body))
	switch {
	case e.IsBase64Encoded && e.Body != "":
		b, err := base64.StdEncoding.DecodeString(e.Body)
		if err != nil {
			return nil, nil, &badRequest{reason: "body is not valid base64: " + err.Error()}
		}
		body, n = io.NopCloser(bytes.NewReader(b)), int64(len(b))
	case e.Body != "":
		body = io.NopCloser(strings.NewReader(e.Body))
	}
	hosts = header["Host"]
	host := header.Get("Host")
	if host == "" {
		host = e.RequestContext.DomainName
	}
	delete(header, "Host") // as net/http does: the host is Request.Host
	if remote != "" {
		remote = net.JoinHostPort(remote, "0")
	}
	r = &http.Request{
		Method:        method,
		URL:           u,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        header,
		Body:          body,
		ContentLength: n,
		Host:          host,
		RemoteAddr:    remote,
		RequestURI:    target,
	}
	return r.WithContext(ctx), hosts, nil
}

// header returns the multi-value headers of a REST or ALB event (a superset of the single-value
// map when both are present), canonicalized.
func (e *event) header() http.Header {
	if len(e.MultiValueHeaders) > 0 {
		h := make(http.Header, len(e.MultiValueHeaders))
		for name, vs := range e.MultiValueHeaders {
			h[http.CanonicalHeaderKey(name)] = vs
		}
		return h
	}
	return singleValued(e.Headers, 0)
}

// singleValued converts a single-value header map, with room for extra headers. The values
// share one backing array: one allocation instead of one per header.
func singleValued(m map[string]string, extra int) http.Header {
	h := make(http.Header, len(m)+extra)
	vals := make([]string, len(m))
	i := 0
	for name, v := range m {
		vals[i] = v
		h[http.CanonicalHeaderKey(name)] = vals[i : i+1 : i+1]
		i++
	}
	return h
}

// stripStage removes the stage prefix HTTP APIs leave in the path of a named stage.
func stripStage(path, stage string) string {
	if stage == "" || stage == "$default" {
		return path
	}
	rest, ok := strings.CutPrefix(path, "/"+stage)
	if !ok || (rest != "" && rest[0] != '/') {
		return path
	}
	if rest == "" {
		return "/"
	}
	return rest
}

// encodeQuery rebuilds a query string from parameter maps, in key order (the maps lost the
// original order). escape says whether the values were decoded and must be encoded again.
func encodeQuery(multi map[string][]string, single map[string]string, escape bool) string {
	if len(multi) == 0 && len(single) == 0 {
		return ""
	}
	if len(multi) == 0 {
		multi = make(map[string][]string, len(single))
		for k, v := range single {
			multi[k] = []string{v}
		}
	}
	keys := make([]string, 0, len(multi))
	for k := range multi {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	for _, k := range keys {
		for _, v := range multi[k] {
			if b.Len() > 0 {
				b.WriteByte('&')
			}
			if escape {
				b.WriteString(url.QueryEscape(k))
				b.WriteByte('=')
				b.WriteString(url.QueryEscape(v))
			} else {
				b.WriteString(k)
				b.WriteByte('=')
				b.WriteString(v)
			}
		}
	}
	return b.String()
}

// escapePath returns path as a valid escaped path. Function URLs, REST APIs and ALBs deliver the
// path as received (escaped), HTTP APIs deliver it decoded: escaping only the bytes that can never
// appear literally in an escaped path leaves the former untouched and makes the latter safe (a
// decoded "?" or "#" stays part of the path).
func escapePath(path string) string {
	if path == "" || path[0] != '/' {
		path = "/" + path
	}
	i := 0
	for i < len(path) && pathByteOK(path, i) {
		i++
	}
	if i == len(path) {
		return path
	}
	const hex = "0123456789ABCDEF"
	b := make([]byte, 0, len(path)+16)
	b = append(b, path[:i]...)
	for ; i < len(path); i++ {
		if pathByteOK(path, i) {
			b = append(b, path[i])
			continue
		}
		c := path[i]
		b = append(b, '%', hex[c>>4], hex[c&15])
	}
	return string(b)
}

// pathByteOK reports whether path[i] may appear as is in an escaped path: an unreserved or
// sub-delimiter character, ':', '@', '/', or '%' starting a valid escape.
func pathByteOK(path string, i int) bool {
	c := path[i]
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	case c == '%':
		return i+2 < len(path) && isHex(path[i+1]) && isHex(path[i+2])
	}
	return strings.IndexByte("-._~!$&'()*+,;=:@/", c) >= 0
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}
