// Package limits finds argument arrays over their size limit before the upstream runs.
package limits

import (
	"bytes"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// Violation is one array over the limit.
type Violation struct {
	Path   string // e.g. orders[3].lines; "" when the scanned document itself is the array
	Actual int
}

type frame struct {
	array bool
	n     int    // elements so far (arrays)
	start int    // offset of the opening bracket
	key   string // the current member's key (objects)
}

// FirstOversizedArray scans valid JSON and returns the first array, in document order of
// its opening bracket, with more than limit elements, and how many arrays are over.
// It never recurses, so the nesting depth of data costs heap, not stack.
//
// data must be valid JSON (jsonx.Validate); on other input the answer is unspecified but
// the scan still terminates without panicking.
func FirstOversizedArray(data []byte, limit int) (v Violation, count int) {
	var stackBuf [32]frame
	stack := stackBuf[:0]
	best := -1
	element := func() {
		if len(stack) > 0 && stack[len(stack)-1].array {
			stack[len(stack)-1].n++
		}
	}
	for i := 0; i < len(data); i++ {
		switch c := data[i]; c {
		case '"':
			end := skipString(data, i)
			if len(stack) > 0 && !stack[len(stack)-1].array && followedByColon(data, end) {
				stack[len(stack)-1].key = unquote(data[i:end])
			} else {
				element()
			}
			i = end - 1
		case '{', '[':
			element()
			stack = append(stack, frame{array: c == '[', start: i})
		case '}', ']':
			if len(stack) == 0 {
				return v, count
			}
			top := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if top.array && top.n > limit {
				count++
				if best < 0 || top.start < best {
					best = top.start
					v = Violation{Path: pathOf(stack), Actual: top.n}
				}
			}
		case ' ', '\t', '\n', '\r', ',', ':':
		default: // a number or a literal
			element()
			for i+1 < len(data) && !isDelim(data[i+1]) {
				i++
			}
		}
	}
	return v, count
}

// pathOf renders the location of the value that the innermost frame is at.
func pathOf(stack []frame) string {
	var b strings.Builder
	for _, f := range stack {
		if f.array {
			b.WriteByte('[')
			b.WriteString(strconv.Itoa(f.n - 1))
			b.WriteByte(']')
			continue
		}
		if plainKey(f.key) {
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(f.key)
		} else {
			b.WriteString("[" + strconv.Quote(f.key) + "]")
		}
	}
	return b.String()
}

func plainKey(k string) bool {
	if k == "" {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

func isDelim(c byte) bool {
	switch c {
	case ',', ']', '}', ' ', '\t', '\n', '\r', ':', '"', '[', '{':
		return true
	}
	return false
}

func followedByColon(data []byte, i int) bool {
	for ; i < len(data); i++ {
		switch data[i] {
		case ' ', '\t', '\n', '\r':
			continue
		case ':':
			return true
		}
		return false
	}
	return false
}

func skipString(data []byte, i int) int {
	for i++; i < len(data); i++ {
		switch data[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return len(data)
}

// unquote decodes a JSON string literal (quotes included) as encoding/json does: escapes
// resolved, a surrogate pair joined, and a lone surrogate or an invalid UTF-8 byte each
// becoming U+FFFD. On a malformed literal it keeps what it cannot decode.
func unquote(raw []byte) string {
	if len(raw) < 2 {
		return ""
	}
	s := raw[1 : len(raw)-1]
	plain := true
	for _, c := range s {
		if c == '\\' || c >= utf8.RuneSelf {
			plain = false
			break
		}
	}
	if plain || (bytes.IndexByte(s, '\\') < 0 && utf8.Valid(s)) {
		return string(s)
	}
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '\\' && i+1 < len(s):
			e := s[i+1]
			i += 2
			switch e {
			case 'b':
				b = append(b, '\b')
			case 'f':
				b = append(b, '\f')
			case 'n':
				b = append(b, '\n')
			case 'r':
				b = append(b, '\r')
			case 't':
				b = append(b, '\t')
			case 'u':
				r, ok := hex4(s, i)
				if !ok {
					b = append(b, '\\', 'u')
					continue
				}
				i += 4
				if utf16.IsSurrogate(r) {
					if i+1 < len(s) && s[i] == '\\' && s[i+1] == 'u' {
						if r2, ok := hex4(s, i+2); ok {
							if d := utf16.DecodeRune(r, r2); d != utf8.RuneError {
								b = utf8.AppendRune(b, d)
								i += 6
								continue
							}
						}
					}
					r = utf8.RuneError
				}
				b = utf8.AppendRune(b, r)
			default: // '"', '\\', '/'
				b = append(b, e)
			}
		case c < utf8.RuneSelf:
			b = append(b, c)
			i++
		default:
			r, size := utf8.DecodeRune(s[i:])
			if r == utf8.RuneError && size == 1 {
				b = utf8.AppendRune(b, utf8.RuneError)
			} else {
				b = append(b, s[i:i+size]...)
			}
			i += size
		}
	}
	return string(b)
}

// hex4 reads the four hex digits of a \u escape at s[i:].
func hex4(s []byte, i int) (rune, bool) {
	if i < 0 || len(s)-i < 4 {
		return 0, false
	}
	var r rune
	for _, c := range s[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}
