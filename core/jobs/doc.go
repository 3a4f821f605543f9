// Package jobs is background work for svz agents: jobs that outlive the call that starts them.
//
// On serverless platforms nothing runs after a call is answered (Lambda freezes the sandbox,
// Cloud Run and App Runner throttle the CPU, API Gateway stops a call at 29 s), so work that takes
// minutes or hours cannot run inside job.start. Here it is declared by stable name on the agent
// (Define), started by a handler (Work.Start or Work.Started), and run in steps whose results are
// recorded in the controller's store:
//
//	find := jobs.Define(agent, "leads.find", func(ctx context.Context, in Setup) error {
//		leads, err := jobs.Step(ctx, "find", func(ctx context.Context) ([]Lead, error) { return search(ctx, in) })
//		if err != nil {
//			return err
//		}
//		_, err = jobs.Step(ctx, "score", func(ctx context.Context) (int, error) { return score(ctx, leads) })
//		return err
//	})
//
// The promises:
//
//   - Start writes the task to the store before the call is answered, then hands a reference to
//     the platform's queue (a Dispatcher): SQS on Lambda, Cloud Tasks on Cloud Run, an in-process
//     pool over the store on a plain server. Starting is idempotent per job: a retried or second
//     job.start never starts a second run.
//   - A delivery runs the work from the top; a step that completed earlier returns its recorded
//     result without running, so the work continues at its first unfinished step. A completed
//     step ran exactly once; a step interrupted by a crash runs at most once more per crash.
//   - One instance runs a task at a time, under a lease it renews while it works; a task whose
//     instance died is taken over once the lease lapses (by the queue's redelivery, or the pool's
//     scan).
//   - Before each step, a delivery whose time is nearly up (the Lambda deadline, the Cloud Run
//     request timeout) saves and hands the task on to a fresh delivery (continuation); the job's
//     own timeout bounds the whole job.
//   - A step that fails is retried with backoff (MaxAttempts, default 3) in a later delivery, then
//     fails the job with its error; job.stop cancels the running step and starts no other.
//   - Messages carry only the task's reference (agent, workspace, job, work, attempt), never its
//     input, parameters or tokens; the task record holds the input, in the store.
//
// The job's state (job.sync's answer) is projected from the task record: one case per Case
// option, one step per Step and Await, with their statuses. An agent that keeps its job through
// this package needs no job.sync, job.stop or step.awaiting.submit handler of its own: the
// controller serves them when the agent declares them and defines background work. See
// docs/jobs.md.
package jobs
