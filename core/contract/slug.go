package contract

import (
	"encoding/binary"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"
	"golang.org/x/text/unicode/norm"
)

// Slugify returns the slug of an agent name as python-slugify 8.0.4 computes it with its default
// options (the reference's Agent.slug): runs of apostrophes become "-", the text is NFKD-normalized
// and transliterated to ASCII (text-unidecode), HTML 4 named, decimal and hexadecimal character
// references are decoded, the text is normalized again and lowercased, apostrophes produced on the
// way are dropped, commas between digits are removed, every run of characters outside [-a-z0-9]
// becomes "-", repeated "-" collapse and leading and trailing "-" are trimmed.
//
// The transliteration is text-unidecode 1.3's for every character of the Basic Multilingual Plane
// (客服 gives "ke-fu", שלום "shlvm", こんにちは "konnitiha"): go-unidecode's table, corrected where
// text-unidecode differs. Like text-unidecode, characters beyond the BMP (emoji...) are dropped.
func Slugify(name string) string {
	text := replaceQuoteRuns(name, "-")
	text = transliterate(norm.NFKD.String(text))
	text = decodeNamedEntities(text)
	text = decodeCharRefs(text, false)
	text = decodeCharRefs(text, true)
	text = norm.NFKD.String(text)
	text = strings.ToLower(text)
	text = replaceQuoteRuns(text, "")
	text = removeDigitCommas(text)
	var b strings.Builder
	b.Grow(len(text))
	dash := true // at the start, a separator would be trimmed anyway
	for _, r := range text {
		if r == '-' || ('a' <= r && r <= 'z') || ('A' <= r && r <= 'Z') || ('0' <= r && r <= '9') {
			if r == '-' {
				if dash {
					continue
				}
				dash = true
			} else {
				dash = false
			}
			b.WriteRune(r)
			continue
		}
		if !dash {
			b.WriteByte('-')
			dash = true
		}
	}
	return strings.TrimRight(b.String(), "-")
}

// replaceQuoteRuns replaces every run of ASCII apostrophes with repl.
func replaceQuoteRuns(s, repl string) string {
	if !strings.Contains(s, "'") {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	inRun := false
	for i := 0; i < len(s); i++ {
		if s[i] == '\'' {
			if !inRun {
				b.WriteString(repl)
				inRun = true
			}
			continue
		}
		inRun = false
		b.WriteByte(s[i])
	}
	return b.String()
}

// removeDigitCommas removes each comma that has a decimal digit on both sides.
func removeDigitCommas(s string) string {
	if !strings.Contains(s, ",") {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		if s[i] == ',' && i > 0 && i+1 < len(s) {
			prev, _ := utf8.DecodeLastRuneInString(s[:i])
			next, _ := utf8.DecodeRuneInString(s[i+1:])
			if unicode.IsDigit(prev) && unicode.IsDigit(next) {
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// decodeNamedEntities replaces the HTML 4 named character references (&name;, semicolon
// required, names case-sensitive) with their characters, in one left-to-right pass.
func decodeNamedEntities(s string) string {
	if !strings.Contains(s, "&") {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		if s[i] == '&' {
			j := i + 1
			for j < len(s) && isASCIIAlnum(s[j]) {
				j++
			}
			if j > i+1 && j < len(s) && s[j] == ';' {
				if r, ok := entityRune(s[i+1 : j]); ok {
					b.WriteRune(r)
					i = j + 1
					continue
				}
			}
		}
		b.WriteByte(s[i])
		i++
	}
	return b.String()
}

func isASCIIAlnum(c byte) bool {
	return ('0' <= c && c <= '9') || ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z')
}

func hexValue(c byte) int {
	switch {
	case c <= '9':
		return int(c - '0')
	case c >= 'a':
		return int(c-'a') + 10
	}
	return int(c-'A') + 10
}

func isHexDigit(c byte) bool {
	return ('0' <= c && c <= '9') || ('a' <= c && c <= 'f') || ('A' <= c && c <= 'F')
}

// decodeCharRefs replaces &#123; (or &#x7B; when hex) with its character. As in the reference,
// one reference beyond U+10FFFF makes the whole pass a no-op.
func decodeCharRefs(s string, hex bool) string {
	prefix, base, isDigit := "&#", 10, func(c byte) bool { return '0' <= c && c <= '9' }
	if hex {
		prefix, base, isDigit = "&#x", 16, isHexDigit
	}
	if !strings.Contains(s, prefix) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		if strings.HasPrefix(s[i:], prefix) {
			j := i + len(prefix)
			for j < len(s) && isDigit(s[j]) {
				j++
			}
			if j > i+len(prefix) && j < len(s) && s[j] == ';' {
				n := 0
				for _, c := range []byte(s[i+len(prefix) : j]) {
					n = n*base + hexValue(c)
					if n > unicode.MaxRune {
						return s // chr() raised: the reference keeps the text unchanged
					}
				}
				b.WriteRune(rune(n))
				i = j + 1
				continue
			}
		}
		b.WriteByte(s[i])
		i++
	}
	return b.String()
}

// transliterate maps NFKD-normalized text to ASCII the way text-unidecode 1.3 does, up to the
// spelling of separators (text-unidecode's "[?]" for an unknown character is a space here; both
// become one "-" in the slug).
func transliterate(s string) string {
	ascii := true
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			ascii = false
			break
		}
	}
	if ascii {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range s {
		switch {
		case r < utf8.RuneSelf:
			b.WriteByte(byte(r))
		case r <= 0xFFFF:
			b.WriteString(translitRune(r))
		}
		// text-unidecode has no data beyond the BMP and drops those characters.
	}
	return b.String()
}

// translitRune returns text-unidecode's spelling of r, a non-ASCII character of the BMP.
func translitRune(r rune) string {
	i := sort.Search(len(translitOverrides), func(i int) bool { return translitOverrides[i].hi >= r })
	if i < len(translitOverrides) && translitOverrides[i].lo <= r {
		return translitOverrides[i].s
	}
	if s := translitEntry(r); s != "" {
		return s
	}
	return " " // unknown to both tables: text-unidecode writes "[?]"
}

//go:generate go run ./internal/gentranslit

// translitEntry returns go-unidecode's spelling of r, a character of the BMP ("" when it has
// none), from the packed translitBlocks.
func translitEntry(r rune) string {
	blk := translitBlocks[r>>8]
	for range r & 0xFF {
		i := strings.IndexByte(blk, 0xFF)
		if i < 0 {
			return ""
		}
		blk = blk[i+1:]
	}
	if i := strings.IndexByte(blk, 0xFF); i >= 0 {
		return blk[:i]
	}
	return blk
}

// entityRune returns the character of an HTML 4 entity name (Python's html.entities.name2codepoint).
func entityRune(name string) (rune, bool) {
	i := sort.Search(len(htmlEntities), func(i int) bool { return htmlEntities[i].name >= name })
	if i < len(htmlEntities) && htmlEntities[i].name == name {
		return htmlEntities[i].r, true
	}
	return 0, false
}

// DeterministicAgentID returns the reference's Agent.id for an agent name:
// shortuuid.uuid(name=name), the UUIDv5 of the name (URL namespace when the name starts with
// http:// or https://, any case; DNS namespace otherwise) written in base 57, most significant
// digit first, padded to 22 characters.
func DeterministicAgentID(name string) string {
	ns := uuid.NameSpaceDNS
	if hasPrefixFold(name, "http://") || hasPrefixFold(name, "https://") {
		ns = uuid.NameSpaceURL
	}
	return shortUUID(uuid.NewSHA1(ns, []byte(name)))
}

func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}

// shortUUID encodes u in shortuuid's base 57.
func shortUUID(u [16]byte) string {
	const alphabet = "23456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"
	const length = 22
	hi, lo := binary.BigEndian.Uint64(u[:8]), binary.BigEndian.Uint64(u[8:])
	out := make([]byte, length)
	for i := length - 1; i >= 0; i-- {
		// Divide the 128-bit number hi:lo by 57, keeping the remainder.
		var rem uint64
		hi, rem = hi/57, hi%57
		lo, rem = div128by57(rem, lo)
		out[i] = alphabet[rem]
	}
	return string(out)
}

// div128by57 divides rem*2^64 + lo (rem < 57) by 57.
func div128by57(rem, lo uint64) (uint64, uint64) {
	// Long division in 32-bit halves keeps every intermediate value below 2^64.
	a := rem<<32 | lo>>32
	q1, r1 := a/57, a%57
	b := r1<<32 | lo&0xffffffff
	q2, r2 := b/57, b%57
	return q1<<32 | q2, r2
}
