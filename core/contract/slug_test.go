package contract

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"
)

// testdata/slugify_vectors.json holds the outputs of python-slugify 8.0.4's algorithm with
// text-unidecode 1.3 (the reference's dependencies) for agent-like names, HTML references,
// punctuation, Greek and Cyrillic, and every character of Latin-1 Supplement and Latin
// Extended-A between "a" and "b". They come from the reference, so there is no -update for them.
func TestSlugifyReferenceVectors(t *testing.T) {
	b, err := os.ReadFile("testdata/slugify_vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var vectors []struct{ In, Want string }
	if err := json.Unmarshal(b, &vectors); err != nil {
		t.Fatal(err)
	}
	if len(vectors) < 250 {
		t.Fatalf("only %d vectors", len(vectors))
	}
	for _, v := range vectors {
		if got := Slugify(v.In); got != v.Want {
			t.Errorf("Slugify(%q) = %q, want %q", v.In, got, v.Want)
		}
	}
}

func TestSlugifyTable(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"Hello World AI Agent", "hello-world-ai-agent"},
		{"V2 Only Agent", "v2-only-agent"},
		{"agentName", "agentname"},
		// ASCII apostrophes separate; typographic ones are transliterated to ' and then dropped.
		{"Bob's Agent", "bob-s-agent"},
		{"Bob’s Agent", "bobs-agent"},
		// Entities are decoded after transliteration, so a decoded accent becomes a separator.
		{"r&eacute;sum&eacute;", "re-sume"},
		{"1,000,000 rows", "1000000-rows"},
		// One out-of-range reference cancels the whole decimal pass.
		{"&#65;&#99999999;", "65-99999999"},
		{"&#65;&#x1F600;", "a"},
	} {
		if got := Slugify(tc.in); got != tc.want {
			t.Errorf("Slugify(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// Scripts without a transliteration table are separators here, where text-unidecode spells them
// out (中文 → "zhong-wen"). This test pins the documented deviation.
func TestSlugifyUntransliteratedScripts(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"中文 agent", "agent"},
		{"Ａｇｅｎｔ （全角）", "agent"},
		{"عربي agent", "agent"},
	} {
		if got := Slugify(tc.in); got != tc.want {
			t.Errorf("Slugify(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestDeterministicAgentID(t *testing.T) {
	// The first two are spec §3.9's verified values; the others were computed with shortuuid
	// (URL namespace for http(s):// names, in any case; DNS otherwise).
	for _, tc := range []struct{ name, want string }{
		{"agentName", "LMKyPAS2Q8sKWBY34DS37a"},
		{"Hello World AI Agent", "ZbdXaxVurYBVbDcr9cDhXS"},
		{"https://example.com/agent", "9jqPRYw5DYKwUjkHLWkDNm"},
		{"HTTP://Example.com", "MXiarFWnsauxURR6ejGonj"},
		{"http:/x", "E9LF8yzETqRhaC8ZA4rPp5"},
		{"Research Agent", "imussvG8U97vC93sU6egrt"},
		{"", "G2XvSSebd6Tc4bHMenwxLy"},
		{"Éloïse ü", "FHHnKYt5jxjVDxvDDMDqg6"},
	} {
		if got := DeterministicAgentID(tc.name); got != tc.want {
			t.Errorf("DeterministicAgentID(%q) = %q, want %q", tc.name, got, tc.want)
		}
	}
}

var slugShape = regexp.MustCompile(`^([a-z0-9]+(-[a-z0-9]+)*)?$`)

func FuzzSlugify(f *testing.F) {
	for _, s := range []string{"Hello World AI Agent", "l’agent", "&amp;#65;", "1,000", "Straße", "&#x110000;", "\xff\xfe", "Привет"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := Slugify(s)
		if !slugShape.MatchString(got) {
			t.Fatalf("Slugify(%q) = %q: not a slug", s, got)
		}
		if again := Slugify(got); again != got {
			t.Fatalf("Slugify is not idempotent on %q: %q then %q", s, got, again)
		}
		if id := DeterministicAgentID(s); len(id) != 22 || strings.Trim(id, "23456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz") != "" {
			t.Fatalf("DeterministicAgentID(%q) = %q", s, id)
		}
	})
}

func BenchmarkSlugify(b *testing.B) {
	for _, name := range []string{"Hello World AI Agent", "Crème brûlée über Ångström &amp; Œuvre"} {
		b.Run(strings.Fields(name)[0], func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				Slugify(name)
			}
		})
	}
}

func BenchmarkDeterministicAgentID(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		DeterministicAgentID("Hello World AI Agent")
	}
}
