package packed_test

import (
	"bytes"
	"compress/flate"
	"strings"
	"testing"

	"github.com/supervaize/svz/core/internal/packed"
)

func TestPackUnpack(t *testing.T) {
	var p packed.Packer
	for _, tc := range []struct {
		name   string
		value  string
		packed bool // stored deflated
	}{
		{"repetitive JSON shrinks", `{"steps":[` + strings.Repeat(`{"name":"find","status":"completed"},`, 20) + `{}]}`, true},
		{"a short value stays as it is", `{"a":1}`, false},
		{"an empty value stays as it is", ``, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := p.Pack([]byte(tc.value))
			if isPacked := len(got) > 0 && got[0] == packed.Mark; isPacked != tc.packed {
				t.Fatalf("Pack(%d bytes) = %d bytes, packed %v; want packed %v", len(tc.value), len(got), isPacked, tc.packed)
			}
			if tc.packed && len(got) >= len(tc.value)/3 {
				t.Errorf("packed to %d bytes from %d; want under a third", len(got), len(tc.value))
			}
			back, err := packed.Unpack(got)
			if err != nil || string(back) != tc.value {
				t.Fatalf("Unpack(Pack(v)) = %q, %v; want v", back, err)
			}
		})
	}
}

// TestUnpackRefuses: a corrupt packed value, and one that inflates past the bound, are errors,
// never a partial value.
func TestUnpackRefuses(t *testing.T) {
	var bomb bytes.Buffer
	bomb.WriteByte(packed.Mark)
	w, _ := flate.NewWriter(&bomb, flate.BestCompression)
	zeros := make([]byte, 1<<20)
	for range 65 {
		_, _ = w.Write(zeros)
	}
	_ = w.Close()
	for name, v := range map[string][]byte{
		"corrupt":            {packed.Mark, 0xff, 0x00},
		"truncated":          bomb.Bytes()[:bomb.Len()/2],
		"inflates to 65 MiB": bomb.Bytes(),
	} {
		if out, err := packed.Unpack(v); err == nil || out != nil {
			t.Errorf("%s: Unpack = %d bytes, %v; want an error and nothing", name, len(out), err)
		}
	}
}

func FuzzUnpack(f *testing.F) {
	var p packed.Packer
	f.Add(p.Pack([]byte(`{"steps":[` + strings.Repeat(`{"name":"a"},`, 10) + `{}]}`)))
	f.Add([]byte(`{"a":1}`))
	f.Add([]byte{packed.Mark})
	f.Fuzz(func(t *testing.T, v []byte) {
		out, err := packed.Unpack(v)
		if err != nil {
			if out != nil {
				t.Fatalf("an error with %d bytes", len(out))
			}
			return
		}
		if len(v) == 0 || v[0] != packed.Mark {
			if !bytes.Equal(out, v) {
				t.Fatal("an unpacked value was changed")
			}
			return
		}
		if len(out) > 0 && out[0] == packed.Mark {
			return // not JSON: Pack is for values that cannot start with Mark
		}
		if again, err := packed.Unpack(p.Pack(out)); err != nil || !bytes.Equal(again, out) {
			t.Fatalf("round trip of an inflated value: %v", err)
		}
	})
}
