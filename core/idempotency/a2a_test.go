package idempotency_test

// Black-box tests over POST /a2a: a real core.Controller behind a loopback HTTP server, with the
// gate on a real store, driven the way Studio drives it.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/supervaize/svz/core"
	"github.com/supervaize/svz/core/contract"
	"github.com/supervaize/svz/core/grant"
	"github.com/supervaize/svz/core/idempotency"
	"github.com/supervaize/svz/core/store/memory"
	"github.com/supervaize/svz/core/store/storeenv"
	"github.com/supervaize/svz/core/store/storetest"
)

const apiKey = "K-idempotency"

// agent is a test agent whose job.start creates a job (counted) and names the process and run
// in its result, so a replay is told apart from a second run even across processes.
type agent struct {
	instance string
	runs     atomic.Int32
	// block, when set, is waited on by the first run (a stuck instance ignores its context).
	block chan struct{}
	// fail makes a run fail with an error.
	fail atomic.Bool
}

func newAgent() *agent {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return &agent{instance: hex.EncodeToString(b)}
}

func (a *agent) jobStart(ctx context.Context, req *contract.ActionRequest) (*contract.ActionResult, error) {
	n := a.runs.Add(1)
	if n == 1 && a.block != nil {
		<-a.block
	}
	if a.fail.Load() {
		return nil, fmt.Errorf("database password=hunter2 rejected") // must never reach the wire
	}
	job := ""
	if req.JobID != nil {
		job = *req.JobID
	}
	return &contract.ActionResult{
		Status:  contract.StatusOK,
		Effects: []contract.Effect{{Type: "job.started", JobID: job, Message: fmt.Sprintf("run %d of %s", n, a.instance)}},
	}, nil
}

func (a *agent) preview(_ context.Context, req *contract.ActionRequest) (*contract.ActionResult, error) {
	a.runs.Add(1)
	return &contract.ActionResult{Status: contract.StatusOK, Effects: []contract.Effect{{Type: "job.start.previewed", Message: string(req.Input)}}}, nil
}

// controller serves a on gate. Preview is declared non-mutating, as job_policy.setup derives it.
func (a *agent) controller(t testing.TB, gate core.ActionGate) *core.Controller {
	t.Helper()
	reg, err := contract.BuildRegistration(contract.RegistrationSpec{
		AgentSlug: "s", DisplayName: "S", A2UICatalogVersion: "s.1",
		Surfaces: []contract.SurfaceSpec{contract.SurfaceID("job.start")},
		Actions: []contract.ActionSpec{
			contract.ActionID("job.start"),
			contract.ActionDefinition{ID: "job.start.preview", ReadOnly: true, Scope: "job"},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	ag, err := core.NewAgent(core.AgentConfig{Name: "S", Version: "1.0", Registration: reg})
	if err != nil {
		t.Fatal(err)
	}
	ag.HandleAction("job.start", core.ActionFunc(a.jobStart))
	ag.HandleAction("job.start.preview", core.ActionFunc(a.preview))
	c, err := core.New(core.Config{
		APIKey: apiKey, ServerID: "SRV", Authorizer: grant.LocalBypass{ServerID: "SRV"}, Gate: gate,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}, ag)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// serve starts c on a loopback port.
func serve(t testing.TB, c *core.Controller) string {
	t.Helper()
	srv := httptest.NewServer(c)
	t.Cleanup(func() {
		srv.Close()
		_ = c.Close()
	})
	return srv.URL
}

func params(over map[string]any) map[string]any {
	p := map[string]any{
		"request_id": "request-1", "actor": map[string]any{"user_id": "user-1"},
		"workspace": map[string]any{"id": "workspace-1", "slug": "workspace"}, "mission_id": "mission-1",
		"agent_slug": "s", "surface": "job.start", "action": "job.start", "input": map[string]any{"count": 2},
		"job_id": "job-1", "idempotency_key": "idem_start_campaign_123",
	}
	for k, v := range over {
		p[k] = v
	}
	return p
}

// call posts an action.invoke and returns the whole JSON-RPC response body.
func call(t testing.TB, base string, p map[string]any) string {
	t.Helper()
	out, err := post(base, p)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// post is call for goroutines other than the test's: it returns its failure.
func post(base string, p map[string]any) (string, error) {
	return postWith(http.DefaultClient, base, p)
}

func postWith(client *http.Client, base string, p map[string]any) (string, error) {
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "supervaizer/action.invoke", "params": p})
	if err != nil {
		return "", err
	}
	req, err := http.NewRequest(http.MethodPost, base+"/a2a", bytes.NewReader(body))
	if err != nil {
		return "", err
	}
	req.Header.Set("X-API-Key", apiKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return "", fmt.Errorf("POST /a2a: %w", err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("POST /a2a: HTTP %d %s %v", resp.StatusCode, out, err)
	}
	return strings.TrimSpace(string(out)), nil
}

// goPost runs post in a goroutine and delivers its answer (or failure) on the channel.
func goPost(t *testing.T, base string, p map[string]any) <-chan string {
	ch := make(chan string, 1)
	go func() {
		out, err := post(base, p)
		if err != nil {
			t.Error(err)
		}
		ch <- out
	}()
	return ch
}

func rpcResult(result string) string { return `{"jsonrpc":"2.0","id":1,"result":` + result + `}` }

func okResult(run int, instance string) string {
	return fmt.Sprintf(`{"status":"ok","effects":[{"type":"job.started","job_id":"job-1","message":"run %d of %s"}],`+
		`"replay_safety":{"dedupe_keys":[],"stable_external_ids_required":true,"strictly_idempotent_response":true,"convergent":true}}`, run, instance)
}

func TestA2AReplayAndConflict(t *testing.T) {
	a := newAgent()
	base := serve(t, a.controller(t, idempotency.New(memory.New())))
	want := rpcResult(okResult(1, a.instance))
	if got := call(t, base, params(nil)); got != want {
		t.Fatalf("first call = %s\nwant %s", got, want)
	}
	if got := call(t, base, params(map[string]any{"request_id": "request-2", "actor": map[string]any{"user_id": "user-2"}})); got != want {
		t.Errorf("retry = %s\nwant %s", got, want)
	}
	// Studio sends its current context with every call: the mission's name and metadata, the
	// workspace's slug, a draft session. A retry that differs only there is the same request.
	studio := params(map[string]any{
		"request_id":       "request-3",
		"mission":          map[string]any{"id": "mission-1", "name": "Renamed", "metadata": map[string]any{"filter": map[string]any{"contact": "c-9"}}},
		"workspace":        map[string]any{"id": "workspace-1", "slug": "renamed-workspace"},
		"draft_session_id": "draft-9",
	})
	if got := call(t, base, studio); got != want {
		t.Errorf("retry with Studio's current context = %s\nwant %s", got, want)
	}
	conflict := rpcResult(conflictResult)
	for name, over := range map[string]map[string]any{
		"input":   {"input": map[string]any{"count": 3}},
		"job_id":  {"job_id": "job-2"},
		"mission": {"mission_id": "mission-2"},
	} {
		if got := call(t, base, params(over)); got != conflict {
			t.Errorf("%s changed: %s\nwant %s", name, got, conflict)
		}
	}
	if n := a.runs.Load(); n != 1 {
		t.Errorf("handler ran %d times, want 1", n)
	}
}

// TestA2APreviewSharesTheKey: Studio sends the confirm's key with every preview. Previews are not
// gated (not mutating), so they rerun with edited input; the confirm is then recorded once.
func TestA2APreviewSharesTheKey(t *testing.T) {
	a := newAgent()
	base := serve(t, a.controller(t, idempotency.New(memory.New())))
	for i, in := range []map[string]any{{"count": 1}, {"count": 2}, {"count": 2}} {
		got := call(t, base, params(map[string]any{"action": "job.start.preview", "input": in}))
		if !strings.Contains(got, `"status":"ok"`) || strings.Contains(got, "replay_safety") {
			t.Errorf("preview %d = %s; want a fresh, ungated result", i, got)
		}
	}
	want := rpcResult(okResult(4, a.instance))
	for range 2 {
		if got := call(t, base, params(nil)); got != want {
			t.Errorf("confirm = %s\nwant %s", got, want)
		}
	}
	if n := a.runs.Load(); n != 4 {
		t.Errorf("handlers ran %d times, want 3 previews and 1 confirm", n)
	}
}

func TestA2AFiftyConcurrentConfirmsRunOnce(t *testing.T) {
	a := newAgent()
	a.block = make(chan struct{})
	base := serve(t, a.controller(t, idempotency.New(memory.New())))
	pending := make([]<-chan string, 50)
	for i := range pending {
		pending[i] = goPost(t, base, params(map[string]any{"request_id": fmt.Sprint("request-", i)}))
	}
	// Let the 49 others meet the running claim, then let the first run finish.
	deadline := time.Now().Add(30 * time.Second)
	for a.runs.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond)
	close(a.block)
	responses := make([]string, len(pending))
	for i, ch := range pending {
		responses[i] = <-ch
	}

	ok := rpcResult(okResult(1, a.instance))
	var okCount, inProgress int
	for _, r := range responses {
		switch {
		case r == ok:
			okCount++
		case strings.Contains(r, `"code":"idempotency_in_progress"`) && strings.Contains(r, `"retry_after_seconds":`):
			inProgress++
		default:
			t.Errorf("unexpected response %s", r)
		}
	}
	if a.runs.Load() != 1 || okCount < 1 || okCount+inProgress != 50 {
		t.Errorf("runs = %d, ok = %d, in progress = %d; want one run and 50 answers", a.runs.Load(), okCount, inProgress)
	}
	// Every later retry replays.
	if got := call(t, base, params(map[string]any{"request_id": "late"})); got != ok {
		t.Errorf("late retry = %s", got)
	}
}

// TestA2ALeaseExpiryThenRetry: a stuck first run (it ignores its context) holds the key only
// until its lease ends; the retry then runs, and the stuck run cannot overwrite its record.
func TestA2ALeaseExpiryThenRetry(t *testing.T) {
	a := newAgent()
	a.block = make(chan struct{})
	clock := storetest.NewClock()
	s := memory.New(memory.WithClock(clock.Now))
	base := serve(t, a.controller(t, idempotency.New(s, idempotency.WithClock(clock.Now), idempotency.WithMaxRun(30*time.Second))))

	stuck := goPost(t, base, params(nil))
	for a.runs.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	if got := call(t, base, params(map[string]any{"request_id": "retry-1"})); !strings.Contains(got, `"code":"idempotency_in_progress"`) {
		t.Fatalf("retry during the lease = %s", got)
	}
	clock.Advance(30*time.Second + idempotency.SkewMargin)
	want := rpcResult(okResult(2, a.instance))
	if got := call(t, base, params(map[string]any{"request_id": "retry-2"})); got != want {
		t.Errorf("retry after the lease = %s\nwant %s", got, want)
	}
	close(a.block)
	late := <-stuck
	if !strings.Contains(late, `"message":"run 1 of`) || !strings.Contains(late, `"strictly_idempotent_response":false`) {
		t.Errorf("stuck run answered %s; want its own result, flagged as not replayable", late)
	}
	if got := call(t, base, params(map[string]any{"request_id": "retry-3"})); got != want {
		t.Errorf("replay = %s\nwant the retry's result %s", got, want)
	}
}

// TestA2AFailedRunReleasesTheKey: a handler error answers -32603 without its text, and the
// retry runs.
func TestA2AFailedRunReleasesTheKey(t *testing.T) {
	a := newAgent()
	a.fail.Store(true)
	base := serve(t, a.controller(t, idempotency.New(memory.New())))
	want := `{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"Action handler failed","data":{"action":"job.start","agent_slug":"s"}}}`
	if got := call(t, base, params(nil)); got != want {
		t.Fatalf("failed run = %s\nwant %s", got, want)
	}
	a.fail.Store(false)
	if got := call(t, base, params(nil)); got != rpcResult(okResult(2, a.instance)) {
		t.Errorf("retry = %s", got)
	}
}

// TestA2AStoreFailureLeaksNothing: a store that fails answers -32603; nothing runs.
func TestA2AStoreFailureLeaksNothing(t *testing.T) {
	a := newAgent()
	s := memory.New()
	base := serve(t, a.controller(t, idempotency.New(s)))
	s.Close()
	want := `{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"Action handler failed","data":{"action":"job.start","agent_slug":"s"}}}`
	if got := call(t, base, params(nil)); got != want {
		t.Errorf("closed store = %s\nwant %s", got, want)
	}
	if a.runs.Load() != 0 {
		t.Error("the handler ran without a claim")
	}
}

// TestA2AReplayAfterProcessRestart runs the controller in child processes on one data directory,
// with the store chosen by storeenv as local mode does (bolt by default), and kills the first
// with SIGKILL: the second process replays the first one's result.
func TestA2AReplayAfterProcessRestart(t *testing.T) {
	dir := t.TempDir()
	first := startChild(t, dir)
	want := call(t, first.url, params(nil))
	if !strings.Contains(want, `"message":"run 1 of `+first.instance+`"`) {
		t.Fatalf("first process answered %s", want)
	}
	first.kill(t)

	second := startChild(t, dir)
	if got := call(t, second.url, params(map[string]any{"request_id": "after-restart"})); got != want {
		t.Errorf("after the restart = %s\nwant the first process's result %s", got, want)
	}
	if got := call(t, second.url, params(map[string]any{"job_id": "job-2"})); got != rpcResult(conflictResult) {
		t.Errorf("conflicting request after the restart = %s", got)
	}
	if _, err := os.Stat(filepath.Join(dir, "svz.db")); err != nil {
		t.Errorf("bolt file: %v", err)
	}
}

// TestA2AKeyOfAKilledHolderFrees kills (SIGKILL) a process while its handler runs, holding the
// key: a second process on the same store answers idempotency_in_progress with the time left on
// the dead holder's lease (never more than lease + skew margin), then runs the action itself once
// the lease has lapsed, well before the old fixed 5-minute lease. The child's lease is 5 s here
// so the test ends within seconds; production's is idempotency.DefaultLease (20 s).
func TestA2AKeyOfAKilledHolderFrees(t *testing.T) {
	const lease = 5 * time.Second
	dir := t.TempDir()
	first := startChild(t, dir, "SVZ_IDEMPOTENCY_LEASE="+lease.String(), "SVZ_IDEMPOTENCY_BLOCK=1")
	// A probe may itself become the blocked run (if it arrives first): it then times out, and
	// the next probe is answered in progress.
	probe := &http.Client{Timeout: 5 * time.Second}
	go func() { _, _ = postWith(probe, first.url, params(nil)) }() // never answered: the process dies first
	// The claim is taken once the child answers a retry "in progress".
	waitFor(t, "the first process to run the handler", func() bool {
		out, err := postWith(probe, first.url, params(map[string]any{"request_id": "probe"}))
		return err == nil && strings.Contains(out, `"code":"idempotency_in_progress"`)
	})
	first.kill(t)
	killed := time.Now()

	second := startChild(t, dir)
	got := call(t, second.url, params(map[string]any{"request_id": "after-crash"}))
	if strings.Contains(got, `"code":"idempotency_in_progress"`) {
		var resp struct {
			Result contract.ActionResult `json:"result"`
		}
		if err := json.Unmarshal([]byte(got), &resp); err != nil || len(resp.Result.Errors) != 1 {
			t.Fatalf("in-progress answer %s: %v", got, err)
		}
		e := resp.Result.Errors[0]
		expires, err := time.Parse(time.RFC3339Nano, e.LeaseExpiresAt)
		if err != nil || e.RetryAfterSeconds == nil {
			t.Fatalf("in-progress answer without lease_expires_at or retry_after_seconds: %s", got)
		}
		if limit := killed.Add(lease + idempotency.SkewMargin); expires.After(limit) {
			t.Errorf("the dead holder's claim expires at %s, after kill + lease + margin (%s)", expires, limit)
		}
		if max := int((lease + idempotency.SkewMargin).Seconds()); *e.RetryAfterSeconds < 1 || *e.RetryAfterSeconds > max {
			t.Errorf("retry_after_seconds = %d, want the time left on the lease (1..%d)", *e.RetryAfterSeconds, max)
		}
	}
	waitFor(t, "the dead holder's key to free", func() bool {
		got = call(t, second.url, params(map[string]any{"request_id": "after-crash"}))
		return !strings.Contains(got, `"code":"idempotency_in_progress"`)
	})
	if want := rpcResult(okResult(1, second.instance)); got != want {
		t.Errorf("after the lease = %s\nwant the second process's own run %s", got, want)
	}
}

// waitFor polls cond until it holds, failing after a generous deadline (a loaded machine must
// not fail the test; a broken lease would block for minutes).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

type child struct {
	cmd      *exec.Cmd
	url      string
	instance string
}

func startChild(t *testing.T, dir string, env ...string) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestChildController$")
	cmd.Env = append(os.Environ(), "SVZ_IDEMPOTENCY_CHILD=1", storeenv.DataDir+"="+dir, storeenv.Kind+"=")
	cmd.Env = append(cmd.Env, env...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &child{cmd: cmd}
	t.Cleanup(func() { c.kill(t) })
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) == 3 && f[0] == "CHILD" {
			c.url, c.instance = f[1], f[2]
			go func() { _, _ = io.Copy(io.Discard, out) }()
			return c
		}
	}
	t.Fatalf("child process did not start: %v", sc.Err())
	return nil
}

func (c *child) kill(t *testing.T) {
	if c.cmd.ProcessState != nil {
		return
	}
	_ = c.cmd.Process.Kill()
	_ = c.cmd.Wait()
}

// TestChildController is the child process of TestA2AReplayAfterProcessRestart; it does nothing
// in a normal run.
func TestChildController(t *testing.T) {
	if os.Getenv("SVZ_IDEMPOTENCY_CHILD") != "1" {
		t.Skip("child process of TestA2AReplayAfterProcessRestart")
	}
	s, err := storeenv.Open(context.Background(), os.Getenv)
	if err != nil {
		t.Fatal(err)
	}
	a := newAgent()
	var opts []idempotency.Option
	if v := os.Getenv("SVZ_IDEMPOTENCY_LEASE"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatal(err)
		}
		opts = append(opts, idempotency.WithLease(d))
	}
	if os.Getenv("SVZ_IDEMPOTENCY_BLOCK") == "1" {
		a.block = make(chan struct{}) // the first run never ends: the process is killed during it
	}
	srv := httptest.NewServer(a.controller(t, idempotency.New(s, opts...)))
	fmt.Printf("CHILD %s %s\n", srv.URL, a.instance)
	select {} // until killed
}
