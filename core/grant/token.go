package grant

import (
	"encoding/base64"
	"errors"
	"strings"

	"github.com/supervaize/svz/core/internal/wirejson"
)

// MaxTokenBytes bounds the token the verifier reads. Studio's tokens are well under 2 KiB and the
// transports in front of a controller cap headers near 10 KiB; anything longer is refused as
// malformed before it is decoded or hashed.
const MaxTokenBytes = 16 << 10

// extractToken reads the X-Supervaize-Workspace-Authorization value as the reference does: trimmed,
// a leading "Bearer " (any case) removed, the raw token also accepted; "" means no token.
func extractToken(v string) string {
	v = strings.TrimSpace(v)
	if len(v) >= 7 && strings.EqualFold(v[:7], "bearer ") {
		v = strings.TrimSpace(v[7:])
	}
	return v
}

// parsedToken is a compact JWS split and decoded, not yet trusted.
type parsedToken struct {
	header    *object
	claims    *object
	signed    string // base64url(header) "." base64url(payload) as sent: the bytes the signature covers
	signature []byte
}

// parseToken performs step 3 of spec §4.3: exactly three base64url segments (strict alphabet,
// canonical, "=" padding optional), a header and a payload that are UTF-8 JSON objects without
// duplicate members, and no critical extension: this verifier understands none, so a header
// listing any under "crit" is refused (RFC 7515 §4.1.11). It reads nothing else: what the header
// claims (alg, kid) is judged by the caller.
func parseToken(tok string) (*parsedToken, *Error) {
	if len(tok) > MaxTokenBytes {
		return nil, refuse(CodeMalformed, msgMalformed)
	}
	if strings.Count(tok, ".") != 2 {
		return nil, refuse(CodeMalformed, msgNotCompact)
	}
	h, rest, _ := strings.Cut(tok, ".")
	p, s, _ := strings.Cut(rest, ".")
	header, err1 := decodeSegment(h)
	payload, err2 := decodeSegment(p)
	sig, err3 := decodeSegment(s)
	if err1 != nil || err2 != nil || err3 != nil || !wirejson.Valid(header) || !wirejson.Valid(payload) {
		return nil, refuse(CodeMalformed, msgMalformed)
	}
	if wirejson.Kind(header) != '{' || wirejson.Kind(payload) != '{' {
		return nil, refuse(CodeMalformed, msgNotObjects)
	}
	hdr, ok := parseObject(header)
	if !ok {
		return nil, refuse(CodeMalformed, msgMalformed)
	}
	if _, crit := hdr.get("crit"); crit {
		return nil, refuse(CodeMalformed, msgMalformed)
	}
	claims, ok := parseObject(payload)
	if !ok {
		return nil, refuse(CodeMalformed, msgMalformed)
	}
	return &parsedToken{header: hdr, claims: claims, signed: tok[:len(h)+1+len(p)], signature: sig}, nil
}

// decodeSegment decodes base64url (RFC 7515 §2): the URL-safe alphabet only, checked first
// because Go's decoder silently skips CR and LF; "=" padding accepted when it is exactly what the
// length calls for (spec §4.3: "padding optional"); Strict rejects non-canonical trailing bits.
func decodeSegment(s string) ([]byte, error) {
	if trimmed := strings.TrimRight(s, "="); trimmed != s {
		if len(s)%4 != 0 || len(s)-len(trimmed) > 2 {
			return nil, errors.New("bad padding")
		}
		s = trimmed
	}
	for i := 0; i < len(s); i++ {
		if !isB64URL(s[i]) {
			return nil, errors.New("not base64url")
		}
	}
	return base64.RawURLEncoding.Strict().DecodeString(s)
}

func isB64URL(c byte) bool {
	return c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_'
}

// object is a JSON object read once: its members in order, names unique, strings read as slices
// of one text (wirejson.Text).
type object struct {
	wirejson.Text
	members []objectMember
}

type objectMember struct {
	name  string
	value []byte
}

// parseObject reads a valid JSON object, refusing duplicate names: with duplicates, which value
// counts depends on the parser (RFC 7515 §5.2 allows refusing).
func parseObject(b []byte) (*object, bool) {
	o := &object{Text: wirejson.NewText(b), members: make([]objectMember, 0, 16)}
	for name, v := range wirejson.Members(b) {
		n, _ := o.String(name)
		if _, dup := o.get(n); dup {
			return nil, false
		}
		o.members = append(o.members, objectMember{name: n, value: v})
	}
	return o, true
}

// get returns the raw value of the member name.
func (o *object) get(name string) ([]byte, bool) {
	for _, m := range o.members {
		if m.name == name {
			return m.value, true
		}
	}
	return nil, false
}

// str returns the value of a string member; ok is false when it is absent or not a string (null,
// a number, an object...).
func (o *object) str(name string) (string, bool) {
	v, ok := o.get(name)
	if !ok {
		return "", false
	}
	return o.String(v)
}
