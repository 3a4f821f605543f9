package lambda

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/supervaize/svz/adapters/adaptertest"
	"github.com/supervaize/svz/core/store/dynamodb/dynamodbtest"
	"github.com/supervaize/svz/internal/bill"
	"github.com/supervaize/svz/internal/testenv"
)

// sentMessage is a message the function sent to its queue: its body and its delay.
type sentMessage struct {
	Body  string
	Delay time.Duration
}

// sqsRecorder is the function's SQS endpoint: a proxy to moto_server that records each message
// sent, so that the test delivers it as the event source mapping would, once its delay passed
// (moto_server holds delayed messages back in real time, and delivers nothing to a function).
type sqsRecorder struct {
	url  string
	mu   sync.Mutex
	sent []sentMessage
}

func newSQSRecorder(t *testing.T, endpoint string) *sqsRecorder {
	t.Helper()
	u, err := url.Parse(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	r := &sqsRecorder{}
	rp := httputil.NewSingleHostReverseProxy(u)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, err := io.ReadAll(req.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if req.Header.Get("X-Amz-Target") == "AmazonSQS.SendMessage" {
			var in struct {
				MessageBody  string
				DelaySeconds int
			}
			if err := json.Unmarshal(body, &in); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			r.mu.Lock()
			r.sent = append(r.sent, sentMessage{in.MessageBody, time.Duration(in.DelaySeconds) * time.Second})
			r.mu.Unlock()
		}
		req.Body = io.NopCloser(bytes.NewReader(body))
		rp.ServeHTTP(w, req)
	}))
	t.Cleanup(srv.Close)
	r.url = srv.URL
	return r
}

// take removes and returns the messages sent so far.
func (r *sqsRecorder) take() []sentMessage {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.sent
	r.sent = nil
	return out
}

// sleepFunction is the jobs test agent (testdata/jobsagent, its jobs "sleep-<seconds>") under the
// emulator: its store a DynamoDB table on moto_server behind the bill meter, its queue an SQS queue
// on moto_server behind the recorder, its clock moved on by the test.
type sleepFunction struct {
	*jobsFunction
	sent  *sqsRecorder
	meter *bill.DynamoDB
	clock string
	now   time.Duration // how far the test moved the function's clock on
}

func startSleepFunction(t *testing.T) *sleepFunction {
	t.Helper()
	endpoint := testenv.Need(t, testenv.AWSEndpoint)
	testenv.Need(t, testenv.RIE)
	motoWrites := testenv.MotoProxy(t, endpoint)
	_, table := dynamodbtest.Table(t, motoWrites, "svz-lambda-sleep-")
	meter, err := bill.NewDynamoDB(motoWrites, "ix")
	if err != nil {
		t.Fatal(err)
	}
	metered := httptest.NewServer(meter)
	t.Cleanup(metered.Close)
	f := &sleepFunction{jobsFunction: &jobsFunction{sqs: newMotoSQS(t, endpoint)}, sent: newSQSRecorder(t, endpoint), meter: meter,
		clock: filepath.Join(t.TempDir(), "clock")}
	f.queueURL, f.queueARN = f.sqs.create()
	env := append(adaptertest.Environ(), dynamodbtest.Env(endpoint, table)...)
	// The invocation's deadline is on the real clock: a timeout longer than the longest sleep keeps
	// a clock moved on from reading as an invocation at its end (which would hand the task on).
	env = append(env, "AWS_ENDPOINT_URL_DYNAMODB="+metered.URL, "AWS_ENDPOINT_URL_SQS="+f.sent.url, EnvQueueURL+"="+f.queueURL,
		"JOBSAGENT_CLOCK_FILE="+f.clock, "AWS_LAMBDA_FUNCTION_TIMEOUT=10800")
	f.em = startEmulator(t, buildBootstrapOf(t, "./adapters/lambda/testdata/jobsagent"), env...)
	return f
}

// advance moves the function's clock on by d.
func (f *sleepFunction) advance(t *testing.T, d time.Duration) {
	t.Helper()
	f.now += d
	if err := os.WriteFile(f.clock, []byte(f.now.String()), 0o600); err != nil {
		t.Fatal(err)
	}
}

// delivery is what one SQS invocation of the function did.
type delivery struct {
	store  bill.Usage    // its store requests and units
	sent   []sentMessage // the messages it sent
	billed string        // its billed duration, as the emulator reports it
}

// billedDuration is the emulator's report of an invocation's billed time.
var billedDuration = regexp.MustCompile(`Billed Duration: ([0-9]+ ms)`)

// sleepRun is a job that sleeps, followed from its start to its end.
type sleepRun struct {
	deliveries []delivery
	// sleeping is the index of the delivery that reached the sleep, woke that of the one that ran
	// the step after it: the deliveries between them ran while the job slept.
	sleeping, woke int
}

// hops are the deliveries while the job slept.
func (r sleepRun) hops() []delivery { return r.deliveries[r.sleeping+1 : r.woke] }

// runSleep starts a job that sleeps d and delivers each message it sends, the clock moved on by
// the message's delay first, as SQS would, until the job completes.
func (f *sleepFunction) runSleep(t *testing.T, d time.Duration) sleepRun {
	t.Helper()
	job := fmt.Sprintf("sleep-%d", int(d.Seconds()))
	if got := jobState(t, f.call(t, "job.start", job)); got != "active" {
		t.Fatalf("job.start: %s", got)
	}
	run := sleepRun{sleeping: -1, woke: -1}
	queued := f.sent.take()
	for n := 0; len(queued) > 0; n++ {
		if n > 20 {
			t.Fatalf("more than 20 deliveries for a sleep of %s", d)
		}
		if len(queued) != 1 {
			t.Fatalf("delivery %d: %d messages sent, want 1: %+v", n, len(queued), queued)
		}
		m := queued[0]
		f.advance(t, m.Delay)
		before := f.meter.Usage()
		msg := sqsMessage{MessageID: fmt.Sprintf("m-%d", n), ReceiptHandle: fmt.Sprintf("rh-%d", n), Body: m.Body, MD5OfBody: "x",
			Attributes: map[string]string{"ApproximateReceiveCount": "1"}}
		logged := f.em.logs.Len()
		if got := f.deliver(t, msg); got != `{"batchItemFailures":[]}` {
			t.Fatalf("delivery %d: %s", n, got)
		}
		queued = f.sent.take()
		used := f.meter.Usage().Sub(before)
		state := jobState(t, f.call(t, "job.sync", job))
		// The emulator reports an invocation's end before it starts the next: the first report
		// after the delivery began is the delivery's.
		billed := ""
		if m := billedDuration.FindStringSubmatch(f.em.logs.String()[logged:]); m != nil {
			billed = m[1]
		}
		run.deliveries = append(run.deliveries, delivery{store: used, sent: queued, billed: billed})
		switch {
		case run.sleeping < 0 && state == "active "+job+"-before=completed "+job+"-wait=pending":
			run.sleeping = n
		case strings.HasPrefix(state, "completed "):
			if state != "completed "+job+"-before=completed "+job+"-wait=completed "+job+"-after=completed" {
				t.Fatalf("job.sync at the end: %s", state)
			}
			run.woke = n
		}
	}
	if run.sleeping < 0 || run.woke < 0 {
		t.Fatalf("the job did not sleep then complete: %+v", run)
	}
	return run
}

// TestSleepUnderEmulator counts what a durable sleep (jobs.Sleep) costs on Lambda, on the real
// bootstrap under the emulator, the test playing SQS (each message delivered once its delay
// passed on the function's clock): a sleep of 10 minutes, within SQS's 15-minute delay, costs no
// invocation while the job sleeps; one of 2 hours costs 7, each handing the message on for the
// next 15 minutes without a store request. It logs the figures of docs/performance.md#timers
// (make bench-jobs runs it).
func TestSleepUnderEmulator(t *testing.T) {
	f := startSleepFunction(t)
	for _, tc := range []struct {
		sleep time.Duration
		hops  int
	}{{10 * time.Minute, 0}, {2 * time.Hour, 7}} {
		run := f.runSleep(t, tc.sleep)
		hops := run.hops()
		var hopStore bill.Usage
		var billed []string
		for i, h := range hops {
			billed = append(billed, h.billed)
			hopStore = hopStore.Add(h.store)
			// Each hop hands the message on for 15 minutes; the last for what is left, a little less
			// (the real time the deliveries took moved the clock on too).
			if len(h.sent) != 1 || h.sent[0].Delay > MaxDelay || h.sent[0].Delay != MaxDelay && (i < len(hops)-1 || h.sent[0].Delay < MaxDelay-time.Minute) {
				t.Errorf("sleep %s, hop %d: sent %+v, want one message delayed %s", tc.sleep, i, h.sent, MaxDelay)
			}
		}
		if len(hops) != tc.hops || hopStore.Total() != 0 {
			t.Errorf("sleep %s: %d invocations while the job slept (%s of the store), want %d without a store request",
				tc.sleep, len(hops), hopStore.Ops(), tc.hops)
		}
		asleep, awake := run.deliveries[run.sleeping], run.deliveries[run.woke]
		t.Logf("sleep %s: %d invocations while the job slept (billed %v), %d store requests among them (%s); "+
			"the invocation that reached the sleep: %s, %.0f WCU, %.0f RCU (billed %s); the one that woke: %s, %.0f WCU, %.0f RCU (billed %s)",
			tc.sleep, len(hops), billed, hopStore.Total(), hopStore.Ops(), asleep.store.Ops(), asleep.store.WCU, asleep.store.RCU, asleep.billed,
			awake.store.Ops(), awake.store.WCU, awake.store.RCU, awake.billed)
	}
}
