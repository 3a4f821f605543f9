package checkpoint

import (
	"errors"
	"testing"
)

// TestResumeDecisionMatchesEveryMember: a kept decision decides the checkpoint an occurrence
// waits on only when every member names it: agent, occurrence, snapshot, and the phase's
// checkpoint id and input hash. Resume refuses a decision whose agent, occurrence or snapshot
// differs before keeping it, so only this check stands between a kept record that says
// otherwise (another deployment's, or one edited in the store) and the step.
func TestResumeDecisionMatchesEveryMember(t *testing.T) {
	rec := &stepRecord{Agent: "agent", OccurrenceID: "occ", SnapshotHash: "snap",
		Before: phaseState{CheckpointID: "chk-b", InputHash: "in-b"}, After: phaseState{CheckpointID: "chk-a", InputHash: "in-a"}}
	good := decision{Agent: "agent", OccurrenceID: "occ", SnapshotHash: "snap", Phase: PhaseBefore, CheckpointID: "chk-b", InputHash: "in-b"}
	for _, c := range []struct {
		name string
		edit func(*decision)
		want bool
	}{
		{"every member", func(*decision) {}, true},
		{"the after phase's", func(d *decision) { d.Phase, d.CheckpointID, d.InputHash = PhaseAfter, "chk-a", "in-a" }, true},
		{"another agent", func(d *decision) { d.Agent = "other" }, false},
		{"another occurrence", func(d *decision) { d.OccurrenceID = "occ-2" }, false},
		{"another snapshot", func(d *decision) { d.SnapshotHash = "snap-2" }, false},
		{"another checkpoint", func(d *decision) { d.CheckpointID = "chk-2" }, false},
		{"another input hash", func(d *decision) { d.InputHash = "in-2" }, false},
		{"the other phase's checkpoint", func(d *decision) { d.Phase = PhaseAfter }, false},
		{"the agent alone", func(d *decision) { d.OccurrenceID, d.SnapshotHash, d.CheckpointID, d.InputHash = "x", "x", "x", "x" }, false},
		{"the occurrence alone", func(d *decision) { d.Agent, d.SnapshotHash, d.CheckpointID, d.InputHash = "x", "x", "x", "x" }, false},
	} {
		d := good
		c.edit(&d)
		if got := d.matches(rec); got != c.want {
			t.Errorf("%s: matches = %v, want %v", c.name, got, c.want)
		}
	}
}

// TestGateTokenSealRoundTrip: open gives back every token seal sealed, the empty one and one of
// a byte too (the shortest sealed values: a nonce and a tag, and one byte more); a sealed value
// opens only under its own record key and secret, and one cut short is unreadable, not a crash.
func TestGateTokenSealRoundTrip(t *testing.T) {
	secret := []byte("studio-api-key")
	for _, token := range []string{"", "~", "checkpoint-token-0123456789abcdef"} {
		sealed, err := seal(secret, token, "key-1")
		if err != nil {
			t.Fatal(err)
		}
		if got, err := open(secret, sealed, "key-1"); err != nil || got != token {
			t.Errorf("open(seal(%q)) = %q, %v", token, got, err)
		}
		for name, c := range map[string]struct {
			secret, sealed []byte
			aad            string
		}{
			"another record":  {secret, sealed, "key-2"},
			"another secret":  {[]byte("rotated"), sealed, "key-1"},
			"one byte short":  {secret, sealed[:len(sealed)-1], "key-1"},
			"a nonce, no tag": {secret, sealed[:12], "key-1"},
		} {
			if got, err := open(c.secret, c.sealed, c.aad); !errors.Is(err, ErrTokenUnreadable) || got != "" {
				t.Errorf("token %q, %s: %q, %v; want ErrTokenUnreadable", token, name, got, err)
			}
		}
	}
}

// TestStoreKeyPrefixesEachPartsLength: a key hashes each part behind its length, so that no two
// tuples of ids meet even when an id holds the bytes that separate parts elsewhere (eight zero
// bytes: the length of an empty part).
func TestStoreKeyPrefixesEachPartsLength(t *testing.T) {
	zeros := string(make([]byte, 8))
	a := storeKey("step", "ws", "job"+zeros+"case", "occ")
	b := storeKey("step", "ws", "job", "case"+zeros+"occ")
	if a == b {
		t.Errorf("two tuples share the key %s", a)
	}
}
