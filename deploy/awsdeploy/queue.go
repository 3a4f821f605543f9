package awsdeploy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/supervaize/svz/core/jobs"
	"github.com/supervaize/svz/deploy"
	"github.com/supervaize/svz/internal/awsapi"
)

// The jobs queue of a service: background work (core/jobs) is dispatched to it, and its event
// source mapping delivers it to the function. A message delivered JobsMaxReceives times without
// finishing moves to the dead-letter queue.
const (
	// JobsMaxReceives is the redrive policy's maxReceiveCount (the controller's
	// SUPERVAIZER_JOBS_MAX_RECEIVES must say the same).
	JobsMaxReceives = 5
	// JobsVisibilityFactor: the queue's visibility timeout is this many times the function
	// timeout, as AWS recommends for a queue that is a Lambda event source (and at least
	// JobsLeaseSeconds more than it: see JobsVisibility).
	JobsVisibilityFactor = 6
	// JobsLeaseSeconds is how long a task stays leased after the last renewal of a delivery that
	// the function's timeout stopped: core/jobs' lease and its skew margin.
	JobsLeaseSeconds = int((jobs.DefaultLease + jobs.SkewMargin) / time.Second)
	// jobsRetention is how long an undelivered task message is kept (SQS's default, 4 days);
	// deadLetterRetention how long a dead-lettered one is (the most SQS allows, 14 days).
	jobsRetention       = 4 * 24 * 3600
	deadLetterRetention = 14 * 24 * 3600
)

// JobsVisibility is the visibility timeout of a jobs queue, in seconds, for a function timeout of
// functionTimeout seconds: JobsVisibilityFactor times it, and never less than the function
// timeout plus JobsLeaseSeconds. A delivery that the function's timeout stopped keeps its task
// leased that long: a redelivery that came sooner would find the task busy and spend one of its
// receives (the message dead-letters after JobsMaxReceives).
func JobsVisibility(functionTimeout int) int {
	return max(JobsVisibilityFactor*functionTimeout, functionTimeout+JobsLeaseSeconds)
}

// JobsQueueName and JobsDeadLetterName name a service's jobs queue and its dead-letter queue.
func JobsQueueName(service string) string      { return service + "-jobs" }
func JobsDeadLetterName(service string) string { return service + "-jobs-dlq" }

// QueueARN is the ARN of an SQS queue.
func QueueARN(region, account, name string) string {
	return fmt.Sprintf("arn:aws:sqs:%s:%s:%s", region, account, name)
}

// QueueURL is the URL of an SQS queue, as SQS names it.
func QueueURL(region, account, name string) string {
	suffix := "amazonaws.com"
	if strings.HasPrefix(region, "cn-") {
		suffix = "amazonaws.com.cn"
	}
	return fmt.Sprintf("https://sqs.%s.%s/%s/%s", region, suffix, account, name)
}

// JobsStatements allow a function's role what background work needs of its jobs queue and its
// dead-letter queue, on those queues only: sending task messages to the jobs queue (the
// controller), and receiving, deleting and reading the attributes of the messages of both (their
// event source mappings poll with the function's role).
func JobsStatements(queueARN, deadLetterARN string) []Statement {
	return []Statement{
		{Sid: "JobsSend", Action: List{"sqs:SendMessage"}, Resource: List{queueARN}},
		{Sid: "JobsReceive", Action: List{"sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes"}, Resource: List{queueARN, deadLetterARN}},
	}
}

// sqsService is SQS for internal/awsapi (the JSON protocol; svz links no SDK SQS client).
var sqsService = awsapi.Service{ID: "sqs", Name: "SQS", Target: "AmazonSQS", JSONVersion: "1.0"}

// NewSQS returns an SQS client with cfg's region and credentials, and its endpoint
// (AWS_ENDPOINT_URL_SQS, else cfg's base endpoint, else SQS's regional one).
func NewSQS(cfg aws.Config) (*awsapi.Client, error) {
	if cfg.Credentials == nil {
		return nil, fmt.Errorf("%w: %s", ErrNoCredentials, noCredentials)
	}
	getenv := func(k string) string {
		switch k {
		case "AWS_ENDPOINT_URL_SQS", "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS":
			return os.Getenv(k)
		case "AWS_ENDPOINT_URL":
			return aws.ToString(cfg.BaseEndpoint)
		}
		return "" // credentials come from cfg, through the fallback
	}
	creds := cfg.Credentials
	return awsapi.New(getenv, sqsService, awsapi.WithRegion(cfg.Region),
		awsapi.WithFallback(func(context.Context) (aws.CredentialsProvider, error) { return creds, nil }))
}

// JobsQueues converges a service's jobs queue and dead-letter queue. It changes and deletes only
// the queues it created (tag managed-by=svz).
type JobsQueues struct {
	Client  *awsapi.Client
	Region  string
	Account string
}

// queueSpec is one queue and the attributes svz sets on it.
type queueSpec struct {
	name  string
	attrs map[string]string
}

func (q *JobsQueues) specs(service string, visibility int) []queueSpec {
	dlq := JobsDeadLetterName(service)
	redrive, _ := json.Marshal(map[string]any{"deadLetterTargetArn": QueueARN(q.Region, q.Account, dlq), "maxReceiveCount": JobsMaxReceives})
	return []queueSpec{
		// The function consumes its dead-letter queue too (a record fails its job): Lambda wants
		// the visibility timeout of a mapped queue no shorter than the function timeout.
		{dlq, map[string]string{"VisibilityTimeout": strconv.Itoa(visibility), "MessageRetentionPeriod": strconv.Itoa(deadLetterRetention)}},
		{JobsQueueName(service), map[string]string{"VisibilityTimeout": strconv.Itoa(visibility),
			"MessageRetentionPeriod": strconv.Itoa(jobsRetention), "RedrivePolicy": string(redrive)}},
	}
}

// liveQueue is what svz reads of a queue.
type liveQueue struct {
	url   string
	ours  bool
	attrs map[string]string
}

func notFound(err error) bool {
	var api *awsapi.APIError
	return errors.As(err, &api) && (api.Code == "QueueDoesNotExist" || api.Code == "AWS.SimpleQueueService.NonExistentQueue" || api.Code == "NonExistentQueue")
}

// read returns the queue, nil when absent; the attributes only of a queue svz created.
func (q *JobsQueues) read(ctx context.Context, name string) (*liveQueue, error) {
	var u struct{ QueueUrl string }
	if err := q.Client.Call(ctx, "GetQueueUrl", map[string]string{"QueueName": name}, &u); notFound(err) {
		return nil, nil
	} else if err != nil {
		return nil, fmt.Errorf("sqs:GetQueueUrl %s: %w", name, err)
	}
	lq := &liveQueue{url: u.QueueUrl}
	var tags struct{ Tags map[string]string }
	if err := q.Client.Call(ctx, "ListQueueTags", map[string]string{"QueueUrl": lq.url}, &tags); err != nil {
		return nil, fmt.Errorf("sqs:ListQueueTags %s: %w", name, err)
	}
	if lq.ours = tags.Tags[ManagedByTag] == ManagedByValue; !lq.ours {
		return lq, nil
	}
	var attrs struct{ Attributes map[string]string }
	if err := q.Client.Call(ctx, "GetQueueAttributes", map[string]any{"QueueUrl": lq.url, "AttributeNames": []string{"All"}}, &attrs); err != nil {
		return nil, fmt.Errorf("sqs:GetQueueAttributes %s: %w", name, err)
	}
	lq.attrs = attrs.Attributes
	return lq, nil
}

func notManagedQueue(name, url string) error {
	return &deploy.NotManagedError{Kind: "sqs queue", Name: name,
		Adopt: "aws sqs tag-queue --queue-url " + url + " --tags " + ManagedByTag + "=" + ManagedByValue}
}

// diff says which of the attributes svz sets differ ("" when none).
func (lq *liveQueue) diff(want map[string]string) string {
	var d []string
	keys := make([]string, 0, len(want))
	for k := range want {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		live, w := lq.attrs[k], want[k]
		if k == "RedrivePolicy" {
			if !sameRedrive(live, w) {
				d = append(d, "redrive policy")
			}
			continue
		}
		if live != w {
			d = append(d, fmt.Sprintf("%s %s → %s", k, cmpOr(live, "unset"), w))
		}
	}
	return strings.Join(d, ", ")
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// sameRedrive compares two redrive policies by meaning: SQS may answer maxReceiveCount as a
// number or a string.
func sameRedrive(a, b string) bool {
	norm := func(s string) map[string]string {
		var m map[string]any
		if json.Unmarshal([]byte(s), &m) != nil {
			return nil
		}
		out := map[string]string{}
		for k, v := range m {
			out[k] = fmt.Sprint(v)
		}
		return out
	}
	na, nb := norm(a), norm(b)
	if na == nil || nb == nil || len(na) != len(nb) {
		return false
	}
	for k, v := range na {
		if nb[k] != v {
			return false
		}
	}
	return true
}

// Plan says what Ensure would do: the dead-letter queue, then the jobs queue.
func (q *JobsQueues) Plan(ctx context.Context, service string, visibility int) ([]deploy.Change, error) {
	var cs []deploy.Change
	for _, s := range q.specs(service, visibility) {
		c := deploy.Change{Resource: "sqs-queue", Name: s.name, Action: deploy.Create}
		lq, err := q.read(ctx, s.name)
		switch {
		case err != nil:
			return nil, err
		case lq == nil:
		case !lq.ours:
			return nil, notManagedQueue(s.name, lq.url)
		default:
			c.Action, c.Detail = deploy.NoOp, lq.diff(s.attrs)
			if c.Detail != "" {
				c.Action = deploy.Update
			}
		}
		cs = append(cs, c)
	}
	return cs, nil
}

// Ensure creates or fixes the dead-letter queue, then the jobs queue, and returns the jobs
// queue's URL.
func (q *JobsQueues) Ensure(ctx context.Context, service string, visibility int) ([]deploy.Change, string, error) {
	var cs []deploy.Change
	var url string
	for _, s := range q.specs(service, visibility) {
		c := deploy.Change{Resource: "sqs-queue", Name: s.name, Action: deploy.NoOp}
		lq, err := q.read(ctx, s.name)
		switch {
		case err != nil:
			return cs, "", err
		case lq == nil:
			var out struct{ QueueUrl string }
			in := map[string]any{"QueueName": s.name, "Attributes": s.attrs, "tags": map[string]string{ManagedByTag: ManagedByValue}}
			if err := q.Client.Call(ctx, "CreateQueue", in, &out); err != nil {
				return cs, "", fmt.Errorf("sqs:CreateQueue %s: %w", s.name, err)
			}
			c.Action, url = deploy.Create, out.QueueUrl
		case !lq.ours:
			return cs, "", notManagedQueue(s.name, lq.url)
		default:
			url = lq.url
			if c.Detail = lq.diff(s.attrs); c.Detail != "" {
				c.Action = deploy.Update
				if err := q.Client.Call(ctx, "SetQueueAttributes", map[string]any{"QueueUrl": lq.url, "Attributes": s.attrs}, nil); err != nil {
					return cs, "", fmt.Errorf("sqs:SetQueueAttributes %s: %w", s.name, err)
				}
			}
		}
		cs = append(cs, c)
	}
	return cs, url, nil
}

// Delete removes the jobs queue, then its dead-letter queue, each only when svz created it.
func (q *JobsQueues) Delete(ctx context.Context, service string) ([]deploy.Change, error) {
	var cs []deploy.Change
	for _, name := range []string{JobsQueueName(service), JobsDeadLetterName(service)} {
		lq, err := q.read(ctx, name)
		switch {
		case err != nil:
			return cs, err
		case lq == nil:
			cs = append(cs, deploy.Change{Resource: "sqs-queue", Name: name, Action: deploy.NoOp, Detail: "absent"})
			continue
		case !lq.ours:
			cs = append(cs, deploy.KeptChange("sqs-queue", name))
			continue
		}
		if err := q.Client.Call(ctx, "DeleteQueue", map[string]string{"QueueUrl": lq.url}, nil); err != nil && !notFound(err) {
			return cs, fmt.Errorf("sqs:DeleteQueue %s: %w", name, err)
		}
		cs = append(cs, deploy.Change{Resource: "sqs-queue", Name: name, Action: deploy.Delete})
	}
	return cs, nil
}
