// Package redact shows values that may hold secrets in a form fit for logs and error messages.
package redact

import (
	"net/url"
	"strings"
)

// Mask replaces what a message must not show.
const Mask = "xxxxx"

// URL is raw as an error message may show it: scheme, host, port and path; the userinfo and
// every query value Mask (pgx takes ?password= and ?sslpassword=, and a password misplaced as
// the user name is still a password); the fragment dropped. It is empty when raw is not a URL
// with a scheme and an authority, or when an '@' appears after the authority: a password with an
// unescaped '/', '?' or '#' ends the authority early and spills, with the host, into the path,
// query or fragment.
func URL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" || u.Opaque != "" || spilled(u) {
		return ""
	}
	var b strings.Builder
	b.WriteString(u.Scheme + "://")
	if u.User != nil {
		b.WriteString(Mask + "@")
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
				name = Mask // a bare value: show nothing of it
			} else {
				name += "=" + Mask
			}
			b.WriteString(sep + name)
		}
	}
	return b.String()
}

// Spilled reports whether raw, a URL, holds an '@' that parsers may read differently: one after
// the authority (a password with an unescaped '/', '?' or '#' ends the authority early), or two
// (net/url splits the userinfo at the last '@', pgx at the first). A piece of the password then
// becomes the host, which connection errors quote. Such a value must be refused, not used. It
// reads raw as written: parsers that disagree on it are the danger.
func Spilled(raw string) bool {
	_, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return false
	}
	at := strings.IndexByte(rest, '@')
	if at < 0 {
		return false
	}
	end := strings.IndexAny(rest, "/?#")
	return strings.Count(rest, "@") > 1 || (end >= 0 && end < at)
}

func spilled(u *url.URL) bool {
	return strings.Contains(u.Path+u.RawPath+u.RawQuery+u.Fragment+u.RawFragment, "@")
}
