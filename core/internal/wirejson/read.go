// Package wirejson reads and writes the JSON of the controller's wire in one pass, without
// reflection: what encoding/json does twice or more on every call (validate, then decode; encode a
// nested value, then validate and compact it again at each level), done once.
//
// Reading is strict: a document is RFC 8259 JSON in valid UTF-8. Invalid bytes are an error, never
// replaced by U+FFFD, so two different byte strings can never read as the same text. Writing
// escapes exactly as encoding/json does (HTML-safe: <, >, & and U+2028/U+2029 escaped), so what
// the controller writes is byte for byte what json.Marshal would write.
package wirejson

import (
	"bytes"
	"errors"
	"iter"
	"unicode/utf16"
	"unicode/utf8"
)

// MaxDepth is the deepest nesting of arrays and objects accepted, as in encoding/json.
const MaxDepth = 10000

// ErrSyntax is the error of every malformed document; the position is not reported (callers
// answer a parse error without echoing input).
var ErrSyntax = errors.New("invalid JSON")

// Valid reports whether data is exactly one JSON value in valid UTF-8, with optional whitespace
// around it.
func Valid(data []byte) bool {
	c := compactor{src: data, check: true}
	return c.document() == nil
}

// AppendCompact validates src like Valid and appends it to dst without insignificant whitespace.
// With escapeHTML, <, >, & and U+2028/U+2029 in strings are escaped as encoding/json does; the
// text is otherwise copied as written (escapes are kept as sent). On error dst is returned
// unchanged.
func AppendCompact(dst, src []byte, escapeHTML bool) ([]byte, error) {
	c := compactor{src: src, dst: dst, html: escapeHTML}
	if err := c.document(); err != nil {
		return dst, err
	}
	return c.dst, nil
}

// IsCompact reports whether valid JSON holds no whitespace outside strings: a cheap check (it may
// answer false for compact text whose strings hold spaces).
func IsCompact(data []byte) bool {
	for _, b := range data {
		if b <= ' ' {
			return false
		}
	}
	return true
}

// compactor is a recursive-descent validator that copies what it reads to dst (unless check).
type compactor struct {
	src   []byte
	i     int
	dst   []byte
	html  bool
	check bool // validate only, write nothing
	depth int
}

func (c *compactor) document() error {
	if err := c.value(); err != nil {
		return err
	}
	c.space()
	if c.i != len(c.src) {
		return ErrSyntax
	}
	return nil
}

func (c *compactor) space() {
	for c.i < len(c.src) {
		switch c.src[c.i] {
		case ' ', '\t', '\n', '\r':
			c.i++
		default:
			return
		}
	}
}

func (c *compactor) emit(b ...byte) {
	if !c.check {
		c.dst = append(c.dst, b...)
	}
}

func (c *compactor) value() error {
	c.space()
	if c.i >= len(c.src) {
		return ErrSyntax
	}
	switch b := c.src[c.i]; {
	case b == '{':
		return c.object()
	case b == '[':
		return c.array()
	case b == '"':
		return c.str()
	case b == 't':
		return c.literal("true")
	case b == 'f':
		return c.literal("false")
	case b == 'n':
		return c.literal("null")
	case b == '-' || b >= '0' && b <= '9':
		return c.number()
	}
	return ErrSyntax
}

func (c *compactor) literal(word string) error {
	if len(c.src)-c.i < len(word) || string(c.src[c.i:c.i+len(word)]) != word {
		return ErrSyntax
	}
	c.emit(c.src[c.i : c.i+len(word)]...)
	c.i += len(word)
	return nil
}

func (c *compactor) nest() error {
	c.depth++
	if c.depth > MaxDepth {
		return ErrSyntax
	}
	return nil
}

func (c *compactor) object() error {
	if err := c.nest(); err != nil {
		return err
	}
	c.emit('{')
	c.i++
	c.space()
	if c.i < len(c.src) && c.src[c.i] == '}' {
		c.emit('}')
		c.i++
		c.depth--
		return nil
	}
	for {
		c.space()
		if c.i >= len(c.src) || c.src[c.i] != '"' {
			return ErrSyntax
		}
		if err := c.str(); err != nil {
			return err
		}
		c.space()
		if c.i >= len(c.src) || c.src[c.i] != ':' {
			return ErrSyntax
		}
		c.emit(':')
		c.i++
		if err := c.value(); err != nil {
			return err
		}
		c.space()
		if c.i >= len(c.src) {
			return ErrSyntax
		}
		switch c.src[c.i] {
		case ',':
			c.emit(',')
			c.i++
		case '}':
			c.emit('}')
			c.i++
			c.depth--
			return nil
		default:
			return ErrSyntax
		}
	}
}

func (c *compactor) array() error {
	if err := c.nest(); err != nil {
		return err
	}
	c.emit('[')
	c.i++
	c.space()
	if c.i < len(c.src) && c.src[c.i] == ']' {
		c.emit(']')
		c.i++
		c.depth--
		return nil
	}
	for {
		if err := c.value(); err != nil {
			return err
		}
		c.space()
		if c.i >= len(c.src) {
			return ErrSyntax
		}
		switch c.src[c.i] {
		case ',':
			c.emit(',')
			c.i++
		case ']':
			c.emit(']')
			c.i++
			c.depth--
			return nil
		default:
			return ErrSyntax
		}
	}
}

// str reads a string literal: escapes well formed, no control characters, valid UTF-8.
func (c *compactor) str() error {
	start := c.i
	c.i++ // opening quote
	flushed := start
	flush := func(to int) {
		if !c.check {
			c.dst = append(c.dst, c.src[flushed:to]...)
		}
	}
	for c.i < len(c.src) {
		b := c.src[c.i]
		switch {
		case b == '"':
			c.i++
			flush(c.i)
			return nil
		case b == '\\':
			if c.i+1 >= len(c.src) {
				return ErrSyntax
			}
			switch c.src[c.i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				c.i += 2
			case 'u':
				if c.i+6 > len(c.src) || !isHex4(c.src[c.i+2:c.i+6]) {
					return ErrSyntax
				}
				c.i += 6
			default:
				return ErrSyntax
			}
		case b < 0x20:
			return ErrSyntax
		case b < utf8.RuneSelf:
			if c.html && (b == '<' || b == '>' || b == '&') {
				flush(c.i)
				c.emit('\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xF])
				flushed = c.i + 1
			}
			c.i++
		default:
			r, size := utf8.DecodeRune(c.src[c.i:])
			if r == utf8.RuneError && size <= 1 {
				return ErrSyntax
			}
			if c.html && (r == '\u2028' || r == '\u2029') {
				flush(c.i)
				c.emit('\\', 'u', '2', '0', '2', hexDigits[r&0xF])
				flushed = c.i + size
			}
			c.i += size
		}
	}
	return ErrSyntax
}

func isHex4(b []byte) bool {
	for _, c := range b[:4] {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
			return false
		}
	}
	return true
}

// number reads -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (c *compactor) number() error {
	start := c.i
	if c.src[c.i] == '-' {
		c.i++
	}
	switch {
	case c.i < len(c.src) && c.src[c.i] == '0':
		c.i++
	case c.i < len(c.src) && c.src[c.i] >= '1' && c.src[c.i] <= '9':
		c.digits()
	default:
		return ErrSyntax
	}
	if c.i < len(c.src) && c.src[c.i] == '.' {
		c.i++
		if c.digits() == 0 {
			return ErrSyntax
		}
	}
	if c.i < len(c.src) && (c.src[c.i] == 'e' || c.src[c.i] == 'E') {
		c.i++
		if c.i < len(c.src) && (c.src[c.i] == '+' || c.src[c.i] == '-') {
			c.i++
		}
		if c.digits() == 0 {
			return ErrSyntax
		}
	}
	c.emit(c.src[start:c.i]...)
	return nil
}

func (c *compactor) digits() int {
	n := 0
	for c.i < len(c.src) && c.src[c.i] >= '0' && c.src[c.i] <= '9' {
		c.i++
		n++
	}
	return n
}

// The functions below read documents already known to be valid (by Valid or AppendCompact):
// they do not check syntax again.

// Members iterates the members of a valid JSON object: each name as its raw string literal
// (quotes included; see Unquote) and each value as its raw text, without surrounding whitespace.
// It yields nothing when obj is not an object.
func Members(obj []byte) iter.Seq2[[]byte, []byte] {
	return func(yield func([]byte, []byte) bool) {
		i := skipSpace(obj, 0)
		if i >= len(obj) || obj[i] != '{' {
			return
		}
		i = skipSpace(obj, i+1)
		for i < len(obj) && obj[i] == '"' {
			nameEnd := skipString(obj, i)
			name := obj[i:nameEnd]
			i = skipSpace(obj, nameEnd) + 1 // ':'
			i = skipSpace(obj, i)
			end := SkipValue(obj, i)
			if !yield(name, obj[i:end]) {
				return
			}
			i = skipSpace(obj, end)
			if i < len(obj) && obj[i] == ',' {
				i = skipSpace(obj, i+1)
			}
		}
	}
}

// Elements iterates the elements of a valid JSON array, each as its raw text. It yields nothing
// when arr is not an array.
func Elements(arr []byte) iter.Seq[[]byte] {
	return func(yield func([]byte) bool) {
		i := skipSpace(arr, 0)
		if i >= len(arr) || arr[i] != '[' {
			return
		}
		i = skipSpace(arr, i+1)
		for i < len(arr) && arr[i] != ']' {
			end := SkipValue(arr, i)
			if !yield(arr[i:end]) {
				return
			}
			i = skipSpace(arr, end)
			if i < len(arr) && arr[i] == ',' {
				i = skipSpace(arr, i+1)
			}
		}
	}
}

// Kind returns the first byte of a valid value ('{', '[', '"', 't', 'f', 'n', or '-'/a digit for
// a number), 0 for empty input.
func Kind(v []byte) byte {
	i := skipSpace(v, 0)
	if i >= len(v) {
		return 0
	}
	return v[i]
}

// IsNull reports whether the valid value v is null.
func IsNull(v []byte) bool { return Kind(v) == 'n' }

// SkipValue returns the index just past the valid value that starts at data[i].
func SkipValue(data []byte, i int) int {
	switch data[i] {
	case '"':
		return skipString(data, i)
	case '{', '[':
		depth := 0
		for i < len(data) {
			switch data[i] {
			case '"':
				i = skipString(data, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return i
	default: // a number or a literal: up to the next delimiter
		for i < len(data) {
			switch data[i] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return i
			}
			i++
		}
		return i
	}
}

// skipString returns the index just past the string literal that starts at data[i].
func skipString(data []byte, i int) int {
	for i++; i < len(data); i++ {
		switch data[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return i
}

func skipSpace(data []byte, i int) int {
	for i < len(data) && (data[i] == ' ' || data[i] == '\t' || data[i] == '\n' || data[i] == '\r') {
		i++
	}
	return i
}

// Text is a valid JSON document together with the same bytes as one string, so that the strings
// read from it are slices of that string: one allocation for the whole document instead of one
// per string.
type Text struct {
	raw  []byte
	text string
}

// NewText returns the Text of raw, which must be valid JSON and must not change afterwards.
func NewText(raw []byte) Text { return Text{raw: raw, text: string(raw)} }

// Raw is the document.
func (t Text) Raw() []byte { return t.raw }

// String returns the text of v, a string literal that is a slice of the document; ok is false
// when v is not a string.
func (t Text) String(v []byte) (s string, ok bool) {
	if Kind(v) != '"' {
		return "", false
	}
	if bytes.IndexByte(v, '\\') >= 0 {
		return Unquote(v)
	}
	at := cap(t.raw) - cap(v) // where v starts in raw: they share one array
	return t.text[at+1 : at+len(v)-1], true
}

// Name returns the text of a member name as Members yields it (a valid string literal): a slice
// of lit itself unless the name is written with escapes.
func Name(lit []byte) []byte {
	body := lit[1 : len(lit)-1]
	for _, b := range body {
		if b == '\\' {
			s, _ := Unquote(lit)
			return []byte(s)
		}
	}
	return body
}

// Unquote returns the text of a valid JSON string literal. An escaped lone surrogate (\ud800)
// becomes U+FFFD, as in encoding/json. ok is false when lit is not a string.
func Unquote(lit []byte) (s string, ok bool) {
	if len(lit) < 2 || lit[0] != '"' {
		return "", false
	}
	body := lit[1 : len(lit)-1]
	esc := -1
	for i, b := range body {
		if b == '\\' {
			esc = i
			break
		}
	}
	if esc < 0 {
		return string(body), true
	}
	out := make([]byte, esc, len(body))
	copy(out, body[:esc])
	for i := esc; i < len(body); {
		b := body[i]
		if b != '\\' {
			out = append(out, b)
			i++
			continue
		}
		switch body[i+1] {
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r := hex4(body[i+2 : i+6])
			i += 6
			if utf16.IsSurrogate(r) {
				if i+6 <= len(body) && body[i] == '\\' && body[i+1] == 'u' {
					if r2 := utf16.DecodeRune(r, hex4(body[i+2:i+6])); r2 != utf8.RuneError {
						out = utf8.AppendRune(out, r2)
						i += 6
						continue
					}
				}
				r = utf8.RuneError
			}
			out = utf8.AppendRune(out, r)
			continue
		default: // '"', '\\', '/'
			out = append(out, body[i+1])
		}
		i += 2
	}
	return string(out), true
}

func hex4(b []byte) rune {
	var r rune
	for _, c := range b[:4] {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c - 'a' + 10)
		default:
			r |= rune(c - 'A' + 10)
		}
	}
	return r
}
