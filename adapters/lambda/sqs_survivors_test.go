package lambda

import (
	"testing"
	"time"
)

// TestTimeoutLimit: the time left of an invocation that just began is rounded up to the second,
// the function's timeout (a mutant the mutation tester left alive, issue 30).
func TestTimeoutLimit(t *testing.T) {
	for left, want := range map[time.Duration]string{
		41 * time.Second:                      "the function's timeout (41 s)",
		41*time.Second - time.Nanosecond:      "the function's timeout (41 s)",
		41*time.Second - 2*time.Nanosecond:    "the function's timeout (41 s)",
		41*time.Second + time.Nanosecond:      "the function's timeout (42 s)",
		41*time.Second + 500*time.Millisecond: "the function's timeout (42 s)",
		time.Nanosecond:                       "the function's timeout (1 s)",
		900*time.Second - 3*time.Millisecond:  "the function's timeout (900 s)",
	} {
		if got := timeoutLimit(left); got != want {
			t.Errorf("%v left: %q, want %q", left, got, want)
		}
	}
}
