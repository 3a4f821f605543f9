package contract

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"math/big"
	"strconv"
	"strings"
)

// maxIntDigits is pydantic's bound on the length of an integer string.
const maxIntDigits = 4300

// ErrIntTooLong is ParseLaxInt's error for a string of more than 4300 characters.
var ErrIntTooLong = errors.New("integer string too long")

// ParseLaxInt parses an integer string as pydantic does in lax mode (checked against
// pydantic-core 2.46): surrounding whitespace, an optional sign, ASCII digits with single
// underscores between them, optionally a fraction of zeros ("5.0", not "5."); more than 4300
// characters is ErrIntTooLong.
func ParseLaxInt(s string) (*big.Int, error) {
	s = strings.TrimSpace(s)
	if whole, frac, ok := strings.Cut(s, "."); ok {
		if frac == "" || strings.Trim(frac, "0") != "" {
			return nil, strconv.ErrSyntax
		}
		s = whole
	}
	digits := strings.TrimLeft(s, "+-")
	if len(s)-len(digits) > 1 || digits == "" || digits[0] == '_' || digits[len(digits)-1] == '_' || strings.Contains(digits, "__") {
		return nil, strconv.ErrSyntax
	}
	for _, r := range digits {
		if (r < '0' || r > '9') && r != '_' {
			return nil, strconv.ErrSyntax
		}
	}
	if len(s) > maxIntDigits {
		return nil, ErrIntTooLong
	}
	n, ok := new(big.Int).SetString(strings.ReplaceAll(s, "_", ""), 10)
	if !ok {
		return nil, strconv.ErrSyntax
	}
	return n, nil
}

// Pydantic's int errors.
var (
	errIntType      = FieldError{Type: "int_type", Msg: "Input should be a valid integer"}
	errIntParsing   = FieldError{Type: "int_parsing", Msg: "Input should be a valid integer, unable to parse string as an integer"}
	errIntSize      = FieldError{Type: "int_parsing_size", Msg: "Unable to parse input string as an integer, exceeded maximum size"}
	errIntFromFloat = FieldError{Type: "int_from_float", Msg: "Input should be a valid integer, got a number with a fractional part"}
	errFiniteNumber = FieldError{Type: "finite_number", Msg: "Input should be a finite number"}
)

// laxInt decodes the JSON value v as an int the way pydantic's lax mode does, with its error for
// a value it refuses: an integer, a float without a fractional part, a numeric string
// (ParseLaxInt), or a boolean. Python integers have no size: a value that does not fit an int64
// is refused here (int_parsing_size, pydantic's own error for a float that large).
func laxInt(v json.RawMessage) (int, *FieldError) {
	v = bytes.TrimSpace(v)
	fail := func(e FieldError) (int, *FieldError) { return 0, &e }
	if len(v) == 0 {
		return fail(errIntType)
	}
	switch v[0] {
	case 't':
		return 1, nil
	case 'f':
		return 0, nil
	case '"':
		var s string
		if json.Unmarshal(v, &s) != nil {
			return fail(errIntType)
		}
		n, err := ParseLaxInt(s)
		switch {
		case errors.Is(err, ErrIntTooLong):
			return fail(errIntSize)
		case err != nil:
			return fail(errIntParsing)
		case !n.IsInt64():
			return fail(errIntSize)
		}
		return int(n.Int64()), nil
	case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
	default:
		return fail(errIntType)
	}
	if !bytes.ContainsAny(v, ".eE") {
		n, ok := new(big.Int).SetString(string(v), 10)
		if !ok {
			return fail(errIntType)
		}
		if !n.IsInt64() {
			return fail(errIntSize)
		}
		return int(n.Int64()), nil
	}
	x, err := strconv.ParseFloat(string(v), 64)
	switch {
	case err != nil && !errors.Is(err, strconv.ErrRange):
		return fail(errIntType)
	case math.IsInf(x, 0):
		return fail(errFiniteNumber)
	case x != math.Trunc(x):
		return fail(errIntFromFloat)
	case x <= -(1<<63) || x >= 1<<63:
		return fail(errIntSize)
	}
	return int(x), nil
}
