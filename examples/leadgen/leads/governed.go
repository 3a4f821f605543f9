package leads

import (
	"github.com/supervaize/svz/core"
	"github.com/supervaize/svz/core/checkpoint"
)

// A governed job (its job.start carries Studio's rule_snapshot) imports its leads as a guarded
// step (jobs.Guarded): Studio's rules decide before the import and before the job completes, and
// may pause either until an operator decides (docs/checkpoints.md); an import interrupted inside
// its effect is recovered by redoing its upserts (recover_guarded_step). An ungoverned job
// imports as a step.

// ImportStep is the guarded import's stable name: every instance defines it under this name, so
// that whichever receives rule.checkpoint.resume continues a paused import.
const ImportStep = "contacts.import"

// defineImport defines the guarded import: its input is the job's id, its result the number of
// contacts written (upserts, so its recovery redoes them).
func defineImport(owner *core.Agent) *checkpoint.Step[string, int] {
	return checkpoint.Define(owner, ImportStep, checkpoint.Funcs[string, int]{Effect: importLeads,
		AfterContext: func(id string, n int) (any, error) {
			return map[string]any{"operation": "contacts.import", "job_id": id, "imported": n}, nil
		},
	})
}

// beforeImport is the before checkpoint's context of a governed job's import.
func beforeImport(job Job) map[string]any {
	return map[string]any{"operation": "contacts.import", "job_id": job.ID, "leads": len(job.Leads),
		"industry": job.Setup.Industry, "region": job.Setup.Region, "reviewer_email": job.Setup.ReviewerEmail}
}
