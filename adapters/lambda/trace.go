package lambda

import (
	"context"
	"net/http"

	"go.opentelemetry.io/otel/trace"

	"github.com/supervaize/svz/adapters/internal/tracehdr"
)

// Trace context on Lambda. A job message carries the trace context of its dispatch in SQS
// message attributes, written by the controller's propagator (traceparent and tracestate by
// default; an X-Ray header goes in the AWSTraceHeader system attribute, which X-Ray reads). A
// delivery's parent is, in order: the message's attributes, its AWSTraceHeader, the invocation's
// X-Ray trace (Lambda-Runtime-Trace-Id, which aws-lambda-go puts in the context). An HTTP event's
// X-Amzn-Trace-Id header is the invocation's, so that a call without a traceparent joins
// Lambda's own trace.

// maxTraceAttributes bounds the attributes taken from a message: SQS allows 10.
const maxTraceAttributes = 10

// attributeOut is a message attribute of SendMessage.
type attributeOut struct {
	DataType    string `json:"DataType"`
	StringValue string `json:"StringValue"`
}

// attributeIn is a message attribute of an SQS event's record.
type attributeIn struct {
	DataType    string  `json:"dataType"`
	StringValue *string `json:"stringValue"`
}

// traceAttributes are the message and system attributes of a trace context carrier (nil: none).
func traceAttributes(tc map[string]string) (msg, sys map[string]attributeOut) {
	for k, v := range tc {
		if k == tracehdr.XRayHeader {
			sys = map[string]attributeOut{"AWSTraceHeader": {DataType: "String", StringValue: v}}
			continue
		}
		if msg == nil {
			msg = map[string]attributeOut{}
		}
		msg[k] = attributeOut{DataType: "String", StringValue: v}
	}
	return msg, sys
}

// runtimeTraceID is the invocation's X-Ray trace header, "" when Lambda sent none.
func runtimeTraceID(ctx context.Context) string {
	v, _ := ctx.Value("x-amzn-trace-id").(string)
	return v
}

// invocationTrace sets an HTTP event's X-Amzn-Trace-Id to the invocation's, when Lambda sent one.
func invocationTrace(ctx context.Context, h http.Header) {
	if v := runtimeTraceID(ctx); v != "" {
		h.Set(tracehdr.XRayHeader, v)
	}
}

// messageTrace returns ctx with the parent of a delivery of r (see above).
func (a *adapter) messageTrace(ctx context.Context, r sqsRecord) context.Context {
	tc := map[string]string{}
	for k, v := range r.MessageAttributes {
		if v.StringValue != nil && len(tc) < maxTraceAttributes {
			tc[k] = *v.StringValue
		}
	}
	if with := a.tel.Extract(ctx, tc); trace.SpanContextFromContext(with).IsRemote() {
		return with
	}
	for _, h := range []string{r.Attributes.AWSTraceHeader, runtimeTraceID(ctx)} {
		if sc, ok := tracehdr.ParseXRay(h); ok {
			return trace.ContextWithRemoteSpanContext(ctx, sc)
		}
	}
	return ctx
}
