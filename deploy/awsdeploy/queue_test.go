package awsdeploy

import (
	"testing"
	"time"

	"github.com/supervaize/svz/core/jobs"
)

// The jobs queue's visibility timeout is 6 times the function timeout, and never less than the
// function timeout plus the task lease and its skew margin: a delivery the function's timeout
// stopped keeps its task leased that long.
func TestJobsVisibility(t *testing.T) {
	if JobsLeaseSeconds != 32 || time.Duration(JobsLeaseSeconds)*time.Second != jobs.DefaultLease+jobs.SkewMargin {
		t.Fatalf("JobsLeaseSeconds = %d", JobsLeaseSeconds)
	}
	for timeout, want := range map[int]int{3: 35, 6: 38, 7: 42, 30: 180, 60: 360, 900: 5400} {
		if got := JobsVisibility(timeout); got != want {
			t.Errorf("JobsVisibility(%d) = %d, want %d", timeout, got, want)
		}
	}
}
