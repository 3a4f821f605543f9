// Command bench-dbos measures svz's background jobs (core/jobs on the PostgreSQL store, run by the
// in-process pool) beside DBOS Transact for Go on one PostgreSQL server with fsync on, in
// alternating rounds (make bench-jobs; docs/performance.md, "Beside DBOS Transact"):
//
//   - 4-step jobs per second (200 jobs started by 16 goroutines, steps that return at once);
//   - latency from the start to the first step and to the job's recorded end (p50, p99), one
//     job at a time;
//   - commits (pg_stat_database.xact_commit) and WAL bytes (pg_current_wal_lsn) per step, for
//     jobs of 4 and of 100 steps: an instance opened, the jobs run, the instance closed, less the
//     same with no job;
//   - 100 steps of 50 ms fanned out (jobs.Map with Concurrency(100); dbos.Go): the wall time;
//   - kill -9 inside a step, then a restarted process: the time from its start to the job's end
//     (svz with an instance name, SUPERVAIZER_INSTANCE_ID / jobs.Identity, and without one).
//
// It is a module of its own so that DBOS stays out of svz's go.mod. It needs the address of a
// PostgreSQL server with fsync on in SVZ_TEST_POSTGRES_URL: `SVZ_POSTGRES_FSYNC=on
// scripts/with-services go run .` (make bench-jobs runs it so). It creates two databases, one
// per engine, and drops them at the end; it sets checkpoint_timeout and max_wal_size so that no
// checkpoint (and no full-page image after one) falls inside a measurement.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

const (
	engineSvz   = "svz"
	engineSvzID = "svz+id" // svz restarted under its instance name
	engineDBOS  = "dbos"
	// identity is the svz instance name of the restart figure.
	identity = "bench-node"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "child" {
		if err := child(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "bench-dbos child:", err)
			os.Exit(1)
		}
		return
	}
	rounds := flag.Int("rounds", 5, "alternating rounds")
	njobs := flag.Int("jobs", 200, "4-step jobs of the throughput figure")
	nlat := flag.Int("latency", 50, "jobs of the latency figure, one at a time")
	killRounds := flag.Int("kill-rounds", 0, "rounds of the restart figure (0: -rounds)")
	flag.Parse()
	if *killRounds == 0 {
		*killRounds = *rounds
	}
	if err := run(context.Background(), *rounds, *njobs, *nlat, *killRounds); err != nil {
		fmt.Fprintln(os.Stderr, "bench-dbos:", err)
		os.Exit(1)
	}
}

// bench holds the server, the engines' databases and what was measured.
type bench struct {
	admin  *pgxpool.Pool
	urls   map[string]string // engine → its database's URL
	dbs    map[string]string // engine → its database's name
	marks  *marks
	jobSeq int
	res    map[string]*results
}

type results struct {
	jobsPerSec []float64
	first, end []time.Duration
	perStep    map[int]*perStep // by steps per job
	fan        []time.Duration
	// restart: from the restarted process's start to the job's end; phases: to its main, to the
	// engine opened, to the first step run again (medians of each).
	restart []time.Duration
	phases  map[string][]time.Duration
}

// perStep is the cost per step of jobs of some number of steps, one value per round.
type perStep struct{ commits, writes, wal []float64 }

func newResults() *results {
	return &results{perStep: map[int]*perStep{4: {}, 100: {}}, phases: map[string][]time.Duration{}}
}

func run(ctx context.Context, rounds, njobs, nlat, killRounds int) error {
	raw := os.Getenv("SVZ_TEST_POSTGRES_URL")
	if raw == "" {
		return errors.New("SVZ_TEST_POSTGRES_URL is not set: run it under scripts/with-services with SVZ_POSTGRES_FSYNC=on (make bench-jobs does)")
	}
	admin, err := pgxpool.New(ctx, raw)
	if err != nil {
		return err
	}
	defer admin.Close()
	var fsync, version string
	if err := admin.QueryRow(ctx, "SHOW fsync").Scan(&fsync); err != nil {
		return err
	}
	if fsync != "on" {
		return fmt.Errorf("the server at SVZ_TEST_POSTGRES_URL runs with fsync=%s: the figures need fsync on (SVZ_POSTGRES_FSYNC=on scripts/with-services ...)", fsync)
	}
	if err := admin.QueryRow(ctx, "SHOW server_version").Scan(&version); err != nil {
		return err
	}
	for _, q := range []string{"ALTER SYSTEM SET checkpoint_timeout = '1h'", "ALTER SYSTEM SET max_wal_size = '8GB'", "SELECT pg_reload_conf()", "CHECKPOINT"} {
		if _, err := admin.Exec(ctx, q); err != nil {
			return fmt.Errorf("%s: %w", q, err)
		}
	}
	b := &bench{admin: admin, urls: map[string]string{}, dbs: map[string]string{}, marks: newMarks(), res: map[string]*results{}}
	suffix := time.Now().Format("150405")
	for _, e := range []string{engineSvz, engineDBOS} {
		name := "bench_" + e + "_" + suffix
		if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
			return err
		}
		defer func() { _, _ = admin.Exec(context.Background(), "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)") }()
		u, err := url.Parse(raw)
		if err != nil {
			return err
		}
		u.Path = "/" + name
		b.urls[e], b.dbs[e] = u.String(), name
		b.res[e] = newResults()
	}
	b.res[engineSvzID] = newResults()
	fmt.Printf("PostgreSQL %s, fsync on; %d alternating rounds; load average at the start: %s\n", version, rounds, loadavg())
	for r := range rounds {
		order := []string{engineSvz, engineDBOS}
		if r%2 == 1 {
			slices.Reverse(order)
		}
		for _, e := range order {
			if err := b.round(ctx, e, njobs, nlat); err != nil {
				return fmt.Errorf("round %d, %s: %w", r+1, e, err)
			}
			x := b.res[e]
			p4, p100 := x.perStep[4], x.perStep[100]
			fmt.Printf("round %d %-4s: %6.0f jobs/s; per step (4 / 100 steps a job): WAL %4.0f / %4.0f B, write commits %.2f / %.2f, xact_commit %.2f / %.2f; fan-out %s\n",
				r+1, e, last(x.jobsPerSec), last(p4.wal), last(p100.wal), last(p4.writes), last(p100.writes), last(p4.commits), last(p100.commits),
				x.fan[len(x.fan)-1].Round(time.Millisecond))
		}
	}
	for r := range killRounds {
		order := []string{engineSvzID, engineDBOS, engineSvz}
		if r%2 == 1 {
			slices.Reverse(order)
		}
		for _, e := range order {
			phases, err := b.restart(ctx, e)
			if err != nil {
				return fmt.Errorf("restart round %d, %s: %w", r+1, e, err)
			}
			x := b.res[e]
			x.restart = append(x.restart, phases["done"])
			for k, d := range phases {
				x.phases[k] = append(x.phases[k], d)
			}
			fmt.Printf("restart %d %-6s: %s from the restarted process's start to the job's end (main %s, engine open %s, step run again %s)\n", r+1, e,
				phases["done"].Round(time.Millisecond), phases["main"].Round(time.Millisecond), phases["opened"].Round(time.Millisecond), phases["step"].Round(time.Millisecond))
		}
	}
	b.report(rounds, killRounds)
	return nil
}

func last(v []float64) float64 { return v[len(v)-1] }

func loadavg() string {
	raw, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	return strings.Join(strings.Fields(string(raw))[:3], " ")
}

// open starts an instance of engine e on its database.
func (b *bench) open(ctx context.Context, e string, workers int) (system, error) {
	if e == engineDBOS {
		return newDBOS(ctx, b.urls[e], b.marks)
	}
	return newSvz(ctx, b.urls[engineSvz], "", workers, b.marks)
}

func (b *bench) id(prefix string) string {
	b.jobSeq++
	return fmt.Sprintf("%s-%d-%d", prefix, time.Now().UnixNano(), b.jobSeq)
}

// round measures engine e once: latency and throughput on one instance, the cost per step on
// instances of their own, the fan-out.
func (b *bench) round(ctx context.Context, e string, njobs, nlat int) error {
	x := b.res[e]
	sys, err := b.open(ctx, e, 32)
	if err != nil {
		return err
	}
	for range 5 { // warm-up: connections, prepared statements
		if err := runJobs(ctx, sys, b, 1, 1, input{Steps: 4}); err != nil {
			return err
		}
	}
	for range nlat {
		in := input{ID: b.id("lat"), Steps: 4}
		t0 := time.Now()
		wait, err := sys.run(ctx, in)
		if err != nil {
			return err
		}
		if err := wait(); err != nil {
			return err
		}
		end := time.Since(t0)
		x.first, x.end = append(x.first, b.marks.firstStep(in.ID).Sub(t0)), append(x.end, end)
	}
	t0 := time.Now()
	if err := runJobs(ctx, sys, b, njobs, 16, input{Steps: 4}); err != nil {
		return err
	}
	x.jobsPerSec = append(x.jobsPerSec, float64(njobs)/time.Since(t0).Seconds())
	var fans []time.Duration
	for i := range 6 {
		in := input{ID: b.id("fan"), Fan: 100, Sleep: 50 * time.Millisecond}
		t0 := time.Now()
		wait, err := sys.run(ctx, in)
		if err == nil {
			err = wait()
		}
		if err != nil {
			return err
		}
		if i > 0 { // the first warms the fan-out's paths up
			fans = append(fans, time.Since(t0))
		}
	}
	slices.Sort(fans)
	x.fan = append(x.fan, fans[len(fans)/2])
	if s, ok := sys.(*svzSystem); ok {
		// The pool's index entries of the jobs that ended go now, not in the next instance's
		// first scan, which the cost per step below would count.
		if err := s.scan(ctx); err != nil {
			return err
		}
	}
	if err := sys.close(); err != nil {
		return err
	}
	base, err := b.cost(ctx, e, 0, 0)
	if err != nil {
		return err
	}
	for _, k := range []int{4, 100} {
		n := 100
		if k == 100 {
			n = 5
		}
		c, err := b.cost(ctx, e, n, k)
		if err != nil {
			return err
		}
		steps := float64(n * k)
		p := x.perStep[k]
		p.commits = append(p.commits, float64(c.commits-base.commits)/steps)
		p.writes = append(p.writes, float64(c.xids-base.xids)/steps)
		p.wal = append(p.wal, float64(c.wal-base.wal)/steps)
	}
	return nil
}

// runJobs runs n jobs like in, from conc goroutines, and waits for them all.
func runJobs(ctx context.Context, sys system, b *bench, n, conc int, in input) error {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = b.id("job")
	}
	var wg sync.WaitGroup
	errs := make(chan error, n)
	next := make(chan string, n)
	for _, id := range ids {
		next <- id
	}
	close(next)
	for range min(conc, n) {
		wg.Go(func() {
			for id := range next {
				j := in
				j.ID = id
				wait, err := sys.run(ctx, j)
				if err == nil {
					err = wait()
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// usage is what an engine's instance cost the server: commits in its database (all
// transactions, reads included: pg_stat_database.xact_commit), write transactions (the
// transaction ids assigned, each a commit that waits for its WAL to reach the disk), WAL bytes.
type usage struct{ commits, xids, wal int64 }

// cost opens an instance of e, runs n jobs of k steps (8 at a time), closes it, and returns
// what that cost the server, once every connection of the instance ended (a backend reports its
// counts when it exits).
func (b *bench) cost(ctx context.Context, e string, n, k int) (usage, error) {
	before, err := b.usage(ctx, e)
	if err != nil {
		return usage{}, err
	}
	sys, err := b.open(ctx, e, 8)
	if err != nil {
		return usage{}, err
	}
	if n > 0 {
		if err := runJobs(ctx, sys, b, n, 8, input{Steps: k}); err != nil {
			return usage{}, err
		}
	}
	if s, ok := sys.(*svzSystem); ok {
		if err := s.scan(ctx); err != nil {
			return usage{}, err
		}
	}
	if err := sys.close(); err != nil {
		return usage{}, err
	}
	after, err := b.usage(ctx, e)
	return usage{after.commits - before.commits, after.xids - before.xids, after.wal - before.wal}, err
}

// usage reads the commits of e's database and the WAL position, once no connection to the
// database is left.
func (b *bench) usage(ctx context.Context, e string) (usage, error) {
	for deadline := time.Now().Add(30 * time.Second); ; {
		var n int
		if err := b.admin.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE datname = $1", b.dbs[e]).Scan(&n); err != nil {
			return usage{}, err
		}
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			return usage{}, fmt.Errorf("%d connections to %s left after the instance closed", n, b.dbs[e])
		}
		time.Sleep(20 * time.Millisecond)
	}
	// A backend leaves pg_stat_activity just before it reports its counts: read until they hold
	// still.
	var u usage
	for i := 0; ; i++ {
		var next usage
		err := b.admin.QueryRow(ctx, "SELECT xact_commit, pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint, "+
			"pg_snapshot_xmax(pg_current_snapshot())::text::bigint FROM pg_stat_database WHERE datname = $1", b.dbs[e]).Scan(&next.commits, &next.wal, &next.xids)
		if err != nil {
			return usage{}, err
		}
		if i > 0 && next == u || i == 50 {
			return next, nil
		}
		u = next
		time.Sleep(100 * time.Millisecond)
	}
}

// restart runs a 4-step job (50 ms a step) in a child process, kills it (SIGKILL) as its second
// step starts, then starts the process again and returns the times from that start to the
// restarted process's main, to its engine opened, to the step run again, and to the job's
// recorded end ("done"; the second step runs again, then the two others: 150 ms of work).
func (b *bench) restart(ctx context.Context, e string) (map[string]time.Duration, error) {
	job := b.id("kill")
	db := b.urls[engineDBOS]
	if e != engineDBOS {
		db = b.urls[engineSvz]
	}
	first := exec.CommandContext(ctx, os.Args[0], "child", e, "start", job, db)
	out, err := first.StdoutPipe()
	if err != nil {
		return nil, err
	}
	first.Stderr = os.Stderr
	if err := first.Start(); err != nil {
		return nil, err
	}
	if _, err := readPhases(out, "step"); err != nil {
		_ = first.Process.Kill()
		_ = first.Wait()
		return nil, fmt.Errorf("the first process: %w", err)
	}
	_ = first.Process.Kill()
	if err := first.Wait(); err == nil || !killed(err) {
		return nil, fmt.Errorf("the first process was not killed: %v", err)
	}
	t0 := time.Now()
	second := exec.CommandContext(ctx, os.Args[0], "child", e, "recover", job, db)
	if out, err = second.StdoutPipe(); err != nil {
		return nil, err
	}
	second.Stderr = os.Stderr
	if err := second.Start(); err != nil {
		return nil, err
	}
	at, err := readPhases(out, "done")
	if werr := second.Wait(); err == nil {
		err = werr
	}
	phases := map[string]time.Duration{}
	for k, t := range at {
		phases[k] = t.Sub(t0)
	}
	return phases, err
}

// readPhases reads the child's "<phase> <unix nanoseconds>" lines until phase until.
func readPhases(r io.Reader, until string) (map[string]time.Time, error) {
	at := map[string]time.Time{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		var phase string
		var ns int64
		if _, err := fmt.Sscan(sc.Text(), &phase, &ns); err != nil {
			continue
		}
		if _, seen := at[phase]; !seen {
			at[phase] = time.Unix(0, ns)
		}
		if phase == until {
			return at, nil
		}
	}
	return at, fmt.Errorf("the process ended before %q", until)
}

func killed(err error) bool {
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return false
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
}

// child is a process of the restart figure: "start" starts the job and says "step" when its
// second step starts (then waits to be killed); "recover" opens the engine as a restarted
// server does and says "step" when it runs a step, "done" once the job's end is recorded. Each
// line is the phase and the time (Unix nanoseconds); both say "main" first, and "opened" once
// the engine is.
func child(args []string) error {
	if len(args) != 4 {
		return fmt.Errorf("usage: child ENGINE start|recover JOB DATABASE_URL")
	}
	say := func(phase string) { fmt.Println(phase, time.Now().UnixNano()) }
	say("main")
	e, phase, job, db := args[0], args[1], args[2], args[3]
	ctx := context.Background()
	m := newMarks()
	var once sync.Once
	m.onStep = func(_ string, i int) {
		if phase == "recover" || i == 1 {
			once.Do(func() { say("step") })
		}
	}
	var sys interface {
		system
		await(id string) error
	}
	var err error
	switch e {
	case engineDBOS:
		sys, err = newDBOS(ctx, db, m)
	case engineSvz:
		sys, err = newSvz(ctx, db, "", 4, m)
	case engineSvzID:
		sys, err = newSvz(ctx, db, identity, 4, m)
	default:
		err = fmt.Errorf("unknown engine %q", e)
	}
	if err != nil {
		return err
	}
	say("opened")
	switch phase {
	case "start":
		if _, err := sys.run(ctx, input{ID: job, Steps: 4, Sleep: 50 * time.Millisecond}); err != nil {
			return err
		}
		time.Sleep(time.Minute)
		return errors.New("not killed within a minute")
	case "recover":
		if err := sys.await(job); err != nil {
			return err
		}
		say("done")
		return sys.close()
	}
	return fmt.Errorf("unknown phase %q", phase)
}

// report prints the figures as the table of docs/performance.md.
func (b *bench) report(rounds, killRounds int) {
	s, d := b.res[engineSvz], b.res[engineDBOS]
	fmt.Printf("\nsvz (core/jobs, PostgreSQL store, in-process pool) beside DBOS Transact v1.9.0, one PostgreSQL, fsync on: %d rounds (%d for restarts), load average at the end: %s\n\n", rounds, killRounds, loadavg())
	fmt.Println("| what | svz | DBOS Transact | svz / DBOS |")
	fmt.Println("|---|---|---|---|")
	row := func(what, a, b string, ratio float64) { fmt.Printf("| %s | %s | %s | %.2fx |\n", what, a, b, ratio) }
	row("4-step jobs per second (median of rounds; range)", rangeOf(s.jobsPerSec, "%.0f"), rangeOf(d.jobsPerSec, "%.0f"), median(s.jobsPerSec)/median(d.jobsPerSec))
	row("start → first step, p50 / p99", pcts(s.first), pcts(d.first), ratioP50(s.first, d.first))
	row("start → job's end recorded, p50 / p99", pcts(s.end), pcts(d.end), ratioP50(s.end, d.end))
	for _, k := range []int{4, 100} {
		a, c := s.perStep[k], d.perStep[k]
		row(fmt.Sprintf("write commits per step (transaction ids), %d-step jobs", k), fmt.Sprintf("%.2f", median(a.writes)), fmt.Sprintf("%.2f", median(c.writes)), median(a.writes)/median(c.writes))
		row(fmt.Sprintf("xact_commit per step (reads included), %d-step jobs", k), fmt.Sprintf("%.2f", median(a.commits)), fmt.Sprintf("%.2f", median(c.commits)), median(a.commits)/median(c.commits))
		row(fmt.Sprintf("WAL bytes per step, %d-step jobs", k), fmt.Sprintf("%.0f", median(a.wal)), fmt.Sprintf("%.0f", median(c.wal)), median(a.wal)/median(c.wal))
	}
	row("100 steps of 50 ms fanned out: wall time (median)", fanOf(s.fan), fanOf(d.fan), float64(medianD(s.fan))/float64(medianD(d.fan)))
	id := b.res[engineSvzID]
	fmt.Printf("| kill -9 inside a step → the restarted process ends the job (median; range) | %s with SUPERVAIZER_INSTANCE_ID; %s without | %s | %.2fx |\n",
		durRange(id.restart), durRange(s.restart), durRange(d.restart), float64(medianD(id.restart))/float64(medianD(d.restart)))
	fmt.Printf("\nRestart phases, medians from the restarted process's start: ")
	for _, e := range []string{engineSvzID, engineSvz, engineDBOS} {
		p := b.res[e].phases
		fmt.Printf("%s: main %s, open %s, step %s, end %s; ", e, ms(medianD(p["main"])), ms(medianD(p["opened"])), ms(medianD(p["step"])), ms(medianD(p["done"])))
	}
	fmt.Println("(ms)")
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	w := slices.Clone(v)
	slices.Sort(w)
	return w[len(w)/2]
}

func medianD(v []time.Duration) time.Duration {
	if len(v) == 0 {
		return 0
	}
	w := slices.Clone(v)
	slices.Sort(w)
	return w[len(w)/2]
}

func rangeOf(v []float64, f string) string {
	return fmt.Sprintf(f+" ("+f+"–"+f+")", median(v), slices.Min(v), slices.Max(v))
}

func pct(v []time.Duration, p float64) time.Duration {
	w := slices.Clone(v)
	slices.Sort(w)
	return w[min(len(w)-1, int(float64(len(w))*p))]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f", float64(d.Microseconds())/1000) }

func pcts(v []time.Duration) string {
	return ms(pct(v, 0.5)) + " / " + ms(pct(v, 0.99)) + " ms"
}

func ratioP50(a, b []time.Duration) float64 { return float64(pct(a, 0.5)) / float64(pct(b, 0.5)) }

func fanOf(v []time.Duration) string {
	m := medianD(v)
	return fmt.Sprintf("%s ms (%.2fx the 50 ms ideal)", ms(m), float64(m)/float64(50*time.Millisecond))
}

func durRange(v []time.Duration) string {
	if len(v) == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.2f s (%.2f–%.2f)", medianD(v).Seconds(), slices.Min(v).Seconds(), slices.Max(v).Seconds())
}
