package redact

import "testing"

func TestSpilled(t *testing.T) {
	for raw, want := range map[string]bool{
		"postgres://u:pw@h:5432/db?sslmode=disable": false,
		"postgres://u:p%40ss@h/db":                  false,
		"postgres://u:p%2Fss@h/db":                  false,
		"postgres://h/db":                           false,
		"redis://:pw@[::1]:6379/0":                  false,
		"host=h password=p@ss":                      false, // not a URL: pgx's key=value form
		"postgres://u:p@ss@h/db":                    true,  // net/url and pgx split it differently
		"postgres://u:p@ss/word@h/db":               true,  // the review's "cannot reach postgres at ss:5432"
		"postgres://u:12/pw@h/db":                   true,
		"postgres://u:pw?x@h/db":                    true,
		"postgres://u:pw#x@h/db":                    true,
		"postgres://h/db?user=a@b":                  true, // an '@' in the query: encode it
		"http://u:a#b?c@d@127.0.0.1:1/":             true,
	} {
		if got := Spilled(raw); got != want {
			t.Errorf("Spilled(%q) = %v, want %v", raw, got, want)
		}
	}
}

func TestURL(t *testing.T) {
	for raw, want := range map[string]string{
		"postgres://svz:pw@db:5432/app?sslmode=require&password=pw2": "postgres://xxxxx@db:5432/app?sslmode=xxxxx&password=xxxxx",
		"postgres://u:p@ss/word@h/db":                                "",
		"not a url":                                                  "",
	} {
		if got := URL(raw); got != want {
			t.Errorf("URL(%q) = %q, want %q", raw, got, want)
		}
	}
}
