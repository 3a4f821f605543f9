package lambda

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/supervaize/svz/adapters/internal/testkit"
	"github.com/supervaize/svz/core/jobs"
	"github.com/supervaize/svz/internal/awsapi"
	"github.com/supervaize/svz/internal/testenv"
)

func envOf(kv ...string) func(string) string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) string { return m[k] }
}

func TestParseQueueURL(t *testing.T) {
	const tail = "; it must be the URL of a standard SQS queue, such as https://sqs.eu-west-3.amazonaws.com/123456789012/my-agent-jobs"
	for _, ok := range []string{
		"https://sqs.eu-west-3.amazonaws.com/123456789012/my-agent-jobs",
		"https://sqs.cn-north-1.amazonaws.com.cn/123456789012/a_b-C9",
		"http://127.0.0.1:5000/123456789012/svz-jobs",
		"https://sqs.us-east-1.amazonaws.com/123456789012/" + strings.Repeat("q", 80),
	} {
		if got, err := ParseQueueURL(ok); err != nil || got != ok {
			t.Errorf("ParseQueueURL(%q) = %q, %v", ok, got, err)
		}
	}
	for v, why := range map[string]string{
		"sqs.eu-west-3.amazonaws.com/123456789012/q":                                  "not an absolute http(s) URL",
		"ftp://sqs.eu-west-3.amazonaws.com/123456789012/q":                            "not an absolute http(s) URL",
		"https:///123456789012/q":                                                     "not an absolute http(s) URL",
		"https://sqs.eu-west-3.amazonaws.com:x/123456789012/q":                        "not an absolute http(s) URL",
		"https://sqs.eu-west-3.amazonaws.com/123456789012/q?x=1":                      "a queue URL has no credentials, query or fragment",
		"https://sqs.eu-west-3.amazonaws.com/123456789012/q#f":                        "a queue URL has no credentials, query or fragment",
		"https://sqs.eu-west-3.amazonaws.com/12345678901/q":                           "the path is not /ACCOUNT/NAME",
		"https://sqs.eu-west-3.amazonaws.com/123456789012":                            "the path is not /ACCOUNT/NAME",
		"https://sqs.eu-west-3.amazonaws.com/123456789012/":                           "the path is not /ACCOUNT/NAME",
		"https://sqs.eu-west-3.amazonaws.com/123456789012/q/x":                        "the path is not /ACCOUNT/NAME",
		"https://sqs.eu-west-3.amazonaws.com/123456789012/q.x":                        "the path is not /ACCOUNT/NAME",
		"https://sqs.eu-west-3.amazonaws.com/123456789012/" + strings.Repeat("q", 81): "the path is not /ACCOUNT/NAME",
		"https://sqs.eu-west-3.amazonaws.com/123456789012/q.fifo":                     "a FIFO queue takes no per-message delay, which retries need",
	} {
		_, err := ParseQueueURL(v)
		want := EnvQueueURL + "=" + strconv.Quote(awsapi.ShownURL(v)) + ": " + why + tail
		if err == nil || err.Error() != want {
			t.Errorf("ParseQueueURL(%q):\n got %v\nwant %s", v, err, want)
		}
	}
	// A URL with credentials is refused without showing them.
	_, err := ParseQueueURL("https://user:hunter2@sqs.eu-west-3.amazonaws.com/123456789012/q")
	if err == nil || strings.Contains(err.Error(), "hunter2") || !strings.Contains(err.Error(), "no credentials, query or fragment") {
		t.Errorf("credentials: %v", err)
	}
}

func TestNewQueueSettings(t *testing.T) {
	creds := []string{"AWS_ACCESS_KEY_ID", "a", "AWS_SECRET_ACCESS_KEY", "b"}
	const u = "https://sqs.eu-west-3.amazonaws.com/123456789012/q"
	for name, tc := range map[string]struct {
		env  []string
		want string
	}{
		"unset":     {creds, "lambda: SUPERVAIZER_JOBS_QUEUE_URL is not set: background work on Lambda is dispatched to an SQS queue that delivers to this function (template.yaml and svz deploy create it and set the variable)"},
		"blank":     {append([]string{EnvQueueURL, "  "}, creds...), "lambda: SUPERVAIZER_JOBS_QUEUE_URL is not set: background work on Lambda is dispatched to an SQS queue that delivers to this function (template.yaml and svz deploy create it and set the variable)"},
		"malformed": {append([]string{EnvQueueURL, "queue"}, creds...), `lambda: SUPERVAIZER_JOBS_QUEUE_URL="queue": not an absolute http(s) URL; it must be the URL of a standard SQS queue, such as https://sqs.eu-west-3.amazonaws.com/123456789012/my-agent-jobs`},
		"no region": {append([]string{EnvQueueURL, u}, creds...), "lambda: the SQS client of SUPERVAIZER_JOBS_QUEUE_URL: no AWS region: set AWS_REGION"},
	} {
		if _, err := NewQueue(envOf(tc.env...)); err == nil || err.Error() != tc.want {
			t.Errorf("%s: %v\nwant %s", name, err, tc.want)
		}
	}
	q, err := NewQueue(envOf(append([]string{EnvQueueURL, u, "AWS_REGION", "eu-west-3"}, creds...)...))
	if err != nil || q.URL() != u || q.api.Endpoint() != "https://sqs.eu-west-3.amazonaws.com" {
		t.Fatalf("NewQueue: %v", err)
	}
}

func TestMaxReceives(t *testing.T) {
	if n, err := MaxReceives(envOf()); err != nil || n != 5 {
		t.Errorf("default: %d %v", n, err)
	}
	if n, err := MaxReceives(envOf(EnvMaxReceives, "12")); err != nil || n != 12 {
		t.Errorf("12: %d %v", n, err)
	}
	for _, bad := range []string{"0", "1001", "five", "-1"} {
		want := `lambda: SUPERVAIZER_JOBS_MAX_RECEIVES="` + bad + `": must be a whole number from 1 to 1000 (the maxReceiveCount of the jobs queue's redrive policy)`
		if _, err := MaxReceives(envOf(EnvMaxReceives, bad)); err == nil || err.Error() != want {
			t.Errorf("%s: %v", bad, err)
		}
	}
}

// TestDispatchRequest checks the exact SendMessage request: the JSON protocol, the target, the
// body (the task's reference only) and the delay rounded up to the second.
func TestDispatchRequest(t *testing.T) {
	type seen struct{ target, ctype, body string }
	var mu sync.Mutex
	var got []seen
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, seen{r.Header.Get("X-Amz-Target"), r.Header.Get("Content-Type"), string(b)})
		mu.Unlock()
		if strings.Contains(string(b), "refused") {
			w.Header().Set("Content-Type", "application/x-amz-json-1.0")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = io.WriteString(w, `{"__type":"com.amazonaws.sqs#QueueDoesNotExist","message":"The specified queue does not exist."}`)
			return
		}
		_, _ = io.WriteString(w, `{"MessageId":"m-1","MD5OfMessageBody":"x"}`)
	}))
	defer srv.Close()
	const u = "https://sqs.eu-west-3.amazonaws.com/123456789012/q"
	q, err := NewQueue(envOf(EnvQueueURL, u, "AWS_REGION", "eu-west-3", "AWS_ACCESS_KEY_ID", "a", "AWS_SECRET_ACCESS_KEY", "b", "AWS_ENDPOINT_URL_SQS", srv.URL))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	m := jobs.Message{Agent: "agent", Workspace: "ws", Job: "job-1", Work: "w", Attempt: 2}
	for _, d := range []time.Duration{0, time.Millisecond, 5 * time.Second, MaxDelay} {
		if err := q.Dispatch(ctx, m, d); err != nil {
			t.Fatal(err)
		}
	}
	if err := q.Dispatch(ctx, m, MaxDelay+time.Second); err == nil || err.Error() != "lambda: SQS delays a message by at most 15m0s, not 15m1s" {
		t.Errorf("a delay past 15 minutes: %v", err)
	}
	m.Job = "refused"
	wantErr := `lambda: send the task of job "refused" to the SQS queue ` + u + `: QueueDoesNotExist: The specified queue does not exist. (HTTP 400)`
	if err := q.Dispatch(ctx, m, 0); err == nil || err.Error() != wantErr {
		t.Errorf("refused: %v", err)
	}
	body := func(delay int, job string) string {
		return `{"QueueUrl":"` + u + `","MessageBody":"{\"agent\":\"agent\",\"workspace\":\"ws\",\"job\":\"` + job + `\",\"work\":\"w\",\"attempt\":2}","DelaySeconds":` + itoa(delay) + `}`
	}
	want := []seen{}
	for _, d := range []int{0, 1, 5, 900} {
		want = append(want, seen{"AmazonSQS.SendMessage", "application/x-amz-json-1.0", body(d, "job-1")})
	}
	want = append(want, seen{"AmazonSQS.SendMessage", "application/x-amz-json-1.0", body(0, "refused")})
	if len(got) != len(want) {
		t.Fatalf("requests:\n%v\nwant\n%v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("request %d:\n got %+v\nwant %+v", i, got[i], want[i])
		}
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// motoSQS calls moto_server's SQS with the awsapi client, as the function does.
type motoSQS struct {
	t   testing.TB
	api *awsapi.Client
}

func newMotoSQS(t testing.TB, endpoint string) *motoSQS {
	t.Helper()
	api, err := awsapi.New(envOf("AWS_REGION", "us-east-1", "AWS_ACCESS_KEY_ID", "test", "AWS_SECRET_ACCESS_KEY", "test", "AWS_ENDPOINT_URL", endpoint), sqsService)
	if err != nil {
		t.Fatal(err)
	}
	return &motoSQS{t: t, api: api}
}

// create makes a queue of a fresh name and returns its URL and ARN.
func (s *motoSQS) create() (string, string) {
	s.t.Helper()
	var out struct{ QueueUrl string }
	if err := s.api.Call(context.Background(), "CreateQueue", map[string]any{"QueueName": testenv.UniqueName("svz-jobs-")}, &out); err != nil {
		s.t.Fatal(err)
	}
	var attrs struct{ Attributes map[string]string }
	if err := s.api.Call(context.Background(), "GetQueueAttributes", map[string]any{"QueueUrl": out.QueueUrl, "AttributeNames": []string{"QueueArn"}}, &attrs); err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() {
		_ = s.api.Call(context.Background(), "DeleteQueue", map[string]any{"QueueUrl": out.QueueUrl}, nil)
	})
	return out.QueueUrl, attrs.Attributes["QueueArn"]
}

// sqsMessage is a message as ReceiveMessage returns it.
type sqsMessage struct {
	MessageID     string            `json:"MessageId"`
	ReceiptHandle string            `json:"ReceiptHandle"`
	MD5OfBody     string            `json:"MD5OfBody"`
	Body          string            `json:"Body"`
	Attributes    map[string]string `json:"Attributes"`
	// MessageAttributes: the trace context a dispatch sent with the message.
	MessageAttributes map[string]struct{ DataType, StringValue string } `json:"MessageAttributes"`
}

// receive returns the messages visible now (at most 10), with all their attributes.
func (s *motoSQS) receive(url string) []sqsMessage {
	s.t.Helper()
	var out struct{ Messages []sqsMessage }
	if err := s.api.Call(context.Background(), "ReceiveMessage", map[string]any{"QueueUrl": url, "MaxNumberOfMessages": 10,
		"MessageSystemAttributeNames": []string{"All"}, "MessageAttributeNames": []string{"All"}, "VisibilityTimeout": 0}, &out); err != nil {
		s.t.Fatal(err)
	}
	return out.Messages
}

// TestDispatchToMoto sends a task message to moto_server's SQS and reads it back: the body is the
// task's reference, as core/jobs decodes it.
func TestDispatchToMoto(t *testing.T) {
	endpoint := testenv.Need(t, testenv.AWSEndpoint)
	s := newMotoSQS(t, endpoint)
	u, _ := s.create()
	q, err := NewQueue(envOf(EnvQueueURL, u, "AWS_REGION", "us-east-1", "AWS_ACCESS_KEY_ID", "test", "AWS_SECRET_ACCESS_KEY", "test", "AWS_ENDPOINT_URL", endpoint))
	if err != nil {
		t.Fatal(err)
	}
	m := jobs.Message{Agent: "agent", Workspace: "ws", Job: "job-1", Work: "w"}
	if err := q.Dispatch(context.Background(), m, 0); err != nil {
		t.Fatal(err)
	}
	got := s.receive(u)
	if len(got) != 1 || got[0].Body != `{"agent":"agent","workspace":"ws","job":"job-1","work":"w","attempt":0}` {
		t.Fatalf("received %+v", got)
	}
	if back, err := jobs.DecodeMessage([]byte(got[0].Body)); err != nil || back != m {
		t.Fatalf("decoded %+v %v", back, err)
	}
	// A delayed message is not visible before its delay.
	if err := q.Dispatch(context.Background(), m, 10*time.Minute); err != nil {
		t.Fatal(err)
	}
	if got := s.receive(u); len(got) != 1 || got[0].Attributes["ApproximateReceiveCount"] != "2" {
		t.Fatalf("after a delayed send, visible: %+v", got)
	}
}

// sqsEvent is an SQS event as Lambda's event source mapping sends it.
func sqsEvent(records ...map[string]any) []byte {
	b, _ := json.Marshal(map[string]any{"Records": records})
	return b
}

func sqsRecordOf(id, body, receives string) map[string]any {
	return map[string]any{
		"messageId": id, "receiptHandle": "AQEB" + id, "body": body,
		"attributes": map[string]string{"ApproximateReceiveCount": receives, "SentTimestamp": "1783504800000",
			"SenderId": "AROAEXAMPLE:svz", "ApproximateFirstReceiveTimestamp": "1783504800100"},
		"messageAttributes": map[string]any{}, "md5OfBody": "d41d8cd98f00b204e9800998ecf8427e",
		"eventSource": "aws:sqs", "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:svz-jobs", "awsRegion": "us-east-1",
	}
}

// outcomeOf is how the job service in process ends the delivery of job: busy, a store outage, or
// done with.
func outcomeOf(job string) error {
	switch job {
	case "busy":
		return jobs.ErrBusy
	case "down":
		return errors.New("store: connection refused")
	}
	return nil
}

// TestSQSBatch runs an SQS event in process: each record is delivered with the invocation's
// deadline, its receive count and the queue's maxReceiveCount; the records that failed (a store
// error, a task busy elsewhere) come back in batchItemFailures, exactly; a body that is not a task
// message is acknowledged, never delivered.
func TestSQSBatch(t *testing.T) {
	type call struct {
		m jobs.Message
		d jobs.Delivery
	}
	var mu sync.Mutex
	calls := map[string]call{}
	deliver := func(ctx context.Context, m jobs.Message, d jobs.Delivery) error {
		mu.Lock()
		calls[m.Job] = call{m, d}
		mu.Unlock()
		return outcomeOf(m.Job)
	}
	msg := func(job string) string {
		return string(jobs.Message{Agent: "a", Workspace: "w", Job: job, Work: "work", Attempt: 1}.Encode())
	}
	ev := sqsEvent(
		sqsRecordOf("m-ok", msg("ok"), "1"),
		sqsRecordOf("m-busy", msg("busy"), "2"),
		sqsRecordOf("m-down", msg("down"), "5"),
		sqsRecordOf("m-bad", `{"agent":"a","workspace":"w","job":"j","work":"x","attempt":0,"input":{"secret":1}}`, "1"),
	)
	log, logs := testkit.Logger()
	deadline := time.Now().Add(42 * time.Second).Truncate(time.Millisecond)
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	out, err := NewHandler(http.NotFoundHandler(), WithLogger(log), WithJobs(deliver, 5)).Invoke(ctx, ev)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"batchItemFailures":[{"itemIdentifier":"m-busy"},{"itemIdentifier":"m-down"}]}`
	if string(out) != want {
		t.Fatalf("answer %s\nwant   %s", out, want)
	}
	for job, receive := range map[string]int{"ok": 1, "busy": 2, "down": 5} {
		c := calls[job]
		if c.m.Job != job || c.m.Attempt != 1 || !c.d.Deadline.Equal(deadline) || c.d.Receive != receive || c.d.MaxReceives != 5 {
			t.Errorf("delivery of %s: %+v", job, c)
		}
	}
	if len(calls) != 3 {
		t.Errorf("deliveries %v: the record that does not decode must not be delivered", calls)
	}
	if s := logs.String(); strings.Contains(s, "secret") || !strings.Contains(s, `"message_id":"m-bad"`) || !strings.Contains(s, "connection refused") {
		t.Errorf("logs:\n%s", s)
	}

	// All delivered: an empty list, not null.
	out, err = NewHandler(http.NotFoundHandler(), WithLogger(log), WithJobs(deliver, 5)).Invoke(ctx, sqsEvent(sqsRecordOf("m-1", msg("ok"), "1")))
	if err != nil || string(out) != `{"batchItemFailures":[]}` {
		t.Fatalf("all delivered: %s %v", out, err)
	}
	// Without background work an SQS event fails the invocation; a record from another source is
	// not an SQS event.
	if _, err := NewHandler(http.NotFoundHandler(), WithLogger(log)).Invoke(ctx, ev); err == nil || err.Error() != errNoJobs.Error() {
		t.Errorf("without WithJobs: %v", err)
	}
	other := sqsRecordOf("m-1", msg("ok"), "1")
	other["eventSource"] = "aws:kinesis"
	if _, err := NewHandler(http.NotFoundHandler(), WithLogger(log), WithJobs(deliver, 5)).Invoke(ctx, sqsEvent(sqsRecordOf("m-2", msg("ok"), "1"), other)); !errors.Is(err, ErrUnsupportedEvent) {
		t.Errorf("a kinesis record: %v", err)
	}
}

// TestSQSBadBodies: a record whose body is not a task message (or longer than one can be: a
// 200 KB job id) is acknowledged once, never delivered, with one log line of its length and why,
// never its body, whatever it holds; the other records of the batch are delivered.
func TestSQSBadBodies(t *testing.T) {
	bodies := map[string]string{
		"empty": "", "spaces": "   ", "null": "null", "array": `[{"job":"secret"}]`, "string": `"secret"`, "number": "1e999",
		"truncated": `{"agent":"a","workspace":"w","job":"secret"`, "not UTF-8": "{\"job\":\"secret\xff\"}",
		"base64": "eyJqb2IiOiJqIn0=", "trailing data": `{"agent":"a","workspace":"w","job":"j","work":"x","attempt":1} secret`,
		"missing members": `{"job":"secret"}`, "wrong types": `{"agent":1,"workspace":[],"job":{"secret":1},"work":null,"attempt":"1"}`,
		"deep": strings.Repeat("[", 100000) + strings.Repeat("]", 100000), "huge": `{"agent":"secret` + strings.Repeat("a", 300<<10) + `"}`,
		"200 KB job id":  `{"agent":"a","workspace":"w","job":"secret` + strings.Repeat("j", 200<<10) + `","work":"x","attempt":0}`,
		"unknown member": `{"agent":"a","workspace":"w","job":"j","work":"x","attempt":0,"` + strings.Repeat("secret", 500) + `":1}`,
	}
	var records []map[string]any
	for name, body := range bodies {
		records = append(records, sqsRecordOf("bad "+name, body, "1"))
	}
	ok := string(jobs.Message{Agent: "a", Workspace: "w", Job: "ok", Work: "work", Attempt: 1}.Encode())
	records = append(records, sqsRecordOf("good", ok, "1"))
	var delivered atomic.Int32
	deliver := func(_ context.Context, m jobs.Message, _ jobs.Delivery) error {
		if m.Job != "ok" {
			t.Errorf("delivered a bad record: %+v", m)
		}
		delivered.Add(1)
		return nil
	}
	log, logs := testkit.Logger()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := NewHandler(http.NotFoundHandler(), WithLogger(log), WithJobs(deliver, 5)).Invoke(ctx, sqsEvent(records...))
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != `{"batchItemFailures":[]}` || delivered.Load() != 1 {
		t.Fatalf("answer %s (delivered %d), want every record acknowledged and the good one delivered once", out, delivered.Load())
	}
	if strings.Contains(logs.String(), "secret") {
		t.Errorf("a body reached the log:\n%.2000s", logs)
	}
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	if len(lines) != len(bodies) {
		t.Fatalf("%d log lines for %d bad bodies:\n%.4000s", len(lines), len(bodies), logs)
	}
	for _, l := range lines {
		if len(l) > 1024 || !strings.Contains(l, `"msg":"SQS message is not a task message: acknowledged, dropped"`) {
			t.Errorf("log line of %d bytes: %.2000s", len(l), l)
		}
	}
	n := itoa(len(bodies["200 KB job id"]))
	if !strings.Contains(logs.String(), `"message_id":"bad 200 KB job id","receive":1,"bytes":`+n+`,"error":"jobs: a task message is at most 4096 bytes, got `+n+`"}`) {
		t.Errorf("the 200 KB job id's line:\n%.4000s", logs)
	}
}

func TestDeadLetterARN(t *testing.T) {
	for v, want := range map[string]string{
		"": "", "  ": "", "arn:aws:sqs:eu-west-3:123456789012:my-agent-jobs-dlq": "arn:aws:sqs:eu-west-3:123456789012:my-agent-jobs-dlq",
		"arn:aws-cn:sqs:cn-north-1:123456789012:q": "arn:aws-cn:sqs:cn-north-1:123456789012:q",
	} {
		if got, err := DeadLetterARN(envOf(EnvDeadLetterARN, v)); err != nil || got != want {
			t.Errorf("%q: %q %v", v, got, err)
		}
	}
	for _, bad := range []string{
		"my-agent-jobs-dlq", "arn:aws:sqs:eu-west-3:123456789012", "arn:aws:sns:eu-west-3:123456789012:q", "arn:gcp:sqs:eu-west-3:123456789012:q",
		"urn:aws:sqs:eu-west-3:123456789012:q", "arn:aws:sqs::123456789012:q", "arn:aws:sqs:eu-west-3:12345678901:q",
		"arn:aws:sqs:eu-west-3:123456789012:q.fifo", "arn:aws:sqs:eu-west-3:123456789012:q:x",
		"https://sqs.eu-west-3.amazonaws.com/123456789012/q",
	} {
		want := `lambda: SUPERVAIZER_JOBS_DEAD_LETTER_ARN=` + strconv.Quote(bad) + `: must be the ARN of a standard SQS queue, such as arn:aws:sqs:eu-west-3:123456789012:my-agent-jobs-dlq (the jobs queue's dead-letter queue, an event source of this function)`
		if _, err := DeadLetterARN(envOf(EnvDeadLetterARN, bad)); err == nil || err.Error() != want {
			t.Errorf("%q:\n got %v\nwant %s", bad, err, want)
		}
	}
}

// TestSQSDeadLetters: with WithDeadLetters, a record from the dead-letter queue (its event source
// ARN) fails its job through the dead-letter function, with the queue's maxReceiveCount and the
// function timeout (the invocation's time left, in whole seconds) and is never delivered;
// acknowledged when done with, reported when its task is still leased or the store failed; an
// unreadable one is acknowledged. Records of the jobs queue are delivered as always.
func TestSQSDeadLetters(t *testing.T) {
	const dlq = "arn:aws:sqs:us-east-1:123456789012:svz-jobs-dlq"
	var mu sync.Mutex
	failed := map[string]jobs.DeadLetter{}
	delivered := map[string]bool{}
	deliver := func(_ context.Context, m jobs.Message, _ jobs.Delivery) error {
		mu.Lock()
		defer mu.Unlock()
		delivered[m.Job] = true
		return nil
	}
	fail := func(_ context.Context, m jobs.Message, d jobs.DeadLetter) error {
		mu.Lock()
		defer mu.Unlock()
		failed[m.Job] = d
		return outcomeOf(m.Job)
	}
	msg := func(job string) string {
		return string(jobs.Message{Agent: "a", Workspace: "w", Job: job, Work: "work"}.Encode())
	}
	dead := func(id, body string) map[string]any {
		r := sqsRecordOf(id, body, "1")
		r["eventSourceARN"] = dlq
		return r
	}
	log, logs := testkit.Logger()
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(41*time.Second+500*time.Millisecond))
	defer cancel()
	out, err := NewHandler(http.NotFoundHandler(), WithLogger(log), WithJobs(deliver, 5), WithDeadLetters(fail, dlq)).Invoke(ctx, sqsEvent(
		dead("d-ok", msg("dead")), dead("d-busy", msg("busy")), dead("d-down", msg("down")), dead("d-bad", `{"job":"secret"}`),
		sqsRecordOf("m-ok", msg("live"), "1"),
	))
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"batchItemFailures":[{"itemIdentifier":"d-busy"},{"itemIdentifier":"d-down"}]}`; string(out) != want {
		t.Fatalf("answer %s\nwant   %s", out, want)
	}
	want := jobs.DeadLetter{Receives: 5, Limit: "the function's timeout (42 s)"}
	if len(failed) != 3 || failed["dead"] != want || failed["busy"] != want || failed["down"] != want {
		t.Errorf("dead letters %+v, want each %+v", failed, want)
	}
	if len(delivered) != 1 || !delivered["live"] {
		t.Errorf("delivered %v, want the jobs queue's record only", delivered)
	}
	if s := logs.String(); strings.Contains(s, "secret") || !strings.Contains(s, `"msg":"dead-lettered task delivery failed: delivered again later","message_id":"d-down"`) ||
		!strings.Contains(s, `"msg":"dead-lettered task runs on another instance: delivered again later","message_id":"d-busy"`) || !strings.Contains(s, "connection refused") {
		t.Errorf("logs:\n%s", s)
	}
	// Without a deadline the reason names no limit; without WithDeadLetters a record of the
	// dead-letter queue is a task message like any other.
	clear(failed)
	if _, err := NewHandler(http.NotFoundHandler(), WithLogger(log), WithJobs(deliver, 5), WithDeadLetters(fail, dlq)).Invoke(context.Background(), sqsEvent(dead("d-1", msg("dead")))); err != nil || failed["dead"] != (jobs.DeadLetter{Receives: 5}) {
		t.Errorf("no deadline: %+v %v", failed, err)
	}
	clear(delivered)
	if _, err := NewHandler(http.NotFoundHandler(), WithLogger(log), WithJobs(deliver, 5)).Invoke(ctx, sqsEvent(dead("d-1", msg("dead")))); err != nil || !delivered["dead"] {
		t.Errorf("without WithDeadLetters: %v %v", delivered, err)
	}
	// Nor is a record that names no queue (no dead-letter queue names none either).
	clear(delivered)
	unnamed := sqsRecordOf("m-1", msg("live"), "1")
	delete(unnamed, "eventSourceARN")
	if _, err := NewHandler(http.NotFoundHandler(), WithLogger(log), WithJobs(deliver, 5)).Invoke(ctx, sqsEvent(unnamed)); err != nil || !delivered["live"] {
		t.Errorf("a record without its queue's ARN: %v %v", delivered, err)
	}
}
