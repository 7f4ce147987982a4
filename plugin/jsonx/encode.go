package jsonx

import (
	"strings"
	"unicode/utf8"
)

const hexDigits = "0123456789abcdef"

// AppendString appends s to dst as a JSON string literal. Invalid UTF-8 becomes U+FFFD;
// <, > and & are kept as they are (these strings are read by models, not by browsers), and
// U+2028/U+2029 are escaped.
func AppendString(dst []byte, s string) []byte { return modelText.AppendString(dst, s) }

// AppendStrings appends list as a JSON array of strings, each as AppendString writes it.
func AppendStrings(dst []byte, list []string) []byte {
	dst = append(dst, '[')
	for i, s := range list {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = AppendString(dst, s)
	}
	return append(dst, ']')
}

// AppendEscaped appends s escaped as the inside of a JSON string literal (no quotes).
func AppendEscaped(dst []byte, s string) []byte { return modelText.AppendEscaped(dst, s) }

// StringLen returns len(AppendString(nil, s)) without building it.
func StringLen(s string) int {
	n := 2
	for i := 0; i < len(s); {
		j := asciiRun(s, i)
		n += j - i
		if i = j; i >= len(s) {
			break
		}
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\' || c == '\n' || c == '\r' || c == '\t':
				n += 2
			case c < 0x20:
				n += 6
			default:
				n++
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			n += 3
		case r == '\u2028' || r == '\u2029':
			n += 6
		default:
			n += size
		}
		i += size
	}
	return n
}

// AppendGap appends gap, the bytes between two elements of an array (whitespace and a
// comma), as they stand once elements are dropped: without the comma when the element
// that follows is the first one written, with one added when the gap had none (it followed
// the opening bracket) and an element was written before. The engine's list decoration
// (decorate.Index.Append) and the exchange's incremental one (exchange/toollist) splice
// lists by it, so both give the same bytes.
func AppendGap(dst []byte, gap string, first bool) []byte {
	i := strings.IndexByte(gap, ',')
	switch {
	case i < 0 && first:
		return append(dst, gap...)
	case i < 0:
		dst = append(dst, ',')
		return append(dst, gap...)
	case first:
		dst = append(dst, gap[:i]...)
		return append(dst, gap[i+1:]...)
	}
	return append(dst, gap...)
}
