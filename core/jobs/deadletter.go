package jobs

import (
	"context"
	"errors"
	"fmt"

	"github.com/supervaize/svz/core/store"
)

// What a queue cannot deliver: a message no delivery can read, and one the queue gave up on.

// MaxMessageSize bounds a task message's body: a reference of a few hundred bytes. A longer one
// names no task a store could keep (DynamoDB bounds a key to 2 KB), so it is refused unread.
const MaxMessageSize = 4 << 10

// ErrMessageTooLarge: a queue message longer than MaxMessageSize.
var ErrMessageTooLarge = fmt.Errorf("jobs: a task message is at most %d bytes", MaxMessageSize)

// ReadMessage is DecodeMessage for a body from a queue: a body longer than MaxMessageSize is
// refused before it is decoded, so that neither the message nor its error can be large.
func ReadMessage(body []byte) (Message, error) {
	if len(body) > MaxMessageSize {
		return Message{}, fmt.Errorf("%w, got %d", ErrMessageTooLarge, len(body))
	}
	return DecodeMessage(body)
}

// Unreadable is what a log line says of a queue message no delivery can read: its length and why,
// never its content (not even the member name a decoding error quotes), which may come from
// anyone allowed to send to the queue. An adapter acknowledges such a message once, with this
// line, rather than have the queue deliver it again and log it at every receive.
func Unreadable(body []byte, err error) []any {
	why := err.Error()
	if errors.Is(err, errBadMessage) {
		why = errBadMessage.Error()
	}
	return []any{"bytes", len(body), "error", why}
}

// DeadLetter is what the platform says of a task message its queue gave up on (moved to its
// dead-letter queue).
type DeadLetter struct {
	// Receives is how many times the queue delivered the message first (its maxReceiveCount); 0
	// when it does not say.
	Receives int
	// Limit names the platform's bound on one delivery, e.g. "the function's timeout (5 s)";
	// "" when it has none.
	Limit string
}

// DeadLettered fails the job of a task message its queue dead-lettered, with what the task record
// says of why: the step that did not finish (the one a delivery was running when it last wrote
// the record, else the one after the last completed step), within the platform's limit, in how
// many receives. Failure goes through the same path as every failed job (its job.synced effect
// included).
//
// A nil error means the message is done with: the job failed now, or it had finished, waits for
// an operator, or is left to a newer message (its task was handed on after this message's last
// receive). ErrBusy means a delivery still holds the task's lease: the dead-letter queue should
// deliver the message again later, when that delivery has ended or its lease has lapsed.
func (s *Service) DeadLettered(ctx context.Context, m Message, d DeadLetter) error {
	log := s.log.With("agent_slug", m.Agent, "job_id", m.Job, "work", m.Work, "attempt", m.Attempt)
	key := m.Key()
	r, _, err := s.load(ctx, key)
	switch {
	case errors.Is(err, store.ErrNotFound):
		log.WarnContext(ctx, "dead-lettered task message for a job that no longer exists: acknowledged")
		return nil
	case err != nil:
		return fmt.Errorf("jobs: load task of dead-lettered job %q: %w", m.Job, err)
	case r.Work != m.Work:
		log.WarnContext(ctx, "dead-lettered task message names another work than the job's: acknowledged", "job_work", r.Work)
		return nil
	case r.Holder == "":
		// No delivery died holding it: the job finished, waits for its operator, or was handed on
		// since (or its retry waits), and the message that carries it now runs it.
		return nil
	case s.now().Before(r.LeaseUntil.Add(SkewMargin)):
		return ErrBusy
	}
	steps, err := stepsOf(ctx, s.cfg.Store, key, r)
	if err != nil {
		return fmt.Errorf("jobs: read the steps of dead-lettered job %q: %w", m.Job, err)
	}
	msg := deadLetterReason(r, steps, d)
	if err := s.fail(ctx, key, msg); err != nil {
		return fmt.Errorf("jobs: fail dead-lettered job %q: %w", m.Job, err)
	}
	log.WarnContext(ctx, "job failed: its task message was dead-lettered", "reason", msg)
	return nil
}

// deadLetterReason says why a task whose last delivery died holding it did not finish: the step
// its delivery showed running, else the one after the last it recorded.
func deadLetterReason(r *record, steps []*stepRecord, d DeadLetter) string {
	step := "the work's first step"
	if st := runningStep(r); st != nil {
		step = fmt.Sprintf("step %q", st.Name)
	} else if n := len(steps); n > 0 {
		step = fmt.Sprintf("the step after %q", steps[n-1].Name)
	}
	msg := step + " did not finish"
	if d.Limit != "" {
		msg += " within " + d.Limit
	}
	if d.Receives > 0 {
		return fmt.Sprintf("%s; its message was delivered %d times, then dead-lettered", msg, d.Receives)
	}
	return msg + "; its message was dead-lettered"
}

// runningStep is the last step r shows running, nil when none.
func runningStep(r *record) *stepRecord {
	for i := len(r.Open) - 1; i >= 0; i-- {
		if r.Open[i].Status == stepActive {
			return r.Open[i]
		}
	}
	return nil
}
