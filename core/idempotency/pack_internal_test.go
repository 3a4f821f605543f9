package idempotency

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/supervaize/svz/core/contract"
	"github.com/supervaize/svz/core/internal/packed"
	"github.com/supervaize/svz/core/store/memory"
)

// TestCompletedRecordsArePacked: a completed record is stored deflated (a third of its JSON for
// a result of repetitive JSON) and replays byte for byte; a record stored unpacked, as before
// packing existed, still replays.
func TestCompletedRecordsArePacked(t *testing.T) {
	st := memory.New()
	g := New(st)
	req := internalRequest(`{"n":1}`)
	effects := make([]contract.Effect, 8)
	for i := range effects {
		effects[i] = contract.Effect{Type: "job.started", Data: map[string]any{"job_id": "job-1", "message": strings.Repeat("hello ", 8)}}
	}
	first, err := g.Do(context.Background(), req, func(context.Context) (*contract.ActionResult, error) {
		return &contract.ActionResult{Status: contract.StatusOK, Effects: effects}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := st.Get(context.Background(), scopeKey(req))
	if err != nil {
		t.Fatal(err)
	}
	plain, _ := json.Marshal(first)
	if rec.Value[0] != packed.Mark || len(rec.Value)*2 > len(plain) {
		t.Fatalf("stored %d bytes starting %q for a %d-byte result: want it packed to under half", len(rec.Value), rec.Value[:1], len(plain))
	}
	replay := func() []byte {
		t.Helper()
		res, err := g.Do(context.Background(), req, func(context.Context) (*contract.ActionResult, error) {
			t.Fatal("the handler ran again")
			return nil, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(res)
		return b
	}
	if got := replay(); !bytes.Equal(got, plain) {
		t.Fatalf("replay %s\nwant %s", got, plain)
	}
	// The same record as it was stored before packing.
	unpacked, err := packed.Unpack(rec.Value)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Update(context.Background(), scopeKey(req), rec.Version, unpacked, rec.ExpiresAt); err != nil {
		t.Fatal(err)
	}
	if got := replay(); !bytes.Equal(got, plain) {
		t.Fatalf("replay of an unpacked record %s\nwant %s", got, plain)
	}
	if _, err := packed.Unpack([]byte{packed.Mark, 0xff, 0x00}); err == nil {
		t.Error("a corrupt packed record was read without an error")
	}
}
