// Command jobsagent is the Lambda bootstrap of the SQS tests (adapters/lambda): an agent whose
// job.start starts background work of three steps, each recording its result in the store. It is
// built as sam build builds the function (mk/lambda.mk, the Lambda build tags).
package main

import (
	"context"
	"log/slog"
	"net/http"

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
	a.HandleAction("job.start", core.ActionFunc(func(ctx context.Context, req *contract.ActionRequest) (*contract.ActionResult, error) {
		return count.Started(ctx, req, struct{}{})
	}))
	return config.NewController(ctx, getenv, log, a)
}
