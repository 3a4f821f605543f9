package lambda

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/supervaize/svz/adapters/adaptertest"
	"github.com/supervaize/svz/core/store/dynamodb/dynamodbtest"
	"github.com/supervaize/svz/internal/testenv"
)

// switchProxy is a proxy to a store endpoint that a test can take down: while down, every call
// answers 503, as a DynamoDB outage would.
type switchProxy struct {
	down atomic.Bool
	url  string
}

func newSwitchProxy(t *testing.T, endpoint string) *switchProxy {
	t.Helper()
	u, err := url.Parse(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	p := &switchProxy{}
	rp := httputil.NewSingleHostReverseProxy(u)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p.down.Load() {
			w.Header().Set("Content-Type", "application/x-amz-json-1.0")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`{"__type":"com.amazonaws.dynamodb.v20120810#ServiceUnavailable","message":"down for the test"}`))
			return
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	p.url = srv.URL
	return p
}

// jobsFunction is the jobs test agent (testdata/jobsagent) as Lambda runs it: under the emulator,
// its store a DynamoDB table and its jobs queue an SQS queue, both on moto_server, with a
// function timeout of 8 s, below the 10 s margin core/jobs keeps: every delivery runs one step and
// hands the task on.
type jobsFunction struct {
	em       *emulator
	sqs      *motoSQS
	queueURL string
	queueARN string
	store    *switchProxy
}

func startJobsFunction(t *testing.T, env ...string) *jobsFunction {
	t.Helper()
	return startJobsFunctionWith(t, env)
}

// startJobsFunctionWith is startJobsFunction with more environment, its bootstrap built with
// make's vars (such as LAMBDA_OTEL=1).
func startJobsFunctionWith(t *testing.T, extra []string, vars ...string) *jobsFunction {
	t.Helper()
	endpoint := testenv.Need(t, testenv.AWSEndpoint)
	testenv.Need(t, testenv.RIE)
	motoWrites := testenv.MotoProxy(t, endpoint)
	_, table := dynamodbtest.Table(t, motoWrites, "svz-lambda-jobs-")
	f := &jobsFunction{sqs: newMotoSQS(t, endpoint), store: newSwitchProxy(t, motoWrites)}
	f.queueURL, f.queueARN = f.sqs.create()
	env := append(adaptertest.Environ(), dynamodbtest.Env(endpoint, table)...)
	env = append(env, "AWS_ENDPOINT_URL_DYNAMODB="+f.store.url, EnvQueueURL+"="+f.queueURL, "AWS_LAMBDA_FUNCTION_TIMEOUT=8")
	f.em = startEmulator(t, buildBootstrapOf(t, "./adapters/lambda/testdata/jobsagent", vars...), append(env, extra...)...)
	return f
}

// call sends a JSON-RPC action.invoke through a Function URL event and returns its result.
func (f *jobsFunction) call(t *testing.T, action, job string) map[string]any {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":1,"method":"supervaizer/action.invoke","params":{"request_id":"req-` + action + `-` + job + `",` +
		`"actor":{"user_id":"user-1"},"workspace":{"id":"workspace-1"},"mission_id":"mission-1","agent_slug":"jobs-test-agent",` +
		`"surface":"` + action + `","action":"` + action + `","job_id":"` + job + `","input":{}}}`
	ev := localFunctionURLEvent("POST", "/a2a", "", body)
	ev.Headers["x-api-key"] = adaptertest.APIKey
	status, out := f.em.invoke(t, payload(t, ev))
	r, _ := decodeReply(t, out)
	var rpc struct{ Result map[string]any }
	if status != http.StatusOK || r.StatusCode != http.StatusOK || json.Unmarshal([]byte(r.Body), &rpc) != nil || rpc.Result == nil {
		t.Fatalf("%s %s: %d %s", action, job, status, out)
	}
	return rpc.Result
}

// lambdaSQSEvent wraps messages received from the queue in the event Lambda's event source
// mapping sends, member for member.
func (f *jobsFunction) lambdaSQSEvent(msgs ...sqsMessage) []byte {
	var records []map[string]any
	for _, m := range msgs {
		attrs := map[string]any{}
		for k, v := range m.MessageAttributes {
			attrs[k] = map[string]any{"stringValue": v.StringValue, "stringListValues": []string{}, "binaryListValues": []string{}, "dataType": v.DataType}
		}
		records = append(records, map[string]any{
			"messageId": m.MessageID, "receiptHandle": m.ReceiptHandle, "body": m.Body,
			"attributes": map[string]string{
				"ApproximateReceiveCount":          m.Attributes["ApproximateReceiveCount"],
				"SentTimestamp":                    m.Attributes["SentTimestamp"],
				"SenderId":                         m.Attributes["SenderId"],
				"ApproximateFirstReceiveTimestamp": m.Attributes["ApproximateFirstReceiveTimestamp"],
			},
			"messageAttributes": attrs, "md5OfBody": m.MD5OfBody,
			"eventSource": "aws:sqs", "eventSourceARN": f.queueARN, "awsRegion": "us-east-1",
		})
	}
	return sqsEvent(records...)
}

// deliver invokes the function with msgs as one SQS event and returns its answer.
func (f *jobsFunction) deliver(t *testing.T, msgs ...sqsMessage) string {
	t.Helper()
	status, out := f.em.invoke(t, f.lambdaSQSEvent(msgs...))
	if status != http.StatusOK {
		t.Fatalf("SQS event: %d %s", status, out)
	}
	return string(out)
}

// next receives the one message the queue holds.
func (f *jobsFunction) next(t *testing.T) sqsMessage {
	t.Helper()
	msgs := f.sqs.receive(f.queueURL)
	if len(msgs) != 1 {
		t.Fatalf("queue holds %d messages, want 1: %+v", len(msgs), msgs)
	}
	return msgs[0]
}

// ack deletes a delivered message, as the event source mapping does for the ones the function
// did not report failed.
func (f *jobsFunction) ack(t *testing.T, m sqsMessage) {
	t.Helper()
	if err := f.sqs.api.Call(context.Background(), "DeleteMessage", map[string]any{"QueueUrl": f.queueURL, "ReceiptHandle": m.ReceiptHandle}, nil); err != nil {
		t.Fatal(err)
	}
}

// jobState is the part of a job_state the test follows: the job's status and its steps'.
func jobState(t *testing.T, result map[string]any) string {
	t.Helper()
	js, _ := result["job_state"].(map[string]any)
	job, _ := js["job"].(map[string]any)
	var b strings.Builder
	b.WriteString(job["status"].(string))
	cases, _ := js["cases"].([]any)
	for _, c := range cases {
		steps, _ := c.(map[string]any)["steps"].([]any)
		for _, s := range steps {
			st := s.(map[string]any)
			b.WriteString(" " + st["id"].(string) + "=" + st["status"].(string))
		}
	}
	return b.String()
}

// TestJobsOverSQSUnderEmulator drives background work on Lambda end to end: job.start through a
// Function URL event records the task and sends its message to the SQS queue (moto_server); that
// message, wrapped in the event Lambda sends, runs on the real bootstrap under the emulator; a
// store outage fails the delivery (reported in batchItemFailures, exactly) and the redelivery
// runs it; each delivery hands the task on before the function timeout, visible as the next
// message in the queue, until job.sync shows the job completed; in a batch, a message that is not
// a task message is acknowledged (dropped) as the others are.
func TestJobsOverSQSUnderEmulator(t *testing.T) {
	f := startJobsFunction(t)

	started := f.call(t, "job.start", "job-1")
	if got := jobState(t, started); got != "active" {
		t.Fatalf("job.start: %s %v", got, started)
	}
	msg := f.next(t)
	const body0 = `{"agent":"jobs-test-agent","workspace":"workspace-1","job":"job-1","work":"count","attempt":0}`
	if msg.Body != body0 || msg.Attributes["ApproximateReceiveCount"] != "1" {
		t.Fatalf("message sent by job.start: %+v", msg)
	}

	// The store is down: the delivery fails, and only it is reported.
	f.store.down.Store(true)
	if got, want := f.deliver(t, msg), `{"batchItemFailures":[{"itemIdentifier":"`+msg.MessageID+`"}]}`; got != want {
		t.Fatalf("delivery with the store down: %s, want %s", got, want)
	}
	f.store.down.Store(false)

	// Delivered again: step one runs, the task hands itself on (the next message, attempt 1).
	msg = f.next(t)
	if msg.Body != body0 || msg.Attributes["ApproximateReceiveCount"] != "2" {
		t.Fatalf("redelivery: %+v", msg)
	}
	steps := []string{"active job-1-one=completed", "active job-1-one=completed job-1-two=completed",
		"completed job-1-one=completed job-1-two=completed job-1-three=completed"}
	for attempt, want := range steps {
		if got := f.deliver(t, msg); got != `{"batchItemFailures":[]}` {
			t.Fatalf("delivery %d: %s", attempt, got)
		}
		f.ack(t, msg)
		if got := jobState(t, f.call(t, "job.sync", "job-1")); got != want {
			t.Fatalf("job.sync after delivery %d: %s, want %s", attempt, got, want)
		}
		if attempt == len(steps)-1 {
			break
		}
		msg = f.next(t)
		want := strings.Replace(body0, `"attempt":0`, `"attempt":`+itoa(attempt+1), 1)
		if msg.Body != want || msg.Attributes["ApproximateReceiveCount"] != "1" {
			t.Fatalf("continuation after delivery %d: %+v, want body %s", attempt, msg, want)
		}
	}
	if left := f.sqs.receive(f.queueURL); len(left) != 0 {
		t.Fatalf("messages left after the job completed: %+v", left)
	}

	// A batch: a message that is not a task message (dropped: no delivery will ever read it), a
	// duplicate of a finished task's and one for a job that does not exist, all acknowledged.
	poison := sqsMessage{MessageID: "poison-1", ReceiptHandle: "rh-poison", Body: `{"job":"job-1"}`, MD5OfBody: "x",
		Attributes: map[string]string{"ApproximateReceiveCount": "1"}}
	dup := sqsMessage{MessageID: "dup-1", ReceiptHandle: "rh-dup", Body: body0, MD5OfBody: "x", Attributes: map[string]string{"ApproximateReceiveCount": "1"}}
	gone := sqsMessage{MessageID: "gone-1", ReceiptHandle: "rh-gone", Body: strings.Replace(body0, "job-1", "job-gone", 1), MD5OfBody: "x",
		Attributes: map[string]string{"ApproximateReceiveCount": "1"}}
	if got, want := f.deliver(t, dup, poison, gone), `{"batchItemFailures":[]}`; got != want {
		t.Fatalf("batch: %s, want %s", got, want)
	}
	if got := jobState(t, f.call(t, "job.sync", "job-1")); got != steps[2] {
		t.Fatalf("job.sync after a duplicate: %s", got)
	}
}

// TestJobsQueueSettingUnderEmulator: a function whose agent defines background work does not
// start without its queue, and says which setting to give.
func TestJobsQueueSettingUnderEmulator(t *testing.T) {
	testenv.Need(t, testenv.RIE)
	em := startEmulator(t, buildBootstrapOf(t, "./adapters/lambda/testdata/jobsagent"), adaptertest.Environ()...)
	status, out := em.invoke(t, payload(t, functionURLEvent("GET", "/", "", "")))
	var got struct{ ErrorMessage, ErrorType string }
	if err := json.Unmarshal(out, &got); err != nil || status != http.StatusBadGateway || got.ErrorType != "Runtime.InitError" ||
		!strings.Contains(got.ErrorMessage, "lambda: SUPERVAIZER_JOBS_QUEUE_URL is not set: ") {
		t.Fatalf("start without the queue: %d %s", status, out)
	}
}
