package awsdeploy

import (
	"net/url"
	"testing"
)

func TestParsePolicy(t *testing.T) {
	want := NewPolicy(Statement{Principal: &Principal{Service: List{"lambda.amazonaws.com"}}, Action: List{"sts:AssumeRole"}})
	for name, doc := range map[string]string{
		"ours":        want.JSON(),
		"url-encoded": url.QueryEscape(want.JSON()),
		"strings":     `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":"lambda.amazonaws.com"},"Action":"sts:AssumeRole"}]}`,
	} {
		got, err := ParsePolicy(doc)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !SamePolicy(got, want) {
			t.Errorf("%s: %+v differs from %+v", name, got, want)
		}
	}
	a := NewPolicy(Statement{Action: List{"b", "a"}, Resource: List{"y", "x"}})
	b := NewPolicy(Statement{Action: List{"a", "b"}, Resource: List{"x", "y"}})
	if !SamePolicy(a, b) {
		t.Error("list order matters")
	}
	c := NewPolicy(Statement{Action: List{"a"}, Resource: List{"x", "y"}})
	if SamePolicy(a, c) {
		t.Error("a missing action goes unnoticed")
	}
	for _, bad := range []string{"", "{", `{"Statement":[{"Action":1}]}`} {
		if _, err := ParsePolicy(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func FuzzParsePolicy(f *testing.F) {
	f.Add(TrustPolicy("lambda.amazonaws.com").JSON())
	f.Add(url.QueryEscape(TrustPolicy("lambda.amazonaws.com").JSON()))
	f.Add(`{"Statement":[{"Action":"x","Resource":["a","b"],"Condition":{"Bool":{"k":"true"}}}]}`)
	f.Fuzz(func(t *testing.T, doc string) {
		p, err := ParsePolicy(doc)
		if err != nil {
			return
		}
		if !SamePolicy(p, p) {
			t.Fatal("a policy differs from itself")
		}
		again, err := ParsePolicy(p.JSON())
		if err != nil {
			t.Fatalf("re-parse of %s: %v", p.JSON(), err)
		}
		if !SamePolicy(p, again) {
			t.Fatalf("round trip changed %s", p.JSON())
		}
	})
}
