package platform

import (
	"context"
	"fmt"
	"net/http"

	"github.com/supervaize/svz/adapters/lambda"
	"github.com/supervaize/svz/core"
	"github.com/supervaize/svz/core/jobs"
	"github.com/supervaize/svz/core/telemetry"
)

// JobsHandler is a handler that runs background work: *core.Controller is one. A BuildFunc that
// wraps the controller in another handler gives the wrapper a Jobs method returning the
// controller's, so that on Lambda the jobs queue's messages reach it.
type JobsHandler interface {
	http.Handler
	Jobs() *jobs.Service
}

var _ JobsHandler = (*core.Controller)(nil)

// lambdaJobs gives the build the SQS queue of background work (SUPERVAIZER_JOBS_QUEUE_URL, read
// by package config only when an agent defines work, so a function without work needs no queue)
// and reads the queue's maxReceiveCount (SUPERVAIZER_JOBS_MAX_RECEIVES).
func lambdaJobs(ctx context.Context, getenv func(string) string) (context.Context, int, error) {
	n, err := lambda.MaxReceives(getenv)
	if err != nil {
		return ctx, 0, fmt.Errorf("platform: %w", err)
	}
	tel := telemetry.FromContext(ctx)
	return jobs.WithQueue(ctx, func() (jobs.Dispatcher, error) {
		q, err := lambda.NewQueue(getenv)
		if err != nil {
			return nil, err
		}
		return q.WithTelemetry(tel), nil
	}), n, nil
}
