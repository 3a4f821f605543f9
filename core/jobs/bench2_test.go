package jobs_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/supervaize/svz/core/contract"
	"github.com/supervaize/svz/core/jobs"
	"github.com/supervaize/svz/core/store"
	"github.com/supervaize/svz/core/store/memory"
	"github.com/supervaize/svz/core/store/storeenv"
	"github.com/supervaize/svz/core/store/storeenv/storeenvtest"
)

// The figures of jobs round two (make bench-jobs; docs/performance.md, "Background jobs, round
// two"): a fan-out of 500 items of 200 ms at concurrency 20 on the in-process pool (wall time
// against the ideal, store writes per item), the same killed (SIGKILL) halfway and restarted
// under its instance name (items run again against items running at the kill), and fifty jobs
// under a shared limit of 5 on two instances (the most ever running). Wall times are reported as
// ratios, never asserted; counts that the design promises (at most 5 running, every job
// completed, no item recorded before the kill run again) fail the benchmark when broken.

const (
	fanBenchItems = 500
	fanBenchConc  = 20
	fanBenchItem  = 200 * time.Millisecond
	// fanBenchIdeal is the wall time of the fan-out with no overhead at all.
	fanBenchIdeal = fanBenchItems / fanBenchConc * fanBenchItem
)

// kinds is a store that counts its writes by the kind of record written, and its reads.
type kinds struct {
	store.Store
	mu     sync.Mutex
	writes map[string]int
	reads  int
}

func newKinds(s store.Store) *kinds { return &kinds{Store: s, writes: map[string]int{}} }

// kindOf is the kind of record under key: a fan-out item, a step record, a task, a limit, the
// pool's index entry.
func kindOf(key string) string {
	switch {
	case strings.HasPrefix(key, jobs.TaskKeyPrefix+"~l/"):
		return "limit"
	case !strings.HasPrefix(key, jobs.TaskKeyPrefix):
		return "index"
	case strings.Contains(key, "/i/"): // the parts of a key are escaped: "/" only separates them
		return "item"
	case strings.Contains(key, "/s/"):
		return "step"
	}
	return "task"
}

func (k *kinds) count(key string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.writes[kindOf(key)]++
}

// snapshot returns the writes by kind, their total and the reads so far.
func (k *kinds) snapshot() (map[string]int, int, int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	total := 0
	for _, n := range k.writes {
		total += n
	}
	return maps.Clone(k.writes), total, k.reads
}

func (k *kinds) Get(ctx context.Context, key string) (store.Record, error) {
	k.mu.Lock()
	k.reads++
	k.mu.Unlock()
	return k.Store.Get(ctx, key)
}

func (k *kinds) Create(ctx context.Context, key string, v []byte, exp time.Time) (store.Record, error) {
	k.count(key)
	return k.Store.Create(ctx, key, v, exp)
}

func (k *kinds) Update(ctx context.Context, key string, ver uint64, v []byte, exp time.Time) (store.Record, error) {
	k.count(key)
	return k.Store.Update(ctx, key, ver, v, exp)
}

func (k *kinds) Delete(ctx context.Context, key string, ver uint64) error {
	k.count(key)
	return k.Store.Delete(ctx, key, ver)
}

// List keeps the pool's scan working through the decorator.
func (k *kinds) List(ctx context.Context, prefix, after string, limit int) (store.Page, error) {
	l, ok := k.Store.(store.Lister)
	if !ok {
		return store.Page{}, errors.New("the store cannot list")
	}
	return l.List(ctx, prefix, after, limit)
}

var _ store.Lister = (*kinds)(nil)

// benchStores are the stores a figure runs on: memory, and PostgreSQL when scripts/with-services
// runs it (make bench-jobs).
func benchStores(b *testing.B) map[string][]string {
	out := map[string][]string{"memory": nil}
	if os.Getenv("SVZ_TEST_POSTGRES_URL") != "" {
		out["postgres"] = storeenvtest.Postgres(b, "svz_jobs_bench2_")
	}
	return out
}

func openBench(b *testing.B, env []string) store.Store {
	if env == nil {
		return memory.New()
	}
	return storeenvtest.Open(b, env)
}

// completions is a Publish hook that tells when each job ended (job.synced, after the end of the
// job is written).
type completions struct {
	mu   sync.Mutex
	done map[string]chan string
}

func newCompletions() *completions { return &completions{done: map[string]chan string{}} }

func (c *completions) ch(job string) chan string {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := c.done[job]
	if ch == nil {
		ch = make(chan string, 1)
		c.done[job] = ch
	}
	return ch
}

func (c *completions) publish(_ context.Context, _, _ string, effects []contract.Effect) {
	for _, e := range effects {
		if e.Type == contract.EffectJobSynced && e.Status != contract.StateAwaiting {
			select {
			case c.ch(e.JobID) <- e.Status:
			default:
			}
		}
	}
}

// wait waits for job to end and returns its status.
func (c *completions) wait(b testing.TB, job string, within time.Duration) string {
	b.Helper()
	select {
	case st := <-c.ch(job):
		return st
	case <-time.After(within):
		b.Fatalf("job %s did not end within %s", job, within)
		return ""
	}
}

// poolService is one instance's job service on s, with an in-process pool and the Publish hook.
func poolService(s store.Store, o owner, c *completions, opts ...jobs.PoolOption) *jobs.Service {
	return jobs.NewService(jobs.Config{Store: s, Dispatcher: jobs.NewPool(opts...), Logger: quiet, Publish: c.publish,
		Works: func(string) (*jobs.Registry, time.Duration, bool) { return o.reg, 0, true }})
}

func benchCtx(svc *jobs.Service, o owner, workspace string) context.Context {
	return jobs.NewContext(context.Background(), svc, o.reg, agentSlug, &contract.VerifiedWorkspaceContext{WorkspaceID: workspace})
}

// defineFanBench defines the fan-out of the figures: fanBenchItems items of fanBenchItem each (a
// sleep standing in for a model call), fanBenchConc at once; with runs, each item appends
// "s <i>" to it when it starts and "e <i>" when its call returned.
func defineFanBench(o owner, runs *os.File) *jobs.Work[struct{}] {
	mark := func(what string, i int) {
		if runs != nil {
			_, _ = fmt.Fprintf(runs, "%s %d\n", what, i) // O_APPEND: one write per line
		}
	}
	return jobs.Define(o, "fan-bench", func(ctx context.Context, _ struct{}) error {
		items, err := jobs.Step(ctx, "items", func(context.Context) ([]int, error) {
			out := make([]int, fanBenchItems)
			for i := range out {
				out[i] = i
			}
			return out, nil
		})
		if err != nil {
			return err
		}
		_, err = jobs.Map(ctx, "call", items, func(ctx context.Context, i int) (int, error) {
			mark("s", i)
			select {
			case <-time.After(fanBenchItem):
			case <-ctx.Done():
				return 0, ctx.Err()
			}
			mark("e", i)
			return i * i, nil
		}, jobs.Concurrency(fanBenchConc))
		return err
	})
}

// BenchmarkFanout: one job fans out 500 items of 200 ms at Concurrency(20) on the in-process
// pool; it reports the wall time from the start to the job's end against the ideal 5 s, the
// store writes per item (all of the job's, and those of item records alone) and the reads.
func BenchmarkFanout(b *testing.B) {
	for name, env := range benchStores(b) {
		b.Run(name, func(b *testing.B) {
			s := newKinds(openBench(b, env))
			b.Cleanup(func() { _ = s.Close() })
			o, c := newOwner(), newCompletions()
			w := defineFanBench(o, nil)
			svc := poolService(s, o, c, jobs.ScanEvery(0))
			b.Cleanup(svc.Close)
			ctx := benchCtx(svc, o, wsID)
			var ratio, perItem, itemWrites, reads float64
			var kindsOf map[string]int
			for i := 0; b.Loop(); i++ {
				job := fmt.Sprintf("fan-%d-%d", time.Now().UnixNano(), i)
				before, total0, reads0 := s.snapshot()
				t0 := time.Now()
				if _, err := w.Start(ctx, startReq(job), struct{}{}); err != nil {
					b.Fatal(err)
				}
				if st := c.wait(b, job, 10*time.Minute); st != contract.StateCompleted {
					b.Fatalf("job %s: %s", job, st)
				}
				wall := time.Since(t0)
				after, total1, reads1 := s.snapshot()
				kindsOf = map[string]int{}
				for k, n := range after {
					kindsOf[k] = n - before[k]
				}
				ratio = float64(wall) / float64(fanBenchIdeal)
				perItem = float64(total1-total0) / fanBenchItems
				itemWrites = float64(kindsOf["item"]) / fanBenchItems
				reads = float64(reads1 - reads0)
			}
			b.ReportMetric(ratio, "wall/ideal")
			b.ReportMetric(perItem, "writes/item")
			b.ReportMetric(itemWrites, "item-writes/item")
			b.ReportMetric(reads, "reads/job")
			b.Logf("%s: writes by kind %v", name, kindsOf)
		})
	}
}

// fanChildEnv runs TestFanoutKillChild as the child of BenchmarkFanoutKill: the value is the
// store's settings and the job, as JSON-free "KEY=VALUE" lines.
const fanChildEnv = "SVZ_JOBS_FAN_CHILD"

// TestFanoutKillChild is the process BenchmarkFanoutKill kills: it starts the fan-out job on an
// in-process pool under the instance name "fan-a" and waits to be killed. It does nothing unless
// the benchmark runs it.
func TestFanoutKillChild(t *testing.T) {
	spec := os.Getenv(fanChildEnv)
	if spec == "" {
		t.Skip("the child process of BenchmarkFanoutKill")
	}
	lines := strings.Split(spec, "\n")
	job, runsPath, env := lines[0], lines[1], lines[2:]
	s, err := storeenv.Open(context.Background(), storeenvtest.Getenv(env))
	if err != nil {
		t.Fatal(err)
	}
	runs, err := os.OpenFile(runsPath, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	o, c := newOwner(), newCompletions()
	w := defineFanBench(o, runs)
	svc := poolService(s, o, c, jobs.ScanEvery(0), jobs.Identity("fan-a"))
	if _, err := w.Start(benchCtx(svc, o, wsID), startReq(job), struct{}{}); err != nil {
		t.Fatal(err)
	}
	c.wait(t, job, 10*time.Minute)
	t.Fatal("the fan-out completed before the benchmark killed its process")
}

// BenchmarkFanoutKill kills (SIGKILL) the process running the fan-out once half of its items
// returned, then restarts it under the same instance name (jobs.Identity) in this process: it
// reports the items running at the kill (started, result not recorded), the items that ran
// again, and the restarted process's wall time to the job's end against the ideal for the items
// left. An item recorded before the kill that runs again fails it.
func BenchmarkFanoutKill(b *testing.B) {
	env := storeenvtest.Postgres(b, "svz_jobs_kill_")
	var running, rerun int
	var ratio float64
	for i := 0; b.Loop(); i++ {
		job := fmt.Sprintf("fan-kill-%d-%d", time.Now().UnixNano(), i)
		runs := filepath.Join(b.TempDir(), "runs")
		cmd := exec.Command(os.Args[0], "-test.run=^TestFanoutKillChild$", "-test.v")
		cmd.Env = append(os.Environ(), fanChildEnv+"="+strings.Join(append([]string{job, runs}, env...), "\n"))
		out := &strings.Builder{}
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		for len(readRuns(b, runs)["e"]) < fanBenchItems/2 {
			select {
			case err := <-exited:
				b.Fatalf("the child ended before the kill (%v): %s", err, out)
			case <-time.After(20 * time.Millisecond):
			}
		}
		if err := cmd.Process.Kill(); err != nil {
			b.Fatal(err)
		}
		if err := <-exited; err == nil {
			b.Fatalf("the child was not killed: %s", out)
		} else if ee, ok := errors.AsType[*exec.ExitError](err); !ok || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			b.Fatalf("the child ended with %v: %s", err, out)
		}

		s := storeenvtest.Open(b, env)
		recorded := map[int]bool{}
		for i := range fanBenchItems {
			_, err := s.Get(context.Background(), jobs.TaskKeyPrefix+agentSlug+"/"+wsID+"/"+url.PathEscape(job)+fmt.Sprintf("/i/call/%d", i))
			switch {
			case err == nil:
				recorded[i] = true
			case !errors.Is(err, store.ErrNotFound):
				b.Fatal(err)
			}
		}
		started := readRuns(b, runs)["s"]
		running = 0
		for it := range started {
			if !recorded[it] {
				running++
			}
		}
		o, c := newOwner(), newCompletions()
		rf, err := os.OpenFile(runs, os.O_APPEND|os.O_WRONLY, 0o600)
		if err != nil {
			b.Fatal(err)
		}
		defineFanBench(o, rf)
		t0 := time.Now()
		svc := poolService(s, o, c, jobs.ScanEvery(0), jobs.Identity("fan-a"))
		if st := c.wait(b, job, 10*time.Minute); st != contract.StateCompleted {
			b.Fatalf("job %s: %s", job, st)
		}
		wall := time.Since(t0)
		svc.Close()
		_ = rf.Close()
		_ = s.Close()
		rerun = 0
		for it, n := range readRuns(b, runs)["s"] {
			switch {
			case n > 2 || n > 1 && recorded[it]:
				b.Fatalf("item %d ran %d times (recorded before the kill: %v)", it, n, recorded[it])
			case n == 2:
				rerun++
			}
		}
		left := fanBenchItems - len(recorded)
		ideal := time.Duration((left+fanBenchConc-1)/fanBenchConc) * fanBenchItem
		ratio = float64(wall) / float64(ideal)
	}
	b.ReportMetric(float64(running), "running-at-kill")
	b.ReportMetric(float64(rerun), "rerun")
	b.ReportMetric(ratio, "restart-wall/ideal")
}

// readRuns reads the runs file: for "s" and "e", how many times each item has a line.
func readRuns(b testing.TB, path string) map[string]map[int]int {
	b.Helper()
	out := map[string]map[int]int{"s": {}, "e": {}}
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return out
	}
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		what, n, ok := strings.Cut(sc.Text(), " ")
		i, err := strconv.Atoi(n)
		if !ok || err != nil || out[what] == nil {
			continue // a line cut by the kill
		}
		out[what][i]++
	}
	return out
}

const (
	limitBenchJobs    = 50
	limitBenchMax     = 5
	limitBenchStep    = 100 * time.Millisecond
	limitBenchSpaces  = 5
	limitBenchIdeal   = limitBenchJobs / limitBenchMax * limitBenchStep
	limitBenchTimeout = 5 * time.Minute
)

// running counts the units running now and the most ever running at once.
type running struct {
	mu        sync.Mutex
	now, most int
}

func (r *running) enter() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.now++
	r.most = max(r.most, r.now)
}

func (r *running) leave() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.now--
}

// BenchmarkLimitTwoInstances: fifty jobs of five workspaces under jobs.NewLimit(MaxRunning(5),
// Shared()) on two instances (two services, each with its pool and its own connections to one
// PostgreSQL), started half on each: it reports the most jobs ever running at once (a counter the
// step updates; more than 5 fails) and the wall time against the ideal (50/5 steps of 100 ms).
// Every job must complete.
func BenchmarkLimitTwoInstances(b *testing.B) {
	env := storeenvtest.Postgres(b, "svz_jobs_limit_")
	var most int
	var ratio float64
	for i := 0; b.Loop(); i++ {
		lim := jobs.NewLimit(fmt.Sprintf("provider-%d-%d", time.Now().UnixNano(), i), jobs.MaxRunning(limitBenchMax), jobs.Shared())
		r := &running{}
		o, c := newOwner(), newCompletions()
		w := jobs.Define(o, "limited-bench", func(ctx context.Context, n int) error {
			_, err := jobs.Step(ctx, "call", func(ctx context.Context) (int, error) {
				r.enter()
				defer r.leave()
				select {
				case <-time.After(limitBenchStep):
				case <-ctx.Done():
					return 0, ctx.Err()
				}
				return n, nil
			})
			return err
		}, jobs.Limited(lim))
		var svcs []*jobs.Service
		var stores []store.Store
		for range 2 {
			s := storeenvtest.Open(b, env)
			stores, svcs = append(stores, s), append(svcs, poolService(s, o, c))
		}
		var started []string
		t0 := time.Now()
		for n := range limitBenchJobs {
			job := fmt.Sprintf("lim-%d-%d-%d", time.Now().UnixNano(), i, n)
			ws := fmt.Sprintf("ws-%d", n%limitBenchSpaces)
			if _, err := w.Start(benchCtx(svcs[n%2], o, ws), startReq(job), n); err != nil {
				b.Fatal(err)
			}
			started = append(started, job)
		}
		for _, job := range started {
			if st := c.wait(b, job, limitBenchTimeout); st != contract.StateCompleted {
				b.Fatalf("job %s: %s", job, st)
			}
		}
		ratio = float64(time.Since(t0)) / float64(limitBenchIdeal)
		for k, svc := range svcs {
			svc.Close()
			_ = stores[k].Close()
		}
		r.mu.Lock()
		most = r.most
		r.mu.Unlock()
		if most > limitBenchMax {
			b.Fatalf("%d jobs ran at once under a limit of %d", most, limitBenchMax)
		}
	}
	b.ReportMetric(float64(most), "most-running")
	b.ReportMetric(ratio, "wall/ideal")
}
