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

// env is added to (and overrides) the function's environment.
func startSleepFunction(t *testing.T, env ...string) *sleepFunction {
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
	all := append(adaptertest.Environ(), dynamodbtest.Env(endpoint, table)...)
	// The invocation's deadline is on the real clock: a timeout longer than the longest sleep keeps
	// a clock moved on from reading as an invocation at its end (which would hand the task on).
	all = append(all, "AWS_ENDPOINT_URL_DYNAMODB="+metered.URL, "AWS_ENDPOINT_URL_SQS="+f.sent.url, EnvQueueURL+"="+f.queueURL,
		"JOBSAGENT_CLOCK_FILE="+f.clock, "AWS_LAMBDA_FUNCTION_TIMEOUT=10800")
	f.em = startEmulator(t, buildBootstrapOf(t, "./adapters/lambda/testdata/jobsagent"), append(all, env...)...)
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
	billed string        // its billed duration, as the emulator reports it (billedAfter)
	logged int           // the length of the emulator's log when it began
}

// startedRequest is the emulator's line for an invocation's start.
var startedRequest = regexp.MustCompile(`START RequestId: ([0-9a-f-]+)`)

// deliverSent delivers m, the n-th message the function sent, as SQS would once its delay passed
// on the function's clock, and returns what the invocation did.
func (f *sleepFunction) deliverSent(t *testing.T, n int, m sentMessage) delivery {
	t.Helper()
	f.advance(t, m.Delay)
	before := f.meter.Usage()
	msg := sqsMessage{MessageID: fmt.Sprintf("m-%d", n), ReceiptHandle: fmt.Sprintf("rh-%d", n), Body: m.Body, MD5OfBody: "x",
		Attributes: map[string]string{"ApproximateReceiveCount": "1"}}
	logged := f.em.logs.Len()
	if got := f.deliver(t, msg); got != `{"batchItemFailures":[]}` {
		t.Fatalf("delivery %d: %s", n, got)
	}
	return delivery{sent: f.sent.take(), store: f.meter.Usage().Sub(before), logged: logged}
}

// billedAfter is the billed duration of the invocation that began when the emulator's log was
// logged bytes long: the report of the first invocation started after that (the emulator may
// print an invocation's report after the next one started). Call it once the report is out:
// after another invocation began.
func (f *sleepFunction) billedAfter(logged int) string {
	log := f.em.logs.String()[logged:]
	start := startedRequest.FindStringSubmatch(log)
	if start == nil {
		return ""
	}
	if m := regexp.MustCompile(`REPORT RequestId: ` + regexp.QuoteMeta(start[1]) + `\t.*Billed Duration: ([0-9]+ ms)`).FindStringSubmatch(log); m != nil {
		return m[1]
	}
	return ""
}

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
		d := f.deliverSent(t, n, queued[0])
		queued = d.sent
		state := jobState(t, f.call(t, "job.sync", job)) // an invocation: the delivery's report is out
		d.billed = f.billedAfter(d.logged)
		run.deliveries = append(run.deliveries, d)
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

// TestFanoutUnderEmulator measures how a fan-out spreads on Lambda, on the real bootstrap under
// the emulator (docs/jobs.md, where the items run): the items run on goroutines of the invocation
// that reaches the fan-out, 20 at a time; when that invocation's time is nearly up (less than
// jobs.DefaultMargin left) it hands the task on to the next, which runs only the items not
// recorded yet. Either way each item runs once. It logs the figures of docs/performance.md
// (make bench-jobs runs it).
func TestFanoutUnderEmulator(t *testing.T) {
	for _, tc := range []struct {
		name     string
		timeout  int // the function's, in seconds
		items    int
		each     time.Duration // an item's run
		min, max int           // invocations
	}{
		// 200 items of 200 ms: an ideal 2 s, all in the invocation that reaches the fan-out.
		{"one invocation", 10800, 200, 200 * time.Millisecond, 1, 1},
		// 120 items of 1 s: an ideal 6 s, more than the 5 s a 15 s invocation has before the 10 s
		// margin: handed on at least once.
		{"handed on", 15, 120, time.Second, 2, 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			runs := filepath.Join(t.TempDir(), "items")
			f := startSleepFunction(t, fmt.Sprintf("AWS_LAMBDA_FUNCTION_TIMEOUT=%d", tc.timeout), "JOBSAGENT_ITEMS_FILE="+runs)
			job := fmt.Sprintf("fan-%d-%d", tc.items, tc.each.Milliseconds())
			started := time.Now()
			if got := jobState(t, f.call(t, "job.start", job)); got != "active" {
				t.Fatalf("job.start: %s", got)
			}
			var deliveries []delivery
			var store bill.Usage
			for queued := f.sent.take(); len(queued) > 0; {
				if len(queued) != 1 || len(deliveries) == tc.max {
					t.Fatalf("after %d invocations: %d messages sent, want 1 and at most %d invocations", len(deliveries), len(queued), tc.max)
				}
				d := f.deliverSent(t, len(deliveries), queued[0])
				deliveries, store = append(deliveries, d), store.Add(d.store)
				queued = d.sent
			}
			wall := time.Since(started)
			if got := jobState(t, f.call(t, "job.sync", job)); got != "completed "+job+"-items=completed" {
				t.Fatalf("job.sync at the end: %s", got)
			}
			var billed []string
			for _, d := range deliveries {
				billed = append(billed, f.billedAfter(d.logged))
			}
			b, err := os.ReadFile(runs)
			if err != nil {
				t.Fatal(err)
			}
			lines := strings.Fields(string(b))
			seen := map[string]bool{}
			for _, l := range lines {
				seen[l] = true
			}
			if len(lines) != tc.items || len(seen) != tc.items {
				t.Fatalf("%d item runs of %d distinct items, want each of the %d once", len(lines), len(seen), tc.items)
			}
			if len(deliveries) < tc.min {
				t.Fatalf("%d invocations, want at least %d", len(deliveries), tc.min)
			}
			ideal := time.Duration(tc.items/20) * tc.each
			t.Logf("%d items of %s, 20 at a time, a function timeout of %d s: %d invocations (billed %v), job.start to the job's end %s, %.2fx the ideal %s; store %s, %.0f WCU, %.0f RCU",
				tc.items, tc.each, tc.timeout, len(deliveries), billed, wall.Round(time.Millisecond), float64(wall)/float64(ideal), ideal, store.Ops(), store.WCU, store.RCU)
		})
	}
}
