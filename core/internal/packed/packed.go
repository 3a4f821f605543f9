// Package packed stores JSON records deflated when that makes them smaller. DynamoDB bills a
// write by the started KB of the larger item image, and a failed conditional write at the
// stored item's size: JSON shrinks about threefold, so a record packed under 1 KB costs one unit
// where it would cost two or three. A packed value starts with Mark, which no JSON text does, so
// records written before packing are read as they are.
package packed

import (
	"bytes"
	"compress/flate"
	"errors"
	"fmt"
	"io"
	"sync"
)

const (
	// Mark is the first byte of a packed value.
	Mark = 0x01
	// maxUnpacked bounds what a value may inflate to: far above any value a store accepts
	// deflated (flate's best ratio is about 1000:1), so only a corrupt value reaches it.
	maxUnpacked = 64 << 20
)

// Packer packs values. Its zero value is ready; it is safe for concurrent use.
type Packer struct {
	deflaters sync.Pool // each compressor holds about 1 MB of tables
}

// Pack returns value deflated behind Mark, or value itself when that is not smaller. value is
// JSON (or anything else that cannot start with Mark, which Unpack would take for packed).
func (p *Packer) Pack(value []byte) []byte {
	var buf bytes.Buffer
	buf.Grow(len(value)/2 + 16)
	buf.WriteByte(Mark)
	w, _ := p.deflaters.Get().(*flate.Writer)
	if w == nil {
		w, _ = flate.NewWriter(&buf, flate.BestSpeed) // BestSpeed is a valid level: never an error
	} else {
		w.Reset(&buf)
	}
	_, err := w.Write(value)
	if err == nil {
		err = w.Close()
	}
	p.deflaters.Put(w)
	if err != nil || buf.Len() >= len(value) {
		return value
	}
	return buf.Bytes()
}

// Unpack returns the JSON of a stored value, inflating a packed one.
func Unpack(value []byte) ([]byte, error) {
	if len(value) == 0 || value[0] != Mark {
		return value, nil
	}
	r := flate.NewReader(bytes.NewReader(value[1:]))
	defer r.Close()
	out, err := io.ReadAll(io.LimitReader(r, maxUnpacked+1))
	switch {
	case err != nil:
		return nil, fmt.Errorf("inflate: %w", err)
	case len(out) > maxUnpacked:
		return nil, errors.New("inflate: larger than 64 MiB")
	}
	return out, nil
}
