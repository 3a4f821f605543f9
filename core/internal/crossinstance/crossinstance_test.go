package crossinstance

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/supervaize/svz/adapters/adaptertest"
	"github.com/supervaize/svz/core/store/dynamodb/dynamodbtest"
	"github.com/supervaize/svz/core/store/storeenv/storeenvtest"
	"github.com/supervaize/svz/examples/helloworld/hello"
	"github.com/supervaize/svz/internal/testenv"
)

// childEnv makes the test binary a controller process: Hello World configured by its
// environment, served on a free loopback port it prints, until its stdin closes.
const childEnv = "SVZ_CROSSINSTANCE_CONTROLLER"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		if err := serveController(); err != nil {
			fmt.Fprintln(os.Stderr, "controller:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func serveController() error {
	h, err := hello.Build(context.Background(), os.Getenv, slog.New(slog.NewTextHandler(os.Stderr, nil)))
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	fmt.Printf("listening %s\n", ln.Addr())
	_, _ = io.Copy(io.Discard, os.Stdin) // the parent closes it to stop this process
	_ = srv.Close()
	if c, ok := h.(io.Closer); ok {
		return c.Close()
	}
	return nil
}

// controller is a running controller process.
type controller struct {
	url    string
	stderr *syncBuffer
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// start runs a controller process with the suite's environment plus env. It returns an error
// (with the process's output) when the process exits before listening.
func start(t testing.TB, env ...string) (*controller, error) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self, "-test.run=^$")
	cmd.Env = append(append(append(os.Environ(), adaptertest.Environ()...), childEnv+"=1"), env...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	c := &controller{stderr: &syncBuffer{}}
	cmd.Stderr = c.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if a, ok := strings.CutPrefix(sc.Text(), "listening "); ok {
				addr <- a
			}
		}
	}()
	go func() { _ = cmd.Wait(); close(exited) }()
	stop := func() {
		_ = stdin.Close()
		select {
		case <-exited:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	}
	select {
	case a := <-addr:
		c.url = "http://" + a
		t.Cleanup(func() {
			stop()
			if t.Failed() {
				t.Logf("controller %s output:\n%s", c.url, c.stderr)
			}
		})
		return c, nil
	case <-exited:
		return nil, fmt.Errorf("the controller exited before listening:\n%s", c.stderr)
	case <-time.After(60 * time.Second):
		stop()
		return nil, fmt.Errorf("the controller did not listen within a minute:\n%s", c.stderr)
	}
}

func mustStart(t testing.TB, env ...string) *controller {
	t.Helper()
	c, err := start(t, env...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// invoke runs Hello World's job.start on c with requestID and returns once answered.
func (c *controller) invoke(t testing.TB, requestID string) {
	t.Helper()
	c.invokeIn(t, requestID, "workspace-1")
}

// invokeIn is invoke in workspace ws.
func (c *controller) invokeIn(t testing.TB, requestID, ws string) {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":1,"method":"supervaizer/action.invoke","params":{"request_id":"` + requestID + `",` +
		`"actor":{"user_id":"user-1"},"workspace":{"id":"` + ws + `"},"mission_id":"mission-1",` +
		`"agent_slug":"hello-world-ai-agent","surface":"job.start","action":"job.start","job_id":"job-` + requestID + `","input":{"count":1}}}`
	req, _ := http.NewRequest(http.MethodPost, c.url+"/a2a", strings.NewReader(body))
	req.Header.Set("X-API-Key", adaptertest.APIKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || !bytes.Contains(out, []byte(`"result":{"status":"ok"`)) {
		t.Fatalf("job.start %s on %s: %d %s", requestID, c.url, resp.StatusCode, out)
	}
}

type event struct{ id, name, requestID string }

// stream is an open GET /a2a/events.
type stream struct {
	events chan event
	cancel context.CancelFunc
}

func (c *controller) open(t testing.TB, lastEventID string) *stream {
	t.Helper()
	return c.openWith(t, lastEventID, nil)
}

// openWith is open with more request headers.
func (c *controller) openWith(t testing.TB, lastEventID string, hdr map[string]string) *stream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, c.url+"/a2a/events", nil)
	req.Header.Set("X-API-Key", adaptertest.APIKey)
	if lastEventID != "" {
		req.Header.Set("Last-Event-ID", lastEventID)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		cancel()
		t.Fatalf("GET /a2a/events on %s: %d", c.url, resp.StatusCode)
	}
	s := &stream{events: make(chan event, 1024), cancel: cancel}
	go func() {
		defer close(s.events)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		var ev event
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if ev.name != "" || ev.id != "" { // an id alone (name "") moves the position
					s.events <- ev
				}
				ev = event{}
			case strings.HasPrefix(line, "id: "):
				ev.id = line[4:]
			case strings.HasPrefix(line, "event: "):
				ev.name = line[7:]
			case strings.HasPrefix(line, "data: "):
				var d struct {
					RequestID string `json:"request_id"`
				}
				_ = json.Unmarshal([]byte(line[6:]), &d)
				ev.requestID = d.RequestID
			}
		}
	}()
	t.Cleanup(cancel)
	return s
}

// next returns the next event other than a heartbeat.
func (s *stream) next(t testing.TB) event {
	t.Helper()
	timeout := time.After(60 * time.Second)
	for {
		select {
		case ev, ok := <-s.events:
			if !ok {
				t.Fatal("the stream ended")
			}
			if ev.name != "supervaizer.heartbeat" {
				return ev
			}
		case <-timeout:
			t.Fatal("no event within a minute")
		}
	}
}

func (s *stream) expect(t testing.TB, name, requestID string) event {
	t.Helper()
	ev := s.next(t)
	if ev.name != name || ev.requestID != requestID {
		t.Fatalf("got %+v, want %s for %q", ev, name, requestID)
	}
	return ev
}

// checkIncreasing asserts that ids are "<epoch>-<position>" of one epoch, positions increasing.
func checkIncreasing(t testing.TB, ids []string) {
	t.Helper()
	epoch, _, _ := strings.Cut(ids[0], "-")
	prev := uint64(0)
	for _, id := range ids {
		e, n, _ := strings.Cut(id, "-")
		seq, err := strconv.ParseUint(n, 10, 64)
		if e != epoch || err != nil || seq <= prev {
			t.Fatalf("ids %v: want one epoch, increasing positions", ids)
		}
		prev = seq
	}
}

// sharedStores returns, for each backend that several processes can share, the environment of a
// fresh store of it.
func sharedStores(t testing.TB) map[string][]string {
	t.Helper()
	// The processes' conditional writes race on one table: through MotoProxy they are atomic, as
	// on DynamoDB (moto_server's are not).
	endpoint := testenv.MotoProxy(t, testenv.Need(t, testenv.AWSEndpoint))
	_, ddbTable := dynamodbtest.Table(t, endpoint, "svz-cross-")
	return map[string][]string{
		"postgres": storeenvtest.Postgres(t, "svz_cross_"),
		"redis":    storeenvtest.Redis(t),
		"dynamodb": dynamodbtest.Env(endpoint, ddbTable),
	}
}

// TestEffectsAcrossProcesses: two controller processes of one server id on one store. An action
// on A appears on a stream opened on B, in order, with ids B's Last-Event-ID resumes from; a
// stream that reconnects to the other instance misses nothing and repeats nothing.
func TestEffectsAcrossProcesses(t *testing.T) {
	stores := sharedStores(t)
	for _, backend := range slices.Sorted(func(yield func(string) bool) {
		for k := range stores {
			if !yield(k) {
				return
			}
		}
	}) {
		t.Run(backend, func(t *testing.T) {
			env := append([]string{"SUPERVAIZER_SERVER_ID=" + testenv.UniqueName("svz-cross-")}, stores[backend]...)
			a, b := mustStart(t, env...), mustStart(t, env...)

			onB := b.open(t, "")
			onB.expect(t, "supervaizer.connected", "")
			for i := range 3 {
				a.invoke(t, fmt.Sprintf("a-%d", i))
			}
			var ids []string
			for i := range 3 {
				ids = append(ids, onB.expect(t, "supervaizer.effect", fmt.Sprintf("a-%d", i)).id)
			}
			checkIncreasing(t, ids)
			b.invoke(t, "b-0")
			last := onB.expect(t, "supervaizer.effect", "b-0").id

			// Reconnect to A after B's second event: the third and B's own, then live.
			onA := a.open(t, ids[1])
			if ev := onA.next(t); ev.name != "supervaizer.connected" || ev.id != ids[1] {
				t.Fatalf("reconnected: %+v", ev)
			}
			if ev := onA.expect(t, "supervaizer.effect", "a-2"); ev.id != ids[2] {
				t.Fatalf("resumed with %s, want %s", ev.id, ids[2])
			}
			if ev := onA.expect(t, "supervaizer.effect", "b-0"); ev.id != last {
				t.Fatalf("resumed with %s, want %s", ev.id, last)
			}
			b.invoke(t, "b-1")
			a.invoke(t, "a-3")
			onA.expect(t, "supervaizer.effect", "b-1")
			onA.expect(t, "supervaizer.effect", "a-3")
			onB.expect(t, "supervaizer.effect", "b-1")
			onB.expect(t, "supervaizer.effect", "a-3")
		})
	}
}

// TestWorkspaceStreamsAcrossProcesses: the workspace each entry keeps survives every shared
// backend. A stream for workspace-1 opened on B gets only workspace-1's events appended on A, and
// ids alone past the others; resumed on A from its last id, it reads none of them again. (Hello
// World runs in local mode: the stream's token is not verified, its workspace is the header's.)
func TestWorkspaceStreamsAcrossProcesses(t *testing.T) {
	stores := sharedStores(t)
	for _, backend := range slices.Sorted(func(yield func(string) bool) {
		for k := range stores {
			if !yield(k) {
				return
			}
		}
	}) {
		t.Run(backend, func(t *testing.T) {
			env := append([]string{"SUPERVAIZER_SERVER_ID=" + testenv.UniqueName("svz-cross-")}, stores[backend]...)
			a, b := mustStart(t, env...), mustStart(t, env...)
			only1 := map[string]string{"X-Supervaize-Workspace-Authorization": "Bearer local", "X-Supervaize-Agent-Slug": "hello-world-ai-agent",
				"X-Supervaize-Workspace-Id": "workspace-1"}
			onB := b.openWith(t, "", only1)
			onB.expect(t, "supervaizer.connected", "")
			a.invokeIn(t, "w1-0", "workspace-1")
			a.invokeIn(t, "w2-0", "workspace-2")
			a.invokeIn(t, "w1-1", "workspace-1")
			a.invokeIn(t, "w2-1", "workspace-2")
			// Live: the two events of workspace-1, ids alone between and after (batching varies).
			var got []string
			var ids []string
			for len(ids) == 0 || !strings.HasSuffix(ids[len(ids)-1], "-4") {
				ev := onB.next(t)
				ids = append(ids, ev.id)
				if ev.name != "" {
					got = append(got, ev.name+" "+ev.requestID)
				}
			}
			checkIncreasing(t, ids)
			if want := []string{"supervaizer.effect w1-0", "supervaizer.effect w1-1"}; !slices.Equal(got, want) {
				t.Fatalf("workspace-1's stream on B: %v (ids %v)", got, ids)
			}
			epoch, _, _ := strings.Cut(ids[0], "-")
			// Resumed on A after its first event: the second, then an id alone at the newest.
			onA := a.openWith(t, epoch+"-1", only1)
			onA.expect(t, "supervaizer.connected", "")
			if ev := onA.expect(t, "supervaizer.effect", "w1-1"); ev.id != epoch+"-3" {
				t.Fatalf("resumed with %+v", ev)
			}
			if ev := onA.next(t); ev != (event{id: epoch + "-4"}) {
				t.Fatalf("after the last event of workspace-1: %+v", ev)
			}
			// Resumed from that id: nothing again; the next workspace-1 event is next.
			again := a.openWith(t, epoch+"-4", only1)
			again.expect(t, "supervaizer.connected", "")
			b.invokeIn(t, "w1-2", "workspace-1")
			again.expect(t, "supervaizer.effect", "w1-2")
			// Without the header: every workspace's events, as the reference.
			all := a.open(t, "0-0")
			all.expect(t, "supervaizer.connected", "")
			for _, rid := range []string{"w1-0", "w2-0", "w1-1", "w2-1", "w1-2"} {
				all.expect(t, "supervaizer.effect", rid)
			}
		})
	}
}

// TestSingleInstanceStores: the memory store keeps each process's effects to itself, and a bolt
// file is held by one process: a second controller on it does not start. Neither is
// multi-instance.
func TestSingleInstanceStores(t *testing.T) {
	t.Run("memory", func(t *testing.T) {
		env := []string{"SUPERVAIZER_SERVER_ID=" + testenv.UniqueName("svz-cross-"), "SUPERVAIZER_STORE=memory"}
		a, b := mustStart(t, env...), mustStart(t, env...)
		a.invoke(t, "a-0")
		onA, onB := a.open(t, "0-0"), b.open(t, "0-0")
		onA.expect(t, "supervaizer.connected", "")
		onA.expect(t, "supervaizer.effect", "a-0")
		onB.expect(t, "supervaizer.connected", "")
		b.invoke(t, "b-0")
		onB.expect(t, "supervaizer.effect", "b-0") // B never had A's event before its own
	})
	t.Run("bolt", func(t *testing.T) {
		env := []string{"SUPERVAIZER_SERVER_ID=" + testenv.UniqueName("svz-cross-"), "SUPERVAIZER_STORE=bolt",
			"SUPERVAIZER_DATA_DIR=" + filepath.Join(t.TempDir(), "data")}
		a := mustStart(t, env...)
		a.invoke(t, "a-0")
		_, err := start(t, env...)
		if err == nil || !strings.Contains(err.Error(), "locked by another process") {
			t.Fatalf("a second controller on the same bolt file: %v", err)
		}
	})
}

// BenchmarkDelay measures, per backend, the delay from an action's answer (received by the
// client) to its effect event (received by a client of a stream on another controller process;
// the same process for the single-instance stores), as p50-ms and p99-ms over b.N actions made
// one at a time. Run: scripts/with-services go test -run '^$' -bench Delay -benchtime 200x
// ./core/internal/crossinstance
func BenchmarkDelay(b *testing.B) {
	stores := sharedStores(b)
	stores["memory"] = []string{"SUPERVAIZER_STORE=memory"}
	stores["bolt"] = []string{"SUPERVAIZER_STORE=bolt", "SUPERVAIZER_DATA_DIR=" + filepath.Join(b.TempDir(), "data")}
	for _, backend := range []string{"memory", "bolt", "postgres", "redis", "dynamodb"} {
		b.Run(backend, func(b *testing.B) {
			env := append([]string{"SUPERVAIZER_SERVER_ID=" + testenv.UniqueName("svz-bench-")}, stores[backend]...)
			a := mustStart(b, env...)
			reader := a
			if backend != "memory" && backend != "bolt" {
				reader = mustStart(b, env...)
			}
			s := reader.open(b, "")
			s.expect(b, "supervaizer.connected", "")
			delays := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := range b.N {
				id := fmt.Sprintf("bench-%d", i)
				a.invoke(b, id)
				answered := time.Now()
				s.expect(b, "supervaizer.effect", id)
				delays = append(delays, time.Since(answered))
			}
			b.StopTimer()
			slices.Sort(delays)
			ms := func(q float64) float64 {
				return float64(delays[min(len(delays)-1, int(q*float64(len(delays))))]) / float64(time.Millisecond)
			}
			b.ReportMetric(ms(0.50), "p50-ms")
			b.ReportMetric(ms(0.99), "p99-ms")
		})
	}
}
