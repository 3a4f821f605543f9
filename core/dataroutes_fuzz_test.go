package core_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/supervaize/svz/core"
)

// FuzzMissionMetadata feeds arbitrary X-Supervaize-Mission-Metadata values to the decoder, and
// arbitrary metadata to an encoder playing Studio. An accepted value is at most 4096 bytes, decodes
// (strict base64url, exact padding) to the compact form of a UTF-8 JSON object; every object
// Studio encodes within the limit, padded or not, is accepted with the same meaning.
func FuzzMissionMetadata(f *testing.F) {
	for _, s := range []string{
		`eyJhIjoxfQ`, `eyJhIjoxfQ==`, `e30`, `e31`, `W10`, `bnVsbA`, ``, `=`, `====`, `eyJh IjoxfQ`, `eyJhIjox$Q`,
		`+/+/`, `eyJhIjoxfQAAA`, strings.Repeat("A", 4097), `{"region":"eu"}`, `{"a":[1,"é",{"b":null}]}`, "{\"a\":\"\xff\"}",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		// s as a header value.
		if got, err := core.DecodeMissionMetadata(s); err == nil {
			if len(s) > core.MaxMissionMetadataBytes {
				t.Fatalf("accepted %d bytes", len(s))
			}
			raw, derr := base64.RawURLEncoding.Strict().DecodeString(strings.TrimRight(s, "="))
			if derr != nil || !utf8.Valid(raw) {
				t.Fatalf("accepted %q, which is not strict base64url of UTF-8 (%v)", s, derr)
			}
			var compact bytes.Buffer
			if json.Compact(&compact, raw) != nil || !bytes.Equal(compact.Bytes(), got) || got[0] != '{' {
				t.Fatalf("accepted %q as %s", s, got)
			}
		} else if len(s) > 16 && strings.Contains(err.Error(), s) {
			t.Fatalf("the error echoes the value: %v", err)
		}

		// s as metadata Studio encodes.
		var obj map[string]any
		if json.Unmarshal([]byte(s), &obj) != nil || !utf8.ValidString(s) || obj == nil {
			return
		}
		for _, enc := range []*base64.Encoding{base64.RawURLEncoding, base64.URLEncoding} {
			v := enc.EncodeToString([]byte(s))
			got, err := core.DecodeMissionMetadata(v)
			if len(v) > core.MaxMissionMetadataBytes {
				if err == nil {
					t.Fatalf("accepted %d bytes", len(v))
				}
				continue
			}
			if err != nil {
				t.Fatalf("refused Studio's encoding %q of %s: %v", v, s, err)
			}
			var back map[string]any
			if json.Unmarshal(got, &back) != nil || len(back) != len(obj) {
				t.Fatalf("%s decoded as %s", s, got)
			}
		}
	})
}
