package contract

import (
	"bytes"
	"compress/flate"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/supervaize/svz/core/contract/internal/slugdata"
)

// testdata/slugify_vectors.json holds the outputs of python-slugify 8.0.4's algorithm with
// text-unidecode 1.3 (the reference's dependencies; Debian's python3-text-unidecode 1.3, Python
// 3.11) for agent-like names, HTML references, punctuation, Greek and Cyrillic, every character of
// Latin-1 Supplement and Latin Extended-A between "a" and "b", names in CJK, kana, Hangul, Hebrew,
// Arabic, Thai, Indic scripts and emoji, both ends of every translitOverrides range and two
// characters of each 256-character block of the BMP between "a" and "b". They come from the
// reference, so there is no -update for them.
func TestSlugifyReferenceVectors(t *testing.T) {
	b, err := os.ReadFile("testdata/slugify_vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var vectors []struct{ In, Want string }
	if err := json.Unmarshal(b, &vectors); err != nil {
		t.Fatal(err)
	}
	if len(vectors) < 1100 {
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

// Every script of the BMP is transliterated as text-unidecode does; characters beyond it are
// dropped, as text-unidecode has no data for them. (Values from the reference.)
func TestSlugifyScripts(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"客服", "ke-fu"},
		{"Hello 你好", "hello-ni-hao"},
		{"שלום Agent", "shlvm-agent"},
		{"こんにちは", "konnitiha"},
		// NFKD comes first: 𝔸 becomes A, while the emoji, beyond the BMP, is dropped.
		{"Agent 🤖 𝔸", "agent-a"},
		// An unknown BMP character (CJK Extension A here) separates; an emoji vanishes.
		{"a㐀b", "a-b"},
		{"a🤖b", "ab"},
	} {
		if got := Slugify(tc.in); got != tc.want {
			t.Errorf("Slugify(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// The override table must stay a sorted list of disjoint ranges of non-ASCII BMP characters with
// ASCII spellings, and the reference vectors must pin both ends of each range.
func TestTranslitOverridesShape(t *testing.T) {
	b, err := os.ReadFile("testdata/slugify_vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var vectors []struct{ In string }
	if err := json.Unmarshal(b, &vectors); err != nil {
		t.Fatal(err)
	}
	pinned := make(map[string]bool, len(vectors))
	for _, v := range vectors {
		pinned[v.In] = true
	}
	prev := rune(utf8.RuneSelf - 1)
	for _, o := range slugdata.Overrides {
		if o.Lo <= prev || o.Hi < o.Lo || o.Hi > 0xFFFF {
			t.Errorf("range %#x-%#x: not sorted, disjoint and within the BMP", o.Lo, o.Hi)
		}
		prev = o.Hi
		for i := 0; i < len(o.S); i++ {
			if o.S[i] >= utf8.RuneSelf {
				t.Errorf("range %#x-%#x: %q is not ASCII", o.Lo, o.Hi, o.S)
			}
		}
		for _, r := range []rune{o.Lo, o.Hi} {
			if in := "a" + string(r) + "b"; !pinned[in] {
				t.Errorf("no reference vector for %q (U+%04X)", in, r)
			}
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
	for _, s := range []string{"Hello World AI Agent", "l’agent", "&amp;#65;", "1,000", "Straße", "&#x110000;", "\xff\xfe", "Привет", "客服 Agent", "שָׁלוֹם", "こんにちは", "Agent 🤖\u200d"} {
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
	for _, tc := range []struct{ name, in string }{
		{"ASCII", "Hello World AI Agent"},
		{"Latin", "Crème brûlée über Ångström &amp; Œuvre"},
		{"CJK", "客服助手 Customer Service 你好"},
		{"Mixed", "שלום Agent مرحبا नमस्ते สวัสดี 안녕하세요 こんにちは 🤖"},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				Slugify(tc.in)
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

// TestTranslitTable: the embedded table holds text-unidecode's spelling (slugdata.Translit: the
// overrides, else go-unidecode's entry, else a separator) of every non-ASCII code point of the BMP
// that does not decompose (one that does is never looked up: its decomposition is).
func TestTranslitTable(t *testing.T) {
	tables := slugTablesOnce()
	for r := rune(0x80); r <= 0xFFFF; r++ {
		if r >= 0xD800 && r <= 0xDFFF {
			continue
		}
		want := slugdata.Translit(r)
		if slugdata.NFKD(string(r)) != string(r) {
			want = ""
		}
		if got := tables.translit(r); got != want {
			t.Fatalf("U+%04X: %q, slugdata has %q (run go generate ./core/contract)", r, got, want)
		}
	}
}

// everyCharacter calls f with every code point of the BMP and every one beyond it that
// decomposes or is a mark, saying which (the rest, unassigned or plain, are sampled: every 251st).
func everyCharacter(f func(r rune, decomposes bool)) {
	for r := rune(0); r <= utf8.MaxRune; r++ {
		if r >= 0xD800 && r <= 0xDFFF {
			continue
		}
		decomposes := slugdata.NFKD(string(r)) != string(r) || slugdata.NFKD("\u0301"+string(r)+"\u0316") != "\u0301"+string(r)+"\u0316"
		if r <= 0xFFFF || decomposes || r%251 == 0 {
			f(r, decomposes)
		}
	}
}

// TestNFKDEveryCharacter: nfkd decomposes every code point as x/text does, alone and after a
// letter and before a mark of another class (which reordering must move past the character's
// own marks when their class is higher).
func TestNFKDEveryCharacter(t *testing.T) {
	everyCharacter(func(r rune, _ bool) {
		for _, s := range []string{string(r), "a" + string(r) + "\u0323b", "\u0301" + string(r) + "\u0316"} {
			if got, want := nfkd(s), slugdata.NFKD(s); got != want {
				t.Fatalf("nfkd(%+q) = %+q, x/text has %+q (run go generate ./core/contract)", s, got, want)
			}
		}
	})
}

// TestNFKDReordering: marks are sorted by class, stably, within each run, never past a starter;
// x/text's extra U+034F after 30 marks in a row is the one difference (Python has none).
func TestNFKDReordering(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"a\u0301\u0323", "a\u0323\u0301"},             // 230 then 220: swapped
		{"a\u0323\u0301", "a\u0323\u0301"},             // already ordered
		{"a\u0301\u0300\u0323", "a\u0323\u0301\u0300"}, // stable among equal classes
		{"\u1E69\u0323", "s\u0323\u0323\u0307"},        // ṩ decomposes, then its dot above moves
		{"a\u0301b\u0323", "a\u0301b\u0323"},           // a starter ends the run
		{"\u0363\u0353", "\u0353\u0363"},               // a mark spelled "a" after one spelled " "
		{"\uAC00\uD7A3", "\u1100\u1161\u1112\u1175\u11C2"},
		{"\uFB01 \u2460 \U0001D538", "fi 1 A"},
		{"a\xffb", "a\uFFFDb"}, // invalid UTF-8 becomes U+FFFD, a separator either way
		{"a\x80b", "a\uFFFDb"}, // 0x80, the first byte that is not ASCII
	} {
		if got := nfkd(tc.in); got != tc.want {
			t.Errorf("nfkd(%+q) = %+q, want %+q", tc.in, got, tc.want)
		}
	}
	marks := "a" + strings.Repeat("\u0301", 31)
	if got := nfkd(marks); got != marks {
		t.Errorf("31 marks: %+q", got)
	}
}

// slugifyReference is Slugify as it was before the tables were embedded: x/text's NFKD and
// slugdata's transliteration. cgj reports that x/text inserted a U+034F (after 30 marks in a
// row), which Python's NFKD and Slugify's do not.
func slugifyReference(name string) (slug string, cgj bool) {
	normalize := func(s string) string {
		n := slugdata.NFKD(s)
		cgj = cgj || strings.Count(n, "\u034F") != strings.Count(s, "\u034F")
		return n
	}
	text := replaceQuoteRuns(name, "-")
	var b strings.Builder
	for _, r := range normalize(text) {
		switch {
		case r < utf8.RuneSelf:
			b.WriteRune(r)
		case r <= 0xFFFF:
			b.WriteString(slugdata.Translit(r))
		}
	}
	text = decodeNamedEntities(b.String())
	text = decodeCharRefs(text, false)
	text = decodeCharRefs(text, true)
	text = strings.ToLower(normalize(text))
	text = replaceQuoteRuns(text, "")
	text = removeDigitCommas(text)
	return strings.Trim(slugSeparators.ReplaceAllString(text, "-"), "-"), cgj
}

// TestSlugifyEveryCharacter: every code point, written or as a character reference, between
// letters, digits and commas, slugifies as the reference implementation does.
func TestSlugifyEveryCharacter(t *testing.T) {
	everyCharacter(func(r rune, decomposes bool) {
		if r < utf8.RuneSelf {
			return
		}
		ins := []string{"a" + string(r) + "b", fmt.Sprintf("a&#%d;b", r)}
		if decomposes {
			ins = append(ins, "1,"+string(r)+",2", fmt.Sprintf("1,&#x%x;,2", r))
		}
		for _, in := range ins {
			if got, want := Slugify(in), first(slugifyReference(in)); got != want {
				t.Fatalf("Slugify(%+q) = %q, the reference %q", in, got, want)
			}
		}
	})
}

// slugSeparators are what the reference turns into one "-": its disallowed characters and runs of "-".
var slugSeparators = regexp.MustCompile(`[^a-z0-9]+`)

func first(s string, _ bool) string { return s }

// FuzzSlugifyReference: any valid text slugifies as the reference implementation does, but where
// x/text inserts U+034F after 30 marks in a row (Python does not).
func FuzzSlugifyReference(f *testing.F) {
	for _, s := range []string{"Hello World AI Agent", "r&eacute;sum&eacute;", "a\u0363\u0353b", "\u1E69\u0323&#x1E69;", "客服 &#xFB01;", "1,000,&#8320;"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		want, cgj := slugifyReference(in)
		if !utf8.ValidString(in) || cgj {
			t.Skip()
		}
		if got := Slugify(in); got != want {
			t.Fatalf("Slugify(%+q) = %q, the reference %q", in, got, want)
		}
	})
}

// TestParseSlugTablesRefusesDamage: a cut, padded or undecodable table is refused, never read
// short (the embedded one parses: every other test reads it).
func TestParseSlugTablesRefusesDamage(t *testing.T) {
	if _, err := parseSlugTables(translitFlate); err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(flate.NewReader(strings.NewReader(translitFlate)))
	if err != nil {
		t.Fatal(err)
	}
	deflate := func(b []byte) string {
		var out bytes.Buffer
		w, _ := flate.NewWriter(&out, flate.BestSpeed)
		_, _ = w.Write(b)
		_ = w.Close()
		return out.String()
	}
	for name, compressed := range map[string]string{
		"cut in the last entity":  deflate(raw[:len(raw)-1]),
		"cut in the blocks":       deflate(raw[:1000]),
		"trailing byte":           deflate(append(slices.Clip(raw), 0)),
		"unfinished uvarint":      deflate(bytes.Repeat([]byte{0xFF}, 12)),
		"overflowing uvarint":     deflate(append(bytes.Repeat([]byte{0xFF}, 9), 0x7F)),
		"a length beyond the end": deflate(binary.AppendUvarint(nil, 1<<20)),
		"not DEFLATE":             "\xff\xff\xff",
	} {
		if _, err := parseSlugTables(compressed); err == nil {
			t.Errorf("%s: parsed", name)
		}
	}
}

func TestRandomUUID(t *testing.T) {
	form := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	seen := map[string]bool{}
	for range 64 {
		id, err := RandomUUID()
		if err != nil {
			t.Fatal(err)
		}
		if !form.MatchString(id) || seen[id] {
			t.Fatalf("%q: not a fresh version 4 UUID", id)
		}
		seen[id] = true
	}
}
