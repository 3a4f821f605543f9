package lambda

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/supervaize/svz/adapters/adaptertest"
	"github.com/supervaize/svz/internal/testenv"
)

// TestJobTraceUnderEmulator: on Lambda (the real bootstrap, built with LAMBDA_OTEL=1, under the
// emulator; its queue moto's SQS; Jaeger the OTLP receiver), the trace context of a job.start
// travels in the SQS message's attributes, so that its three deliveries join the call's trace,
// each the child of the one that handed it on; the call's log line carries its trace and span
// ids, the trace id in X-Ray's form too.
func TestJobTraceUnderEmulator(t *testing.T) {
	otlp, query := testenv.Need(t, testenv.OTLP), testenv.Need(t, testenv.JaegerQuery)
	// A trace id of this run: the tests of other packages share the receiver.
	trace, caller := testenv.UniqueName("4bf92f3577b34da6a3ce"), "00f067aa0ba902b7"
	service := testenv.UniqueName("svz-lambda-")
	f := startJobsFunctionWith(t, []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + otlp, "OTEL_SERVICE_NAME=" + service, "OTEL_METRICS_EXPORTER=none"},
		"LAMBDA_OTEL=1")
	body := `{"jsonrpc":"2.0","id":1,"method":"supervaizer/action.invoke","params":{"request_id":"req-1",` +
		`"actor":{"user_id":"user-1"},"workspace":{"id":"workspace-1"},"mission_id":"mission-1","agent_slug":"jobs-test-agent",` +
		`"surface":"job.start","action":"job.start","job_id":"job-t","input":{}}}`
	ev := localFunctionURLEvent("POST", "/a2a", "", body)
	ev.Headers["x-api-key"] = adaptertest.APIKey
	ev.Headers["traceparent"] = "00-" + trace + "-" + caller + "-01"
	if status, out := f.em.invoke(t, payload(t, ev)); status != http.StatusOK || !strings.Contains(string(out), `\"status\":\"ok\"`) {
		t.Fatalf("job.start: %d %s", status, out)
	}
	msg := f.next(t)
	if tp := msg.MessageAttributes["traceparent"]; tp.DataType != "String" || !strings.HasPrefix(tp.StringValue, "00-"+trace+"-") {
		t.Fatalf("the message's trace context: %+v", msg.MessageAttributes)
	}
	for i := range 3 {
		if got := f.deliver(t, msg); got != `{"batchItemFailures":[]}` {
			t.Fatalf("delivery %d: %s", i, got)
		}
		f.ack(t, msg)
		if i < 2 {
			msg = f.next(t)
		}
	}

	spans := testenv.JaegerTrace(t, query, trace, 7)
	var call testenv.Span
	var deliveries, steps []testenv.Span
	for _, s := range spans {
		switch {
		case s.Service != service:
			t.Errorf("span %v of service %q", s, s.Service)
		case s.Name == "supervaizer/action.invoke job.start":
			call = s
		case s.Name == "deliver count":
			deliveries = append(deliveries, s)
		case strings.HasPrefix(s.Name, "step "):
			steps = append(steps, s)
		}
	}
	if call.Parent != caller || len(deliveries) != 3 || len(steps) != 3 {
		t.Fatalf("call %v (want the child of %s), %d deliveries, %d steps: %v", call, caller, len(deliveries), len(steps), spans)
	}
	parent := call.SpanID
	for i, d := range deliveries {
		if d.Parent != parent || d.Tags["svz.job.attempt"] != itoa(i) || d.Tags["svz.job.receive"] != "1" || d.Tags["span.kind"] != "consumer" {
			t.Errorf("delivery %d %v: parent %s, want %s; tags %v", i, d, d.Parent, parent, d.Tags)
		}
		if s := steps[i]; s.Parent != d.SpanID || s.Name != "step "+[]string{"one", "two", "three"}[i] {
			t.Errorf("step %d %v: want the child of delivery %v", i, s, d)
		}
		parent = d.SpanID
	}
	if s := call.Tags; s["svz.job.id"] != "job-t" || s["svz.outcome"] != "ok" {
		t.Errorf("call tags %v", s)
	}

	var found bool
	for line := range strings.SplitSeq(f.em.logs.String(), "\n") {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) != nil || rec["msg"] != "action" || rec["action"] != "job.start" {
			continue
		}
		found = true
		if rec["trace_id"] != trace || rec["span_id"] != call.SpanID || rec["xray_trace_id"] != "1-"+trace[:8]+"-"+trace[8:] {
			t.Errorf("job.start's log line: %s, want trace %s, span %s", line, trace, call.SpanID)
		}
	}
	if !found {
		t.Errorf("no log line of job.start:\n%s", f.em.logs.String())
	}
}

// TestNoExportWithoutSettings: a bootstrap that links the OpenTelemetry SDK (LAMBDA_OTEL=1)
// holds no socket but its Runtime API's after a call when no OTEL_* setting is given (observed in
// /proc), and sends nothing to an OTLP receiver on the default endpoint (localhost:4318, when
// free); the same bootstrap given OTEL_EXPORTER_OTLP_ENDPOINT exports the call's span to it (so
// the receivers' observation can fail).
func TestNoExportWithoutSettings(t *testing.T) {
	testenv.Need(t, testenv.RIE)
	bootstrap := buildBootstrapOf(t, "", "LAMBDA_OTEL=1")
	// An OTLP receiver that accepts everything: the exporter keeps its connection open, so that
	// /proc shows it. Another listens on the default endpoint (localhost:4318) when that is free.
	var exports atomic.Int32
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		exports.Add(1)
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	defer collector.Close()
	if l, err := net.Listen("tcp", "127.0.0.1:4318"); err == nil {
		def := &httptest.Server{Listener: l, Config: &http.Server{Handler: collector.Config.Handler}}
		def.Start()
		defer def.Close()
	}
	for _, export := range []bool{false, true} {
		env := adaptertest.Environ()
		if export {
			env = append(env, "OTEL_EXPORTER_OTLP_ENDPOINT="+collector.URL, "OTEL_METRICS_EXPORTER=none")
		}
		em := startEmulator(t, bootstrap, env...)
		ev := localFunctionURLEvent("POST", "/a2a", "", `{"jsonrpc":`) // a call (a parse error): one span
		ev.Headers["x-api-key"] = adaptertest.APIKey
		if status, out := em.invoke(t, payload(t, ev)); status != http.StatusOK || !strings.Contains(string(out), "-32700") {
			t.Fatalf("call: %d %s", status, out)
		}
		remote := sockets(t, pidOf(t, bootstrap))
		if !export && len(remote) != 1 {
			t.Errorf("without OTEL_*: the bootstrap holds sockets to %v, want its Runtime API's alone", remote)
		}
		if got := exports.Load() > 0; got != export {
			t.Errorf("export %v: %d exports reached the receivers", export, exports.Load())
		}
	}
}

// pidOf is the pid of the one process running the executable at path.
func pidOf(t *testing.T, path string) int {
	t.Helper()
	procs, _ := filepath.Glob("/proc/[0-9]*/exe")
	for _, p := range procs {
		if exe, err := os.Readlink(p); err == nil && exe == path {
			pid, _ := strconv.Atoi(strings.Split(p, "/")[2])
			return pid
		}
	}
	t.Fatalf("no process runs %s", path)
	return 0
}

// sockets are the remote addresses (ip:port) of the TCP sockets process pid holds open, from
// /proc: its descriptors' socket inodes, looked up in the TCP tables.
func sockets(t *testing.T, pid int) []string {
	t.Helper()
	inodes := map[string]bool{}
	fds, _ := filepath.Glob(fmt.Sprintf("/proc/%d/fd/*", pid))
	for _, fd := range fds {
		if l, err := os.Readlink(fd); err == nil && strings.HasPrefix(l, "socket:[") {
			inodes[strings.TrimSuffix(strings.TrimPrefix(l, "socket:["), "]")] = true
		}
	}
	var out []string
	for _, table := range []string{"tcp", "tcp6"} {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/%s", pid, table))
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			f := strings.Fields(line)
			if len(f) < 10 || !inodes[f[9]] {
				continue
			}
			host, port, _ := strings.Cut(f[2], ":")
			p, _ := strconv.ParseUint(port, 16, 16)
			if p == 0 {
				continue // a listener
			}
			raw, _ := hex.DecodeString(host)
			ip := make(net.IP, len(raw))
			for i := 0; i < len(raw); i += 4 { // each 32-bit word is in host (little-endian) order
				for j := range 4 {
					ip[i+j] = raw[i+3-j]
				}
			}
			out = append(out, net.JoinHostPort(ip.String(), strconv.FormatUint(p, 10)))
		}
	}
	return out
}
