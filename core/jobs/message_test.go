package jobs_test

import (
	"testing"

	"github.com/supervaize/svz/core/jobs"
)

func TestDecodeMessage(t *testing.T) {
	ok := `{"agent":"a","workspace":"w","job":"j","work":"x","attempt":2}`
	m, err := jobs.DecodeMessage([]byte(ok))
	if err != nil || m != (jobs.Message{Agent: "a", Workspace: "w", Job: "j", Work: "x", Attempt: 2}) || string(m.Encode()) != ok {
		t.Fatalf("%+v %v", m, err)
	}
	for _, bad := range []string{
		``, `null`, `[]`, `{}`, `{"agent":"a","workspace":"w","job":"j","work":"x","attempt":-1}`,
		`{"agent":"","workspace":"w","job":"j","work":"x","attempt":0}`,
		`{"agent":"a","workspace":"w","job":"j","work":"x","attempt":0,"input":{"secret":1}}`,
		`{"agent":"a","workspace":"w","job":"j","work":"x","attempt":0} {}`,
		`{"agent":"a","workspace":"w","job":"j","work":"x","attempt":1.5}`,
	} {
		if _, err := jobs.DecodeMessage([]byte(bad)); err == nil {
			t.Errorf("DecodeMessage(%s) accepted", bad)
		}
	}
}

// FuzzDecodeMessage: a queue message is untrusted input: it never panics, and what it accepts
// encodes back to a message it accepts with the same value.
func FuzzDecodeMessage(f *testing.F) {
	f.Add([]byte(`{"agent":"a","workspace":"w","job":"j","work":"x","attempt":2}`))
	f.Add([]byte(`{"agent":"a\u0000","workspace":"w/../x","job":"j%2F","work":"x","attempt":0}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := jobs.DecodeMessage(b)
		if err != nil {
			return
		}
		again, err := jobs.DecodeMessage(m.Encode())
		if err != nil || again != m {
			t.Fatalf("round trip of %q: %+v %v", b, again, err)
		}
		if m.Key() == "" {
			t.Fatal("no key")
		}
	})
}
