package dynamodb

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/supervaize/svz/core/store"
	"github.com/supervaize/svz/internal/awsapi"
)

// parseItem decodes an item from its JSON.
func parseItem(t testing.TB, s string) item {
	t.Helper()
	var it item
	if err := json.Unmarshal([]byte(s), &it); err != nil {
		t.Fatalf("%s: %v", s, err)
	}
	return it
}

// FuzzDecode feeds arbitrary attribute values to decode: it must never panic, and what it
// accepts must be what the item says.
func FuzzDecode(f *testing.F) {
	f.Add("42", "1700000000000", []byte("value"), true)
	f.Add("0", "1", []byte{}, false)
	f.Add("9223372036854775808", "1", []byte{0xff}, true)
	f.Add("1", "1.5", []byte(nil), true)
	f.Fuzz(func(t *testing.T, ver, exp string, value []byte, withValue bool) {
		in := map[string]map[string]any{
			AttrVersion: {"N": ver},
			AttrExpires: {"N": exp},
		}
		if withValue {
			in[AttrValue] = map[string]any{"B": value}
		}
		b, err := json.Marshal(in)
		if err != nil {
			t.Fatal(err)
		}
		rec, ms, err := decode(parseItem(t, string(b)))
		if err != nil {
			if !errors.Is(err, errCorrupt) {
				t.Fatalf("decode error %v is not errCorrupt", err)
			}
			return
		}
		wantVer, _ := strconv.ParseUint(ver, 10, 63)
		if !withValue {
			value = nil
		}
		if rec.Version != wantVer || rec.Version == 0 || rec.ExpiresAt.UnixMilli() != ms || !bytes.Equal(rec.Value, value) || rec.Value == nil {
			t.Fatalf("decode(%q, %q, %v) = %+v, %d", ver, exp, value, rec, ms)
		}
	})
}

// FuzzDecodeAnswer feeds arbitrary GetItem answers (what comes off the network): decoding never
// panics, and a record it accepts survives the store's own encoding unchanged.
func FuzzDecodeAnswer(f *testing.F) {
	f.Add([]byte(`{"Item":{"k":{"S":"a"},"v":{"B":"AAEC"},"ver":{"N":"42"},"exp":{"N":"1700000000000"},"ttl":{"N":"1700003601"}}}`))
	f.Add([]byte(`{"Item":{"ver":{"N":"1"},"exp":{"N":"-5"},"v":{"B":""}}}`))
	f.Add([]byte(`{"Item":{"ver":{"N":"1","S":"x"},"exp":{"N":"1"}}}`))
	f.Add([]byte(`{"Item":{"ver":{"N":null},"exp":{"N":"1"},"v":{"B":null}}}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, answer []byte) {
		var out itemOutput
		if json.Unmarshal(answer, &out) != nil || out.Item == nil {
			return
		}
		rec, ms, err := decode(out.Item)
		if err != nil {
			if !errors.Is(err, errCorrupt) {
				t.Fatalf("decode error %v is not errCorrupt", err)
			}
			return
		}
		if rec.Version == 0 || rec.Value == nil || rec.ExpiresAt.UnixMilli() != ms {
			t.Fatalf("accepted %s as %+v", answer, rec)
		}
		again, err := json.Marshal(struct{ Item fullItem }{encode("k", rec, true)})
		if err != nil {
			t.Fatal(err)
		}
		var back itemOutput
		if err := json.Unmarshal(again, &back); err != nil {
			t.Fatal(err)
		}
		rec2, ms2, err := decode(back.Item)
		if err != nil || rec2.Version != rec.Version || ms2 != ms || !bytes.Equal(rec2.Value, rec.Value) {
			t.Fatalf("round trip of %+v gave %+v, %v", rec, rec2, err)
		}
	})
}

func TestDecodeRejectsForeignItems(t *testing.T) {
	for name, it := range map[string]string{
		"no version":          `{"exp":{"N":"1"}}`,
		"string version":      `{"ver":{"S":"1"},"exp":{"N":"1"}}`,
		"two types":           `{"ver":{"N":"1","S":"1"},"exp":{"N":"1"}}`,
		"null version":        `{"ver":{"N":null},"exp":{"N":"1"}}`,
		"numeric JSON number": `{"ver":{"N":1},"exp":{"N":"1"}}`,
		"no expiry":           `{"ver":{"N":"1"}}`,
		"decimal expiry":      `{"ver":{"N":"1"},"exp":{"N":"1.5"}}`,
		"string value":        `{"ver":{"N":"1"},"exp":{"N":"1"},"v":{"S":"x"}}`,
		"null value":          `{"ver":{"N":"1"},"exp":{"N":"1"},"v":{"B":null}}`,
		"value not base64":    `{"ver":{"N":"1"},"exp":{"N":"1"},"v":{"B":"%%%"}}`,
		"version too big":     `{"ver":{"N":"9223372036854775808"},"exp":{"N":"1"}}`,
		"version zero":        `{"ver":{"N":"0"},"exp":{"N":"1"}}`,
	} {
		if _, _, err := decode(parseItem(t, it)); !errors.Is(err, errCorrupt) {
			t.Errorf("%s: error = %v, want errCorrupt", name, err)
		}
	}
}

func TestDecodeEmptyValue(t *testing.T) {
	for _, it := range []string{
		`{"ver":{"N":"7"},"exp":{"N":"1700000000000"}}`,
		`{"ver":{"N":"7"},"exp":{"N":"1700000000000"},"v":{"B":""}}`,
	} {
		rec, ms, err := decode(parseItem(t, it))
		if err != nil || rec.Value == nil || len(rec.Value) != 0 || rec.Version != 7 || ms != 1700000000000 {
			t.Errorf("%s: %+v %d %v", it, rec, ms, err)
		}
	}
}

// TestEncode pins the item as it goes on the wire.
func TestEncode(t *testing.T) {
	exp := time.UnixMilli(1700000000123)
	for _, tc := range []struct {
		value []byte
		want  string
	}{
		{[]byte{0, 1, 2}, `{"k":{"S":"idem/ü"},"ix":{"S":"0"},"v":{"B":"AAEC"},"ver":{"N":"42"},"exp":{"N":"1700000000123"},"ttl":{"N":"1700003601"}}`},
		{[]byte{}, `{"k":{"S":"idem/ü"},"ix":{"S":"0"},"v":{"B":""},"ver":{"N":"42"},"exp":{"N":"1700000000123"},"ttl":{"N":"1700003601"}}`},
	} {
		b, err := json.Marshal(encode("idem/ü", store.Record{Value: tc.value, Version: 42, ExpiresAt: exp}, true))
		if err != nil || string(b) != tc.want {
			t.Errorf("encode = %s %v\nwant     %s", b, err, tc.want)
		}
	}
}

func TestConditionFailed(t *testing.T) {
	body := `{"__type":"com.amazonaws.dynamodb.v20120810#ConditionalCheckFailedException","message":"The conditional request failed",` +
		`"Item":{"k":{"S":"a"},"ver":{"N":"42"},"exp":{"N":"1"}}}`
	err := error(&awsapi.APIError{Status: 400, Code: "ConditionalCheckFailedException", Body: []byte(body)})
	old, failed := conditionFailed(err)
	if !failed || !ownWrite(old, 42) || ownWrite(old, 43) {
		t.Fatalf("%v %v", old, failed)
	}
	if old, failed := conditionFailed(&awsapi.APIError{Status: 400, Code: "ConditionalCheckFailedException"}); !failed || old != nil || ownWrite(old, 42) {
		t.Fatalf("without an item: %v %v", old, failed)
	}
	if _, failed := conditionFailed(&awsapi.APIError{Status: 400, Code: "ValidationException", Body: []byte(body)}); failed {
		t.Fatal("a validation error is a failed condition")
	}
	if _, failed := conditionFailed(errors.New("ConditionalCheckFailedException")); failed {
		t.Fatal("a plain error is a failed condition")
	}
}

// TestBatchFitsAnAnswer: a BatchGetItem of batchKeys items of the largest size, base64 and all,
// fits what awsapi reads of an answer.
func TestBatchFitsAnAnswer(t *testing.T) {
	it := encode(strings.Repeat("k", store.MaxKeyLen), store.Record{Value: make([]byte, MaxValueSize), Version: 1<<63 - 1, ExpiresAt: time.UnixMilli(1 << 50)}, true)
	b, err := json.Marshal(it)
	if err != nil {
		t.Fatal(err)
	}
	if answer := batchKeys*(len(b)+1) + 200; answer > awsapi.MaxResponse {
		t.Errorf("%d items of %d bytes make an answer of %d bytes, more than awsapi reads (%d)", batchKeys, len(b), answer, awsapi.MaxResponse)
	}
}
