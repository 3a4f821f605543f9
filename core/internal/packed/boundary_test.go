package packed_test

import (
	"bytes"
	"compress/flate"
	"strings"
	"testing"

	"github.com/supervaize/svz/core/internal/packed"
)

// TestPackKeepsAnEqualSize: a value whose packed form (Mark and its deflated bytes) is exactly as
// long is kept as it is: packing gains nothing, and a plain value is read without inflating.
func TestPackKeepsAnEqualSize(t *testing.T) {
	v := []byte(`{"a":"6866achwvexankrijupujirknaxevwhchwvexankrijupujirknaxevwhch"}`)
	var d bytes.Buffer
	w, _ := flate.NewWriter(&d, flate.BestSpeed)
	_, _ = w.Write(v)
	_ = w.Close()
	if 1+d.Len() != len(v) {
		t.Fatalf("the value's packed form is %d bytes, not its own %d: pick another value on the boundary", 1+d.Len(), len(v))
	}
	var p packed.Packer
	if got := p.Pack(v); !bytes.Equal(got, v) {
		t.Fatalf("Pack of a value its packing does not shrink: % x", got[:8])
	}
	// The same run, longer, deflates to fewer bytes than it has: that one is packed.
	longer := append(v[:len(v)-2:len(v)-2], `hwvexankrijupujirknaxevwhch"}`...)
	if got := p.Pack(longer); got[0] != packed.Mark || len(got) >= len(longer) {
		t.Fatalf("Pack of a value its packing shrinks: %d bytes from %d", len(got), len(longer))
	}
}

// TestUnpackAtTheBound: a value that inflates to exactly the bound (64 MiB) is read; the bound
// refuses only what goes past it.
func TestUnpackAtTheBound(t *testing.T) {
	var v bytes.Buffer
	v.WriteByte(packed.Mark)
	w, _ := flate.NewWriter(&v, flate.BestSpeed)
	_, _ = w.Write(make([]byte, 64<<20))
	_ = w.Close()
	out, err := packed.Unpack(v.Bytes())
	if err != nil || len(out) != 64<<20 {
		t.Fatalf("Unpack of a value of exactly 64 MiB: %d bytes, %v", len(out), err)
	}
}

// TestPackHoldsItsOwnSize: a packed value's backing array is sized for the packed bytes, not for
// the value: a store that keeps it (the memory store, a cache) holds less than the value, not a
// buffer larger than what was packed.
func TestPackHoldsItsOwnSize(t *testing.T) {
	v := []byte(`{"steps":[` + strings.Repeat(`{"name":"find","status":"completed"},`, 100) + `{}]}`)
	var p packed.Packer
	got := p.Pack(v)
	if got[0] != packed.Mark {
		t.Fatalf("Pack of %d bytes of repeated JSON: not packed", len(v))
	}
	if cap(got) >= len(v) {
		t.Fatalf("Pack of %d bytes = %d bytes in an array of %d: want an array smaller than the value", len(v), len(got), cap(got))
	}
}
