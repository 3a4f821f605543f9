package grant

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"

	"github.com/supervaize/svz/core/grant/granttest"
)

// TestPaddedSegments: spec §4.3 makes base64url padding optional. A token whose segments carry
// "=" padding is accepted, its signature checked over the segments exactly as sent: padding a
// signed segment afterwards changes the signed bytes, padding the signature does not.
func TestPaddedSegments(t *testing.T) {
	studio := granttest.NewIssuer("k1")
	v := newPEMVerifier(t, studio, newClock())
	// claims whose encoded payload needs padding (its unpadded length is not a multiple of 4)
	var claims []byte
	for n := 0; ; n++ {
		claims = mustMarshal(granttest.Valid(t0, testIssuer, fullScopes...).With("jti", fmt.Sprint("token-", strings.Repeat("x", n))))
		if len(claims)%3 != 0 {
			break
		}
	}
	header := []byte(`{"alg":"EdDSA","kid":"k1"}`)
	if len(header)%3 == 0 {
		t.Fatal("the header must need padding too")
	}
	padded := base64.URLEncoding.EncodeToString(header) + "." + base64.URLEncoding.EncodeToString(claims)
	signedPadded := padded + "." + base64.URLEncoding.EncodeToString(ed25519.Sign(studio.Key, []byte(padded)))
	unpadded := studio.SignRaw(header, claims)
	parts := strings.Split(unpadded, ".")

	for _, tc := range []struct {
		name, tok string
		code      Code // "" when accepted
	}{
		{"issuer signed the padded segments", signedPadded, ""},
		{"padded signature segment only", unpadded + strings.Repeat("=", (4-len(parts[2])%4)%4), ""},
		{"padded signature of a padded token without it", strings.TrimRight(signedPadded, "="), ""},
		{"payload padded after signing", parts[0] + "." + base64.URLEncoding.EncodeToString(claims) + "." + parts[2], CodeBadSignature},
		{"padding removed after signing", strings.ReplaceAll(padded, "=", "") + "." + strings.Split(signedPadded, ".")[2], CodeBadSignature},
		{"one = too many", strings.Replace(signedPadded, "=.", "==.", 1), CodeMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !strings.Contains(tc.tok, "=") && tc.code != CodeBadSignature {
				t.Fatalf("test token %q carries no padding", tc.tok)
			}
			got, err := v.Authorize(context.Background(), jobStart(tc.tok))
			if tc.code == "" {
				if err != nil || got == nil || got.GrantID != "grant-1" {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			ge, ok := err.(*Error)
			if !ok || ge.Code != tc.code {
				t.Fatalf("got %v, want %s", err, tc.code)
			}
		})
	}
}
