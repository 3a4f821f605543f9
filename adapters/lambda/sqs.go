package lambda

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/supervaize/svz/core/jobs"
	"github.com/supervaize/svz/core/telemetry"
	"github.com/supervaize/svz/internal/awsapi"
	"github.com/supervaize/svz/internal/envvar"
)

// Settings of background work on Lambda.
const (
	// EnvQueueURL is the URL of the SQS queue background work is dispatched to: an event source
	// of this same function (template.yaml and svz deploy create both).
	EnvQueueURL = "SUPERVAIZER_JOBS_QUEUE_URL"
	// EnvMaxReceives is the queue's maxReceiveCount (its redrive policy): at that receive, a
	// delivery that fails marks the job failed before SQS moves the message to the dead-letter
	// queue. It must match the queue's redrive policy.
	EnvMaxReceives = "SUPERVAIZER_JOBS_MAX_RECEIVES"
	// DefaultMaxReceives is the maxReceiveCount template.yaml and svz deploy set.
	DefaultMaxReceives = 5
	// EnvDeadLetterARN is the ARN of the jobs queue's dead-letter queue, a second event source of
	// this same function (template.yaml and svz deploy create both): a record from it fails its
	// job, saying why (jobs.Service.DeadLettered). Unset, the function consumes no dead letters.
	EnvDeadLetterARN = "SUPERVAIZER_JOBS_DEAD_LETTER_ARN"
	// MaxDelay is the longest delay SQS gives a message (DelaySeconds 900).
	MaxDelay = 15 * time.Minute
)

// The only delays core/jobs asks for are a failed step's backoff, at most jobs.MaxBackoff: this
// stops the build if that ever exceeds what SQS can delay (a message that arrived before the
// task's retry time would be acknowledged as a duplicate, and the task left waiting).
const _ = uint64(MaxDelay - jobs.MaxBackoff)

// sqsService is SQS for internal/awsapi: the JSON protocol (awsJson1_0), X-Amz-Target
// AmazonSQS.<operation>; AWS_ENDPOINT_URL_SQS overrides the endpoint.
var sqsService = awsapi.Service{ID: "sqs", Name: "SQS", Target: "AmazonSQS", JSONVersion: "1.0"}

// Queue dispatches background work to an SQS queue (jobs.Dispatcher). It is one signed
// SendMessage call through internal/awsapi: the SDK's SQS client would cost the cold start more
// than it gives.
type Queue struct {
	api *awsapi.Client
	url string
	tel telemetry.Providers
}

var _ jobs.Dispatcher = (*Queue)(nil)

// NewQueue returns the queue SUPERVAIZER_JOBS_QUEUE_URL names, with the credentials, region and
// endpoint of the environment (AWS_REGION, AWS_ENDPOINT_URL_SQS or AWS_ENDPOINT_URL; see
// internal/awsapi). It fails naming the variable when it is unset or not a queue URL. opts tune
// the calls (tests).
func NewQueue(getenv func(string) string, opts ...awsapi.Option) (*Queue, error) {
	raw := strings.TrimSpace(getenv(EnvQueueURL))
	if raw == "" {
		return nil, fmt.Errorf("lambda: %s is not set: background work on Lambda is dispatched to an SQS queue that delivers to this function (template.yaml and svz deploy create it and set the variable)", EnvQueueURL)
	}
	u, err := ParseQueueURL(raw)
	if err != nil {
		return nil, fmt.Errorf("lambda: %w", err)
	}
	api, err := awsapi.New(getenv, sqsService, opts...)
	if err != nil {
		return nil, fmt.Errorf("lambda: the SQS client of %s: %w", EnvQueueURL, err)
	}
	return &Queue{api: api, url: u}, nil
}

// URL is the queue's URL.
func (q *Queue) URL() string { return q.url }

// WithTelemetry sends each message with the trace context of its dispatch, written by p's
// propagator into message attributes (trace.go), and returns q.
func (q *Queue) WithTelemetry(p telemetry.Providers) *Queue {
	q.tel = p
	return q
}

// ParseQueueURL checks the value of SUPERVAIZER_JOBS_QUEUE_URL: the http(s) URL of a standard SQS
// queue, .../ACCOUNT/NAME with a 12-digit account and a queue name (1 to 80 letters, digits,
// hyphens and underscores), without credentials, query or fragment. A FIFO queue is refused:
// it takes no per-message delay, which a retry's backoff needs.
func ParseQueueURL(v string) (string, error) {
	fail := func(why string) (string, error) {
		return "", fmt.Errorf("%s=%q: %s; it must be the URL of a standard SQS queue, such as https://sqs.eu-west-3.amazonaws.com/123456789012/my-agent-jobs", EnvQueueURL, awsapi.ShownURL(v), why)
	}
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fail("not an absolute http(s) URL")
	}
	if u.User != nil || u.RawQuery != "" || u.Fragment != "" { // an opaque URL has no host
		return fail("a queue URL has no credentials, query or fragment")
	}
	parts := strings.Split(strings.TrimPrefix(u.Path, "/"), "/")
	if len(parts) != 2 || !accountID(parts[0]) || !queueName(strings.TrimSuffix(parts[1], ".fifo")) {
		return fail("the path is not /ACCOUNT/NAME")
	}
	if strings.HasSuffix(parts[1], ".fifo") {
		return fail("a FIFO queue takes no per-message delay, which retries need")
	}
	return v, nil
}

func accountID(s string) bool {
	if len(s) != 12 {
		return false
	}
	for i := range len(s) {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func queueName(s string) bool {
	if s == "" || len(s) > 80 {
		return false
	}
	for i := range len(s) {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// sendMessage is SQS's SendMessage request.
type sendMessage struct {
	QueueURL          string                  `json:"QueueUrl"`
	MessageBody       string                  `json:"MessageBody"`
	DelaySeconds      int                     `json:"DelaySeconds"`
	MessageAttributes map[string]attributeOut `json:"MessageAttributes,omitempty"`
	SystemAttributes  map[string]attributeOut `json:"MessageSystemAttributes,omitempty"`
}

// MaxDelay implements jobs.DelayLimit: core/jobs hands a longer delay (a Sleep) on in steps of
// at most 15 minutes.
func (q *Queue) MaxDelay() time.Duration { return MaxDelay }

var _ jobs.DelayLimit = (*Queue)(nil)

// Dispatch sends the task's reference to the queue, delivered after delay (rounded up to the
// second; at most MaxDelay). A send whose answer was lost is sent again: a duplicate message is
// harmless, core/jobs runs a task once whatever the number of its messages.
func (q *Queue) Dispatch(ctx context.Context, m jobs.Message, delay time.Duration) error {
	if delay > MaxDelay {
		return fmt.Errorf("lambda: SQS delays a message by at most %s, not %s", MaxDelay, delay)
	}
	secs := int(max(delay+time.Second-1, 0) / time.Second)
	in := sendMessage{QueueURL: q.url, MessageBody: string(m.Encode()), DelaySeconds: secs}
	in.MessageAttributes, in.SystemAttributes = traceAttributes(q.tel.Inject(ctx))
	if err := q.api.Call(ctx, "SendMessage", in, nil); err != nil {
		return fmt.Errorf("lambda: send the task of job %q to the SQS queue %s: %w", m.Job, q.url, err)
	}
	return nil
}

// MaxReceives reads SUPERVAIZER_JOBS_MAX_RECEIVES: 1 to 1000 (SQS's range of maxReceiveCount),
// DefaultMaxReceives when unset.
func MaxReceives(getenv func(string) string) (int, error) {
	n, err := envvar.Int(getenv, EnvMaxReceives, DefaultMaxReceives, 1, 1000)
	if err != nil {
		return 0, fmt.Errorf("lambda: %w (the maxReceiveCount of the jobs queue's redrive policy)", err)
	}
	return int(n), nil
}

// DeadLetterARN reads SUPERVAIZER_JOBS_DEAD_LETTER_ARN: "" when unset, else the ARN of a standard
// SQS queue, arn:PARTITION:sqs:REGION:ACCOUNT:NAME.
func DeadLetterARN(getenv func(string) string) (string, error) {
	v := strings.TrimSpace(getenv(EnvDeadLetterARN))
	if v == "" {
		return "", nil
	}
	p := strings.Split(v, ":")
	if len(p) != 6 || p[0] != "arn" || !strings.HasPrefix(p[1], "aws") || p[2] != "sqs" || p[3] == "" || !accountID(p[4]) || !queueName(p[5]) {
		return "", fmt.Errorf("lambda: %s=%q: must be the ARN of a standard SQS queue, such as arn:aws:sqs:eu-west-3:123456789012:my-agent-jobs-dlq (the jobs queue's dead-letter queue, an event source of this function)", EnvDeadLetterARN, v)
	}
	return v, nil
}

// DeliverFunc runs one delivery of a task: (*jobs.Service).Deliver. nil acknowledges the
// message, an error has the queue deliver it again.
type DeliverFunc func(ctx context.Context, m jobs.Message, d jobs.Delivery) error

// WithJobs has the function run the background work that SQS events deliver (the queue's event
// source mapping, with ReportBatchItemFailures): deliver runs each message, maxReceives is the
// queue's maxReceiveCount. Without it an SQS event fails the invocation.
func WithJobs(deliver DeliverFunc, maxReceives int) Option {
	return func(c *config) { c.deliver, c.maxReceives = deliver, maxReceives }
}

// DeadLetterFunc fails the job of a dead-lettered task message: (*jobs.Service).DeadLettered. nil
// acknowledges the record, an error has the dead-letter queue deliver it again.
type DeadLetterFunc func(ctx context.Context, m jobs.Message, d jobs.DeadLetter) error

// WithDeadLetters has the function consume the jobs queue's dead-letter queue, whose ARN is
// queueARN (SUPERVAIZER_JOBS_DEAD_LETTER_ARN; its event source mapping delivers to this same
// function): an SQS record from it fails its job through fail, with the function's timeout and
// the queue's maxReceiveCount (WithJobs) in the reason, instead of running the task. Without it,
// a job whose message was dead-lettered stays active until its own timeout.
func WithDeadLetters(fail DeadLetterFunc, queueARN string) Option {
	return func(c *config) { c.deadLetter, c.deadLetterARN = fail, queueARN }
}

// errNoJobs fails an SQS event that reaches a function that runs no background work.
var errNoJobs = errors.New("lambda: an SQS event, but this function runs no background work (no agent defines any, or the handler built is neither the *core.Controller nor a platform.JobsHandler)")

// sqsRecord is one message of an SQS event, as Lambda's event source mapping sends it.
type sqsRecord struct {
	MessageID     string `json:"messageId"`
	ReceiptHandle string `json:"receiptHandle"`
	Body          string `json:"body"`
	Attributes    struct {
		ApproximateReceiveCount string `json:"ApproximateReceiveCount"`
		AWSTraceHeader          string `json:"AWSTraceHeader"`
	} `json:"attributes"`
	MessageAttributes map[string]attributeIn `json:"messageAttributes"`
	EventSource       string                 `json:"eventSource"`
	EventSourceARN    string                 `json:"eventSourceARN"`
}

// batchResponse is the answer to an SQS event with ReportBatchItemFailures: the messages listed
// are delivered again, the others deleted from the queue.
type batchResponse struct {
	BatchItemFailures []batchItemFailure `json:"batchItemFailures"`
}

type batchItemFailure struct {
	ItemIdentifier string `json:"itemIdentifier"`
}

// serveSQS runs every message of the batch, at once, each until the invocation's deadline (its
// delivery hands the task on before the deadline), and reports the ones to deliver again.
//
// A body that is not a task message (or is longer than one can be) is acknowledged, once, with a
// log line of its length and why, never its content: no delivery will ever read it, and a queue
// that delivered it again would log it again at every receive until it dead-letters it.
func (a *adapter) serveSQS(ctx context.Context, records []sqsRecord) (*batchResponse, error) {
	if a.deliver == nil {
		return nil, errNoJobs
	}
	deadline, _ := ctx.Deadline()
	var limit string
	if !deadline.IsZero() {
		limit = timeoutLimit(time.Until(deadline))
	}
	failed := make([]bool, len(records))
	var wg sync.WaitGroup
	for i, r := range records {
		wg.Go(func() { failed[i] = !a.deliverRecord(ctx, r, deadline, limit) })
	}
	wg.Wait()
	resp := &batchResponse{BatchItemFailures: []batchItemFailure{}}
	for i, r := range records {
		if failed[i] {
			resp.BatchItemFailures = append(resp.BatchItemFailures, batchItemFailure{ItemIdentifier: r.MessageID})
		}
	}
	return resp, nil
}

// timeoutLimit names the function's timeout when left remains of the invocation that just began:
// Lambda's timeouts are whole seconds, so left rounded up to the second.
func timeoutLimit(left time.Duration) string {
	return fmt.Sprintf("the function's timeout (%d s)", (left+time.Second-1)/time.Second)
}

// deliverRecord runs one message (or fails the job of a dead-lettered one); false when the queue
// should deliver it again.
func (a *adapter) deliverRecord(ctx context.Context, r sqsRecord, deadline time.Time, limit string) bool {
	receive, _ := strconv.Atoi(r.Attributes.ApproximateReceiveCount)
	log := a.log.With("message_id", r.MessageID, "receive", receive)
	m, err := jobs.ReadMessage([]byte(r.Body))
	if err != nil {
		log.WarnContext(ctx, "SQS message is not a task message: acknowledged, dropped", jobs.Unreadable([]byte(r.Body), err)...)
		return true
	}
	what := "task"
	if a.deadLetter != nil && r.EventSourceARN == a.deadLetterARN {
		what = "dead-lettered task" // its job fails, saying why, unless a delivery still holds it
		err = a.deadLetter(a.messageTrace(ctx, r), m, jobs.DeadLetter{Receives: a.maxReceives, Limit: limit})
	} else {
		err = a.deliver(a.messageTrace(ctx, r), m, jobs.Delivery{Deadline: deadline, Receive: receive, MaxReceives: a.maxReceives})
	}
	switch {
	case err == nil:
		return true
	case errors.Is(err, jobs.ErrBusy):
		log.InfoContext(ctx, what+" runs on another instance: delivered again later", "job_id", m.Job)
	default:
		log.WarnContext(ctx, what+" delivery failed: delivered again later", "job_id", m.Job, "error", err)
	}
	return false
}
