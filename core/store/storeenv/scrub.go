package storeenv

import (
	"cmp"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/supervaize/svz/internal/redact"
)

// masked replaces what an error message must not show.
const masked = redact.Mask

// minSecret is the shortest value scrub masks: shorter ones (a port, "0", "on") are too common in
// messages to replace, and are no credible password or token.
const minSecret = 4

// secretVariables hold a secret as their whole value.
var secretVariables = [...]string{"AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_CONTAINER_AUTHORIZATION_TOKEN"}

// urlVariables hold URLs that may carry a secret in their userinfo or query.
var urlVariables = [...]string{URL, "AWS_ENDPOINT_URL_DYNAMODB", "AWS_ENDPOINT_URL",
	"AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"}

// secrets returns what the settings hold that no message may show, longest first: the secret
// variables, and of each URL its password and query values, whole and cut at the delimiters a
// parser may have cut them at (an unescaped '/', '?', '#' or '@' in a password moves its pieces
// into the host, path or query of what the parser understood).
func secrets(getenv func(string) string) []string {
	var out []string
	add := func(v string) {
		pieces := strings.FieldsFunc(v, func(r rune) bool { return strings.ContainsRune("/?#@&;= ", r) })
		for _, p := range append(pieces, v) {
			if len(p) >= minSecret && !slices.Contains(out, p) {
				out = append(out, p)
			}
			if d, err := url.QueryUnescape(p); err == nil && d != p && len(d) >= minSecret {
				out = append(out, d)
			}
			if d, err := url.PathUnescape(p); err == nil && d != p && len(d) >= minSecret {
				out = append(out, d)
			}
		}
	}
	for _, name := range secretVariables {
		add(strings.TrimSpace(getenv(name)))
	}
	for _, name := range urlVariables {
		urlSecrets(strings.TrimSpace(getenv(name)), add)
	}
	slices.SortFunc(out, func(a, b string) int { return cmp.Compare(len(b), len(a)) })
	return out
}

// urlSecrets passes to add the password, query values and fragment of raw. A URL that parses
// cleanly is read by url.Parse. Otherwise raw is not trusted to parse: the password is what lies
// between the first ':' after "://" and the last '@', and the query what follows the next '?'.
// A key=value connection string (pgx accepts one) gives its password values.
func urlSecrets(raw string, add func(string)) {
	if raw == "" {
		return
	}
	if u, err := url.Parse(raw); err == nil && u.Scheme != "" && u.Opaque == "" &&
		!strings.Contains(u.Path+u.RawQuery+u.Fragment, "@") {
		if password, ok := u.User.Password(); ok {
			add(password)
		}
		if u.User != nil {
			add(u.User.String()) // the raw, escaped form
		}
		queryValues(u.RawQuery, add)
		add(u.Fragment)
		return
	}
	before, after, ok := strings.Cut(raw, "://")
	if !ok {
		for _, field := range strings.Fields(raw) {
			if k, v, ok := strings.Cut(field, "="); ok && strings.Contains(strings.ToLower(k), "password") {
				add(strings.Trim(v, `'"`))
			}
		}
		// A quoted password may hold spaces: take everything from password=' to the next quote.
		for _, part := range strings.Split(raw, "password='")[1:] {
			v, _, _ := strings.Cut(part, "'")
			add(v)
		}
		after = before
	} else if at := strings.LastIndex(after, "@"); at >= 0 {
		if _, password, ok := strings.Cut(after[:at], ":"); ok {
			add(password)
		}
		after = after[at+1:]
	}
	if _, query, ok := strings.Cut(after, "?"); ok {
		queryValues(query, add)
	}
}

// queryValues passes to add each value of a raw query, or the whole parameter when it has no '='.
func queryValues(query string, add func(string)) {
	for _, param := range strings.FieldsFunc(query, func(r rune) bool { return r == '&' || r == ';' }) {
		if _, v, ok := strings.Cut(param, "="); ok {
			add(v)
		} else {
			add(param)
		}
	}
}

// checkURL refuses the URL-shaped setting name when its password is not percent-encoded so that
// a parser may read a piece of it as the host (see redact.Spilled), connect there, and quote it
// in its errors.
func checkURL(name, raw string) error {
	if redact.Spilled(strings.TrimSpace(raw)) {
		return fmt.Errorf("%s: the URL (not shown) has an '@' in its password or after its host: percent-encode the '@', '/', '?' and '#' of its password (%%40, %%2F, %%3F, %%23), e.g. user:p%%40ss@host for the password p@ss", name)
	}
	return nil
}

// scrub returns err, or when its message shows one of secrets an error with each of them masked.
// That error does not wrap err: unwrapping would reach the unmasked message.
func scrub(err error, secrets []string) error {
	msg := err.Error()
	clean := msg
	for _, s := range secrets {
		clean = strings.ReplaceAll(clean, s, masked)
	}
	if clean == msg {
		return err
	}
	return errors.New(clean)
}
