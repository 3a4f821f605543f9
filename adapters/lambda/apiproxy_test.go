package lambda

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	awslambda "github.com/aws/aws-lambda-go/lambda"
	"github.com/awslabs/aws-lambda-go-api-proxy/httpadapter"
)

// The reference converters of aws-lambda-go-api-proxy, driven through the same aws-lambda-go
// handler plumbing as ours so that benchmarks compare like with like.
func apiProxyHandlers(h http.Handler) map[source]awslambda.Handler {
	v1, v2, alb := httpadapter.New(h), httpadapter.NewV2(h), httpadapter.NewALB(h)
	return map[source]awslambda.Handler{
		srcRESTAPI: awslambda.NewHandler(func(ctx context.Context, e events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
			return v1.ProxyWithContext(ctx, e)
		}),
		srcHTTPAPI: awslambda.NewHandler(func(ctx context.Context, e events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
			return v2.ProxyWithContext(ctx, e)
		}),
		srcFunctionURL: awslambda.NewHandler(func(ctx context.Context, e events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
			return v2.ProxyWithContext(ctx, e)
		}),
		srcALB: awslambda.NewHandler(func(ctx context.Context, e events.ALBTargetGroupRequest) (events.ALBTargetGroupResponse, error) {
			return alb.ProxyWithContext(ctx, e)
		}),
	}
}

// TestAgainstAPIProxy checks, source by source, that the request our adapter builds matches the
// one aws-lambda-go-api-proxy builds from the same event, except where the reference is known to
// be wrong (each exception says why).
func TestAgainstAPIProxy(t *testing.T) {
	type view struct {
		Method string
		Path   string
		Query  url.Values
		Header http.Header
		Body   string
	}
	capture := func(into *view) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			h := r.Header.Clone()
			for _, k := range []string{"Host", "Content-Length", "X-Golambdaproxy-Apigw-Context", "X-Golambdaproxy-Stage-Vars"} {
				h.Del(k) // transport details each adapter places differently
			}
			// Several lines of a header mean the same as one comma-separated line (cookies:
			// semicolon); api-proxy splits payload 2.0 headers, we keep them as received.
			for k, vs := range h {
				sep := ", "
				if k == "Cookie" {
					sep = "; "
				}
				h[k] = []string{strings.Join(vs, sep)}
			}
			*into = view{Method: r.Method, Path: r.URL.Path, Query: r.URL.Query(), Header: h, Body: string(b)}
			w.WriteHeader(http.StatusOK) // api-proxy fails a response without an explicit status
		})
	}
	cases := []struct {
		kind  source
		event any
		fix   func(ref *view) // known defects of the reference, corrected before comparing
	}{
		{kind: srcFunctionURL, event: functionURLEvent("POST", "/a2a/x%20y", "b=2&a=1&a=3", `{"jsonrpc":"2.0"}`)},
		{kind: srcHTTPAPI, event: httpAPIEvent(), fix: func(ref *view) {
			// api-proxy keeps the stage prefix and splits the decoded path at its "?", taking "z?b"
			// for a query key.
			ref.Path = "/a2a/x y?z"
			ref.Query = url.Values{"a": {"1", "3"}, "b": {"2"}}
		}},
		{kind: srcRESTAPI, event: restEvent()},
		{kind: srcALB, event: albEvent(true), fix: func(ref *view) {
			// api-proxy decodes ALB query values twice: "x%20y" arrives encoded, as ALBs send it.
			ref.Query.Set("q", "x y")
		}},
	}
	for _, tc := range cases {
		t.Run(tc.kind.String(), func(t *testing.T) {
			p := payload(t, tc.event)
			var ours, ref view
			if _, err := NewHandler(capture(&ours)).Invoke(context.Background(), p); err != nil {
				t.Fatal(err)
			}
			if _, err := apiProxyHandlers(capture(&ref))[tc.kind].Invoke(context.Background(), p); err != nil {
				t.Fatal(err)
			}
			if tc.fix != nil {
				tc.fix(&ref)
			}
			if !reflect.DeepEqual(ours, ref) {
				o, _ := json.Marshal(ours)
				r, _ := json.Marshal(ref)
				t.Fatalf("request differs from api-proxy's:\n ours %s\n ref  %s", o, r)
			}
		})
	}
}

// benchHandler is a typical controller answer: a small JSON document with a few headers.
func benchHandler() http.Handler {
	body := []byte(`{"jsonrpc":"2.0","id":"rpc-1","result":{"status":"ok","effects":[{"type":"job.started","job_id":"job-1","status":"completed","message":"Completed 1 cases"}]}}`)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		h := w.Header()
		h.Set("Content-Type", "application/json")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		_, _ = w.Write(body)
	})
}

func benchEvents(b *testing.B) map[source][]byte {
	rpc := `{"jsonrpc":"2.0","id":"rpc-1","method":"supervaizer/action.invoke","params":{"request_id":"r1","actor":{"user_id":"u1"},"workspace":{"id":"w1"},"mission_id":"m1","agent_slug":"hello-world-ai-agent","surface":"job.start","action":"job.start","input":{"count":1}}}`
	rest := restEvent()
	rest.Body, rest.IsBase64Encoded = rpc, false
	return map[source][]byte{
		srcFunctionURL: payload(b, functionURLEvent("POST", "/a2a", "", rpc)),
		srcHTTPAPI:     payload(b, func() events.APIGatewayV2HTTPRequest { e := httpAPIEvent(); e.Body = rpc; return e }()),
		srcRESTAPI:     payload(b, rest),
		srcALB:         payload(b, albEvent(true)),
	}
}

// BenchmarkAdapters compares the whole invocation (event decoding, request translation, handler,
// response encoding) of this adapter and of aws-lambda-go-api-proxy on the same events.
func BenchmarkAdapters(b *testing.B) {
	evs := benchEvents(b)
	ref := apiProxyHandlers(benchHandler())
	ours := NewHandler(benchHandler())
	ctx := context.Background()
	for _, k := range []source{srcFunctionURL, srcHTTPAPI, srcRESTAPI, srcALB} {
		name := strings.ReplaceAll(k.String(), " ", "")
		for _, impl := range []struct {
			name string
			h    awslambda.Handler
		}{{"svz", ours}, {"apiproxy", ref[k]}} {
			b.Run(name+"/"+impl.name, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if _, err := impl.h.Invoke(ctx, evs[k]); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkStreaming measures a streamed Function URL response (no api-proxy equivalent).
func BenchmarkStreaming(b *testing.B) {
	h := NewHandler(benchHandler(), WithStreaming())
	ev := benchEvents(b)[srcFunctionURL]
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := h.Invoke(ctx, ev); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkTranslate isolates the translation (event to request, response to payload) from the
// JSON decoding and encoding aws-lambda-go does for both adapters: events are decoded once.
func BenchmarkTranslate(b *testing.B) {
	evs := benchEvents(b)
	h := benchHandler()
	ctx := context.Background()
	a := &adapter{h: h, config: config{log: slog.New(slog.DiscardHandler)}}
	v1, v2, alb := httpadapter.New(h), httpadapter.NewV2(h), httpadapter.NewALB(h)
	for _, k := range []source{srcFunctionURL, srcHTTPAPI, srcRESTAPI, srcALB} {
		name := strings.ReplaceAll(k.String(), " ", "")
		var ours event
		if err := json.Unmarshal(evs[k], &ours); err != nil {
			b.Fatal(err)
		}
		var ref func() error
		switch k {
		case srcFunctionURL, srcHTTPAPI:
			var e events.APIGatewayV2HTTPRequest
			_ = json.Unmarshal(evs[k], &e)
			ref = func() error { _, err := v2.ProxyWithContext(ctx, e); return err }
		case srcRESTAPI:
			var e events.APIGatewayProxyRequest
			_ = json.Unmarshal(evs[k], &e)
			ref = func() error { _, err := v1.ProxyWithContext(ctx, e); return err }
		case srcALB:
			var e events.ALBTargetGroupRequest
			_ = json.Unmarshal(evs[k], &e)
			ref = func() error { _, err := alb.ProxyWithContext(ctx, e); return err }
		}
		b.Run(name+"/svz", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				e := ours // the adapter may keep references into the event, never modify it
				if _, err := a.invoke(ctx, &e); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(name+"/apiproxy", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := ref(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
