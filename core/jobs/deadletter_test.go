package jobs_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/supervaize/svz/core/contract"
	"github.com/supervaize/svz/core/jobs"
	"github.com/supervaize/svz/core/store/memory"
)

// dying is work whose step "slow" blocks until the test releases it, as a delivery the platform
// killed (its function timeout) never returns: its record keeps the dead delivery's lease. With
// steps > 0, steps "one"… complete first, in the delivery before.
func dying(o owner, entered chan<- struct{}, release <-chan struct{}, done ...string) *jobs.Work[struct{}] {
	return jobs.Define(o, "dying", func(ctx context.Context, _ struct{}) error {
		for _, name := range done {
			if _, err := jobs.Step(ctx, name, func(context.Context) (string, error) { return name, nil }); err != nil {
				return err
			}
		}
		_, err := jobs.Step(ctx, "slow", func(context.Context) (int, error) {
			entered <- struct{}{}
			<-release
			return 1, nil
		})
		return err
	})
}

// jobError is the job's failure message in job_state, "" when none.
func jobError(t *testing.T, st *contract.JobState) string {
	t.Helper()
	var e struct{ Message string }
	if raw, ok := st.Job.Extra["error"]; ok {
		if err := json.Unmarshal(raw, &e); err != nil {
			t.Fatal(err)
		}
	}
	return e.Message
}

// A dead-lettered message whose task a delivery died holding fails the job with what the record
// says: busy while the dead delivery's lease (plus the skew margin) lasts, to the nanosecond;
// failed after, naming the step the record shows running, else the one after the last completed.
func TestDeadLettered(t *testing.T) {
	limit := jobs.DeadLetter{Receives: 2, Limit: "the function's timeout (5 s)"}
	for _, tc := range []struct {
		name    string
		done    []string
		renew   bool // a lease renewal wrote the running step
		d       jobs.DeadLetter
		wantErr string
	}{
		{"first step", nil, false, limit, `the work's first step did not finish within the function's timeout (5 s); its message was delivered 2 times, then dead-lettered`},
		{"after a completed step", []string{"one", "two"}, false, limit, `the step after "two" did not finish within the function's timeout (5 s); its message was delivered 2 times, then dead-lettered`},
		{"running step recorded", []string{"one"}, true, limit, `step "slow" did not finish within the function's timeout (5 s); its message was delivered 2 times, then dead-lettered`},
		{"nothing known of the queue", nil, false, jobs.DeadLetter{}, `the work's first step did not finish; its message was dead-lettered`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := memory.New()
			t.Cleanup(func() { _ = s.Close() })
			o := newOwner()
			entered, release := make(chan struct{}, 1), make(chan struct{})
			w := dying(o, entered, release, tc.done...)
			c := newClock()
			in := newInstance(t, s, o, c, &queue{})
			job := start(t, in, w, struct{}{})
			// The steps before complete one per delivery: each has less time left than the margin
			// once it ran one, so it hands the task on.
			for range tc.done {
				m := in.q.take()
				if err := in.svc.Deliver(context.Background(), m[0].M, jobs.Delivery{Deadline: c.Now().Add(time.Second)}); err != nil {
					t.Fatal(err)
				}
			}
			m, done := deliverInBackground(t, in)
			<-entered
			if tc.renew {
				in.after.fire(t)
				in.after.fire(t)
			}
			if err := in.svc.DeadLettered(context.Background(), m, tc.d); !errors.Is(err, jobs.ErrBusy) {
				t.Fatalf("while the lease lasts: %v, want ErrBusy", err)
			}
			c.Add(jobs.DefaultLease + jobs.SkewMargin - time.Nanosecond)
			if err := in.svc.DeadLettered(context.Background(), m, tc.d); !errors.Is(err, jobs.ErrBusy) {
				t.Fatalf("a nanosecond before the lease and its margin end: %v, want ErrBusy", err)
			}
			if st := stateOf(t, in, job); st.Job.Status != contract.StateActive {
				t.Fatalf("busy: the job is %s", st.Job.Status)
			}
			c.Add(time.Nanosecond)
			other := m
			other.Work = "three"
			if err := in.svc.DeadLettered(context.Background(), other, tc.d); err != nil || stateOf(t, in, job).Job.Status != contract.StateActive {
				t.Fatalf("a dead letter naming another work: %v, job %s", err, stateOf(t, in, job).Job.Status)
			}
			if err := in.svc.DeadLettered(context.Background(), m, tc.d); err != nil {
				t.Fatal(err)
			}
			st := stateOf(t, in, job)
			if got := jobError(t, st); st.Job.Status != contract.StateFailed || got != tc.wantErr {
				t.Fatalf("job %s: %q\nwant failed: %q", st.Job.Status, got, tc.wantErr)
			}
			// Delivered again (the dead-letter queue may), a failed job stays as it is.
			if err := in.svc.DeadLettered(context.Background(), m, jobs.DeadLetter{Limit: "other"}); err != nil || jobError(t, stateOf(t, in, job)) != tc.wantErr {
				t.Fatalf("again: %v %s", err, mustJSON(t, stateOf(t, in, job)))
			}
			// The dead delivery, were it to wake up, has lost the task.
			close(release)
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if st := stateOf(t, in, job); st.Job.Status != contract.StateFailed || jobError(t, st) != tc.wantErr {
				t.Fatalf("after the dead delivery woke: %s", mustJSON(t, st))
			}
		})
	}
}

// A dead-lettered message is acknowledged without failing anything when its job is gone, has
// finished, waits for an operator, runs other work, or was handed on since (nobody holds it).
func TestDeadLetteredLeavesJobs(t *testing.T) {
	s := memory.New()
	t.Cleanup(func() { _ = s.Close() })
	o, cnt := newOwner(), &counter{}
	three := threeSteps(o, cnt)
	wait := jobs.Define(o, "wait", func(ctx context.Context, _ struct{}) error {
		_, err := jobs.Await[map[string]any](ctx, "ok", contract.Awaiting{})
		return err
	})
	in := newInstance(t, s, o, newClock(), &queue{})
	d := jobs.DeadLetter{Receives: 5, Limit: "x"}
	check := func(name string, m jobs.Message, want string) {
		t.Helper()
		if err := in.svc.DeadLettered(context.Background(), m, d); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got := stateOf(t, in, m.Job).Job.Status; got != want {
			t.Fatalf("%s: job %s, want %s", name, got, want)
		}
	}

	// Written and never delivered: nobody holds it, its message still runs it.
	pending := start(t, in, three, map[string]int{"n": 1})
	m := in.q.take()[0].M
	check("pending", m, contract.StateActive)
	// Another work's message.
	other := m
	other.Work = "wait"
	check("other work", other, contract.StateActive)
	// Finished.
	in.q.msgs = []sent{{M: m}}
	in.deliverAll(t, 5, nil)
	check("completed", m, contract.StateCompleted)
	// Waiting for its operator.
	waiting := start(t, in, wait, struct{}{})
	wm := in.q.msgs[0].M
	in.deliverAll(t, 5, nil)
	check("awaiting", wm, contract.StateAwaiting)
	// Gone.
	gone := m
	gone.Job = "no-such-job"
	if err := in.svc.DeadLettered(context.Background(), gone, d); err != nil {
		t.Fatal(err)
	}
	_, _ = pending, waiting
	if strings.Contains(mustJSON(t, stateOf(t, in, pending)), "dead-lettered") {
		t.Fatal("a finished job took the dead letter's reason")
	}
}

// sized is a task message body of exactly n bytes (n >= 60).
func sized(n int) []byte {
	b := jobs.Message{Agent: "a", Workspace: "w", Job: "", Work: "x"}.Encode()
	job := strings.Repeat("j", n-len(b))
	return jobs.Message{Agent: "a", Workspace: "w", Job: job, Work: "x"}.Encode()
}

// ReadMessage refuses a body past MaxMessageSize unread, to the byte; Unreadable says its length
// and why, never a byte of it.
func TestReadMessage(t *testing.T) {
	if b := sized(jobs.MaxMessageSize); len(b) != jobs.MaxMessageSize {
		t.Fatalf("sized: %d", len(b))
	} else if m, err := jobs.ReadMessage(b); err != nil || len(m.Job) != jobs.MaxMessageSize-len(`{"agent":"a","workspace":"w","job":"","work":"x","attempt":0}`) {
		t.Fatalf("a message of MaxMessageSize bytes: %v", err)
	}
	long := sized(jobs.MaxMessageSize + 1)
	_, err := jobs.ReadMessage(long)
	if !errors.Is(err, jobs.ErrMessageTooLarge) || err.Error() != "jobs: a task message is at most 4096 bytes, got 4097" {
		t.Fatalf("one byte more: %v", err)
	}
	if got := mustJSON(t, jobs.Unreadable(long, err)); got != `["bytes",4097,"error","jobs: a task message is at most 4096 bytes, got 4097"]` {
		t.Errorf("Unreadable: %s", got)
	}
	bad := []byte(`{"agent":"a","workspace":"w","job":"j","work":"x","attempt":0,"secret-name":1}`)
	_, err = jobs.ReadMessage(bad)
	if err == nil || !strings.Contains(err.Error(), "secret-name") {
		t.Fatalf("an unknown member: %v", err)
	}
	if got := mustJSON(t, jobs.Unreadable(bad, err)); got != `["bytes",78,"error","jobs: a task message has agent, workspace, job, work (non-empty strings) and attempt (a whole number \u003e= 0), and no other member"]` {
		t.Errorf("Unreadable quotes the body: %s", got)
	}
}
