package lambda

import "testing"

// TestQueueURLCharacters: the account is 12 digits, 0 to 9; a queue name is letters a to z and
// A to Z, digits 0 to 9, '-' and '_': each range at both ends, and the byte just outside each
// (a test for every boundary a mutation tester flips, issue 30).
func TestQueueURLCharacters(t *testing.T) {
	const host = "https://sqs.eu-west-3.amazonaws.com/"
	for _, ok := range []string{"012345678901/aA", "999999999990/zZ09-_", "123456789012/mM5"} {
		if _, err := ParseQueueURL(host + ok); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	for _, bad := range []string{
		"12345678901:/q", "12345678901-/q", "/12345678901/q",
		"123456789012/a`", "123456789012/a{", "123456789012/a@", "123456789012/a[", "123456789012/a:", "123456789012/a%2F",
		"123456789012/a.b",
	} {
		if _, err := ParseQueueURL(host + bad); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
}
