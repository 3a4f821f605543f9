package checkpoint

import (
	"errors"
	"strings"
)

// BlockedError is the reference's RuleCheckpointBlocked: a checkpoint answered stop.
type BlockedError struct {
	CheckpointID string
	Phase        string
}

func (e *BlockedError) Error() string {
	return "Rule checkpoint " + pyRepr(e.CheckpointID) + " returned 'stop'"
}

// pyRepr quotes s as Python's repr of a str does, for the reference's messages.
func pyRepr(s string) string {
	q := "'"
	if strings.Contains(s, "'") && !strings.Contains(s, `"`) {
		q = `"`
	}
	r := strings.NewReplacer(`\`, `\\`, "\n", `\n`, "\r", `\r`, "\t", `\t`)
	s = r.Replace(s)
	if q == "'" {
		s = strings.ReplaceAll(s, "'", `\'`)
	}
	return q + s + q
}

// RecoveryError is the reference's RuleCheckpointRecoveryRequired: the occurrence cannot go on by
// itself. Match it with errors.As, or its messages with errors.Is against the Err* values below.
type RecoveryError struct{ err error }

func (e *RecoveryError) Error() string { return e.err.Error() }
func (e *RecoveryError) Unwrap() error { return e.err }

func recovery(err error) error { return &RecoveryError{err: err} }

// The reference's messages (spec §6.5, §6.6). Errors returned by this package match them with
// errors.Is.
var (
	//lint:ignore ST1005 the reference SDK's exact message
	ErrRequestFailed = errors.New("Rule checkpoint request failed")
	//lint:ignore ST1005 the reference SDK's exact message
	ErrResponseHash = errors.New("Rule checkpoint response snapshot_hash does not match")
	//lint:ignore ST1005 the reference SDK's exact message
	ErrActive = errors.New("Rule checkpoint occurrence is active")
	//lint:ignore ST1005 the reference SDK's exact message
	ErrEffectStarted = errors.New("Started rule-gated effect requires an explicit recovery handler")
	//lint:ignore ST1005 the reference SDK's exact message
	ErrAmbiguousAdvance = errors.New("Rule checkpoint advancement is ambiguous")
	//lint:ignore ST1005 the reference SDK's exact message
	ErrNotReady = errors.New("Rule checkpoint is not ready to recover")
	//lint:ignore ST1005 the reference SDK's exact message
	ErrRetryContext = errors.New("Rule checkpoint retry context changed")
	//lint:ignore ST1005 the reference SDK's exact message
	ErrRetrySnapshot = errors.New("Rule checkpoint retry snapshot changed")
	//lint:ignore ST1005 the reference SDK's exact message
	ErrRetryStep = errors.New("Rule checkpoint retry step changed")
	//lint:ignore ST1005 the reference SDK's exact message
	ErrRecoverySnapshot = errors.New("Rule checkpoint recovery snapshot changed")
	//lint:ignore ST1005 the reference SDK's exact message
	ErrRecoveryContext = errors.New("Rule checkpoint recovery context changed")
	//lint:ignore ST1005 the reference SDK's exact message
	ErrOtherAgent = errors.New("Rule checkpoint case belongs to another agent")
	//lint:ignore ST1005 the reference SDK's exact message
	ErrResumeOtherAgent = errors.New("Rule checkpoint resume is for another agent")
	//lint:ignore ST1005 the reference SDK's exact message
	ErrResumeSnapshot = errors.New("Rule checkpoint resume snapshot_hash does not match")
	//lint:ignore ST1005 the reference SDK's exact message
	ErrResumeMismatch = errors.New("Rule checkpoint resume does not match persisted occurrence")
	// ErrRetryInput: svz's own, since svz keeps the effect's input: a retried occurrence must run
	// the same step with the same input.
	//lint:ignore ST1005 worded like the reference's retry messages
	ErrRetryInput = errors.New("Rule checkpoint retry input changed")
	// ErrLeaseLost: the instance running the occurrence lost its lease (it stalled longer than
	// the lease and another instance took the occurrence over); it stops where it is.
	ErrLeaseLost = errors.New("checkpoint: this instance lost the occurrence's lease (it stalled longer than the lease); another instance may have taken it over")
	// ErrTokenInContext: the checkpoint token was found in a context, an input or a result.
	ErrTokenInContext = errors.New("checkpoint: the rule snapshot's checkpoint token is in a checkpoint context, a step input or a result: build them from business fields only, never from input.rule_snapshot")
)
