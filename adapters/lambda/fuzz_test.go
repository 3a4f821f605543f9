package lambda

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/supervaize/svz/core/jobs"
)

// FuzzInvoke feeds arbitrary payloads to the adapter, in both modes: it must never panic, and
// whatever it accepts must come back as a well-formed response for the event's source.
func FuzzInvoke(f *testing.F) {
	for _, ev := range []any{
		functionURLEvent("POST", "/a2a/x%20y", "b=2&a=1&a=3", `{"jsonrpc":"2.0"}`),
		functionURLEvent("GET", "/binary", "", ""),
		httpAPIEvent(), restEvent(), albEvent(true), albEvent(false),
	} {
		f.Add(payload(f, ev), false)
		f.Add(payload(f, ev), true)
	}
	f.Add([]byte(`{"version":"2.0","requestContext":{"http":{"method":"GET"},"domainName":"x.lambda-url.y"},"rawPath":"/\u0000?#","isBase64Encoded":true,"body":"=="}`), true)
	f.Add([]byte(`{"httpMethod":"GET","path":"","multiValueQueryStringParameters":{"":[""]},"multiValueHeaders":{"":[]}}`), false)
	f.Add([]byte(`{"requestContext":{"elb":null},"httpMethod":"X"}`), false)
	f.Add(sqsEvent(sqsRecordOf("m-1", `{"agent":"a","workspace":"w","job":"j","work":"x","attempt":0}`, "1"),
		sqsRecordOf("m-2", `{"agent":"a","workspace":"w","job":"fail","work":"x","attempt":3}`, "x"), sqsRecordOf("m-3", "{", "")), false)

	quiet := slog.New(slog.DiscardHandler)
	f.Fuzz(func(t *testing.T, data []byte, stream bool) {
		deliver := func(_ context.Context, m jobs.Message, _ jobs.Delivery) error {
			if m.Job == "fail" {
				return jobs.ErrBusy
			}
			return nil
		}
		a := &adapter{h: echo(), config: config{log: quiet, stream: stream, deliver: deliver, maxReceives: 5}}
		var ev event
		if json.Unmarshal(data, &ev) != nil {
			return
		}
		out, err := a.invoke(context.Background(), &ev)
		if err != nil {
			return
		}
		switch r := out.(type) {
		case *batchResponse:
			// Every failure names a message of the batch, once.
			ids := map[string]int{}
			for _, rec := range ev.Records {
				ids[rec.MessageID]++
			}
			for _, f := range r.BatchItemFailures {
				if ids[f.ItemIdentifier] == 0 {
					t.Fatalf("failure %q names no message of the batch", f.ItemIdentifier)
				}
				ids[f.ItemIdentifier]--
			}
		case *events.LambdaFunctionURLStreamingResponse:
			br := bufio.NewReader(r)
			prelude, err := br.ReadBytes(0)
			if err != nil {
				t.Fatalf("streamed response without a prelude: %v", err)
			}
			var head struct{ StatusCode int }
			if json.Unmarshal(prelude[:len(prelude)-1], &head) != nil || head.StatusCode < 200 || head.StatusCode > 599 {
				t.Fatalf("bad prelude %q", prelude)
			}
			_, _ = io.Copy(io.Discard, br)
		default:
			b, err := json.Marshal(out)
			if err != nil {
				t.Fatalf("unencodable response %#v: %v", out, err)
			}
			var resp struct{ StatusCode int }
			if json.Unmarshal(b, &resp) != nil || resp.StatusCode < 200 || resp.StatusCode > 599 {
				t.Fatalf("bad response %s", b)
			}
		}
	})
}
