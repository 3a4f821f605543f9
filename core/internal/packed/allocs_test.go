//go:build !race

// The race detector makes sync.Pool drop what it is given at random: allocations are counted
// without it.

package packed_test

import (
	"strings"
	"testing"

	"github.com/supervaize/svz/core/internal/packed"
)

// TestPackAllocations: packing allocates its buffer once, sized up front, and reuses its
// compressor (about 1 MB of tables): two allocations a call (the buffer and its bytes), not the
// compressor's twenty, nor the buffer grown step by step.
func TestPackAllocations(t *testing.T) {
	v := []byte(`{"steps":[` + strings.Repeat(`{"name":"find","status":"completed"},`, 100) + `{}]}`)
	var p packed.Packer
	p.Pack(v)
	if n := testing.AllocsPerRun(50, func() { p.Pack(v) }); n > 2 {
		t.Fatalf("Pack of %d bytes: %v allocations a call, want 2 at most", len(v), n)
	}
}
