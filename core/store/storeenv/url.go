//go:build !svz_nopostgres || !svz_noredis

package storeenv

import (
	"fmt"
	"net/url"
)

// badURL reports an unparsable SUPERVAIZER_STORE_URL without the parser's text, which may quote
// the value and its password; it shows the URL with any password masked when it can.
func badURL(kind, raw, example string) error {
	shown := "the value is not shown"
	if u, err := url.Parse(raw); err == nil && u.Scheme != "" {
		shown = fmt.Sprintf("got %s", u.Redacted())
	}
	return fmt.Errorf("%s: not a valid %s URL (%s; want e.g. %s)", URL, kind, shown, example)
}
