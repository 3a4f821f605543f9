package state

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzEscape: an escaped segment has no '/' or NUL, is valid UTF-8, unescapes to the original,
// and keeps prefixes (on rune boundaries) as prefixes, which listing by prefix relies on.
func FuzzEscape(f *testing.F) {
	for _, s := range []string{"", "job-1", "a/b", "100%", "%2F", "\x00", "\xff\xfe", "é/ü", "x/w/y"} {
		f.Add(s, 1)
	}
	f.Fuzz(func(t *testing.T, s string, cut int) {
		e := escape(s)
		if strings.ContainsAny(e, "/\x00") || !utf8.ValidString(e) {
			t.Fatalf("escape(%q) = %q", s, e)
		}
		if got := unescape(e); got != s {
			t.Fatalf("unescape(escape(%q)) = %q", s, got)
		}
		if cut < 0 || cut > len(s) || !utf8.ValidString(s) || (cut < len(s) && !utf8.RuneStart(s[cut])) {
			return
		}
		p := s[:cut]
		if !strings.HasPrefix(e, escape(p)) {
			t.Fatalf("escape(%q) = %q does not start with escape(%q) = %q", s, e, p, escape(p))
		}
	})
}
