package contract

import (
	"compress/flate"
	"crypto/rand"
	"crypto/sha1"
	_ "embed"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"
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
	text = transliterate(nfkd(text))
	text = decodeNamedEntities(text)
	text = decodeCharRefs(text, false)
	text = decodeCharRefs(text, true)
	text = nfkd(text)
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

// isASCII reports whether s has only ASCII characters.
func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// transliterate maps NFKD-normalized text to ASCII the way text-unidecode 1.3 does, up to the
// spelling of separators (text-unidecode's "[?]" for an unknown character is a space here; both
// become one "-" in the slug).
func transliterate(s string) string {
	if isASCII(s) {
		return s
	}
	t := slugTablesOnce()
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range s {
		switch {
		case r < utf8.RuneSelf:
			b.WriteByte(byte(r))
		case r <= 0xFFFF:
			b.WriteString(t.translit(r))
		}
		// text-unidecode has no data beyond the BMP and drops those characters.
	}
	return b.String()
}

// nfkd returns the compatibility decomposition of s (Unicode's NFKD): each character replaced
// by its full decomposition (Hangul syllables by arithmetic), then each run of combining marks
// stably sorted by combining class. Unlike x/text's, it never inserts U+034F after 30 marks in
// a row: Python's unicodedata, the reference's, does not either.
func nfkd(s string) string {
	if isASCII(s) {
		return s
	}
	t := slugTablesOnce()
	out := make([]rune, 0, len(s))
	for _, r := range s {
		switch {
		case r < utf8.RuneSelf:
			out = append(out, r)
		case r >= hangulBase && r < hangulBase+hangulCount:
			i := r - hangulBase
			out = append(out, 0x1100+i/588, 0x1161+i%588/28)
			if i%28 != 0 {
				out = append(out, 0x11A7+i%28)
			}
		default:
			if d, ok := t.decomposition(r); ok {
				for _, dr := range d {
					out = append(out, dr)
				}
			} else {
				out = append(out, r)
			}
		}
	}
	for i := 1; i < len(out); i++ { // canonical ordering: marks move past marks of a higher class
		c := t.class(out[i])
		if c == 0 {
			continue
		}
		for j := i; j > 0 && t.class(out[j-1]) > c; j-- {
			out[j-1], out[j] = out[j], out[j-1]
		}
	}
	return string(out)
}

// The Hangul syllables, U+AC00 to U+D7A3, decompose into two or three jamo by arithmetic.
const (
	hangulBase  = 0xAC00
	hangulCount = 11172
)

//go:generate go run ./internal/gentranslit

// translitFlate holds Slugify's tables, compressed (see gentranslit).
//
//go:embed translit.flate
var translitFlate string

// slugTables are the tables of translitFlate, inflated: read-only once built.
type slugTables struct {
	// blocks[r>>8] holds the spellings of the block's 256 code points in order, separated by
	// 0xFF; an empty block or spelling means no data. ASCII code points are left empty (they
	// are never looked up).
	blocks [256]string
	// decompRunes (sorted) have the decompositions of decomps, Hangul syllables left out.
	decompRunes []rune
	decomps     []string
	// classRunes (sorted) have the combining classes of classes; every other character's is 0.
	classRunes []rune
	classes    []uint8
	// entityNames (sorted) name the HTML 4 entities' entityRunes.
	entityNames []string
	entityRunes []rune
}

// slugTablesOnce inflates translitFlate, once, the first time a name with a non-ASCII character
// is slugified.
var slugTablesOnce = sync.OnceValue(func() *slugTables {
	t, err := parseSlugTables(translitFlate)
	if err != nil {
		panic("contract: the embedded slug tables are corrupt (run go generate ./core/contract): " + err.Error())
	}
	return t
})

func parseSlugTables(compressed string) (*slugTables, error) {
	raw, err := io.ReadAll(flate.NewReader(strings.NewReader(compressed)))
	if err != nil {
		return nil, err
	}
	r := tableReader{rest: string(raw), ok: true}
	t := &slugTables{}
	for i := range t.blocks {
		t.blocks[i] = r.bytes(r.int())
	}
	for n, c := r.int(), rune(0); n > 0 && r.ok; n-- {
		c += rune(r.int())
		t.decompRunes, t.decomps = append(t.decompRunes, c), append(t.decomps, r.bytes(r.int()))
	}
	for n, c := r.int(), rune(0); n > 0 && r.ok; n-- {
		c += rune(r.int())
		t.classRunes, t.classes = append(t.classRunes, c), append(t.classes, uint8(r.int()))
	}
	for n := r.int(); n > 0 && r.ok; n-- {
		t.entityNames, t.entityRunes = append(t.entityNames, r.bytes(r.int())), append(t.entityRunes, rune(r.int()))
	}
	if !r.ok || r.rest != "" {
		return nil, errors.New("truncated or trailing data")
	}
	return t, nil
}

// tableReader reads translitFlate's uvarints and strings; ok turns false at the first that is
// cut short.
type tableReader struct {
	rest string
	ok   bool
}

func (r *tableReader) int() int {
	n, w := binary.Uvarint([]byte(r.rest[:min(len(r.rest), binary.MaxVarintLen64)]))
	if w <= 0 || n > 1<<31 {
		r.ok, r.rest = false, ""
		return 0
	}
	r.rest = r.rest[w:]
	return int(n)
}

func (r *tableReader) bytes(n int) string {
	if n > len(r.rest) {
		r.ok, n = false, len(r.rest)
	}
	s := r.rest[:n]
	r.rest = r.rest[n:]
	return s
}

// translit returns text-unidecode's spelling of r, a non-ASCII character of the BMP.
func (t *slugTables) translit(r rune) string {
	blk := t.blocks[r>>8]
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

// decomposition returns r's compatibility decomposition, if it has one.
func (t *slugTables) decomposition(r rune) (string, bool) {
	i, ok := slices.BinarySearch(t.decompRunes, r)
	if !ok {
		return "", false
	}
	return t.decomps[i], true
}

// class returns r's canonical combining class.
func (t *slugTables) class(r rune) uint8 {
	if r < 0x300 {
		return 0 // no mark before the combining diacritics
	}
	i, ok := slices.BinarySearch(t.classRunes, r)
	if !ok {
		return 0
	}
	return t.classes[i]
}

// entityRune returns the character of an HTML 4 entity name (Python's html.entities.name2codepoint).
func entityRune(name string) (rune, bool) {
	t := slugTablesOnce()
	i, ok := slices.BinarySearch(t.entityNames, name)
	if !ok {
		return 0, false
	}
	return t.entityRunes[i], true
}

// DeterministicAgentID returns the reference's Agent.id for an agent name:
// shortuuid.uuid(name=name), the UUIDv5 of the name (URL namespace when the name starts with
// http:// or https://, any case; DNS namespace otherwise) written in base 57, most significant
// digit first, padded to 22 characters.
func DeterministicAgentID(name string) string {
	ns := namespaceDNS
	if hasPrefixFold(name, "http://") || hasPrefixFold(name, "https://") {
		ns = namespaceURL
	}
	return shortUUID(uuidV5(ns, name))
}

// RFC 9562's name spaces for UUIDs of DNS names and URLs (6ba7b810-… and 6ba7b811-…).
var (
	namespaceDNS = [16]byte{0x6b, 0xa7, 0xb8, 0x10, 0x9d, 0xad, 0x11, 0xd1, 0x80, 0xb4, 0x00, 0xc0, 0x4f, 0xd4, 0x30, 0xc8}
	namespaceURL = [16]byte{0x6b, 0xa7, 0xb8, 0x11, 0x9d, 0xad, 0x11, 0xd1, 0x80, 0xb4, 0x00, 0xc0, 0x4f, 0xd4, 0x30, 0xc8}
)

// uuidV5 is the name-based UUID (version 5, SHA-1) of name in ns (RFC 9562 §5.5).
func uuidV5(ns [16]byte, name string) [16]byte {
	h := sha1.New()
	h.Write(ns[:])
	h.Write([]byte(name))
	var u [16]byte
	copy(u[:], h.Sum(nil))
	u[6] = u[6]&0x0f | 0x50
	u[8] = u[8]&0x3f | 0x80
	return u
}

// RandomUUID returns a random UUID (version 4, RFC 9562 §5.4) in its canonical form, as a
// generated server id is written.
func RandomUUID() (string, error) {
	var u [16]byte
	if _, err := rand.Read(u[:]); err != nil {
		return "", fmt.Errorf("reading random bytes: %w", err)
	}
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	b := hex.EncodeToString(u[:])
	return b[:8] + "-" + b[8:12] + "-" + b[12:16] + "-" + b[16:20] + "-" + b[20:], nil
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
