// Command sleepagent is the Lambda bootstrap of the timer test (adapters/lambda, TestSleepUnderEmulator):
// an agent whose job.start starts background work that runs a step, sleeps durably (jobs.Sleep)
// for the number of seconds its job id ends with ("sleep-600": 10 minutes), then runs another
// step. Its clock is the real time plus the offset in milliseconds that the file
// SVZ_TEST_CLOCK_FILE holds, read at every reading of the clock: the test plays SQS, which holds
// a message back for its delay, by moving the clock on by that delay before it delivers it.
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

const name, slug = "Sleep Test Agent", "sleep-test-agent"

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
	a, err := core.NewAgent(core.AgentConfig{Name: name, Version: "1.0", Description: "A durable sleep under the Lambda emulator.", Registration: reg})
	if err != nil {
		return nil, err
	}
	sleepy := jobs.Define(a, "sleepy", func(ctx context.Context, seconds int) error {
		if _, err := jobs.Step(ctx, "before", func(context.Context) (string, error) { return "before done", nil }); err != nil {
			return err
		}
		if err := jobs.Sleep(ctx, "wait", time.Duration(seconds)*time.Second); err != nil {
			return err
		}
		_, err := jobs.Step(ctx, "after", func(context.Context) (string, error) { return "after done", nil })
		return err
	}, jobs.Timeout(24*time.Hour))
	a.HandleAction("job.start", core.ActionFunc(func(ctx context.Context, req *contract.ActionRequest) (*contract.ActionResult, error) {
		id := ""
		if req.JobID != nil {
			id = *req.JobID
		}
		parts := strings.Split(id, "-")
		seconds, err := strconv.Atoi(parts[min(1, len(parts)-1)])
		if err != nil {
			return nil, fmt.Errorf("sleepagent: job id %q is not sleep-<seconds>[-...]", id)
		}
		return sleepy.Started(ctx, req, seconds)
	}))
	cfg, err := config.Load(ctx, getenv, log)
	if err != nil {
		return nil, err
	}
	queue := jobs.QueueFrom(ctx)
	if queue == nil {
		return nil, fmt.Errorf("sleepagent: no platform queue (run it on Lambda, under the emulator)")
	}
	if cfg.Jobs, err = queue(); err != nil {
		return nil, err
	}
	clock := getenv("SVZ_TEST_CLOCK_FILE")
	cfg.Now = func() time.Time {
		b, _ := os.ReadFile(clock)
		ms, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		return time.Now().Add(time.Duration(ms) * time.Millisecond)
	}
	return core.New(cfg, a)
}
