package fingerprint

import "testing"

func TestOf(t *testing.T) {
	// Expected values computed independently: printf %s "$in" | sha256sum | cut -c1-12
	for in, want := range map[string]string{
		"":          "e3b0c44298fc",
		"local-dev": "08846e81b3a8",
	} {
		if got := Of(in); got != want {
			t.Errorf("Of(%q) = %q, want %q", in, got, want)
		}
	}
}
