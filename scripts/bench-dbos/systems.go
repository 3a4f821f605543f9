package main

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/dbos-inc/dbos-transact-golang/dbos"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/supervaize/svz/core/contract"
	"github.com/supervaize/svz/core/jobs"
	"github.com/supervaize/svz/core/store/postgres"
)

// input is a job of the benchmark: Steps steps of Sleep each, or (Fan > 0) one fan-out of Fan
// steps of Sleep each, all at once.
type input struct {
	ID    string        `json:"id"`
	Steps int           `json:"steps"`
	Fan   int           `json:"fan"`
	Sleep time.Duration `json:"sleep"`
}

// system is a durable-workflow engine under measurement, on one database.
type system interface {
	// run starts the job in and returns when it was started (durably); wait returns once the job
	// completed and its end is recorded.
	run(ctx context.Context, in input) (wait func() error, err error)
	close() error
}

// marks tells when each job's first step started, and when a step of a watched job starts.
type marks struct {
	mu    sync.Mutex
	first map[string]time.Time
	// onStep, when set, is called as each step starts (the kill of the restart figure).
	onStep func(id string, i int)
}

func newMarks() *marks { return &marks{first: map[string]time.Time{}} }

func (m *marks) step(id string, i int) {
	m.mu.Lock()
	if _, ok := m.first[id]; !ok {
		m.first[id] = time.Now()
	}
	f := m.onStep
	m.mu.Unlock()
	if f != nil {
		f(id, i)
	}
}

func (m *marks) firstStep(id string) time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.first[id]
}

func pause(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	select {
	case <-time.After(d):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

var quiet = slog.New(slog.DiscardHandler)

// maxConns is both engines' connection pool size (DBOS's default).
const maxConns = 20

// --- svz: core/jobs on the PostgreSQL store, run by the in-process pool --------------------------

type owner struct{ reg *jobs.Registry }

func (o owner) Works() *jobs.Registry { return o.reg }

type svzSystem struct {
	st   *postgres.Store
	svc  *jobs.Service
	pool *jobs.Pool
	ctx  context.Context
	w    *jobs.Work[input]
	mu   sync.Mutex
	done map[string]chan struct{}
}

// newSvz opens the store on url and a pool of workers deliveries at once under the instance name
// identity ("" for none).
func newSvz(ctx context.Context, url, identity string, workers int, m *marks) (*svzSystem, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, err
	}
	cfg.MaxConns = maxConns
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	st, err := postgres.New(ctx, pool, postgres.WithTable("svz_jobs"))
	if err != nil {
		return nil, err
	}
	s := &svzSystem{st: st, done: map[string]chan struct{}{}}
	o := owner{jobs.NewRegistry()}
	s.w = jobs.Define(o, "bench", func(ctx context.Context, in input) error {
		if in.Fan > 0 {
			items := make([]int, in.Fan)
			for i := range items {
				items[i] = i
			}
			_, err := jobs.Map(ctx, "fan", items, func(ctx context.Context, i int) (int, error) {
				m.step(in.ID, i)
				return i, pause(ctx, in.Sleep)
			}, jobs.Concurrency(in.Fan))
			return err
		}
		for i := range in.Steps {
			if _, err := jobs.Step(ctx, strconv.Itoa(i), func(ctx context.Context) (int, error) {
				m.step(in.ID, i)
				return i, pause(ctx, in.Sleep)
			}); err != nil {
				return err
			}
		}
		return nil
	})
	s.pool = jobs.NewPool(jobs.Workers(workers), jobs.Identity(identity))
	s.svc = jobs.NewService(jobs.Config{Store: st, Dispatcher: s.pool, Logger: quiet, Publish: s.published,
		Works: func(string) (*jobs.Registry, time.Duration, bool) { return o.reg, 0, true }})
	s.ctx = jobs.NewContext(ctx, s.svc, o.reg, "bench-agent", &contract.VerifiedWorkspaceContext{WorkspaceID: "ws-bench"})
	return s, nil
}

func (s *svzSystem) ch(id string) chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.done[id]
	if c == nil {
		c = make(chan struct{})
		s.done[id] = c
	}
	return c
}

// published hears job.synced, written once the job's end is recorded.
func (s *svzSystem) published(_ context.Context, _, _ string, effects []contract.Effect) {
	for _, e := range effects {
		if e.Type == contract.EffectJobSynced && e.Status == contract.StateCompleted {
			c := s.ch(e.JobID)
			s.mu.Lock()
			select {
			case <-c: // a duplicate
			default:
				close(c)
			}
			s.mu.Unlock()
		}
	}
}

func (s *svzSystem) run(_ context.Context, in input) (func() error, error) {
	id := in.ID
	c := s.ch(id)
	req := &contract.ActionRequest{AgentSlug: "bench-agent", Action: contract.JobStartAction, JobID: &id, MissionID: "m-bench"}
	if _, err := s.w.Start(s.ctx, req, in); err != nil {
		return nil, err
	}
	return func() error { return s.wait(id, c) }, nil
}

// await waits for a job this process did not start (the restart figure).
func (s *svzSystem) await(id string) error { return s.wait(id, s.ch(id)) }

func (s *svzSystem) wait(id string, c chan struct{}) error {
	select {
	case <-c:
		return nil
	case <-time.After(5 * time.Minute):
		return fmt.Errorf("svz: job %s did not complete within 5 minutes", id)
	}
}

// scan drops the pool's index entries of the jobs that ended, as its periodic scan does: their
// deletion is part of a job's cost.
func (s *svzSystem) scan(ctx context.Context) error { return s.pool.Scan(ctx) }

func (s *svzSystem) close() error {
	s.svc.Close()
	return s.st.Close()
}

// --- DBOS Transact: a workflow per job, RunAsStep per step, Go per fanned-out step ---------------

type dbosSystem struct {
	ctx dbos.Context
	wf  dbos.Workflow[input, int]
}

func newDBOS(ctx context.Context, url string, m *marks) (*dbosSystem, error) {
	dctx, err := dbos.NewContext(ctx, dbos.Config{AppName: "svz-bench", DatabaseURL: url, Logger: quiet})
	if err != nil {
		return nil, err
	}
	wf := func(ctx dbos.Context, in input) (int, error) {
		if in.Fan > 0 {
			chans := make([]<-chan dbos.StepOutcome[int], in.Fan)
			for i := range in.Fan {
				ch, err := dbos.Go(ctx, func(ctx context.Context) (int, error) {
					m.step(in.ID, i)
					return i, pause(ctx, in.Sleep)
				}, dbos.WithStepName("fan-"+strconv.Itoa(i)))
				if err != nil {
					return 0, err
				}
				chans[i] = ch
			}
			for _, ch := range chans {
				if o := <-ch; o.Err != nil {
					return 0, o.Err
				}
			}
			return in.Fan, nil
		}
		for i := range in.Steps {
			if _, err := dbos.RunAsStep(ctx, func(ctx context.Context) (int, error) {
				m.step(in.ID, i)
				return i, pause(ctx, in.Sleep)
			}, dbos.WithStepName(strconv.Itoa(i))); err != nil {
				return 0, err
			}
		}
		return in.Steps, nil
	}
	dbos.RegisterWorkflow(dctx, wf, dbos.WithWorkflowName("bench"))
	if err := dbos.Launch(dctx); err != nil {
		return nil, err
	}
	return &dbosSystem{ctx: dctx, wf: wf}, nil
}

func (d *dbosSystem) run(_ context.Context, in input) (func() error, error) {
	h, err := dbos.RunWorkflow(d.ctx, d.wf, in, dbos.WithWorkflowID(in.ID))
	if err != nil {
		return nil, err
	}
	return func() error { _, err := h.GetResult(); return err }, nil
}

// await waits for a workflow this process did not start: the one its launch recovered.
func (d *dbosSystem) await(id string) error {
	h, err := dbos.RetrieveWorkflow[int](d.ctx, id)
	if err != nil {
		return err
	}
	_, err = h.GetResult(dbos.WithHandlePollingInterval(5*time.Millisecond), dbos.WithHandleTimeout(5*time.Minute))
	return err
}

func (d *dbosSystem) close() error { return dbos.Shutdown(d.ctx, 10*time.Second) }
