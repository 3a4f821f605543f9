package lambda

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/supervaize/svz/core/jobs"
	"github.com/supervaize/svz/internal/testenv"
)

// deadLetterFunction is the jobs test agent under the emulator with the settings: a
// function timeout of 5 s, a jobs queue whose redrive policy dead-letters a message at its
// second receive (SUPERVAIZER_JOBS_MAX_RECEIVES=2), the dead-letter queue given to the function
// (SUPERVAIZER_JOBS_DEAD_LETTER_ARN), and the controller's clock moved by the test
// (JOBSAGENT_CLOCK_FILE).
type deadLetterFunction struct {
	*jobsFunction
	dlqURL, dlqARN string
	clock          string
}

func startDeadLetterFunction(t *testing.T) *deadLetterFunction {
	t.Helper()
	sqs := newMotoSQS(t, testenv.Need(t, testenv.AWSEndpoint))
	dlqURL, dlqARN := sqs.create()
	clock := filepath.Join(t.TempDir(), "clock")
	if err := os.WriteFile(clock, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	f := startJobsFunction(t, "AWS_LAMBDA_FUNCTION_TIMEOUT=5", EnvMaxReceives+"=2", EnvDeadLetterARN+"="+dlqARN, "JOBSAGENT_CLOCK_FILE="+clock)
	redrive, _ := json.Marshal(map[string]any{"deadLetterTargetArn": dlqARN, "maxReceiveCount": 2})
	if err := f.sqs.api.Call(context.Background(), "SetQueueAttributes", map[string]any{"QueueUrl": f.queueURL,
		"Attributes": map[string]string{"RedrivePolicy": string(redrive)}}, nil); err != nil {
		t.Fatal(err)
	}
	return &deadLetterFunction{jobsFunction: f, dlqURL: dlqURL, dlqARN: dlqARN, clock: clock}
}

// advance sets the controller's clock to the real time plus offset (Go syntax).
func (f *deadLetterFunction) advance(t *testing.T, offset string) {
	t.Helper()
	if err := os.WriteFile(f.clock, []byte(offset), 0o600); err != nil {
		t.Fatal(err)
	}
}

// timesOut delivers m and expects the emulator to stop the invocation at the function timeout,
// as Lambda does ("Task timed out"): the step takes 8 s.
func (f *deadLetterFunction) timesOut(t *testing.T, m sqsMessage) {
	t.Helper()
	// The emulator kills the runtime (SIGKILL) and answers so.
	if status, out := f.em.invoke(t, f.lambdaSQSEvent(m)); status != 200 || string(out) != "Task timed out after 5.00 seconds" {
		t.Fatalf("delivery of receive %s: %d %s, want the function timeout", m.Attributes["ApproximateReceiveCount"], status, out)
	}
}

// deadLetter receives the one message of the dead-letter queue and wraps it in the event its
// event source mapping sends.
func (f *deadLetterFunction) deadLetter(t *testing.T) []byte {
	t.Helper()
	if left := f.sqs.receive(f.queueURL); len(left) != 0 {
		t.Fatalf("the jobs queue still holds %+v", left)
	}
	msgs := f.sqs.receive(f.dlqURL)
	if len(msgs) != 1 {
		t.Fatalf("the dead-letter queue holds %d messages, want 1: %+v", len(msgs), msgs)
	}
	var ev map[string][]map[string]any
	if err := json.Unmarshal(f.lambdaSQSEvent(msgs[0]), &ev); err != nil {
		t.Fatal(err)
	}
	ev["Records"][0]["eventSourceARN"] = f.dlqARN
	b, _ := json.Marshal(ev)
	return b
}

// jobError is job.sync's status and the job's error message.
func (f *deadLetterFunction) jobError(t *testing.T, job string) string {
	t.Helper()
	r := f.call(t, "job.sync", job)
	var js struct {
		Job struct {
			Status string
			Error  struct{ Message string }
		}
	}
	b, _ := json.Marshal(r["job_state"])
	if err := json.Unmarshal(b, &js); err != nil {
		t.Fatal(err)
	}
	return js.Job.Status + ": " + js.Job.Error.Message
}

// TestDeadLetterUnderEmulator is issue 29's scenario on the real bootstrap: a step of 8 s under a
// function timeout of 5 s, a queue that dead-letters at the second receive. Both receives time
// out (the second after the first one's lease lapsed), or the second finds the task still leased
// by the first (busy); either way SQS dead-letters the message, and its record from the
// dead-letter queue fails the job with what happened, where job.sync said active until the
// job's own 24 h timeout. A dead letter whose task a delivery still holds is reported, and done
// with once the lease lapsed.
func TestDeadLetterUnderEmulator(t *testing.T) {
	const reason = `failed: the work's first step did not finish within the function's timeout (5 s); its message was delivered 2 times, then dead-lettered`
	for _, busy := range []bool{false, true} {
		name := map[bool]string{false: "timed out twice", true: "busy at the last receive"}[busy]
		t.Run(name, func(t *testing.T) {
			f := startDeadLetterFunction(t)
			const job = "slow-1"
			if got := jobState(t, f.call(t, "job.start", job)); got != "active" {
				t.Fatalf("job.start: %s", got)
			}
			f.timesOut(t, f.next(t))
			if got := f.jobError(t, job); got != "active: " {
				t.Fatalf("after the first timeout: %s", got)
			}
			second := f.next(t)
			if second.Attributes["ApproximateReceiveCount"] != "2" {
				t.Fatalf("second receive: %+v", second)
			}
			if busy {
				// The first delivery's lease (30 s, and 2 s of skew) is still on.
				if got, want := f.deliver(t, second), `{"batchItemFailures":[{"itemIdentifier":"`+second.MessageID+`"}]}`; got != want {
					t.Fatalf("second receive, busy: %s, want %s", got, want)
				}
			} else {
				f.advance(t, "40s")
				f.timesOut(t, second)
				if got := f.jobError(t, job); got != "active: " {
					t.Fatalf("after the second timeout: %s", got)
				}
			}
			ev := f.deadLetter(t)
			// The last delivery's lease is still on: the dead letter waits for it.
			status, out := f.em.invoke(t, ev)
			var rec struct{ Records []struct{ MessageID string } }
			_ = json.Unmarshal(ev, &rec)
			if want := `{"batchItemFailures":[{"itemIdentifier":"` + rec.Records[0].MessageID + `"}]}`; status != 200 || string(out) != want {
				t.Fatalf("dead letter while the task is leased: %d %s, want %s", status, out, want)
			}
			if got := f.jobError(t, job); got != "active: " {
				t.Fatalf("after a dead letter while the task is leased: %s", got)
			}
			f.advance(t, map[bool]string{false: "80s", true: "40s"}[busy])
			if status, out := f.em.invoke(t, ev); status != 200 || string(out) != `{"batchItemFailures":[]}` {
				t.Fatalf("dead letter: %d %s", status, out)
			}
			if got := f.jobError(t, job); got != reason {
				t.Fatalf("job.sync after the dead letter: %s\nwant %s", got, reason)
			}
			// Delivered again, the dead letter changes nothing.
			if status, out := f.em.invoke(t, ev); status != 200 || string(out) != `{"batchItemFailures":[]}` || f.jobError(t, job) != reason {
				t.Fatalf("dead letter again: %d %s %s", status, out, f.jobError(t, job))
			}
		})
	}
}

// template.yaml's jobs queues leave a delivery that the function timeout stopped the time its task
// stays leased (jobs.DefaultLease + jobs.SkewMargin): its default visibility timeout against the
// default Timeout, and its MinValue against the smallest Timeout (CloudFormation cannot compare
// two parameters); the dead-letter queue has the same visibility timeout, and is mapped to the
// function with the variable that makes its records fail their jobs.
func TestTemplateJobsVisibility(t *testing.T) {
	tpl, err := os.ReadFile(filepath.Join(repoRoot(), "template.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	param := func(name string) (def, minimum int) {
		m := regexp.MustCompile(`(?m)^  ` + name + `:\n    Type: Number\n    Default: (\d+)\n    MinValue: (\d+)\n`).FindSubmatch(tpl)
		if m == nil {
			t.Fatalf("template.yaml: no Number parameter %s with Default and MinValue", name)
		}
		def, _ = strconv.Atoi(string(m[1]))
		minimum, _ = strconv.Atoi(string(m[2]))
		return def, minimum
	}
	lease := int((jobs.DefaultLease + jobs.SkewMargin) / time.Second)
	timeout, minTimeout := param("Timeout")
	visibility, minVisibility := param("JobsVisibilityTimeout")
	if visibility < timeout+lease || minVisibility != minTimeout+lease {
		t.Errorf("JobsVisibilityTimeout default %d, MinValue %d; want at least %d and exactly %d", visibility, minVisibility, timeout+lease, minTimeout+lease)
	}
	for _, want := range []string{
		"  JobsDeadLetterQueue:\n    Type: AWS::SQS::Queue\n    DeletionPolicy: Delete\n    UpdateReplacePolicy: Delete\n    Properties:\n      VisibilityTimeout: !Ref JobsVisibilityTimeout\n",
		"        DeadLetters:\n          Type: SQS\n          Properties:\n            Queue: !GetAtt JobsDeadLetterQueue.Arn\n            BatchSize: 1\n            FunctionResponseTypes: [ReportBatchItemFailures]\n",
		"          " + EnvDeadLetterARN + ": !GetAtt JobsDeadLetterQueue.Arn\n",
	} {
		if !strings.Contains(string(tpl), want) {
			t.Errorf("template.yaml lacks\n%s", want)
		}
	}
}
