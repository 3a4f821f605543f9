// Command gentranslit writes core/contract/translit.flate, the tables Slugify reads, from
// package slugdata (text-unidecode's transliteration, Unicode's NFKD as golang.org/x/text has
// it). Three sections, then the whole DEFLATE-compressed:
//
//   - 256 blocks of the BMP, each its length as a uvarint then the spellings of its 256 code
//     points separated by 0xFF (spellings are ASCII, so the separator never occurs in them),
//     empty for a character that decomposes;
//   - the compatibility decomposition of every character that has one, but Hangul syllables
//     (decomposed by arithmetic): a count, then per character its distance from the previous
//     one, the decomposition's length in bytes and its UTF-8, uvarints;
//   - the canonical combining class of every character whose class is not 0: a count, then per
//     character its distance from the previous one and its class;
//   - the HTML 4 entities (Python's html.entities.name2codepoint), sorted by name: a count,
//     then per entity its name's length, its name and its character.
//
// With these Slugify normalizes without linking x/text's normalization tables (the standard
// library's copy of them, which net/http links, is out of reach). Compressed, the tables weigh
// about 90 KB in a binary, where go-unidecode's table and x/text's tables weighed 280 KB, the
// Lambda bootstrap's budget (docs/platforms.md); they are inflated once, the first time a name
// with a non-ASCII character is slugified. Run it from core/contract with go generate; package
// contract's tests compare Slugify with slugdata's reference for every code point.
package main

import (
	"bytes"
	"compress/flate"
	"encoding/binary"
	"log"
	"os"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"

	"github.com/supervaize/svz/core/contract/internal/slugdata"
)

func valid(r rune) bool { return r < 0xD800 || r > 0xDFFF }

func hangul(r rune) bool { return r >= 0xAC00 && r <= 0xD7A3 }

func main() {
	var raw []byte
	for blk := rune(0); blk < 256; blk++ {
		var packed []byte
		for i := rune(0); i < 256; i++ {
			if i > 0 {
				packed = append(packed, 0xFF)
			}
			// A character that decomposes is never looked up: Slugify transliterates its
			// decomposition. Leaving it empty saves a fifth of the table (Hangul syllables).
			if r := blk<<8 | i; r >= utf8.RuneSelf && valid(r) && slugdata.NFKD(string(r)) == string(r) {
				s := slugdata.Translit(r)
				for j := 0; j < len(s); j++ {
					if s[j] >= utf8.RuneSelf {
						log.Fatalf("U+%04X: spelling %q is not ASCII", r, s)
					}
				}
				packed = append(packed, s...)
			}
		}
		raw = binary.AppendUvarint(raw, uint64(len(packed)))
		raw = append(raw, packed...)
	}
	var decomps, classes []rune
	for r := rune(utf8.RuneSelf); r <= utf8.MaxRune; r++ {
		if !valid(r) {
			continue
		}
		if d := slugdata.NFKD(string(r)); d != string(r) && !hangul(r) {
			decomps = append(decomps, r)
		}
		if norm.NFD.PropertiesString(string(r)).CCC() != 0 {
			classes = append(classes, r)
		}
	}
	raw = binary.AppendUvarint(raw, uint64(len(decomps)))
	prev := rune(0)
	for _, r := range decomps {
		d := slugdata.NFKD(string(r))
		raw = binary.AppendUvarint(raw, uint64(r-prev))
		raw = binary.AppendUvarint(raw, uint64(len(d)))
		raw = append(raw, d...)
		prev = r
	}
	raw = binary.AppendUvarint(raw, uint64(len(classes)))
	prev = 0
	for _, r := range classes {
		raw = binary.AppendUvarint(raw, uint64(r-prev))
		raw = binary.AppendUvarint(raw, uint64(norm.NFD.PropertiesString(string(r)).CCC()))
		prev = r
	}
	raw = binary.AppendUvarint(raw, uint64(len(slugdata.Entities)))
	for _, e := range slugdata.Entities {
		raw = binary.AppendUvarint(raw, uint64(len(e.Name)))
		raw = append(raw, e.Name...)
		raw = binary.AppendUvarint(raw, uint64(e.R))
	}
	var out bytes.Buffer
	w, err := flate.NewWriter(&out, flate.BestCompression)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := w.Write(raw); err != nil {
		log.Fatal(err)
	}
	if err := w.Close(); err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile("translit.flate", out.Bytes(), 0o644); err != nil {
		log.Fatal(err)
	}
	log.Printf("translit.flate: %d bytes (%d inflated); %d decompositions, %d combining classes, %d entities", out.Len(), len(raw), len(decomps), len(classes), len(slugdata.Entities))
}
