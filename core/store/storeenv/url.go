//go:build !svz_nopostgres || !svz_noredis

package storeenv

import (
	"fmt"
	"net/url"
	"strings"
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

// shownURL is raw as an error message may show it: scheme, host, port and path; the userinfo and
// every query value masked (pgx takes ?password= and ?sslpassword=, and a password misplaced as
// the user name is still a password); the fragment dropped. It is empty when raw is not a URL
// with a scheme and an authority, or when an '@' appears after the authority: a password with an
// unescaped '/', '?' or '#' ends the authority early and spills, with the host, into the path,
// query or fragment.
func shownURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" || u.Opaque != "" {
		return ""
	}
	if strings.Contains(u.Path+u.RawPath+u.RawQuery+u.Fragment+u.RawFragment, "@") {
		return ""
	}
	var b strings.Builder
	b.WriteString(u.Scheme + "://")
	if u.User != nil {
		b.WriteString(masked + "@")
	}
	b.WriteString(u.Host)
	b.WriteString(u.EscapedPath())
	if u.RawQuery != "" {
		for i, param := range strings.Split(u.RawQuery, "&") {
			sep := "&"
			if i == 0 {
				sep = "?"
			}
			name, _, ok := strings.Cut(param, "=")
			if !ok {
				name = masked // a bare value: show nothing of it
			} else {
				name += "=" + masked
			}
			b.WriteString(sep + name)
		}
	}
	return b.String()
}
