package core

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"sort"

	"github.com/supervaize/svz/core/contract"
)

// encodeEffectEvent encodes the log entry of the supervaizer.effect event announcing the effects
// of a dispatched action, in one pass (contract's wire encoder, as for results): the verified
// workspace the action ran in, when there is one, then the event's data (see splitEntry). An
// entry of more than limit bytes (0: no limit) is truncated (truncateEffects): truncated then
// says how many effects it still holds, or it fails with errEventTooLarge when none fits.
func encodeEffectEvent(req *contract.ActionRequest, workspace string, effects []contract.Effect, limit int64) (data []byte, truncated *truncation, err error) {
	data, err = effectEntry(req, workspace, effects, 128+len(workspace)+160*len(effects))
	if err != nil || limit <= 0 || int64(len(data)) <= limit {
		return data, nil, err
	}
	t := &truncation{bytes: len(data), effects: len(effects)}
	reduced := truncateEffects(effects)
	// The longest prefix of the reduced effects that fits (encodings grow with the prefix).
	// The probes that fit have growing prefixes: the last one is the longest.
	var fits []byte
	n := sort.Search(len(reduced)+1, func(k int) bool {
		b, err := effectEntry(req, workspace, reduced[:k], 0)
		if err != nil || int64(len(b)) > limit {
			return true
		}
		fits = b
		return false
	}) - 1
	if n < 0 {
		return nil, nil, fmt.Errorf("%w: %d bytes, and %d without its effects, over the limit of %d (SUPERVAIZER_EVENT_MAX_BYTES)",
			errEventTooLarge, len(data), minEntry(req, workspace), limit)
	}
	t.kept = n
	return fits, t, nil
}

// effectEntry encodes the entry of effects into a buffer of size bytes (0: as needed).
func effectEntry(req *contract.ActionRequest, workspace string, effects []contract.Effect, size int) ([]byte, error) {
	buf := make([]byte, 0, size) // kept by the event buffer: sized once, not grown
	buf = appendEntryHeader(buf, workspace)
	if effects == nil {
		effects = []contract.Effect{}
	}
	return contract.AppendJSON(buf, &contract.EffectEvent{
		AgentSlug: req.AgentSlug, Action: req.Action, RequestID: req.RequestID, Effects: effects,
	})
}

// minEntry is the size of the entry of req without effects.
func minEntry(req *contract.ActionRequest, workspace string) int {
	b, _ := effectEntry(req, workspace, nil, 0)
	return len(b)
}

// errEventTooLarge refuses an effect event that does not fit the limit even without effects (a
// request id of a megabyte).
var errEventTooLarge = errors.New("the effect event is too large to be recorded even truncated")

// truncation describes an effect event truncated to fit the limit.
type truncation struct {
	bytes   int // the whole event's size
	effects int // its effects
	kept    int // the effects the truncated event holds
}

// truncatedMark marks an effect whose details were left out of its event.
var truncatedMark = json.RawMessage("true")

// truncateEffects returns effects without their details: each keeps its type, its ids (job, case,
// step, resource, dataset, artifact), status and count, and says "truncated": true. The message,
// item, items, rows, errors, gaps, summary, case, data and other members are left out: the
// action's result carries them (a job's state with job.sync, an artifact with artifact.get).
func truncateEffects(effects []contract.Effect) []contract.Effect {
	out := make([]contract.Effect, len(effects))
	for i, e := range effects {
		out[i] = contract.Effect{Type: e.Type, JobID: e.JobID, CaseID: e.CaseID, StepID: e.StepID, Resource: e.Resource,
			Dataset: e.Dataset, ArtifactID: e.ArtifactID, Status: e.Status, Count: e.Count,
			Extra: contract.Extra{"truncated": truncatedMark}}
	}
	return out
}

// entryMark starts an effect-log entry that names its workspace: a NUL byte, which no JSON text
// starts with, so an entry written before workspaces were kept (the event's JSON alone) reads as
// one of no workspace.
const entryMark = 0x00

// appendEntryHeader appends the header naming workspace (nothing for none): entryMark, the
// workspace's length as a uvarint, the workspace. The wire never sees it.
func appendEntryHeader(buf []byte, workspace string) []byte {
	if workspace == "" {
		return buf
	}
	buf = append(buf, entryMark)
	buf = binary.AppendUvarint(buf, uint64(len(workspace)))
	return append(buf, workspace...)
}

// splitEntry returns the workspace an effect-log entry names (empty for none) and the event's
// data, without copying; ok is false for an entry whose header is malformed (sent to no one).
func splitEntry(entry []byte) (workspace, data []byte, ok bool) {
	if len(entry) == 0 || entry[0] != entryMark {
		return nil, entry, true
	}
	n, w := binary.Uvarint(entry[1:])
	if w <= 0 || n == 0 || n > uint64(len(entry)-1-w) {
		return nil, nil, false
	}
	start := 1 + w
	return entry[start : start+int(n)], entry[start+int(n):], true
}
