package jobs_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/supervaize/svz/core/contract"
	"github.com/supervaize/svz/core/jobs"
	"github.com/supervaize/svz/core/store"
	"github.com/supervaize/svz/core/store/storeenv"
	"github.com/supervaize/svz/core/store/storeenv/storeenvtest"
)

// Crash injection: a delivery is killed (SIGKILL, by itself) at every step boundary and inside
// every step, then the queue delivers the task again on a "restarted" instance, once the dead
// one's lease has lapsed. Each step appends its name to a file when it runs: every completed
// step must have run exactly once, the interrupted one at most once more, and the job must end
// completed.

const crashChildEnv = "SVZ_JOBS_CRASH_CHILD"

func TestMain(m *testing.M) {
	if spec := os.Getenv(crashChildEnv); spec != "" {
		os.Exit(crashChild(spec))
	}
	os.Exit(m.Run())
}

type crashSpec struct {
	Env    []string      `json:"env"`
	Job    string        `json:"job"`
	Start  bool          `json:"start"`
	At     string        `json:"at"` // "before:N", "inside:N" or "" (never)
	Offset time.Duration `json:"offset"`
	Runs   string        `json:"runs"`
	// Pool: the child runs the task on an in-process pool (as local mode does) instead of
	// delivering it itself.
	Pool bool `json:"pool"`
}

const crashSteps = 4

// nopQueue drops what it is given: the parent delivers the task's message itself.
type nopQueue struct{}

func (nopQueue) Dispatch(context.Context, jobs.Message, time.Duration) error { return nil }

func crashChild(raw string) int {
	var spec crashSpec
	if err := json.Unmarshal([]byte(raw), &spec); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	s, err := storeenv.Open(context.Background(), storeenvtest.Getenv(spec.Env))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer s.Close()
	die := func(at string) {
		if spec.At == at {
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {}
		}
	}
	o := newOwner()
	w := defineCrashy(o, spec.Runs, die)
	var d jobs.Dispatcher = nopQueue{}
	if spec.Pool {
		d = jobs.NewPool(jobs.ScanEvery(0))
	}
	svc := jobs.NewService(jobs.Config{Store: s, Dispatcher: d, Logger: quiet,
		Now:   func() time.Time { return time.Now().Add(spec.Offset) },
		Works: func(string) (*jobs.Registry, time.Duration, bool) { return o.reg, 0, true }})
	ctx := jobs.NewContext(context.Background(), svc, o.reg, agentSlug, &contract.VerifiedWorkspaceContext{WorkspaceID: wsID})
	if spec.Start {
		if _, err := w.Start(ctx, startReq(spec.Job), struct{}{}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
	}
	if spec.Pool {
		time.Sleep(60 * time.Second) // the pool's delivery kills the process before
		fmt.Fprintln(os.Stderr, "the pool did not reach the crash point")
		return 4
	}
	m := jobs.Message{Agent: agentSlug, Workspace: wsID, Job: spec.Job, Work: "crashy"}
	if err := svc.Deliver(context.Background(), m, jobs.Delivery{}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	return 0
}

// defineCrashy defines the work of the crash runs: crashSteps steps that append their number to
// runs, calling die before and inside each.
func defineCrashy(o owner, runs string, die func(at string)) *jobs.Work[struct{}] {
	return jobs.Define(o, "crashy", func(ctx context.Context, _ struct{}) error {
		for i := range crashSteps {
			if _, err := jobs.Step(ctx, fmt.Sprint(i), func(context.Context) (int, error) {
				die(fmt.Sprintf("before:%d", i))
				f, err := os.OpenFile(runs, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
				if err != nil {
					return 0, err
				}
				_, err = fmt.Fprintf(f, "%d\n", i)
				if err == nil {
					err = f.Sync()
				}
				_ = f.Close()
				die(fmt.Sprintf("inside:%d", i))
				return i, err
			}); err != nil {
				return err
			}
		}
		return nil
	})
}

func runChild(t *testing.T, spec crashSpec) (killed bool) {
	t.Helper()
	raw, _ := json.Marshal(spec)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), crashChildEnv+"="+string(raw))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	if ee, ok := errors.AsType[*exec.ExitError](err); ok {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
			return true
		}
	}
	if err != nil {
		t.Fatalf("child %s: %v\n%s", spec.At, err, stderr.String())
	}
	return false
}

// crashAcrossProcesses kills a delivery at every point, then delivers again.
func crashAcrossProcesses(t *testing.T, env []string) {
	points := []string{}
	for i := range crashSteps {
		points = append(points, fmt.Sprintf("before:%d", i), fmt.Sprintf("inside:%d", i))
	}
	for _, at := range points {
		t.Run(strings.ReplaceAll(at, ":", "_"), func(t *testing.T) {
			job := jobID(t)
			runs := filepath.Join(t.TempDir(), "runs")
			if !runChild(t, crashSpec{Env: env, Job: job, Start: true, At: at, Runs: runs}) {
				t.Fatalf("the child was not killed at %s", at)
			}
			// The restarted instance delivers again once the lease lapsed (its clock is ahead).
			if runChild(t, crashSpec{Env: env, Job: job, Offset: time.Hour, Runs: runs}) {
				t.Fatal("the recovery child was killed")
			}
			b, err := os.ReadFile(runs)
			if err != nil && !os.IsNotExist(err) {
				t.Fatal(err)
			}
			count := map[string]int{}
			for _, l := range strings.Fields(string(b)) {
				count[l]++
			}
			var n int
			var kind string
			fmt.Sscanf(strings.Replace(at, ":", " ", 1), "%s %d", &kind, &n)
			for i := range crashSteps {
				want := 1
				if kind == "inside" && i == n {
					want = 2 // interrupted after its work, before its record: once more
				}
				if count[fmt.Sprint(i)] != want {
					t.Fatalf("crash %s: step %d ran %d times, want %d (runs %q)", at, i, count[fmt.Sprint(i)], want, b)
				}
			}
			s, err := storeenv.Open(context.Background(), storeenvtest.Getenv(env))
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			assertCompleted(t, s, job)
		})
	}
}

// poolTakesOverAtStart: a process killed inside a step left its lease in a bolt file; the next
// process's pool takes the task over at its first scan, without waiting the lease out (no other
// process can have the file open).
func poolTakesOverAtStart(t *testing.T, env []string) {
	job := jobID(t)
	runs := filepath.Join(t.TempDir(), "runs")
	if !runChild(t, crashSpec{Env: env, Job: job, Start: true, At: "inside:1", Runs: runs, Pool: true}) {
		t.Fatal("the child was not killed")
	}
	s, err := storeenv.Open(context.Background(), storeenvtest.Getenv(env))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	o := newOwner()
	defineCrashy(o, runs, func(string) {})
	// One scan only, at start: the task must be taken over then, its lease still live.
	svc := jobs.NewService(jobs.Config{Store: s, Dispatcher: jobs.NewPool(jobs.ScanEvery(0)), Logger: quiet,
		Works: func(string) (*jobs.Registry, time.Duration, bool) { return o.reg, 0, true }})
	defer svc.Close()
	ctx := jobs.NewContext(context.Background(), svc, o.reg, agentSlug, &contract.VerifiedWorkspaceContext{WorkspaceID: wsID})
	deadline := time.Now().Add(30 * time.Second)
	for {
		snap, err := jobs.State(ctx, job)
		if err != nil {
			t.Fatal(err)
		}
		if snap.Job.Status == contract.StateCompleted {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the task was not taken over at start: %s", mustJSON(t, snap))
		}
		time.Sleep(10 * time.Millisecond)
	}
	if b, _ := os.ReadFile(runs); string(b) != "0\n1\n1\n2\n3\n" {
		t.Fatalf("runs %q", b)
	}
}

func assertCompleted(t *testing.T, s store.Store, job string) {
	t.Helper()
	o := newOwner()
	jobs.Define(o, "crashy", func(context.Context, struct{}) error { return nil })
	in := newInstance(t, s, o, newClock(), &queue{})
	snap := stateOf(t, in, job)
	if snap.Job.Status != contract.StateCompleted || len(snap.Cases) != 1 || len(snap.Cases[0].Steps) != crashSteps {
		t.Fatalf("state %s", mustJSON(t, snap))
	}
}
