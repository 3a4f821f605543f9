package bolt

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/supervaize/svz/core/store"
)

func TestDecodeRejectsCorruptRecords(t *testing.T) {
	for name, raw := range map[string][]byte{
		"empty":        {},
		"short header": make([]byte, headerSize-1),
		"version 0":    make([]byte, headerSize),
		"version 2^63": append([]byte{0x80, 0, 0, 0, 0, 0, 0, 0}, make([]byte, 8)...),
	} {
		if _, _, err := decode(raw); !errors.Is(err, errCorrupt) {
			t.Errorf("%s: decode error = %v, want errCorrupt", name, err)
		}
	}
}

func TestEncodeDecodeRoundTrip(t *testing.T) {
	rec := store.Record{Value: []byte("v\x00\xff"), Version: 1<<63 - 1, ExpiresAt: time.UnixMilli(1_800_000_000_123).UTC()}
	got, ms, err := decode(encode(rec))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Value, rec.Value) || got.Version != rec.Version || !got.ExpiresAt.Equal(rec.ExpiresAt) || ms != 1_800_000_000_123 {
		t.Errorf("decode(encode(%+v)) = %+v, %d", rec, got, ms)
	}
}

// FuzzDecode feeds arbitrary file bytes to decode: it must never panic, and whatever it accepts
// must encode back to the same bytes.
func FuzzDecode(f *testing.F) {
	f.Add([]byte{})
	f.Add(encode(store.Record{Value: []byte(`{"state":"done"}`), Version: 42, ExpiresAt: time.UnixMilli(1_700_000_000_000)}))
	f.Add(encode(store.Record{Version: 1, ExpiresAt: time.UnixMilli(-1)}))
	f.Add(bytes.Repeat([]byte{0xff}, 40))
	f.Fuzz(func(t *testing.T, raw []byte) {
		rec, ms, err := decode(raw)
		if err != nil {
			if !errors.Is(err, errCorrupt) {
				t.Fatalf("decode error %v is not errCorrupt", err)
			}
			return
		}
		if rec.Version == 0 || rec.ExpiresAt.UnixMilli() != ms {
			t.Fatalf("decode accepted version %d, expiry %v vs %d", rec.Version, rec.ExpiresAt, ms)
		}
		if !bytes.Equal(encode(rec), raw) {
			t.Fatalf("encode(decode(raw)) != raw")
		}
	})
}
