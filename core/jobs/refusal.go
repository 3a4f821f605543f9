package jobs

import (
	"errors"
	"fmt"

	"github.com/supervaize/svz/core/store"
)

// Refusals: errors of Start (and Started) that no retry of the same request can get past. The
// controller answers each with a result of status "error" naming it (core maps them once), never
// with the internal error Studio retries.

// ErrNoJobID: the request that starts the work has no job_id.
var ErrNoJobID = errors.New("jobs: Start needs the request's job_id (Studio assigns it to job.start)")

// ErrOtherInput: a job.start for a job that exists, with another input: a job id starts one job.
var ErrOtherInput = errors.New("jobs: the job was started with another input (a job id starts one job: use a new job id for another input)")

// InputTooLargeError: the task record of a job, its input included, is longer than the store
// keeps (store.ErrTooLarge): nothing was written.
type InputTooLargeError struct {
	Job string
	// Size is the record's size and Limit the store's (store.Store.MaxValueSize), in bytes.
	Size, Limit int
}

func (e *InputTooLargeError) Error() string {
	return fmt.Sprintf("jobs: the task record of job %q is %d bytes, and the store keeps at most %d: the work's input is too large", e.Job, e.Size, e.Limit)
}

// Unwrap makes the error match store.ErrTooLarge.
func (e *InputTooLargeError) Unwrap() error { return store.ErrTooLarge }
