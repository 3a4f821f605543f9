package core

import (
	"strings"
	"testing"
)

// TestParseLaxInt holds parseLaxInt to pydantic's lax int parsing, as pydantic 2.13.4
// (pydantic-core 2.46.4) answers TypeAdapter(int).validate_python(s) for each string.
func TestParseLaxInt(t *testing.T) {
	for s, want := range map[string]string{
		" 7 ": "7", "1_000": "1000", "5.0": "5", "5.00": "5", "+5": "5", "-0": "0", "00012": "12", "\t3\n": "3", "1_0.0": "10",
		"99999999999999999999999": "99999999999999999999999", strings.Repeat("1", 4300): strings.Repeat("1", 4300),
		" " + strings.Repeat("1", 4300): strings.Repeat("1", 4300), strings.Repeat("1", 4299) + ".0": strings.Repeat("1", 4299),
		"5.": "int_parsing", ".0": "int_parsing", "1e3": "int_parsing", "0x10": "int_parsing", "١٢": "int_parsing", "1__0": "int_parsing",
		"_1": "int_parsing", "5.01": "int_parsing", "": "int_parsing", "+-5": "int_parsing", " 1 _0": "int_parsing",
		strings.Repeat("a", 4301): "int_parsing", strings.Repeat("1", 4301): "int_parsing_size",
	} {
		n, err := parseLaxInt(s)
		got := ""
		switch {
		case err == errIntTooLong:
			got = "int_parsing_size"
		case err != nil:
			got = "int_parsing"
		default:
			got = n.String()
		}
		if got != want {
			t.Errorf("parseLaxInt(%.20q) = %.30s, want %.30s", s, got, want)
		}
	}
}
