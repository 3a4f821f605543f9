package checkpoint

import "testing"

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
