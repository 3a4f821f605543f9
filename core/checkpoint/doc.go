// Package checkpoint is svz's rule checkpoints (the reference SDK's rule_controls, spec §6, seed
// 000 "Points de contrôle de règles") built for serverless: a governed job's external effect runs
// only after Studio allows it, the job advances only after Studio allows the effect's outcome,
// and every step of that is kept in the controller's store, so that any instance continues it.
//
// A governed job.start carries Studio's frozen rule_snapshot; FromJobStart turns it into the
// job's Gate (JobGate finds it again in the job's later requests). Guarded steps are defined by
// stable name on the agent (Define), with typed input and result, and run with RunGuardedStep:
// before checkpoint → effect → after checkpoint → advance. Every transition is written with
// compare-and-swap before the call that follows it, under a lease renewed while the instance
// works, so that:
//
//   - a pause returns at once with the step stored as awaiting; rule.checkpoint.resume (Resume,
//     registered by the controller) continues it on whichever instance receives it, and a
//     decision that arrives before its checkpoint's answer is stored waits in the store;
//   - an effect that started is never called again, whatever happens; one whose outcome was not
//     recorded, or an advance that did not complete, waits for RecoverGuardedStep;
//   - a retry continues where the first run stopped, sending a checkpoint whose answer was lost
//     again unchanged, and refuses a changed context, snapshot, step or input;
//   - two instances never run one occurrence at once ("Rule checkpoint occurrence is active").
//
// The snapshot and its checkpoint token are opaque: the token is never logged, never in an error,
// a checkpoint context, a step input or result, and is stored only sealed (AES-256-GCM under a
// key derived from SUPERVAIZE_API_KEY, bound to its record). Checkpoints go only to
// {SUPERVAIZE_API_URL}/api/v1/rule-checkpoints/ (the snapshot's checkpoint_url is ignored). See
// docs/checkpoints.md.
package checkpoint
