//go:build !svz_nopostgres || !svz_noredis

package storeenv

import (
	"fmt"

	"github.com/supervaize/svz/internal/redact"
)

// badURL reports an unparsable SUPERVAIZER_STORE_URL without the parser's text, which may quote
// the value and its password; it shows the URL masked by shownURL when it can.
func badURL(kind, raw, example string) error {
	shown := "the value is not shown"
	if s := shownURL(raw); s != "" {
		shown = "got " + s
	}
	return fmt.Errorf("%s: not a valid %s URL (%s; want e.g. %s)", URL, kind, shown, example)
}

// shownURL is raw as an error message may show it (redact.URL).
func shownURL(raw string) string { return redact.URL(raw) }
