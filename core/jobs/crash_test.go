package jobs_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
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
	// Kind is the work: "" (crashSteps steps), "fanout" (a Map of fanItems items) or "failing"
	// (a step that fails for good, then the failure handler).
	Kind string `json:"kind,omitempty"`
	// Identity: the pool's instance name (jobs.Identity).
	Identity string `json:"identity,omitempty"`
}

const (
	fanItems = 12
	fanConc  = 4
)

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
	work := "crashy"
	var w *jobs.Work[struct{}]
	switch spec.Kind {
	case "fanout":
		w, work = defineFanout(o, spec.Runs, die), "fanout"
	case "failing":
		w, work = defineFailing(o, spec.Runs, die), "failing"
	case "sleep":
		w, work = defineSleepy(o, spec.Runs), "sleepy"
	case "deploy:old", "deploy:typed", "deploy:patched":
		w, work = defineDeployed(o, strings.TrimPrefix(spec.Kind, "deploy:"), spec.Runs), "deployed"
	default:
		w = defineCrashy(o, spec.Runs, die)
	}
	var d jobs.Dispatcher = nopQueue{}
	if spec.At == "dispatch" {
		d = dieQueue{die}
	}
	if spec.Pool {
		d = jobs.NewPool(jobs.ScanEvery(0), jobs.Identity(spec.Identity))
	}
	build := oldBuild // the build a deploy replaced
	if strings.HasPrefix(spec.Kind, "deploy:") && spec.Kind != "deploy:old" {
		build = newBuild
	}
	svc := jobs.NewService(jobs.Config{Store: s, Dispatcher: d, Logger: quiet,
		Now:   func() time.Time { return time.Now().Add(spec.Offset) },
		Works: func(string) (*jobs.Registry, time.Duration, bool) { return o.reg, 0, true },
		Info:  func(string) jobs.AgentInfo { return jobs.AgentInfo{Build: build} }})
	ctx := jobs.NewContext(context.Background(), svc, o.reg, agentSlug, &contract.VerifiedWorkspaceContext{WorkspaceID: wsID})
	if spec.Start {
		if _, err := w.Start(ctx, startReq(spec.Job), struct{}{}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
	}
	if spec.Pool && spec.Kind == "sleep" {
		// Killed once the task sleeps: its wake is in the store only.
		for range 3000 {
			if snap, err := jobs.State(ctx, spec.Job); err == nil && snap.Job.Extra["waiting"] != nil {
				_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
				select {}
			}
			time.Sleep(10 * time.Millisecond)
		}
		fmt.Fprintln(os.Stderr, "the job did not sleep")
		return 4
	}
	if spec.Pool {
		time.Sleep(60 * time.Second) // the pool's delivery kills the process before
		fmt.Fprintln(os.Stderr, "the pool did not reach the crash point")
		return 4
	}
	m := jobs.Message{Agent: agentSlug, Workspace: wsID, Job: spec.Job, Work: work}
	for range 3 { // the delivery, and the failure handler's after it
		if err := svc.Deliver(context.Background(), m, jobs.Delivery{}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 3
		}
	}
	return 0
}

// dieQueue kills the process when a delivery hands the task on (right after the write that
// precedes it).
type dieQueue struct{ die func(at string) }

func (q dieQueue) Dispatch(_ context.Context, m jobs.Message, _ time.Duration) error {
	if m.Attempt > 0 { // not the start's
		q.die("dispatch")
	}
	return nil
}

// appendRun appends line to the runs file, durably.
func appendRun(runs, line string) error {
	f, err := os.OpenFile(runs, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(f, line)
	if err == nil {
		err = f.Sync()
	}
	return errors.Join(err, f.Close())
}

// defineFanout: a Map of fanItems items, fanConc at once; each appends its index when it runs,
// and the process dies inside item n for at "item:n".
func defineFanout(o owner, runs string, die func(at string)) *jobs.Work[struct{}] {
	return jobs.Define(o, "fanout", func(ctx context.Context, _ struct{}) error {
		items := make([]int, fanItems)
		for i := range items {
			items[i] = i
		}
		_, err := jobs.Map(ctx, "items", items, func(_ context.Context, i int) (int, error) {
			if err := appendRun(runs, fmt.Sprint(i)); err != nil {
				return 0, err
			}
			die(fmt.Sprintf("item:%d", i))
			return i * i, nil
		}, jobs.Concurrency(fanConc))
		return err
	})
}

// defineFailing: a step that fails for good, and a failure handler that appends "handler" when it
// runs and can die inside ("handler").
func defineFailing(o owner, runs string, die func(at string)) *jobs.Work[struct{}] {
	return jobs.Define(o, "failing", func(ctx context.Context, _ struct{}) error {
		_, err := jobs.Step(ctx, "doomed", func(context.Context) (int, error) {
			die("step")
			return 0, jobs.Permanent(errors.New("no such account"))
		})
		return err
	}, jobs.OnFailure(func(ctx context.Context, _ struct{}, f jobs.Failure) error {
		if err := appendRun(runs, "handler"); err != nil {
			return err
		}
		die("handler")
		return nil
	}))
}

// sleepFor is the sleep of the timer crash runs: long enough for the parent to find the task
// asleep after the kill, short for the test.
const sleepFor = 2 * time.Second

// defineSleepy: a step, a Sleep of sleepFor, a step that appends "after".
func defineSleepy(o owner, runs string) *jobs.Work[struct{}] {
	return jobs.Define(o, "sleepy", func(ctx context.Context, _ struct{}) error {
		if _, err := jobs.Step(ctx, "before", func(context.Context) (int, error) { return 1, appendRun(runs, "before") }); err != nil {
			return err
		}
		if err := jobs.Sleep(ctx, "nap", sleepFor); err != nil {
			return err
		}
		_, err := jobs.Step(ctx, "after", func(context.Context) (int, error) { return 2, appendRun(runs, "after") })
		return err
	})
}

// defineDeployed is the work "deployed" as each build defines it: "old" counts (an int), pauses a
// minute, then ends; "typed" counts into a map (a changed step type); "patched" counts in a new
// step for jobs that reach jobs.Patched on it, keeping the old step for those that went past.
func defineDeployed(o owner, version, runs string) *jobs.Work[struct{}] {
	return jobs.Define(o, "deployed", func(ctx context.Context, _ struct{}) error {
		patched := false
		if version == "patched" {
			p, err := jobs.Patched(ctx, "count-v2")
			if err != nil {
				return err
			}
			patched = p
		}
		var err error
		switch {
		case version == "typed":
			_, err = jobs.Step(ctx, "count", func(context.Context) (map[string]int, error) {
				return map[string]int{"n": 7}, appendRun(runs, "count-map")
			})
		case patched:
			_, err = jobs.Step(ctx, "count-v2", func(context.Context) (int, error) { return 8, appendRun(runs, "count-v2") })
		default:
			_, err = jobs.Step(ctx, "count", func(context.Context) (int, error) { return 7, appendRun(runs, "count") })
		}
		if err != nil {
			return err
		}
		if err := jobs.Sleep(ctx, "pause", time.Minute); err != nil {
			return err
		}
		_, err = jobs.Step(ctx, "done", func(context.Context) (int, error) { return 1, appendRun(runs, "done") })
		return err
	})
}

// deployAcrossProcesses starts jobs on one binary's build and finishes them on a changed one's,
// each a process of its own: a step whose type changed fails its job naming the step and both
// builds, the changed step never running; a job past jobs.Patched's point keeps the old path;
// a job started on the new build takes the new one.
func deployAcrossProcesses(t *testing.T, env []string) {
	dir := t.TempDir()
	typed, kept, fresh := jobID(t)+".typed", jobID(t)+".kept", jobID(t)+".fresh"
	runs := func(job string) string { return filepath.Join(dir, job) }
	later := 2 * time.Minute // past the pause: the new build's deliveries find the jobs due
	for _, c := range []crashSpec{
		{Job: typed, Start: true, Kind: "deploy:old"},
		{Job: kept, Start: true, Kind: "deploy:old"},
		{Job: typed, Kind: "deploy:typed", Offset: later},
		{Job: kept, Kind: "deploy:patched", Offset: later},
		{Job: fresh, Start: true, Kind: "deploy:patched", Offset: later},
		{Job: fresh, Kind: "deploy:patched", Offset: 2 * later},
	} {
		c.Env, c.Runs = env, runs(c.Job)
		if runChild(t, c) {
			t.Fatalf("%s was killed", c.Kind)
		}
	}
	s := storeenvtest.Open(t, env)
	defer s.Close()
	o := newOwner()
	defineDeployed(o, "patched", "")
	svc := jobs.NewService(jobs.Config{Store: s, Dispatcher: nopQueue{}, Logger: quiet,
		Works: func(string) (*jobs.Registry, time.Duration, bool) { return o.reg, 0, true }})
	defer svc.Close()
	ctx := jobs.NewContext(context.Background(), svc, o.reg, agentSlug, &contract.VerifiedWorkspaceContext{WorkspaceID: wsID})
	for _, want := range []struct {
		job, status, runs, message string
	}{
		{typed, contract.StateFailed, "count\n", `jobs: the recorded result of step \"count\", recorded by agent 1.0.0, svz v0.9.0 (aaaaaaaaaaaa), ` +
			`does not decode into the step's type in agent 1.1.0, svz v0.9.1 (bbbbbbbbbbbb)`},
		{kept, contract.StateCompleted, "count\ndone\n", ""},
		{fresh, contract.StateCompleted, "count-v2\ndone\n", ""},
	} {
		snap, err := jobs.State(ctx, want.job)
		if err != nil {
			t.Fatal(err)
		}
		got := mustJSON(t, snap)
		b, _ := os.ReadFile(runs(want.job))
		if snap.Job.Status != want.status || string(b) != want.runs || !strings.Contains(got, want.message) {
			t.Errorf("%s: runs %q, want %q; state %s\nwant %s with %s", want.job, b, want.runs, got, want.status, want.message)
		}
	}
}

// sleepAcrossRestart: a process killed while its job sleeps; the next process's pool, its scans
// reading the wake time from the store, runs the job on when it is due, not before.
func sleepAcrossRestart(t *testing.T, env []string) {
	job := jobID(t)
	runs := filepath.Join(t.TempDir(), "runs")
	started := time.Now()
	if !runChild(t, crashSpec{Env: env, Job: job, Start: true, Runs: runs, Pool: true, Kind: "sleep"}) {
		t.Fatal("the child was not killed")
	}
	s := storeenvtest.Open(t, env)
	defer s.Close()
	o := newOwner()
	defineSleepy(o, runs)
	svc := jobs.NewService(jobs.Config{Store: s, Dispatcher: jobs.NewPool(jobs.ScanEvery(50 * time.Millisecond)), Logger: quiet,
		Works: func(string) (*jobs.Registry, time.Duration, bool) { return o.reg, 0, true }})
	defer svc.Close()
	ctx := jobs.NewContext(context.Background(), svc, o.reg, agentSlug, &contract.VerifiedWorkspaceContext{WorkspaceID: wsID})
	waitCompleted(ctx, t, job, "the job did not wake")
	if woke := time.Since(started); woke < sleepFor {
		t.Fatalf("the job woke %s after its start, before its sleep of %s ended", woke, sleepFor)
	}
	if b, _ := os.ReadFile(runs); string(b) != "before\nafter\n" {
		t.Fatalf("runs %q", b)
	}
}

// itemRecorded reports whether item i of the crash fan-out has its result in the store.
func itemRecorded(t *testing.T, s store.Store, job string, i int) bool {
	t.Helper()
	_, err := s.Get(context.Background(), jobs.TaskKeyPrefix+agentSlug+"/"+wsID+"/"+url.PathEscape(job)+fmt.Sprintf("/i/items/%d", i))
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		t.Fatal(err)
	}
	return err == nil
}

func countRuns(t *testing.T, runs string) map[string]int {
	t.Helper()
	b, err := os.ReadFile(runs)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	count := map[string]int{}
	for _, l := range strings.Fields(string(b)) {
		count[l]++
	}
	return count
}

// crashInsideFanout kills the process inside an item while others run: the items recorded
// before the kill never run again, those that were running run once more at most (no more than
// the concurrency), and the job completes with every result.
func crashInsideFanout(t *testing.T, env []string) {
	for _, n := range []int{0, 6, 11} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			job := jobID(t)
			runs := filepath.Join(t.TempDir(), "runs")
			if !runChild(t, crashSpec{Env: env, Job: job, Start: true, At: fmt.Sprintf("item:%d", n), Runs: runs, Kind: "fanout"}) {
				t.Fatal("the child was not killed")
			}
			s := storeenvtest.Open(t, env)
			recorded := map[int]bool{}
			for i := range fanItems {
				recorded[i] = itemRecorded(t, s, job, i)
			}
			_ = s.Close()
			if runChild(t, crashSpec{Env: env, Job: job, Offset: time.Hour, Runs: runs, Kind: "fanout"}) {
				t.Fatal("the recovery child was killed")
			}
			count := countRuns(t, runs)
			again := 0
			for i := range fanItems {
				c := count[fmt.Sprint(i)]
				switch {
				case recorded[i] && c != 1:
					t.Fatalf("item %d, recorded before the kill, ran %d times", i, c)
				case c < 1 || c > 2:
					t.Fatalf("item %d ran %d times", i, c)
				case c == 2:
					again++
				}
			}
			if again < 1 || again > fanConc {
				t.Fatalf("%d items ran again, want 1 to %d (those running at the kill)", again, fanConc)
			}
			wantStatusIn(t, env, func(o owner) { defineFanout(o, runs, func(string) {}) }, job, contract.StateCompleted)
		})
	}
}

// wantStatusIn checks job's status on the store env names, its works defined by define.
func wantStatusIn(t *testing.T, env []string, define func(owner), job, want string) {
	t.Helper()
	s := storeenvtest.Open(t, env)
	defer s.Close()
	o := newOwner()
	define(o)
	in := newInstance(t, s, o, newClock(), &queue{})
	if snap := stateOf(t, in, job); snap.Job.Status != want {
		t.Fatalf("state %s, want %s", mustJSON(t, snap), want)
	}
}

// crashAroundFailure kills the process where the job fails (inside the failing step, right after
// the failure is written) and inside the failure handler: the handler runs exactly once in the
// first two cases, at most once more in the third, and the job ends failed.
func crashAroundFailure(t *testing.T, env []string) {
	for _, tc := range []struct {
		at   string
		want []int // how many handler runs are fine
	}{{"step", []int{1}}, {"dispatch", []int{1}}, {"handler", []int{2}}} {
		t.Run(tc.at, func(t *testing.T) {
			job := jobID(t)
			runs := filepath.Join(t.TempDir(), "runs")
			if !runChild(t, crashSpec{Env: env, Job: job, Start: true, At: tc.at, Runs: runs, Kind: "failing"}) {
				t.Fatalf("the child was not killed at %s", tc.at)
			}
			if runChild(t, crashSpec{Env: env, Job: job, Offset: time.Hour, Runs: runs, Kind: "failing"}) {
				t.Fatal("the recovery child was killed")
			}
			if got := countRuns(t, runs)["handler"]; !slices.Contains(tc.want, got) {
				t.Fatalf("the handler ran %d times, want %v", got, tc.want)
			}
			wantStatusIn(t, env, func(o owner) { defineFailing(o, runs, func(string) {}) }, job, contract.StateFailed)
		})
	}
}

// identityTakesOverAtRestart: a process killed inside a step under an instance name; the process
// restarted under the same name takes the task back at its first scan, its lease still live,
// while one under another name leaves it.
func identityTakesOverAtRestart(t *testing.T, env []string) {
	job := jobID(t)
	runs := filepath.Join(t.TempDir(), "runs")
	if !runChild(t, crashSpec{Env: env, Job: job, Start: true, At: "inside:1", Runs: runs, Pool: true, Identity: "node-a"}) {
		t.Fatal("the child was not killed")
	}
	s := storeenvtest.Open(t, env)
	defer s.Close()
	o := newOwner()
	defineCrashy(o, runs, func(string) {})
	for _, id := range []string{"node-b", "node-a"} {
		svc := jobs.NewService(jobs.Config{Store: s, Dispatcher: jobs.NewPool(jobs.ScanEvery(0), jobs.Identity(id)), Logger: quiet,
			Works: func(string) (*jobs.Registry, time.Duration, bool) { return o.reg, 0, true }})
		ctx := jobs.NewContext(context.Background(), svc, o.reg, agentSlug, &contract.VerifiedWorkspaceContext{WorkspaceID: wsID})
		if id == "node-b" {
			// One scan at start, under another name: the task stays with its live lease.
			svc.Close()
			if snap, err := jobs.State(ctx, job); err != nil || snap.Job.Status != contract.StateActive {
				t.Fatalf("another instance took over a live lease: %v %s", err, mustJSON(t, snap))
			}
			continue
		}
		waitCompleted(ctx, t, job, "the task was not taken back at restart")
		svc.Close()
	}
	if b, _ := os.ReadFile(runs); string(b) != "0\n1\n1\n2\n3\n" {
		t.Fatalf("runs %q", b)
	}
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
	waitCompleted(ctx, t, job, "the task was not taken over at start")
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
