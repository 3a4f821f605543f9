package grant

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"unicode/utf8"
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
	alg       json.RawMessage // the header's alg member as sent; nil when absent
	kid       json.RawMessage // the header's kid member as sent; nil when absent
	claims    map[string]json.RawMessage
	signed    string // base64url(header) "." base64url(payload): the bytes the signature covers
	signature []byte
}

// parseToken performs step 3 of spec §4.3: exactly three base64url segments (strict alphabet, no
// padding, canonical), a header and a payload that are UTF-8 JSON objects without duplicate
// members. It reads nothing else: what the header claims (alg, kid) is judged by the caller.
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
	if err1 != nil || err2 != nil || err3 != nil || !isJSON(header) || !isJSON(payload) {
		return nil, refuse(CodeMalformed, msgMalformed)
	}
	if firstByte(header) != '{' || firstByte(payload) != '{' {
		return nil, refuse(CodeMalformed, msgNotObjects)
	}
	hdr, err := objectMembers(header)
	if err != nil {
		return nil, refuse(CodeMalformed, msgMalformed)
	}
	claims, err := objectMembers(payload)
	if err != nil {
		return nil, refuse(CodeMalformed, msgMalformed)
	}
	return &parsedToken{
		alg:       hdr["alg"],
		kid:       hdr["kid"],
		claims:    claims,
		signed:    tok[:len(h)+1+len(p)],
		signature: sig,
	}, nil
}

// decodeSegment decodes unpadded base64url (RFC 7515 §2). The alphabet is checked first because
// Go's decoder silently skips CR and LF; Strict rejects non-canonical trailing bits, so one token
// has exactly one spelling.
func decodeSegment(s string) ([]byte, error) {
	for i := 0; i < len(s); i++ {
		if !isB64URL(s[i]) {
			return nil, errors.New("not base64url")
		}
	}
	return base64.RawURLEncoding.Strict().DecodeString(s)
}

// decodeJWKCoordinate decodes a JWK member such as x: base64url, canonical, padding tolerated
// (the JWKS is configuration from Studio, not attacker input, and Python encoders often pad).
func decodeJWKCoordinate(s string) ([]byte, error) {
	if trimmed := strings.TrimRight(s, "="); trimmed != s {
		if len(s)%4 != 0 || len(s)-len(trimmed) > 2 {
			return nil, errors.New("bad padding")
		}
		s = trimmed
	}
	return decodeSegment(s)
}

func isB64URL(c byte) bool {
	return c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_'
}

// isJSON reports whether b is one valid UTF-8 JSON value (Go's parser alone would let invalid UTF-8
// through as U+FFFD, so two different byte strings could read as the same text).
func isJSON(b []byte) bool { return utf8.Valid(b) && json.Valid(b) }

func firstByte(b []byte) byte {
	b = bytes.TrimLeft(b, " \t\r\n")
	if len(b) == 0 {
		return 0
	}
	return b[0]
}

// objectMembers returns the members of a JSON object (already checked valid), refusing duplicate
// names: with duplicates, which value counts depends on the parser (RFC 7515 §5.2 allows refusing).
func objectMembers(b []byte) (map[string]json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, errors.New("not a JSON object")
	}
	members := make(map[string]json.RawMessage)
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, err
		}
		name, ok := t.(string)
		if !ok {
			return nil, errors.New("object member name is not a string")
		}
		if _, dup := members[name]; dup {
			return nil, errors.New("duplicate object member")
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		members[name] = v
	}
	if t, err := dec.Token(); err != nil || t != json.Delim('}') {
		return nil, errors.New("unterminated JSON object")
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("data after the JSON object")
	}
	return members, nil
}

// jsonString returns the value of a JSON string member; ok is false when raw is absent or is not
// a string (null, a number, an object...).
func jsonString(raw json.RawMessage) (string, bool) {
	if len(raw) == 0 || raw[0] != '"' {
		return "", false
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", false
	}
	return s, true
}
