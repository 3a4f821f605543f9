package studio

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/supervaize/svz/core/checkpoint"
)

// StepRuleCheckpoint names the rule-checkpoint call in errors.
const StepRuleCheckpoint = "rule checkpoint"

// The reference's errors of a checkpoint call (spec §6.3), package checkpoint's own. Errors
// returned by RuleCheckpoint match one of them with errors.Is, and say why after it.
var (
	ErrCheckpointFailed       = checkpoint.ErrRequestFailed
	ErrCheckpointHashMismatch = checkpoint.ErrResponseHash
)

// RuleCheckpointRequest asks Studio for a decision (RuleCheckpointRequest).
type RuleCheckpointRequest struct {
	OccurrenceID string          `json:"occurrence_id"`
	Phase        string          `json:"phase"` // before or after
	SnapshotHash string          `json:"snapshot_hash"`
	JobID        string          `json:"job_id"`
	CaseID       string          `json:"case_id"`
	StepID       string          `json:"step_id"`
	Context      json.RawMessage `json:"context"` // an object; {} when nil
	SecretRefs   []string        `json:"secret_refs"`
}

// RuleCheckpointResponse is Studio's decision (RuleCheckpointResponse).
type RuleCheckpointResponse struct {
	CheckpointID string `json:"checkpoint_id"`
	Status       string `json:"status"` // allow, pause or stop
	SnapshotHash string `json:"snapshot_hash"`
	InputHash    string `json:"input_hash"`
}

// RuleCheckpoint posts a checkpoint to {SUPERVAIZE_API_URL}/api/v1/rule-checkpoints/ — not the
// workspace-scoped prefix, and never the snapshot's checkpoint_url (request input must not choose
// where the controller's credentials go) — with the snapshot's checkpoint token in
// X-Rule-Checkpoint-Token. The answer's snapshot_hash must be the request's. The token never
// appears in errors or logs.
func (c *Client) RuleCheckpoint(ctx context.Context, token string, r RuleCheckpointRequest) (*RuleCheckpointResponse, error) {
	if token == "" {
		return nil, fmt.Errorf("%w: the rule snapshot has no checkpoint token", ErrCheckpointFailed)
	}
	if len(r.Context) == 0 {
		r.Context = json.RawMessage("{}")
	}
	if r.SecretRefs == nil {
		r.SecretRefs = []string{}
	}
	k := call{step: StepRuleCheckpoint, method: http.MethodPost, url: c.s.APIURL + "/api/v1/rule-checkpoints/", body: r,
		headers: map[string]string{"X-Rule-Checkpoint-Token": token}, secrets: []string{token}}
	resp, err := c.do(ctx, k)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCheckpointFailed, err)
	}
	var out RuleCheckpointResponse
	if err := decodeJSON(k, resp, &out); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCheckpointFailed, err)
	}
	switch out.Status {
	case checkpoint.DecisionAllow, checkpoint.DecisionPause, checkpoint.DecisionStop:
	default:
		return nil, fmt.Errorf("%w: Studio answered status %q (want allow, pause or stop)", ErrCheckpointFailed, printable(out.Status, 40))
	}
	if out.SnapshotHash != r.SnapshotHash {
		return nil, ErrCheckpointHashMismatch
	}
	return &out, nil
}

// RuleCheckpoints is the client as package checkpoint's Studio: the checkpoint call, and the
// Studio key as the secret checkpoint tokens are sealed with in the store (every instance that
// can post a checkpoint has it).
func (c *Client) RuleCheckpoints() checkpoint.Studio { return ruleCheckpoints{c} }

type ruleCheckpoints struct{ c *Client }

func (r ruleCheckpoints) RuleCheckpoint(ctx context.Context, token string, req checkpoint.Request) (checkpoint.Response, error) {
	resp, err := r.c.RuleCheckpoint(ctx, token, RuleCheckpointRequest{
		OccurrenceID: req.OccurrenceID, Phase: req.Phase, SnapshotHash: req.SnapshotHash, JobID: req.JobID,
		CaseID: req.CaseID, StepID: req.StepID, Context: req.Context, SecretRefs: req.SecretRefs,
	})
	if err != nil {
		return checkpoint.Response{}, err
	}
	return checkpoint.Response{CheckpointID: resp.CheckpointID, Status: resp.Status, SnapshotHash: resp.SnapshotHash, InputHash: resp.InputHash}, nil
}

func (r ruleCheckpoints) TokenSecret() []byte { return []byte(r.c.s.APIKey) }
