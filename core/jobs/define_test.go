package jobs_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/supervaize/svz/core/jobs"
)

// TestDefineRefusals: each mistake in a work's options is reported by the registry, naming the
// work and the option; the values at each boundary that are valid define the work.
func TestDefineRefusals(t *testing.T) {
	run := func(context.Context, struct{}) error { return nil }
	handler := func(context.Context, struct{}, jobs.Failure) error { return nil }
	for _, c := range []struct {
		name string
		opts []jobs.Option
		want string // "" when the work is defined
	}{
		{"negative timeout", []jobs.Option{jobs.Timeout(-time.Nanosecond)}, "jobs.Timeout cannot be negative"},
		{"zero timeout", []jobs.Option{jobs.Timeout(0)}, ""},
		{"no attempts", []jobs.Option{jobs.MaxAttempts(0)}, "jobs.MaxAttempts must be at least 1"},
		{"one attempt", []jobs.Option{jobs.MaxAttempts(1)}, ""},
		{"negative backoff", []jobs.Option{jobs.Backoff(-time.Nanosecond)}, "jobs.Backoff cannot be negative"},
		{"zero backoff", []jobs.Option{jobs.Backoff(0)}, ""},
		{"no failure handler", []jobs.Option{jobs.OnFailure[struct{}](nil)}, "jobs.OnFailure: the handler function is required"},
		{"zero handler timeout", []jobs.Option{jobs.OnFailure(handler, jobs.HandlerTimeout(0))}, "jobs.OnFailure: HandlerTimeout must be positive"},
		{"negative handler timeout", []jobs.Option{jobs.OnFailure(handler, jobs.HandlerTimeout(-time.Second))}, "jobs.OnFailure: HandlerTimeout must be positive"},
		{"shortest handler timeout", []jobs.Option{jobs.OnFailure(handler, jobs.HandlerTimeout(time.Nanosecond))}, ""},
		{"nil limit", []jobs.Option{jobs.Limited(nil)}, "jobs: a nil limit"},
		{"unnamed limit", []jobs.Option{jobs.Limited(jobs.NewLimit(" ", jobs.MaxRunning(1)))}, `jobs: a limit name is 1 to 200 characters, got " "`},
		{"longest limit name", []jobs.Option{jobs.Limited(jobs.NewLimit(strings.Repeat("l", 200), jobs.MaxRunning(1)))}, ""},
		{"too long a limit name", []jobs.Option{jobs.Limited(jobs.NewLimit(strings.Repeat("l", 201), jobs.MaxRunning(1)))}, `jobs: a limit name is 1 to 200 characters, got "` + strings.Repeat("l", 201) + `"`},
		{"limit of nothing", []jobs.Option{jobs.Limited(jobs.NewLimit("p"))}, `jobs: limit "p" needs MaxRunning(n) or Rate(n, per) with n at least 1`},
		{"negative running", []jobs.Option{jobs.Limited(jobs.NewLimit("p", jobs.MaxRunning(-1), jobs.Rate(1, time.Second)))}, `jobs: limit "p" needs MaxRunning(n) or Rate(n, per) with n at least 1`},
		{"negative rate", []jobs.Option{jobs.Limited(jobs.NewLimit("p", jobs.MaxRunning(1), jobs.Rate(-1, time.Second)))}, `jobs: limit "p" needs MaxRunning(n) or Rate(n, per) with n at least 1`},
		{"one running", []jobs.Option{jobs.Limited(jobs.NewLimit("p", jobs.MaxRunning(1)))}, ""},
		{"one a second", []jobs.Option{jobs.Limited(jobs.NewLimit("p", jobs.Rate(1, time.Second)))}, ""},
		{"rate of no period", []jobs.Option{jobs.Limited(jobs.NewLimit("p", jobs.Rate(1, 0)))}, `jobs: limit "p": the period of Rate must be positive`},
		{"shortest period", []jobs.Option{jobs.Limited(jobs.NewLimit("p", jobs.Rate(1, time.Nanosecond)))}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := newOwner()
			jobs.Define(o, "w", run, c.opts...)
			err := o.reg.Err()
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case c.want != "" && (err == nil || err.Error() != `background work "w": `+c.want):
				t.Fatalf("err %v, want %s", err, c.want)
			}
		})
	}
}
