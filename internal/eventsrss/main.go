// Command eventsrss reproduces the effect stream's memory figure (docs/events.md, make
// bench-events-rss): it starts a controller in local mode as a child process, logs 300 effect
// events of about 130 KB (a resource list of thousands of items), opens 100 connections that
// resume GET /a2a/events from the beginning and never read, and reports the child's resident
// memory (VmRSS, sampled, and VmHWM, the peak) from /proc/PID/status. Linux only.
//
//	go run ./internal/eventsrss [-events 300] [-size 130000] [-streams 100] [-watch 8s]
package main

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/supervaize/svz/adapters/platform"
	"github.com/supervaize/svz/core"
	"github.com/supervaize/svz/core/config"
	"github.com/supervaize/svz/core/contract"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "serve" {
		platform.Main(build, platform.WithLocalMode())
		return
	}
	events := flag.Int("events", 300, "effect events logged")
	size := flag.Int("size", 130_000, "bytes of each event's message")
	streams := flag.Int("streams", 100, "non-reading GET /a2a/events connections")
	watch := flag.Duration("watch", 8*time.Second, "how long to sample the memory once the streams are open (under the 10 s write timeout)")
	flag.Parse()
	if err := run(*events, *size, *streams, *watch); err != nil {
		fmt.Fprintln(os.Stderr, "eventsrss:", err)
		os.Exit(1)
	}
}

// build is the controller of the child: one agent whose action answers one large effect.
func build(ctx context.Context, getenv func(string) string, log *slog.Logger) (http.Handler, error) {
	reg, err := contract.BuildRegistration(contract.RegistrationSpec{AgentSlug: "big", DisplayName: "Big", A2UICatalogVersion: "big.1",
		Surfaces: []contract.SurfaceSpec{contract.SurfaceID("contacts")}, Actions: []contract.ActionSpec{contract.ActionID("resource.contacts.list")}})
	if err != nil {
		return nil, err
	}
	a, err := core.NewAgent(core.AgentConfig{Name: "Big", Version: "1.0", Registration: reg})
	if err != nil {
		return nil, err
	}
	size, _ := strconv.Atoi(getenv("EVENTSRSS_SIZE"))
	a.HandleAction("resource.contacts.list", core.ActionFunc(func(context.Context, *contract.ActionRequest) (*contract.ActionResult, error) {
		return &contract.ActionResult{Status: contract.StatusOK, Effects: []contract.Effect{{Type: "resource.contacts.list", Message: strings.Repeat("c", size)}}}, nil
	}))
	a.HandleSurface("contacts", core.SurfaceFunc(func(_ context.Context, r *contract.SurfaceRequest) (*contract.SurfaceResult, error) {
		return &contract.SurfaceResult{Surface: r.Surface}, nil
	}))
	return config.NewController(ctx, getenv, log, a)
}

func run(events, size, streams int, watch time.Duration) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	child := exec.Command(self, "serve")
	// Events are kept whole (at most 1 MiB each, 1 GiB in all), however large -size makes them:
	// the streams' memory bounds are measured, not the log's.
	child.Env = append(os.Environ(), "PORT=0", "SUPERVAIZER_STORE=memory", "SUPERVAIZER_LOG_LEVEL=ERROR", "EVENTSRSS_SIZE="+strconv.Itoa(size),
		"SUPERVAIZER_EVENT_MAX_BYTES=1048576", "SUPERVAIZER_EVENT_RETENTION_BYTES=1073741824")
	out, err := child.StdoutPipe()
	if err != nil {
		return err
	}
	child.Stderr = os.Stderr
	if err := child.Start(); err != nil {
		return err
	}
	defer func() { _ = child.Process.Kill(); _ = child.Wait() }()
	base, err := banner(out)
	if err != nil {
		return err
	}
	go func() { _, _ = io.Copy(io.Discard, out) }()
	pid := child.Process.Pid
	idle, _ := memory(pid)

	for i := range events {
		body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"supervaizer/action.invoke","params":{"request_id":"r%d","actor":{"user_id":"me"},`+
			`"workspace":{"id":"local"},"mission_id":"m1","agent_slug":"big","surface":"contacts","action":"resource.contacts.list","input":{}}}`, i, i)
		req, _ := http.NewRequest(http.MethodPost, base+"/a2a", strings.NewReader(body))
		req.Header.Set("X-API-Key", "local-dev")
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !bytes.Contains(b, []byte(`"status":"ok"`)) {
			return fmt.Errorf("action %d: %s", i, b[:min(len(b), 300)])
		}
	}
	logged, _ := memory(pid)

	addr := strings.TrimPrefix(base, "http://")
	conns := make([]net.Conn, 0, streams)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for range streams {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			return err
		}
		conns = append(conns, c)
		if _, err := io.WriteString(c, "GET /a2a/events HTTP/1.1\r\nHost: "+addr+"\r\nX-API-Key: local-dev\r\nLast-Event-ID: 0-0\r\n\r\n"); err != nil {
			return err
		}
	}
	var peak int64
	for end := time.Now().Add(watch); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		rss, _ := memory(pid)
		peak = max(peak, rss)
	}
	_, hwm := memory(pid)
	fmt.Printf("events %d x %d B, %d non-reading streams: VmRSS idle %.1f MiB, after logging %.1f MiB, max sampled %.1f MiB, VmHWM %.1f MiB (goal < 256 MiB)\n",
		events, size, streams, mib(idle), mib(logged), mib(peak), mib(hwm))
	if hwm >= 256<<20 {
		return fmt.Errorf("VmHWM %.1f MiB is over the 256 MiB goal", mib(hwm))
	}
	return nil
}

// banner reads the child's banner and returns its base URL.
func banner(r io.Reader) (string, error) {
	re := regexp.MustCompile(`svz local mode: (\S+)`)
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		if m := re.FindStringSubmatch(sc.Text()); m != nil {
			return m[1], nil
		}
	}
	return "", fmt.Errorf("the controller printed no banner (%v)", sc.Err())
}

// memory reads VmRSS and VmHWM of pid, in bytes.
func memory(pid int) (rss, hwm int64) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		n, _ := strconv.ParseInt(f[1], 10, 64)
		switch f[0] {
		case "VmRSS:":
			rss = n << 10
		case "VmHWM:":
			hwm = n << 10
		}
	}
	return rss, hwm
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }
