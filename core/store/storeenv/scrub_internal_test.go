//go:build !svz_nopostgres || !svz_noredis

package storeenv

import (
	"strings"
	"testing"
)

// urlTemplates put a password where pgx or go-redis read one, or where it lands by mistake.
var urlTemplates = [...]string{
	"postgres://svz:%s@127.0.0.1:5432/db?sslmode=bogus",
	"postgres://svz@127.0.0.1/db?password=%s&sslmode=bogus",
	"postgres://svz@127.0.0.1/db?sslpassword=%s",
	"postgres://%s@127.0.0.1/db",
	"host=127.0.0.1 user=svz password=%s sslmode=bogus",
	"host=127.0.0.1 user=svz password='%s' sslmode=bogus",
	"redis://:%s@127.0.0.1:6379/x",
	"rediss://svz:%s@[::1]:6379/0?dial_timeout=x",
	"unix://:%s@/tmp/redis.sock?db=x",
}

// FuzzBadURLHidesPassword: whatever the password and wherever it is, the message Open would give
// for an unparsable URL (badURL, then scrub) never shows it. SUPERVAIZER_STORE_URL is typed by
// people, so anything may be in it.
func FuzzBadURLHidesPassword(f *testing.F) {
	for i := range urlTemplates {
		for _, p := range []string{"s3cret-Passw0rd", "12/s3cretpw", "pw#frag@x", "p?w=1&x", "a b c d", "%zz%41pw", "xxxxx", "@@@@", "://x@y"} {
			f.Add(uint8(i), p)
		}
	}
	f.Fuzz(func(t *testing.T, template uint8, password string) {
		tpl := urlTemplates[int(template)%len(urlTemplates)]
		message := func(p string) string {
			raw := strings.Replace(tpl, "%s", p, 1)
			getenv := func(k string) string {
				if k == URL {
					return raw
				}
				return ""
			}
			return scrub(badURL("PostgreSQL", raw, "postgres://user:password@host:5432/database"), secrets(getenv)).Error()
		}
		if len(password) < minSecret || strings.TrimSpace(password) != password {
			return // too short to mask (see minSecret); settings are trimmed
		}
		if strings.Contains(message("PLACEHOLDER0"), password) {
			return // the password is part of the message's own text (e.g. "127.0.0.1")
		}
		if got := message(password); strings.Contains(got, password) {
			t.Fatalf("the message shows the password %q: %s", password, got)
		}
	})
}

func TestShownURL(t *testing.T) {
	for raw, want := range map[string]string{
		"postgres://svz:pw@db.example.com:5432/app?sslmode=require&password=pw2": "postgres://xxxxx@db.example.com:5432/app?sslmode=xxxxx&password=xxxxx",
		"postgres://db.example.com/app":                                          "postgres://db.example.com/app",
		"redis://:pw@[::1]:6379/0#frag":                                          "redis://xxxxx@[::1]:6379/0",
		"redis://h/0?":                                                           "redis://h/0",
		"redis://h/0?a&b=&=c":                                                    "redis://h/0?xxxxx&b=xxxxx&=xxxxx",
		"postgres://svz:1/pw@h/db":                                               "",
		"postgres:svz:pw@h/db":                                                   "",
		"host=h password=pw":                                                     "",
		"postgres://svz:p%zz@h/db":                                               "",
		"":                                                                       "",
	} {
		if got := shownURL(raw); got != want {
			t.Errorf("shownURL(%q) = %q, want %q", raw, got, want)
		}
	}
}
