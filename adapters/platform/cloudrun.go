//go:build !svz_nocloudrun

package platform

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"github.com/supervaize/svz/adapters/cloudrun"
	"github.com/supervaize/svz/adapters/internal/httpkit"
	"github.com/supervaize/svz/core"
	"github.com/supervaize/svz/core/jobs"
	"github.com/supervaize/svz/core/telemetry"
	"github.com/supervaize/svz/internal/envvar"
	"github.com/supervaize/svz/internal/localmode"
)

// cloudRunServer returns the Cloud Run function server. In local mode (a local emulation of Cloud
// Run, see package localmode) it listens on loopback only and refuses, on every route, a Host
// that is not loopback (DNS rebinding), as local mode's plain server does.
func cloudRunServer(getenv func(string) string, log *slog.Logger, local bool) (func(context.Context, http.Handler) error, error) {
	opts := []cloudrun.Option{cloudrun.WithPort(getenv("PORT")), cloudrun.WithLogger(log)}
	if local {
		opts = append(opts, cloudrun.WithHost("127.0.0.1"))
	}
	return func(ctx context.Context, h http.Handler) error {
		if local {
			h = httpkit.LoopbackOnly(h, log)
		}
		return cloudrun.Serve(ctx, h, opts...)
	}, nil
}

// cloudRunJobs gives the controller's build the Cloud Tasks queue maker (called only when an agent
// defines background work, so that only then are its settings required), and returns the wrapper
// that serves the queue's deliveries (cloudrun.TaskPath) beside the controller once it is built.
//
// A local emulation of Cloud Run (SUPERVAIZER_LOCAL_EMULATOR=true: svz deploy local, the
// Functions Framework on this machine) without SUPERVAIZER_JOBS_QUEUE has no Cloud Tasks to push
// to it: its background work runs in process, as on a plain server.
func cloudRunJobs(ctx context.Context, getenv func(string) string, log *slog.Logger) (context.Context, func(http.Handler) http.Handler) {
	keep := func(h http.Handler) http.Handler { return h }
	if emulated, _ := envvar.Bool(getenv, localmode.EnvEmulator, false); emulated && strings.TrimSpace(getenv(cloudrun.EnvJobsQueue)) == "" {
		return ctx, keep
	}
	var queue *cloudrun.Jobs
	ctx = jobs.WithQueue(ctx, func() (jobs.Dispatcher, error) {
		q, err := cloudrun.JobsFromEnv(getenv, log)
		if err != nil {
			return nil, fmt.Errorf("cloud run: %w", err)
		}
		queue = q.WithTelemetry(telemetry.FromContext(ctx))
		return queue, nil
	})
	return ctx, func(h http.Handler) http.Handler {
		if queue == nil {
			return h
		}
		c, ok := h.(*core.Controller)
		if !ok || c.Jobs() == nil {
			log.Error("background work is defined but the build returned another handler than the controller: task deliveries (" +
				cloudrun.TaskPath + ") are not served; return the *core.Controller from the BuildFunc")
			return h
		}
		return queue.Handler(h, c.Jobs())
	}
}
