// Command jobsagent is the Lambda bootstrap of the SQS tests (adapters/lambda): an agent whose
// job.start starts background work of three steps, each recording its result in the store, or,
// for a job whose id starts with "slow-", work whose one step takes 8 s, or, for a job whose id is
// "sleep-<seconds>", the timer test's work (TestSleepUnderEmulator): a step, a durable sleep of
// that many seconds (jobs.Sleep), another step; for "fan-<n>-<ms>", the fan-out test's work
// (TestFanoutUnderEmulator): n items of ms milliseconds each (a model call's stand-in), 20 at a
// time (jobs.Map), each item appending its index to the file JOBSAGENT_ITEMS_FILE names. It is built as sam build builds the function
// (mk/lambda.mk, the Lambda build tags).
//
// With JOBSAGENT_CLOCK_FILE set, the controller's clock is the real one plus the duration that
// file holds (Go syntax, e.g. 40s; none while it is empty), read at every reading of the clock: a
// test moves it forward past a dead delivery's lease, or by the delay SQS would hold a message
// back, the manual clock of a process it cannot reach otherwise.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/supervaize/svz/adapters/platform"
	"github.com/supervaize/svz/core"
	"github.com/supervaize/svz/core/config"
	"github.com/supervaize/svz/core/contract"
	"github.com/supervaize/svz/core/jobs"
)

const name, slug = "Jobs Test Agent", "jobs-test-agent"

func main() { platform.Main(build) }

func build(ctx context.Context, getenv func(string) string, log *slog.Logger) (http.Handler, error) {
	reg, err := contract.BuildRegistration(contract.RegistrationSpec{
		AgentID: slug, AgentSlug: slug, DisplayName: name,
		AgentCardURL: "/.well-known/agents/v1.0/" + slug + "_agent.json", ControllerURL: "/a2a",
		A2UICatalogVersion: "supervaizer-v2-local.0",
		Actions:            []contract.ActionSpec{contract.ActionID("job.start"), contract.ActionID("job.sync")},
		CaseLanes:          []contract.CaseLane{{ID: "work", Label: "Work", Default: true}},
		JobPolicy:          &contract.JobPolicy{Sync: &contract.JobSyncPolicy{Action: "job.sync"}},
	})
	if err != nil {
		return nil, err
	}
	a, err := core.NewAgent(core.AgentConfig{Name: name, Version: "1.0", Description: "Background work under the Lambda emulator.", Registration: reg})
	if err != nil {
		return nil, err
	}
	count := jobs.Define(a, "count", func(ctx context.Context, _ struct{}) error {
		for _, step := range []string{"one", "two", "three"} {
			if _, err := jobs.Step(ctx, step, func(context.Context) (string, error) { return step + " done", nil }); err != nil {
				return err
			}
		}
		return nil
	})
	slow := jobs.Define(a, "slow", func(ctx context.Context, _ struct{}) error {
		_, err := jobs.Step(ctx, "slow", func(context.Context) (int, error) { time.Sleep(8 * time.Second); return 8, nil })
		return err
	})
	sleepy := jobs.Define(a, "sleepy", func(ctx context.Context, seconds int) error {
		if _, err := jobs.Step(ctx, "before", func(context.Context) (string, error) { return "before done", nil }); err != nil {
			return err
		}
		if err := jobs.Sleep(ctx, "wait", time.Duration(seconds)*time.Second); err != nil {
			return err
		}
		_, err := jobs.Step(ctx, "after", func(context.Context) (string, error) { return "after done", nil })
		return err
	})
	type fanOut struct{ N, MS int }
	fan := jobs.Define(a, "fan", func(ctx context.Context, in fanOut) error {
		items := make([]int, in.N)
		for i := range items {
			items[i] = i
		}
		_, err := jobs.Map(ctx, "items", items, func(_ context.Context, i int) (int, error) {
			time.Sleep(time.Duration(in.MS) * time.Millisecond)
			return i, appendLine(getenv("JOBSAGENT_ITEMS_FILE"), strconv.Itoa(i))
		}, jobs.Concurrency(20))
		return err
	})
	a.HandleAction("job.start", core.ActionFunc(func(ctx context.Context, req *contract.ActionRequest) (*contract.ActionResult, error) {
		if secs, ok := strings.CutPrefix(req.Job(), "sleep-"); ok {
			seconds, err := strconv.Atoi(secs)
			if err != nil {
				return nil, fmt.Errorf("jobsagent: job id %q is not sleep-<seconds>", req.Job())
			}
			return sleepy.Started(ctx, req, seconds)
		}
		if spec, ok := strings.CutPrefix(req.Job(), "fan-"); ok {
			var in fanOut
			if _, err := fmt.Sscanf(spec, "%d-%d", &in.N, &in.MS); err != nil {
				return nil, fmt.Errorf("jobsagent: job id %q is not fan-<items>-<ms>: %w", req.Job(), err)
			}
			return fan.Started(ctx, req, in)
		}
		if strings.HasPrefix(req.Job(), "slow-") {
			return slow.Started(ctx, req, struct{}{})
		}
		return count.Started(ctx, req, struct{}{})
	}))
	file := getenv("JOBSAGENT_CLOCK_FILE")
	if file == "" {
		return config.NewController(ctx, getenv, log, a)
	}
	cfg, err := config.Load(ctx, getenv, log)
	if err != nil {
		return nil, err
	}
	queue := jobs.QueueFrom(ctx)
	if queue == nil {
		return nil, fmt.Errorf("jobsagent: JOBSAGENT_CLOCK_FILE runs only on Lambda (under the emulator), which gives the queue")
	}
	if cfg.Jobs, err = queue(); err != nil {
		return nil, err
	}
	cfg.Now = func() time.Time {
		b, _ := os.ReadFile(file)
		offset, _ := time.ParseDuration(strings.TrimSpace(string(b)))
		return time.Now().Add(offset)
	}
	return core.New(cfg, a)
}

// appendLine appends line to the file at path (none when path is empty).
func appendLine(path, line string) error {
	if path == "" {
		return nil
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	_, err = f.WriteString(line + "\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
