package checkpoint

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/supervaize/svz/core/contract"
	"github.com/supervaize/svz/core/store"
)

// The reference's errors of a gate (spec §6.2).
var (
	//lint:ignore ST1005 the reference SDK's exact message
	ErrNoSnapshot = errors.New("Governed job requires rule_snapshot")
	//lint:ignore ST1005 the reference SDK's exact message
	ErrNoAgentSlug = errors.New("Governed job requires agent_slug")
	// ErrInvalidSnapshot: input.rule_snapshot is not {hash, checkpoint_url, version: 1,
	// checkpoint_token}; the error names the member, never its value.
	ErrInvalidSnapshot = errors.New("governed job: invalid rule_snapshot")
	// ErrNotGoverned: JobGate found no gate for the job (its job.start carried no rule_snapshot).
	ErrNotGoverned error = notGoverned{}
)

// notGoverned is ErrNotGoverned, a store.ErrNotFound. A type rather than fmt.Errorf: package
// initialisation runs at every cold start, and this was its only use of fmt.
type notGoverned struct{}

func (notGoverned) Error() string {
	return "checkpoint: the job is not governed (its job.start carried no rule_snapshot): " + store.ErrNotFound.Error()
}

func (notGoverned) Unwrap() error { return store.ErrNotFound }

// Gate is the frozen rule snapshot of one governed job, for one agent: it posts the job's rule
// checkpoints with the controller's Studio credentials. The snapshot and its checkpoint token are
// opaque: a Gate never shows its token (printing, logging or encoding a Gate shows the agent,
// the job and the snapshot hash only), and the token is stored only sealed (see docs/checkpoints.md).
type Gate struct {
	agent        string
	job          string // "" until bound to a job
	snapshotHash string
	token        string
	secretRefs   []string
}

// AgentSlug is the agent the gate belongs to.
func (g *Gate) AgentSlug() string { return g.agent }

// JobID is the job the gate is bound to ("" before its first step when job.start had no job_id).
func (g *Gate) JobID() string { return g.job }

// SnapshotHash is the frozen snapshot's hash.
func (g *Gate) SnapshotHash() string { return g.snapshotHash }

// SecretRefs are the paths Studio keeps out of the checkpoint contexts; values at context.*
// paths are also removed from the context before it is sent.
func (g *Gate) SecretRefs() []string { return slices.Clone(g.secretRefs) }

func (g *Gate) shown() string {
	return fmt.Sprintf("checkpoint.Gate{agent_slug: %q, job_id: %q, snapshot_hash: %q}", g.agent, g.job, g.snapshotHash)
}

// Format prints the gate without its token, whatever the verb.
func (g Gate) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte(g.shown())) }

// String describes the gate without its token.
func (g Gate) String() string { return g.shown() }

// LogValue logs the gate without its token.
func (g Gate) LogValue() slog.Value {
	return slog.GroupValue(slog.String("agent_slug", g.agent), slog.String("job_id", g.job), slog.String("snapshot_hash", g.snapshotHash))
}

// MarshalJSON encodes the gate without its token.
func (g Gate) MarshalJSON() ([]byte, error) {
	return json.Marshal(map[string]string{"agent_slug": g.agent, "job_id": g.job, "snapshot_hash": g.snapshotHash})
}

var (
	_ fmt.Formatter    = Gate{} // every verb, %#v and %d included
	_ slog.LogValuer   = Gate{}
	_ json.Marshaler   = Gate{}
	_ fmt.Stringer     = Gate{}
	_ json.Unmarshaler = (*Gate)(nil)
)

// UnmarshalJSON refuses: a gate comes from FromJobStart or JobGate, never from JSON.
func (g *Gate) UnmarshalJSON([]byte) error {
	return errors.New("checkpoint: a Gate cannot be decoded: build it with FromJobStart or JobGate")
}

// GateOption configures FromJobStart.
type GateOption func(*gateOptions)

type gateOptions struct {
	secretRefs []string
	set        bool
}

// WithSecretRefs sets the secret_refs of the gate's checkpoints, replacing the ones the agent's
// registration declares (capabilities.rule_checkpoints.secret_refs, the default).
func WithSecretRefs(paths ...string) GateOption {
	return func(o *gateOptions) { o.secretRefs, o.set = slices.Clone(paths), true }
}

// snapshot is input.rule_snapshot (RuleCheckpointSnapshot). checkpoint_url is read and ignored:
// checkpoints go only to the configured Studio.
type snapshot struct {
	Hash            json.RawMessage `json:"hash"`
	CheckpointURL   json.RawMessage `json:"checkpoint_url"`
	Version         json.RawMessage `json:"version"`
	CheckpointToken json.RawMessage `json:"checkpoint_token"`
}

// invalidSnapshot never quotes the snapshot: it names the member and what it must be.
func invalidSnapshot(member, want string) error {
	return fmt.Errorf("%w: input.rule_snapshot.%s must be %s", ErrInvalidSnapshot, member, want)
}

// parseSnapshot reads input.rule_snapshot: hash, checkpoint_token (non-empty strings),
// checkpoint_url (a string) and version (1).
func parseSnapshot(input json.RawMessage) (hash, token string, err error) {
	var in map[string]json.RawMessage
	if len(bytes.TrimSpace(input)) > 0 {
		if err := json.Unmarshal(input, &in); err != nil {
			return "", "", fmt.Errorf("%w: the input must be a JSON object", ErrInvalidSnapshot)
		}
	}
	raw, ok := in["rule_snapshot"]
	if !ok || string(bytes.TrimSpace(raw)) == "null" {
		return "", "", ErrNoSnapshot
	}
	var s snapshot
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", "", fmt.Errorf("%w: input.rule_snapshot must be an object", ErrInvalidSnapshot)
	}
	str := func(member string, v json.RawMessage, nonEmpty bool) (string, error) {
		var out string
		if v == nil || json.Unmarshal(v, &out) != nil || (nonEmpty && out == "") {
			want := "a string"
			if nonEmpty {
				want = "a non-empty string"
			}
			return "", invalidSnapshot(member, want)
		}
		return out, nil
	}
	if hash, err = str("hash", s.Hash, true); err != nil {
		return "", "", err
	}
	if _, err = str("checkpoint_url", s.CheckpointURL, false); err != nil {
		return "", "", err
	}
	var version float64
	if s.Version == nil || json.Unmarshal(s.Version, &version) != nil || version != 1 {
		return "", "", invalidSnapshot("version", "1")
	}
	if token, err = str("checkpoint_token", s.CheckpointToken, true); err != nil {
		return "", "", err
	}
	return hash, token, nil
}

// FromJobStart is the reference's RuleCheckpointGate.from_job_start: the gate of a governed
// job.start, whose input carries Studio's frozen rule_snapshot. Without one it returns
// ErrNoSnapshot (the job is not governed: run it without a gate); a snapshot that is not
// {hash, checkpoint_url, version: 1, checkpoint_token} is an error naming the member (never its
// value). The snapshot's checkpoint_url is ignored: checkpoints go only to SUPERVAIZE_API_URL.
//
// When the request has a job_id, the gate is stored for the job (its token sealed), so that the
// job's later requests (JobGate) and rule.checkpoint.resume on any instance can post its
// checkpoints; otherwise it is stored by the first step run with it. A retried job.start with
// another snapshot hash for the same job is refused ("Rule checkpoint retry snapshot changed").
func FromJobStart(ctx context.Context, req *contract.ActionRequest, opts ...GateOption) (*Gate, error) {
	hash, token, err := parseSnapshot(req.Input)
	if err != nil {
		return nil, err
	}
	if req.AgentSlug == "" {
		return nil, ErrNoAgentSlug
	}
	sc, err := scopeOf(ctx)
	if err != nil {
		return nil, err
	}
	if req.AgentSlug != sc.agent {
		return nil, fmt.Errorf("checkpoint: the request names agent %q, but this handler is agent %q's", req.AgentSlug, sc.agent)
	}
	o := gateOptions{secretRefs: sc.reg.secretRefs}
	for _, opt := range opts {
		opt(&o)
	}
	if err := checkSecretRefs(o.secretRefs); err != nil {
		return nil, err
	}
	g := &Gate{agent: sc.agent, snapshotHash: hash, token: token, secretRefs: slices.Clone(o.secretRefs)}
	if g.secretRefs == nil {
		g.secretRefs = []string{}
	}
	if req.JobID != nil && *req.JobID != "" {
		if err := sc.bindGate(ctx, g, *req.JobID); err != nil {
			return nil, err
		}
	}
	return g, nil
}

// checkSecretRefs applies the registration's rules to a gate's secret_refs.
func checkSecretRefs(refs []string) error {
	seen := map[string]bool{}
	for _, r := range refs {
		if seen[r] {
			return errors.New("rule_checkpoints.secret_refs must not contain duplicates")
		}
		seen[r] = true
		if !slices.ContainsFunc([]string{"job.fields.", "case.metadata.", "step.payload.", "context."}, func(p string) bool { return strings.HasPrefix(r, p) }) {
			return errors.New("rule_checkpoints.secret_refs contains an invalid path")
		}
	}
	return nil
}

// JobGate returns the gate stored for job jobID by FromJobStart (or by the job's first step), for
// a later request of the job (a review submitted, a job.sync). A job that is not governed gives
// an error matching ErrNotGoverned.
func JobGate(ctx context.Context, jobID string) (*Gate, error) {
	sc, err := scopeOf(ctx)
	if err != nil {
		return nil, err
	}
	if jobID == "" {
		return nil, errors.New("checkpoint: JobGate needs a job id")
	}
	rec, _, err := sc.loadGate(ctx, jobID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, ErrNotGoverned
	}
	if err != nil {
		return nil, err
	}
	if rec.Agent != sc.agent {
		return nil, ErrOtherAgent
	}
	token, err := open(sc.svc.studio.TokenSecret(), rec.SealedToken, sc.gateKey(jobID))
	if err != nil {
		return nil, err
	}
	return &Gate{agent: rec.Agent, job: jobID, snapshotHash: rec.SnapshotHash, token: token, secretRefs: rec.SecretRefs}, nil
}

// gateRecord is a job's gate in the store: the token only sealed, bound to the record's key.
type gateRecord struct {
	Format       int      `json:"format"`
	Agent        string   `json:"agent_slug"`
	JobID        string   `json:"job_id"`
	SnapshotHash string   `json:"snapshot_hash"`
	SealedToken  []byte   `json:"sealed_token"`
	SecretRefs   []string `json:"secret_refs"`
}

func (sc *scope) loadGate(ctx context.Context, jobID string) (gateRecord, uint64, error) {
	r, err := sc.svc.store.Get(ctx, sc.gateKey(jobID))
	if err != nil {
		return gateRecord{}, 0, fmt.Errorf("checkpoint: read the gate of job %q: %w", jobID, err)
	}
	var rec gateRecord
	if err := json.Unmarshal(r.Value, &rec); err != nil {
		return gateRecord{}, 0, fmt.Errorf("checkpoint: unreadable gate record of job %q: %w", jobID, err)
	}
	return rec, r.Version, nil
}

// bindGate binds g, a gate bound to no job yet (its callers see to it), to jobID and stores it. A
// gate already stored for the job must be the same agent's and snapshot's; a newer token or other
// secret_refs replace the stored ones.
func (sc *scope) bindGate(ctx context.Context, g *Gate, jobID string) error {
	key := sc.gateKey(jobID)
	secret := sc.svc.studio.TokenSecret()
	for range 10 {
		sealed, err := seal(secret, g.token, key)
		if err != nil {
			return err
		}
		value, err := json.Marshal(gateRecord{Format: 1, Agent: g.agent, JobID: jobID, SnapshotHash: g.snapshotHash, SealedToken: sealed, SecretRefs: g.secretRefs})
		if err != nil {
			return fmt.Errorf("checkpoint: %w", err)
		}
		cur, err := sc.svc.store.Create(ctx, key, value, store.Never)
		if err == nil {
			g.job = jobID
			return nil
		}
		if !errors.Is(err, store.ErrExists) {
			return fmt.Errorf("checkpoint: store the gate of job %q: %w", jobID, err)
		}
		var rec gateRecord
		if err := json.Unmarshal(cur.Value, &rec); err != nil {
			return fmt.Errorf("checkpoint: unreadable gate record of job %q: %w", jobID, err)
		}
		switch {
		case rec.Agent != g.agent:
			return ErrOtherAgent
		case rec.SnapshotHash != g.snapshotHash:
			return ErrRetrySnapshot
		}
		if stored, err := open(secret, rec.SealedToken, key); err == nil && stored == g.token && slices.Equal(rec.SecretRefs, g.secretRefs) {
			g.job = jobID
			return nil
		}
		_, err = sc.svc.store.Update(ctx, key, cur.Version, value, store.Never)
		if err == nil {
			g.job = jobID
			return nil
		}
		if !errors.Is(err, store.ErrConflict) && !errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("checkpoint: store the gate of job %q: %w", jobID, err)
		}
	}
	return fmt.Errorf("checkpoint: the gate of job %q keeps changing under concurrent writes", jobID)
}
