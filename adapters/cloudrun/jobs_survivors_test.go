package cloudrun

import "testing"

// TestLoopbackOrHTTPS: the Cloud Tasks endpoint and the OIDC key set URL are https, or plain
// http to a loopback address only (the tests' fakes): any other IP literal is refused as a host
// name is (a mutation sample found plain http accepted for any IP literal untested, issue 30).
func TestLoopbackOrHTTPS(t *testing.T) {
	const def = "https://default.example/certs"
	for _, tc := range []struct{ v, want string }{
		{"", def},
		{"  ", def},
		{"https://tasks.example.com/", "https://tasks.example.com"},
		{"https://10.0.0.1/certs", "https://10.0.0.1/certs"},
		{"http://127.0.0.1:8080/certs/", "http://127.0.0.1:8080/certs"},
		{"http://[::1]:9000", "http://[::1]:9000"},
		{"http://10.0.0.1/certs", ""},
		{"http://169.254.169.254/certs", ""},
		{"http://[2001:db8::1]/certs", ""},
		{"http://localhost:8080/certs", ""},
		{"http://tasks.example.com", ""},
		{"ftp://127.0.0.1/certs", ""},
		{"https://user:pw@tasks.example.com", ""},
		{"http://user@127.0.0.1:8080", ""},
		{"https:///certs", ""},
		{"http://127.0.0.1:8080/%zz", ""},
	} {
		got, err := loopbackOrHTTPS(envMap(map[string]string{"X": tc.v}), "X", def)
		if tc.want == "" {
			if err == nil || err.Error() != "X must be an https URL (plain http only to a loopback address such as 127.0.0.1)" {
				t.Errorf("%q: %q, %v; want refused", tc.v, got, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%q: %q, %v; want %q", tc.v, got, err, tc.want)
		}
	}
}
