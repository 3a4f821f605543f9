package testkit

import (
	"net/http"
	"strconv"
	"testing"
	"time"
)

// A request deadline is checked against the times a test took around the request, never as a
// duration left when the handler ran: on a loaded machine the handler may run seconds after the
// deadline was set, and an emulator may count its own start against the timeout.

// WriteDeadline answers r's context deadline as Unix nanoseconds, or "none".
func WriteDeadline(w http.ResponseWriter, r *http.Request) {
	dl, ok := r.Context().Deadline()
	if !ok {
		_, _ = w.Write([]byte("none"))
		return
	}
	_, _ = w.Write([]byte(strconv.FormatInt(dl.UnixNano(), 10)))
}

// ParseDeadline reads what WriteDeadline answered.
func ParseDeadline(t testing.TB, body string) time.Time {
	t.Helper()
	ns, err := strconv.ParseInt(body, 10, 64)
	if err != nil {
		t.Fatalf("the handler saw no request deadline: %q", body)
	}
	return time.Unix(0, ns)
}

// WantDeadline fails t unless dl is timeout after a moment between from (taken before the request
// was sent, or before the emulator that set the deadline started) and to (taken once the answer
// was received), to the given precision (the unit in which the platform hands the deadline over).
func WantDeadline(t testing.TB, dl, from, to time.Time, timeout, precision time.Duration) {
	t.Helper()
	lo, hi := from.Add(timeout).Truncate(precision), to.Add(timeout)
	if dl.Before(lo) || dl.After(hi) {
		t.Fatalf("request deadline %v after the request began (%v before the answer came): want the %v timeout",
			dl.Sub(from), dl.Sub(to), timeout)
	}
}
