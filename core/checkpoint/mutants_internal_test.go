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

// TestGateTokenSealNeedsASecret: without a secret (no SUPERVAIZE_API_KEY) a token is neither
// sealed nor opened: the error names the missing key.
func TestGateTokenSealNeedsASecret(t *testing.T) {
	const want = "checkpoint: no secret to seal checkpoint tokens with (SUPERVAIZE_API_KEY)"
	if b, err := seal(nil, "token", "key-1"); err == nil || err.Error() != want || b != nil {
		t.Errorf("seal: %q, %v; want %q", b, err, want)
	}
	sealed, err := seal([]byte("secret"), "token", "key-1")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := open(nil, sealed, "key-1"); err == nil || err.Error() != want || got != "" {
		t.Errorf("open: %q, %v; want %q", got, err, want)
	}
}

// TestCanonicalRefusals: canonical encoding refuses what is not one JSON value, a number it
// cannot read and a Go value it was not decoded from JSON as, at any depth, naming it.
func TestCanonicalRefusals(t *testing.T) {
	for _, c := range []struct {
		name string
		got  func() ([]byte, error)
		want string
	}{
		{"a value that does not encode", func() ([]byte, error) { return canonicalJSON(func() {}) }, "json: unsupported type: func()"},
		{"no JSON", func() ([]byte, error) { return canonicalize([]byte("{")) }, "unexpected EOF"},
		{"two values", func() ([]byte, error) { return canonicalize([]byte("1 2")) }, "more than one JSON value"},
		{"no number", func() ([]byte, error) { return appendPyNumber(nil, "one") }, `number "one": strconv.ParseFloat: parsing "one": invalid syntax`},
		{"a Go int", func() ([]byte, error) { return appendCanonical(nil, 1) }, "unexpected JSON value int"},
		{"in an array", func() ([]byte, error) { return appendCanonical(nil, []any{"a", 1}) }, "unexpected JSON value int"},
		{"in an object", func() ([]byte, error) { return appendCanonical(nil, map[string]any{"a": 1}) }, "unexpected JSON value int"},
	} {
		b, err := c.got()
		if err == nil || err.Error() != c.want || b != nil {
			t.Errorf("%s: %q, %v; want %q", c.name, b, err, c.want)
		}
	}
}
