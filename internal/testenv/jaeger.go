package testenv

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"
)

// Span is a span as Jaeger's query API (GET /api/traces/{id}) returns it, its tags as strings.
type Span struct {
	TraceID, SpanID, Name string
	// Parent is the span id of its CHILD_OF reference, "" for a root.
	Parent  string
	Service string
	Tags    map[string]string
}

// String is the span's name, id and parent, for failure messages.
func (s Span) String() string { return fmt.Sprintf("%s[%s←%s]", s.Name, s.SpanID, s.Parent) }

// JaegerTrace reads trace traceID (32 hex) from the Jaeger query API at query until it holds at
// least n spans, and returns them sorted by start time; it fails the test after a minute (the
// receiver stores spans as they arrive; the exporter sent them before the caller asks).
func JaegerTrace(t testing.TB, query, traceID string, n int) []Span {
	t.Helper()
	var last string
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		spans, raw, err := jaegerTrace(query, traceID)
		last = raw
		if err == nil && len(spans) >= n {
			return spans
		}
		if err != nil {
			last = err.Error()
		}
	}
	t.Fatalf("Jaeger has no trace %s of %d spans: %s", traceID, n, last)
	return nil
}

func jaegerTrace(query, traceID string) ([]Span, string, error) {
	resp, err := http.Get(strings.TrimRight(query, "/") + "/api/traces/" + traceID)
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	var body struct {
		Data []struct {
			Spans []struct {
				TraceID, SpanID, OperationName, ProcessID string
				StartTime                                 int64
				References                                []struct{ RefType, TraceID, SpanID string }
				Tags                                      []struct {
					Key   string
					Value any
				}
			}
			Processes map[string]struct{ ServiceName string }
		}
	}
	if resp.StatusCode == http.StatusNotFound {
		return nil, "not found", nil
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || resp.StatusCode != http.StatusOK {
		return nil, "", fmt.Errorf("GET trace: %s %v", resp.Status, err)
	}
	type started struct {
		Span
		at int64
	}
	var out []started
	for _, tr := range body.Data {
		for _, s := range tr.Spans {
			sp := Span{TraceID: s.TraceID, SpanID: s.SpanID, Name: s.OperationName, Service: tr.Processes[s.ProcessID].ServiceName, Tags: map[string]string{}}
			for _, r := range s.References {
				if r.RefType == "CHILD_OF" {
					sp.Parent = r.SpanID
				}
			}
			for _, tag := range s.Tags {
				sp.Tags[tag.Key] = fmt.Sprint(tag.Value)
			}
			out = append(out, started{sp, s.StartTime})
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].at < out[j].at })
	spans := make([]Span, len(out))
	for i, s := range out {
		spans[i] = s.Span
	}
	return spans, fmt.Sprint(spans), nil
}
