package checkpoint

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// canonicalJSON encodes v as the reference encodes a checkpoint context before hashing it:
// Python's json.dumps(v, sort_keys=True, separators=(",", ":")) with its defaults, so
// ensure_ascii. That differs from encoding/json in ways that change the bytes, hence the hash:
//
//   - every character outside ' '..'~' is escaped as \uXXXX with lower-case hex digits (DEL
//     included, characters beyond the BMP as a surrogate pair), except \b \f \n \r \t; '<', '>'
//     and '&' are not escaped (Go escapes them for HTML) and neither are U+2028 and U+2029 as
//     such (they become \u2028 \u2029 like any non-ASCII character);
//   - members are sorted by code point at every depth, without whitespace;
//   - a number keeps its Python type: an integer literal is an int (-0 is 0), any other literal
//     is a float written as Python's repr (1.0, 1e+16, 1e-05, Infinity for an overflow).
//
// v is first encoded with encoding/json (struct tags apply), then decoded and re-encoded.
func canonicalJSON(v any) ([]byte, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return canonicalize(raw)
}

// canonicalize re-encodes the JSON document raw canonically (see canonicalJSON).
func canonicalize(raw []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errors.New("more than one JSON value")
	}
	var b []byte
	return appendCanonical(b, doc)
}

func appendCanonical(b []byte, v any) ([]byte, error) {
	var err error
	switch x := v.(type) {
	case nil:
		return append(b, "null"...), nil
	case bool:
		return strconv.AppendBool(b, x), nil
	case string:
		return appendPyString(b, x), nil
	case json.Number:
		return appendPyNumber(b, string(x))
	case []any:
		b = append(b, '[')
		for i, e := range x {
			if i > 0 {
				b = append(b, ',')
			}
			if b, err = appendCanonical(b, e); err != nil {
				return nil, err
			}
		}
		return append(b, ']'), nil
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		// Byte order of valid UTF-8 is code-point order, Python's order of str.
		slices.Sort(keys)
		b = append(b, '{')
		for i, k := range keys {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendPyString(b, k)
			b = append(b, ':')
			if b, err = appendCanonical(b, x[k]); err != nil {
				return nil, err
			}
		}
		return append(b, '}'), nil
	}
	return nil, fmt.Errorf("unexpected JSON value %T", v)
}

const hexDigits = "0123456789abcdef"

// appendPyString writes s as Python's json.dumps with ensure_ascii.
func appendPyString(b []byte, s string) []byte {
	b = append(b, '"')
	for _, r := range s {
		switch {
		case r == '"':
			b = append(b, '\\', '"')
		case r == '\\':
			b = append(b, '\\', '\\')
		case r == '\b':
			b = append(b, '\\', 'b')
		case r == '\f':
			b = append(b, '\\', 'f')
		case r == '\n':
			b = append(b, '\\', 'n')
		case r == '\r':
			b = append(b, '\\', 'r')
		case r == '\t':
			b = append(b, '\\', 't')
		case r >= ' ' && r <= '~':
			b = append(b, byte(r))
		case r > 0xFFFF:
			r1, r2 := utf16.EncodeRune(r)
			b = appendU(appendU(b, r1), r2)
		case r == utf8.RuneError:
			b = appendU(b, utf8.RuneError) // decoded JSON strings are valid UTF-8: a real U+FFFD
		default:
			b = appendU(b, r)
		}
	}
	return append(b, '"')
}

func appendU(b []byte, r rune) []byte {
	return append(b, '\\', 'u', hexDigits[r>>12&0xF], hexDigits[r>>8&0xF], hexDigits[r>>4&0xF], hexDigits[r&0xF])
}

// appendPyNumber writes the JSON number literal n as Python writes the value json.loads gives
// for it: an int for an integer literal, else a float.
func appendPyNumber(b []byte, n string) ([]byte, error) {
	if !strings.ContainsAny(n, ".eE") {
		if n == "-0" {
			return append(b, '0'), nil
		}
		return append(b, n...), nil // JSON forbids leading zeros: the literal is already canonical
	}
	f, err := strconv.ParseFloat(n, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return nil, fmt.Errorf("number %q: %w", n, err)
	}
	return appendPyFloat(b, f), nil
}

// appendPyFloat writes f as Python's float repr (json.dumps uses it): the shortest digits that
// read back as f, in positional notation when the decimal exponent is from -4 to 15 (with ".0"
// for an integral value), else as d.ddde+XX with at least two exponent digits.
func appendPyFloat(b []byte, f float64) []byte {
	switch {
	case math.IsInf(f, 1):
		return append(b, "Infinity"...)
	case math.IsInf(f, -1):
		return append(b, "-Infinity"...)
	case math.IsNaN(f):
		return append(b, "NaN"...)
	}
	if math.Signbit(f) {
		b = append(b, '-')
		f = -f
	}
	// "d.dddde±XX": the shortest round-trip digits and the exponent of the first one.
	s := strconv.FormatFloat(f, 'e', -1, 64)
	mant, exp, _ := strings.Cut(s, "e")
	digits := strings.Replace(mant, ".", "", 1)
	e, _ := strconv.Atoi(exp)
	decpt := e + 1 // the value is 0.digits × 10^decpt
	if decpt <= -4 || decpt > 16 {
		b = append(b, digits[0])
		if len(digits) > 1 {
			b = append(b, '.')
			b = append(b, digits[1:]...)
		}
		b = append(b, 'e')
		if e < 0 {
			b = append(b, '-')
			e = -e
		} else {
			b = append(b, '+')
		}
		if e < 10 {
			b = append(b, '0')
		}
		return strconv.AppendInt(b, int64(e), 10)
	}
	switch {
	case decpt <= 0:
		b = append(b, "0."...)
		b = append(b, strings.Repeat("0", -decpt)...)
		return append(b, digits...)
	case decpt >= len(digits):
		b = append(b, digits...)
		b = append(b, strings.Repeat("0", decpt-len(digits))...)
		return append(b, ".0"...)
	}
	b = append(b, digits[:decpt]...)
	b = append(b, '.')
	return append(b, digits[decpt:]...)
}

// contextHash is the reference's context_hash: the SHA-256, in hex, of the canonical JSON.
func contextHash(canonical []byte) string {
	sum := sha256.Sum256(canonical)
	return hex.EncodeToString(sum[:])
}
