package checkpoint_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/supervaize/svz/core/checkpoint"
	"github.com/supervaize/svz/core/contract"
	"github.com/supervaize/svz/core/store"
	"github.com/supervaize/svz/core/store/storeenv"
	"github.com/supervaize/svz/core/store/storeenv/storeenvtest"
	"github.com/supervaize/svz/core/studio"
	"github.com/supervaize/svz/internal/testenv"
)

// Crash injection: a run of a governed step is killed at every point where a crash can leave the
// store in another state (after each store write, before each Studio call, just after the effect
// or the advance did its work), then "restarted" as the platform would: Studio retries job.start
// (the step runs again) and delivers again a resume it got no answer to; an effect that started
// without a recorded outcome is recovered by hand with RecoverGuardedStep when it did run. The
// effect and the advance append to files: each must have run at most once, and the step must end
// completed or waiting for explicit recovery, never run again silently.

// crashChildEnv makes the test binary a crash child: the value is its crashSpec in JSON.
const crashChildEnv = "SVZ_CHECKPOINT_CRASH_CHILD"

func TestMain(m *testing.M) {
	if spec := os.Getenv(crashChildEnv); spec != "" {
		os.Exit(crashChild(spec))
	}
	os.Exit(m.Run())
}

// crashSpec is one crash run: the occurrence, where to die, and the files the effect and the
// advance append to.
type crashSpec struct {
	At       int    `json:"at"` // die at this event (0: never)
	Scenario string `json:"scenario"`
	Studio   string `json:"studio"`
	WS       string `json:"ws"`
	JobID    string `json:"job_id"`
	Occ      string `json:"occ"`
	Order    string `json:"order"`
	Token    string `json:"token"`
	Effects  string `json:"effects"`
	Advances string `json:"advances"`
}

// Scenarios: the Studio decisions of each phase.
var crashScenarios = map[string]map[string]string{
	"allow":        nil,
	"pause":        {"before": "pause", "after": "pause"},
	"pause-before": {"before": "pause"},
}

func (c *crashSpec) occurrence() checkpoint.Occurrence {
	return checkpoint.Occurrence{JobID: c.JobID, CaseID: "case-1", StepID: "step-charge", OccurrenceID: c.Occ}
}

func (c *crashSpec) jobStart() *contract.ActionRequest {
	input, _ := json.Marshal(map[string]any{"rule_snapshot": map[string]any{"hash": snapshotHash, "checkpoint_url": "", "version": 1, "checkpoint_token": c.Token}})
	id := c.JobID
	return &contract.ActionRequest{AgentSlug: agentSlug, Action: "job.start", JobID: &id, Input: input}
}

func (c *crashSpec) before() map[string]any {
	return map[string]any{"operation": "charge", "order": c.Order, "customer": map[string]any{"card": cardNumber}}
}

// killer counts the events of a run and dies at the chosen one.
type killer struct {
	at   int
	n    atomic.Int64
	dead atomic.Bool
	die  func() // kills the process, or stops the goroutine dead
}

func (k *killer) hit() {
	if int(k.n.Add(1)) == k.at {
		k.dead.Store(true)
		k.die()
	}
}

var errDead = errors.New("crashed")

// crashStore counts successful writes as events; after a crash it refuses everything.
type crashStore struct {
	store.Store
	k *killer
}

func (s crashStore) check() error {
	if s.k.dead.Load() {
		return errDead
	}
	return nil
}

func (s crashStore) Get(ctx context.Context, key string) (store.Record, error) {
	if err := s.check(); err != nil {
		return store.Record{}, err
	}
	return s.Store.Get(ctx, key)
}

func (s crashStore) Create(ctx context.Context, key string, v []byte, exp time.Time) (store.Record, error) {
	if err := s.check(); err != nil {
		return store.Record{}, err
	}
	r, err := s.Store.Create(ctx, key, v, exp)
	if err == nil {
		s.k.hit()
	}
	return r, err
}

func (s crashStore) Update(ctx context.Context, key string, version uint64, v []byte, exp time.Time) (store.Record, error) {
	if err := s.check(); err != nil {
		return store.Record{}, err
	}
	r, err := s.Store.Update(ctx, key, version, v, exp)
	if err == nil {
		s.k.hit()
	}
	return r, err
}

func (s crashStore) Delete(ctx context.Context, key string, version uint64) error {
	if err := s.check(); err != nil {
		return err
	}
	err := s.Store.Delete(ctx, key, version)
	if err == nil {
		s.k.hit()
	}
	return err
}

// crashStudio counts each checkpoint call as an event, before it is sent.
type crashStudio struct {
	checkpoint.Studio
	k *killer
}

func (s crashStudio) RuleCheckpoint(ctx context.Context, token string, r checkpoint.Request) (checkpoint.Response, error) {
	if s.k.dead.Load() {
		return checkpoint.Response{}, errDead
	}
	s.k.hit()
	return s.Studio.RuleCheckpoint(ctx, token, r)
}

func studioAt(url string) (checkpoint.Studio, error) {
	c, err := studio.New(studio.Settings{APIURL: url, WorkspaceID: studioWS, APIKey: studioKey, Timeout: 30 * time.Second},
		studio.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		return nil, err
	}
	return c.RuleCheckpoints(), nil
}

// appendLine appends line to the file at path, durably, as an external effect would happen.
func appendLine(path, line string) error {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(line + "\n"); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func lines(t testing.TB, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Fields(string(b))
}

// fileStep defines the crash tests' step: its effect and advance append to spec's files, then
// count as an event (a crash there is a crash after the work, before its outcome is recorded).
func fileStep(spec *crashSpec, k *killer) (*checkpoint.Registry, *checkpoint.Step[order, receipt]) {
	reg := checkpoint.NewRegistry(rules())
	step := checkpoint.Define(owner{reg}, stepName, checkpoint.Funcs[order, receipt]{
		Effect: func(_ context.Context, o order) (receipt, error) {
			r := receipt{Order: o.ID, Ref: "rcpt-" + o.ID}
			if err := appendLine(spec.Effects, r.Ref); err != nil {
				return receipt{}, err
			}
			k.hit()
			return r, nil
		},
		AfterContext: func(o order, r receipt) (any, error) {
			return map[string]any{"operation": "charge", "order": o.ID, "receipt": r.Ref}, nil
		},
		Advance: func(_ context.Context, o order, _ receipt) error {
			if err := appendLine(spec.Advances, o.ID); err != nil {
				return err
			}
			k.hit()
			return nil
		},
	})
	return reg, step
}

// answered asks the fake Studio for the checkpoint of phase.
func answered(studioURL string, spec *crashSpec, phase string) (answer, error) {
	resp, err := http.Get(studioURL + "/test/answered?occurrence=" + spec.Occ + "&phase=" + phase)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	var a answer
	if resp.StatusCode != http.StatusOK {
		return a, fmt.Errorf("no %s checkpoint answered: HTTP %d", phase, resp.StatusCode)
	}
	return a, json.NewDecoder(resp.Body).Decode(&a)
}

// crashRun is the run that may crash: job.start's gate, the guarded step and, while it pauses,
// the decisions Studio delivers (allow).
func crashRun(ctx context.Context, spec *crashSpec, s store.Store, k *killer) (checkpoint.Status, error) {
	cs, err := studioAt(spec.Studio)
	if err != nil {
		return "", err
	}
	svc := checkpoint.NewService(checkpoint.Config{Store: crashStore{s, k}, Studio: crashStudio{cs, k}, Logger: slog.New(slog.DiscardHandler)})
	reg, step := fileStep(spec, k)
	ctx = checkpoint.NewContext(ctx, svc, reg, agentSlug, spec.WS)
	g, err := checkpoint.FromJobStart(ctx, spec.jobStart())
	if err != nil {
		return "", err
	}
	out, err := checkpoint.RunGuardedStep(ctx, g, step, spec.occurrence(), spec.before(), order{ID: spec.Order, Amount: 12})
	for range 4 {
		if err != nil || out.Status != checkpoint.Awaiting {
			break
		}
		a, aerr := answered(spec.Studio, spec, out.Phase)
		if aerr != nil {
			return "", aerr
		}
		if _, rerr := checkpoint.Resume(ctx, resumeRequestFor(spec.occurrence(), out.Phase, "allow", a)); rerr != nil {
			return "", rerr
		}
		out, err = checkpoint.StepState(ctx, step, spec.occurrence())
	}
	return out.Status, err
}

// crashChild runs crashRun in a child process that SIGKILLs itself at the chosen event.
func crashChild(raw string) int {
	var spec crashSpec
	if err := json.Unmarshal([]byte(raw), &spec); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := storeenv.Open(ctx, os.Getenv)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	k := &killer{at: spec.At, die: func() {
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {}
	}}
	status, err := crashRun(ctx, &spec, s, k)
	_ = s.Close()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	fmt.Printf("status %s events %d\n", status, k.n.Load())
	return 0
}

// crashCase is one crash point of a scenario, and what the restart made of it.
type crashCase struct {
	spec  crashSpec
	final string
}

// restart continues spec's occurrence as the platform would after the crash, on a store opened
// by open, with a clock an hour ahead (the dead run's lease has long lapsed).
func restart(t *testing.T, s store.Store, studioURL string, spec *crashSpec) string {
	t.Helper()
	cs, err := studioAt(studioURL)
	if err != nil {
		t.Fatal(err)
	}
	svc := checkpoint.NewService(checkpoint.Config{Store: s, Studio: cs, Logger: slog.New(slog.DiscardHandler),
		Now: func() time.Time { return time.Now().Add(time.Hour) }})
	reg, step := fileStep(spec, &killer{})
	ctx := checkpoint.NewContext(context.Background(), svc, reg, agentSlug, spec.WS)
	g, err := checkpoint.FromJobStart(ctx, spec.jobStart()) // Studio retries job.start
	if err != nil {
		t.Fatalf("job.start again: %v", err)
	}
	in := order{ID: spec.Order, Amount: 12}
	for range 8 {
		out, err := checkpoint.RunGuardedStep(ctx, g, step, spec.occurrence(), spec.before(), in)
		switch {
		case errors.Is(err, checkpoint.ErrEffectStarted):
			done := lines(t, spec.Effects)
			if len(done) == 0 {
				return "recovery: the effect never ran"
			}
			// The operator found the effect's outcome: recover with it.
			out, err = checkpoint.RecoverGuardedStep(ctx, g, step, spec.occurrence(), receipt{Order: spec.Order, Ref: done[0]})
			if err != nil {
				t.Fatalf("recovery: %v", err)
			}
		case errors.Is(err, checkpoint.ErrAmbiguousAdvance):
			return "recovery: ambiguous advance"
		case err != nil:
			t.Fatalf("run again: %v", err)
		}
		switch out.Status {
		case checkpoint.Completed:
			return "completed"
		case checkpoint.Awaiting: // Studio delivers the decision (again)
			a, err := answered(studioURL, spec, out.Phase)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := checkpoint.Resume(ctx, resumeRequestFor(spec.occurrence(), out.Phase, "allow", a)); err != nil {
				t.Fatalf("resume: %v", err)
			}
		default:
			t.Fatalf("outcome %+v", out)
		}
	}
	t.Fatal("the step did not settle")
	return ""
}

// check asserts what every crash must leave: the effect and the advance ran at most once, the
// step completed (both ran once) or waits for explicit recovery, and every checkpoint sent again
// was the same.
func (c *crashCase) check(t *testing.T, s store.Store, fake *fakeStudio) {
	t.Helper()
	effects, advances := len(lines(t, c.spec.Effects)), len(lines(t, c.spec.Advances))
	if effects > 1 || advances > 1 {
		t.Errorf("crash at event %d: the effect ran %d times, the advance %d", c.spec.At, effects, advances)
	}
	switch c.final {
	case "completed":
		if effects != 1 || advances != 1 {
			t.Errorf("crash at event %d: completed with %d effects and %d advances", c.spec.At, effects, advances)
		}
	case "recovery: the effect never ran":
		if effects != 0 || advances != 0 {
			t.Errorf("crash at event %d: %s, yet %d effects", c.spec.At, c.final, effects)
		}
	case "recovery: ambiguous advance":
		if effects != 1 {
			t.Errorf("crash at event %d: %s with %d effects", c.spec.At, c.final, effects)
		}
	default:
		t.Errorf("crash at event %d: ended %q", c.spec.At, c.final)
	}
	if strings.HasPrefix(c.final, "recovery") {
		cs, _ := studioAt(fake.srv.URL)
		svc := checkpoint.NewService(checkpoint.Config{Store: s, Studio: cs, Now: func() time.Time { return time.Now().Add(time.Hour) }})
		reg, step := fileStep(&c.spec, &killer{})
		st, err := checkpoint.StepState(checkpoint.NewContext(context.Background(), svc, reg, agentSlug, c.spec.WS), step, c.spec.occurrence())
		if err != nil || st.Status != checkpoint.RecoveryRequired {
			t.Errorf("crash at event %d: %s, but the step reads %+v, %v", c.spec.At, c.final, st, err)
		}
	}
	sent := map[string]string{}
	for _, call := range fake.callsOf(c.spec.Occ) {
		if first, ok := sent[call.Body.Phase]; ok && first != call.Raw {
			t.Errorf("crash at event %d: the %s checkpoint was sent again changed:\n%s\n%s", c.spec.At, call.Body.Phase, first, call.Raw)
		}
		sent[call.Body.Phase] = call.Raw
		if call.Token != c.spec.Token {
			t.Errorf("crash at event %d: a checkpoint went without the job's token", c.spec.At)
		}
	}
}

func newCrashSpec(dir string, scenario string, at int, studioURL, ws string) crashSpec {
	return crashSpec{At: at, Scenario: scenario, Studio: studioURL, WS: ws, JobID: testenv.UniqueName("job-"), Occ: testenv.UniqueName("occ-"),
		Order: testenv.UniqueName("order-"), Token: testenv.UniqueName("checkpoint-token-"),
		Effects: filepath.Join(dir, fmt.Sprintf("%s-%d.effects", scenario, at)), Advances: filepath.Join(dir, fmt.Sprintf("%s-%d.advances", scenario, at))}
}

// crashLoop kills a run of scenario at event 1, 2, … until a run finishes before its crash
// point, restarting and checking each.
func crashLoop(t *testing.T, scenario string, run func(spec *crashSpec) (crashed bool), open func() store.Store) {
	fake := newFakeStudio(t, crashScenarios[scenario])
	ws := testenv.UniqueName("ws-")
	dir := t.TempDir()
	var cases []crashCase
	for at := 1; ; at++ {
		if at > 100 {
			t.Fatal("more than 100 events in one run")
		}
		spec := newCrashSpec(dir, scenario, at, fake.srv.URL, ws)
		crashed := run(&spec)
		s := open()
		c := crashCase{spec: spec, final: restart(t, s, fake.srv.URL, &spec)}
		c.check(t, s, fake)
		if at == 1 || !crashed {
			noSecretsIn(t, s, spec.Token)
		}
		_ = s.Close()
		cases = append(cases, c)
		if !crashed {
			break
		}
	}
	// Enough crash points to have covered every transition: the allow scenario has 13 events
	// (gate, before checking and answered, effect started, the effect, its result, after checking
	// and answered, advancing, the advance, completed, the release; and two Studio calls).
	if min := map[string]int{"allow": 14, "pause": 20}[scenario]; len(cases) < min {
		t.Errorf("%d crash points, want at least %d", len(cases), min)
	}
	finals := map[string]int{}
	for _, c := range cases {
		finals[c.final]++
	}
	t.Logf("%s: %d crash points: %v", scenario, len(cases), finals)
}

// noSecretsIn fails t if token or the card number is in a rule-checkpoint record of s.
func noSecretsIn(t *testing.T, s store.Store, token string) {
	t.Helper()
	for _, it := range records(t, s, "rulecheckpoint/") {
		if bytes.Contains(it.Value, []byte(token)) || bytes.Contains(it.Value, []byte(cardNumber)) {
			t.Errorf("record %s holds a secret", it.Key)
		}
	}
}

// crashAcrossProcesses runs the crash loops with a child process per run, on the store env
// describes.
func crashAcrossProcesses(t *testing.T, env []string) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, scenario := range []string{"allow", "pause"} {
		t.Run(scenario, func(t *testing.T) {
			crashLoop(t, scenario, func(spec *crashSpec) bool {
				raw, _ := json.Marshal(spec)
				cmd := exec.Command(self, "-test.run=^$")
				cmd.Env = append(append(os.Environ(), env...), crashChildEnv+"="+string(raw))
				var stdout, stderr bytes.Buffer
				cmd.Stdout, cmd.Stderr = &stdout, &stderr
				err := cmd.Run()
				var exit *exec.ExitError
				if errors.As(err, &exit) {
					if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
						return true
					}
				}
				if err != nil {
					t.Fatalf("crash child (event %d): %v\n%s%s", spec.At, err, stdout.String(), stderr.String())
				}
				sc := bufio.NewScanner(&stdout)
				for sc.Scan() {
					if strings.HasPrefix(sc.Text(), "status ") && !strings.HasPrefix(sc.Text(), "status completed ") {
						t.Fatalf("crash child (event %d) ended %s", spec.At, sc.Text())
					}
				}
				return false
			}, func() store.Store { return storeenvtest.Open(t, env) })
		})
	}
	t.Run("ResumeAfterKill", func(t *testing.T) {
		resumeAfterKill(t, func(spec *crashSpec, fake *fakeStudio) {
			// Studio SIGKILLs the child when the after checkpoint reaches it: the child dies
			// waiting for the answer, holding the occurrence's lease.
			raw, _ := json.Marshal(spec)
			cmd := exec.Command(self, "-test.run=^$")
			cmd.Env = append(append(os.Environ(), env...), crashChildEnv+"="+string(raw))
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			pid := make(chan int, 1)
			var once sync.Once
			fake.setHook(func(c studioCall, _ answer) {
				if c.Body.OccurrenceID == spec.Occ && c.Body.Phase == "after" {
					once.Do(func() { _ = syscall.Kill(<-pid, syscall.SIGKILL) })
				}
			})
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			pid <- cmd.Process.Pid
			err := cmd.Wait()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || !exit.Sys().(syscall.WaitStatus).Signaled() {
				t.Fatalf("the child to kill ended with %v:\n%s", err, out.String())
			}
		}, func() store.Store { return storeenvtest.Open(t, env) })
	})
}

// crashInProcess runs the crash loops in this process, on s: at the crash point the run's
// goroutine stops dead (runtime.Goexit) and the store and Studio refuse whatever else it tries.
func crashInProcess(t *testing.T, s store.Store) {
	for _, scenario := range []string{"allow", "pause"} {
		t.Run(scenario, func(t *testing.T) {
			crashLoop(t, scenario, func(spec *crashSpec) bool {
				k := &killer{at: spec.At, die: runtime.Goexit}
				var status checkpoint.Status
				var err error
				var wg sync.WaitGroup
				wg.Go(func() { status, err = crashRun(context.Background(), spec, s, k) })
				wg.Wait()
				if k.dead.Load() {
					return true
				}
				if err != nil || status != checkpoint.Completed {
					t.Fatalf("run without a crash: %s, %v", status, err)
				}
				return false
			}, func() store.Store { return nopClose{s} })
		})
	}
	t.Run("ResumeAfterKill", func(t *testing.T) {
		resumeAfterKill(t, func(spec *crashSpec, fake *fakeStudio) {
			// The run stops dead at the after checkpoint: the store refuses its every write after
			// Studio received it, as if the process were gone (its lease stays in the record).
			k := &killer{}
			fake.setHook(func(c studioCall, _ answer) {
				if c.Body.OccurrenceID == spec.Occ && c.Body.Phase == "after" {
					k.dead.Store(true)
				}
			})
			if _, err := crashRun(context.Background(), spec, s, k); !errors.Is(err, errDead) || !k.dead.Load() {
				t.Fatalf("the run to kill ended with %v", err)
			}
		}, func() store.Store { return nopClose{s} })
	})
}

// nopClose keeps the shared memory store open when a crash loop closes its handle.
type nopClose struct{ store.Store }

func (nopClose) Close() error { return nil }

func (n nopClose) List(ctx context.Context, prefix, after string, limit int) (store.Page, error) {
	return n.Store.(store.Lister).List(ctx, prefix, after, limit)
}

// resumeAfterKill: the step is in its resume (allow, on instance 1), its after checkpoint waits
// for Studio's answer, and instance 1 is killed; Studio delivers the unanswered resume again to
// instance 2, while the dead instance's lease still runs. A call whose deadline comes before the
// lease ends is refused (Studio delivers it again); one with room waits the lease out on the
// service's clock, sends the same after checkpoint again and finishes the step. Never an allow
// that did nothing.
func resumeAfterKill(t *testing.T, kill func(spec *crashSpec, fake *fakeStudio), open func() store.Store) {
	fake := newFakeStudio(t, crashScenarios["pause-before"])
	spec := newCrashSpec(t.TempDir(), "pause-before", 0, fake.srv.URL, testenv.UniqueName("ws-"))
	kill(&spec, fake)
	fake.setHook(nil)
	if n := len(lines(t, spec.Effects)); n != 1 {
		t.Fatalf("the killed run ran the effect %d times, want once", n)
	}
	s := open()
	defer s.Close()
	until := leaseUntil(t, s, spec.Occ)
	if until.IsZero() {
		t.Fatal("the killed instance holds no lease on the occurrence")
	}

	// Instance 2, on a manual clock ten seconds before the dead instance's lease ends; its timer
	// hands each wait to the test.
	var mu sync.Mutex
	now := until.Add(-10 * time.Second)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	type timer struct {
		d time.Duration
		c chan time.Time
	}
	timers := make(chan timer, 64)
	svc := checkpoint.NewService(checkpoint.Config{Store: s, Studio: fake.client(t), Logger: slog.New(slog.DiscardHandler), Now: clock,
		After: func(d time.Duration) <-chan time.Time {
			c := make(chan time.Time, 1)
			timers <- timer{d, c}
			return c
		}})
	reg, step := fileStep(&spec, &killer{})
	before, ok := fake.answer(spec.Occ, "before")
	if !ok {
		t.Fatal("Studio never answered the before checkpoint")
	}
	req := resumeRequestFor(spec.occurrence(), "before", "allow", before)
	afterCalls := func() (raw []string) {
		for _, c := range fake.callsOf(spec.Occ) {
			if c.Body.Phase == "after" {
				raw = append(raw, c.Raw)
			}
		}
		return raw
	}

	// A deadline before the lease ends: refused at once, nothing sent or run.
	short, cancel := context.WithTimeout(checkpoint.NewContext(context.Background(), svc, reg, agentSlug, spec.WS), time.Second)
	res, err := checkpoint.Resume(short, req)
	cancel()
	if !errors.Is(err, checkpoint.ErrActive) {
		st, _ := checkpoint.StepState(checkpoint.NewContext(context.Background(), svc, reg, agentSlug, spec.WS), step, spec.occurrence())
		t.Fatalf("resume with a deadline before the dead instance's lease ends: %+v, %v; want an error (Studio delivers it again); the step is %s",
			res, err, st.Status)
	}
	if n := len(afterCalls()); n != 1 {
		t.Fatalf("the refused resume sent the after checkpoint: %d calls", n)
	}

	// Room enough: the resume waits the lease out (the test moves the clock), then finishes.
	ctx, cancel := context.WithTimeout(checkpoint.NewContext(context.Background(), svc, reg, agentSlug, spec.WS), time.Minute)
	defer cancel()
	type result struct {
		res *contract.ActionResult
		err error
	}
	done := make(chan result, 1)
	go func() { res, err := checkpoint.Resume(ctx, req); done <- result{res, err} }()
	var got result
	select {
	case got = <-done:
		t.Fatalf("the resume answered without waiting for the dead instance's lease: %+v, %v", got.res, got.err)
	case tm := <-timers:
		if tm.d != 10*time.Second {
			t.Errorf("the resume waits %s, want the 10 s left of the lease", tm.d)
		}
		mu.Lock()
		now = now.Add(tm.d)
		mu.Unlock()
		tm.c <- time.Now()
	case <-time.After(30 * time.Second):
		t.Fatal("the resume neither answered nor waited")
	}
	// Once the lease has ended the resume waits no more: the only timers it arms from then on are
	// the renewals of its own lease (a quarter lease, never fired here).
	deadline := time.After(positiveWait)
wait:
	for {
		select {
		case got = <-done:
			break wait
		case tm := <-timers:
			if tm.d != checkpoint.DefaultLease/4 {
				t.Fatalf("the resume waits %s more after the dead instance's lease ended", tm.d)
			}
		case <-deadline:
			t.Fatal("the resume did not answer after the lease ended")
		}
	}
	if got.err != nil {
		t.Fatalf("resume after the lease: %v", got.err)
	}
	b, err := contract.AppendJSON(nil, got.res)
	if err != nil {
		t.Fatal(err)
	}
	if want := resumed(spec.JobID, "allow", before.CheckpointID); string(b) != want {
		t.Errorf("resume answered %s\nwant %s", b, want)
	}
	st, err := checkpoint.StepState(checkpoint.NewContext(context.Background(), svc, reg, agentSlug, spec.WS), step, spec.occurrence())
	if err != nil || st.Status != checkpoint.Completed {
		t.Errorf("the step after the resume: %+v, %v; want completed", st, err)
	}
	if e, a := len(lines(t, spec.Effects)), len(lines(t, spec.Advances)); e != 1 || a != 1 {
		t.Errorf("the effect ran %d times, the advance %d; want once each", e, a)
	}
	raw := afterCalls()
	if len(raw) != 2 || raw[0] != raw[1] {
		t.Errorf("after checkpoints sent %d times, want twice, byte for byte the same:\n%s", len(raw), strings.Join(raw, "\n"))
	}
	for _, c := range fake.callsOf(spec.Occ) {
		if c.Token != spec.Token {
			t.Errorf("a %s checkpoint went without the job's token", c.Body.Phase)
		}
	}
	noSecretsIn(t, s, spec.Token)
}
