package contract

import (
	"strings"
	"testing"
)

// TestParseLaxInt holds ParseLaxInt to pydantic's lax int parsing, as pydantic 2.13.4
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
		n, err := ParseLaxInt(s)
		got := ""
		switch {
		case err == ErrIntTooLong:
			got = "int_parsing_size"
		case err != nil:
			got = "int_parsing"
		default:
			got = n.String()
		}
		if got != want {
			t.Errorf("ParseLaxInt(%.20q) = %.30s, want %.30s", s, got, want)
		}
	}
}

// TestLaxInt holds laxInt to pydantic 2.13.4's lax int for JSON values (the version of a
// context.assign item), errors included; values beyond int64 are svz's own refusal.
func TestLaxInt(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int
		err  string // the error type, "" when accepted
	}{
		{`3`, 3, ""}, {`-3`, -3, ""}, {`3.0`, 3, ""}, {`1e2`, 100, ""}, {`-0.0`, 0, ""}, {`1e-400`, 0, ""},
		{`true`, 1, ""}, {`false`, 0, ""},
		{`"3"`, 3, ""}, {`" 3 "`, 3, ""}, {`"3.0"`, 3, ""}, {`"1_0"`, 10, ""}, {`"+4"`, 4, ""},
		{`3.5`, 0, "int_from_float"}, {`1e30`, 0, "int_parsing_size"}, {`9.3e18`, 0, "int_parsing_size"}, {`1e400`, 0, "finite_number"},
		{`"x"`, 0, "int_parsing"}, {`"3.5"`, 0, "int_parsing"}, {`"1__0"`, 0, "int_parsing"}, {`""`, 0, "int_parsing"},
		{`"` + strings.Repeat("1", 4301) + `"`, 0, "int_parsing_size"},
		{`99999999999999999999999`, 0, "int_parsing_size"}, {`"99999999999999999999999"`, 0, "int_parsing_size"},
		{`null`, 0, "int_type"}, {`[1]`, 0, "int_type"}, {`{}`, 0, "int_type"},
	} {
		got, fe := laxInt([]byte(tc.in))
		gotErr := ""
		if fe != nil {
			gotErr = fe.Type
		}
		if got != tc.want || gotErr != tc.err {
			t.Errorf("laxInt(%.30s) = %d, %q; want %d, %q", tc.in, got, gotErr, tc.want, tc.err)
		}
	}
}
