package core

import (
	"encoding/binary"

	"github.com/supervaize/svz/core/contract"
)

// encodeEffectEvent encodes the log entry of the supervaizer.effect event announcing the effects
// of a dispatched action, in one pass (contract's wire encoder, as for results): the verified
// workspace the action ran in, when there is one, then the event's data (see splitEntry).
func encodeEffectEvent(req *contract.ActionRequest, workspace string, effects []contract.Effect) ([]byte, error) {
	buf := make([]byte, 0, 128+len(workspace)+160*len(effects)) // kept by the event buffer: sized once, not grown
	buf = appendEntryHeader(buf, workspace)
	return contract.AppendJSON(buf, &contract.EffectEvent{
		AgentSlug: req.AgentSlug, Action: req.Action, RequestID: req.RequestID, Effects: effects,
	})
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
