package jsonx

import (
	"strings"
	"unicode/utf8"
)

// Scanning helpers over a JSON document held in a string. They assume the document was
// validated (Validate) and never recurse; on other input they return offsets within
// [0, len(s)] and never panic.

// SkipWS returns the first offset at or after i that is not JSON whitespace.
//
//go:nobounds
func SkipWS(s string, i int) int {
	if i < len(s) && s[i] > ' ' {
		return i
	}
	return skipWSLoop(s, i)
}

// skipWSLoop is SkipWS's loop; hot callers test the first byte themselves and call
// it only for whitespace: a call costs more than the test in the guest.
//
//go:nobounds
func skipWSLoop(s string, i int) int {
	for i < len(s) {
		switch s[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// SkipValue returns the offset just past the value that starts at i.
func SkipValue(s string, i int) int {
	if i >= len(s) {
		return len(s)
	}
	switch s[i] {
	case '"':
		return skipStr(s, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(s); j++ {
			switch s[j] {
			case '"':
				j = skipStr(s, j) - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1
				}
			}
		}
		return len(s)
	}
	j := i + 1
	for j < len(s) {
		switch s[j] {
		case ',', ']', '}', ' ', '\t', '\n', '\r':
			return j
		}
		j++
	}
	return j
}

func skipStr(s string, i int) int {
	j := i + 1
	for {
		j = quoteRun(s, j)
		if j >= len(s) {
			return len(s)
		}
		if s[j] == '"' {
			return j + 1
		}
		j += 2
	}
}

// Object walks the members of the object at i without callbacks (closures cost an
// allocation each in the guest):
//
//	it := Object(s, i)
//	for key, val, ok := it.Next(); ok; key, val, ok = it.Next() {
//		end := SkipValue(s, val) // or leave it to Next
//		it.Skip(end)
//	}
//	after := it.End()
type ObjectIter struct {
	s    string
	j    int // where the next key (or the closing brace) is
	key  int // offset of the current key's opening quote
	val  int // offset of the current value
	next int // offset past the current value, or -1 when the caller did not say
	end  int // offset past the object once done, else -1
}

// Object starts walking the object at i (s[i] == '{'); anything else yields no members.
func Object(s string, i int) ObjectIter {
	it := ObjectIter{s: s, next: -1, end: -1}
	if i >= len(s) || s[i] != '{' {
		it.end = SkipValue(s, i)
		return it
	}
	it.j = SkipWS(s, i+1)
	if it.j < len(s) && s[it.j] == '}' {
		it.end = it.j + 1
	}
	it.val = -1
	return it
}

// Next returns the next member's key (unescaped) and the offset of its value.
func (it *ObjectIter) Next() (key string, val int, ok bool) {
	s := it.s
	if it.end >= 0 {
		return "", 0, false
	}
	if it.val >= 0 { // move past the current value
		e := it.next
		if e < it.val {
			e = SkipValue(s, it.val)
		}
		j := e
		if j < len(s) && s[j] <= ' ' {
			j = skipWSLoop(s, j)
		}
		switch {
		case j < len(s) && s[j] == ',':
			if j++; j < len(s) && s[j] <= ' ' {
				j = skipWSLoop(s, j)
			}
			it.j = j
		case j < len(s) && s[j] == '}':
			it.end = j + 1
			return "", 0, false
		default:
			it.end = len(s)
			return "", 0, false
		}
	}
	j := it.j
	if j >= len(s) || s[j] != '"' {
		it.end = len(s)
		return "", 0, false
	}
	it.key = j
	kEnd := skipStr(s, j)
	key = Unquote(s[j:kEnd])
	if j = kEnd; j < len(s) && s[j] <= ' ' {
		j = skipWSLoop(s, j)
	}
	if j >= len(s) || s[j] != ':' {
		it.end = len(s)
		return "", 0, false
	}
	if val = j + 1; val < len(s) && s[val] <= ' ' {
		val = skipWSLoop(s, val)
	}
	if val >= len(s) {
		it.end = len(s)
		return "", 0, false
	}
	it.val, it.next = val, -1
	return key, val, true
}

// KeyStart returns the offset of the current member's key (its opening quote).
func (it *ObjectIter) KeyStart() int { return it.key }

// Skip tells the walk where the current value ends, saving a rescan.
func (it *ObjectIter) Skip(end int) { it.next = end }

// End returns the offset just past the object, finishing the walk if needed.
func (it *ObjectIter) End() int {
	for {
		if _, _, ok := it.Next(); !ok {
			return it.end
		}
	}
}

// Member returns the offset of the value of the first member named key of the object at
// i, or -1.
func Member(s string, i int, key string) int {
	it := Object(s, i)
	for k, val, ok := it.Next(); ok; k, val, ok = it.Next() {
		if k == key {
			return val
		}
	}
	return -1
}

// Unquote returns the value of a JSON string literal (with its quotes), decoded as
// encoding/json does: escapes resolved, surrogate pairs joined, lone surrogates and invalid
// UTF-8 bytes each becoming U+FFFD. Literals without escapes and with valid UTF-8 are
// returned as a substring, without copying.
func Unquote(lit string) string {
	if len(lit) < 2 {
		return ""
	}
	body := lit[1 : len(lit)-1]
	i := escapeOrHighRun(body, 0)
	if i == len(body) {
		return body
	}
	if body[i] != '\\' && strings.IndexByte(body[i:], '\\') < 0 && utf8.ValidString(body[i:]) {
		return body
	}
	out, _ := unescape(body, i, false)
	return out
}

// UnquoteExact returns the value of a JSON string literal (with its quotes) and whether
// every reader decodes it alike: false for a literal holding an unpaired UTF-16 surrogate
// escape or invalid UTF-8, which readers turn into U+FFFD (swallowing the next escape, for
// some), keep as a lone code unit, or refuse. Literals without escapes are returned as a
// substring, without copying.
func UnquoteExact(lit string) (string, bool) {
	if len(lit) < 2 || lit[0] != '"' || lit[len(lit)-1] != '"' {
		return "", false
	}
	body := lit[1 : len(lit)-1]
	i := escapeOrHighRun(body, 0)
	if i == len(body) {
		return body, true
	}
	if strings.IndexByte(body[i:], '\\') < 0 {
		return body, utf8.ValidString(body[i:])
	}
	return unescape(body, i, true)
}

// unescape decodes the escapes of a JSON string body whose first i bytes are plain ASCII.
// Without exact it decodes as encoding/json does: invalid UTF-8 and lone surrogates become
// U+FFFD (a bad \u escape too), an unknown escape its letter, a backslash at the end
// itself. With exact each of those refuses the body (false): readers disagree on them.
func unescape(body string, i int, exact bool) (string, bool) {
	out := make([]byte, 0, len(body))
	out = append(out, body[:i]...)
	for ; i < len(body); i++ {
		c := body[i]
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(body[i:])
			if r == utf8.RuneError && size == 1 {
				if exact {
					return "", false
				}
				out = append(out, "\ufffd"...)
			} else {
				out = append(out, body[i:i+size]...)
			}
			i += size - 1
			continue
		}
		if c != '\\' || i+1 >= len(body) {
			if c == '\\' && exact {
				return "", false
			}
			out = append(out, c)
			continue
		}
		i++
		switch body[i] {
		case 'n':
			out = append(out, '\n')
		case 't':
			out = append(out, '\t')
		case 'r':
			out = append(out, '\r')
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case '"', '\\', '/':
			out = append(out, body[i])
		case 'u':
			r, n := hex4(body, i+1)
			if n == 0 {
				if exact {
					return "", false
				}
				out = append(out, "\ufffd"...)
				continue
			}
			i += 4
			lone := r >= 0xdc00 && r < 0xe000 // a low surrogate with no high one before it
			if r >= 0xd800 && r < 0xdc00 {
				lone = true
				if i+2 < len(body) && body[i+1] == '\\' && body[i+2] == 'u' {
					if lo, m := hex4(body, i+3); m != 0 && lo >= 0xdc00 && lo < 0xe000 {
						r = 0x10000 + (r-0xd800)<<10 + (lo - 0xdc00)
						i += 6
						lone = false
					}
				}
			}
			if lone {
				if exact {
					return "", false
				}
				r = 0xfffd
			}
			out = appendRune(out, r)
		default:
			if exact {
				return "", false
			}
			out = append(out, body[i])
		}
	}
	return string(out), true
}

func hex4(s string, i int) (rune, int) {
	if i+4 > len(s) {
		return 0, 0
	}
	var r rune
	for k := i; k < i+4; k++ {
		c := s[k]
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, 0
		}
	}
	return r, 4
}

func appendRune(dst []byte, r rune) []byte {
	switch {
	case r < 0x80:
		return append(dst, byte(r))
	case r < 0x800:
		return append(dst, byte(0xc0|r>>6), byte(0x80|r&0x3f))
	case r < 0x10000:
		return append(dst, byte(0xe0|r>>12), byte(0x80|(r>>6)&0x3f), byte(0x80|r&0x3f))
	}
	return append(dst, byte(0xf0|r>>18), byte(0x80|(r>>12)&0x3f), byte(0x80|(r>>6)&0x3f), byte(0x80|r&0x3f))
}

// Keys notices a member name seen twice in one object (names compared unescaped). The
// first 16 names are kept in place, so a small object costs no allocation.
type Keys struct {
	small [16]string
	n     int
	set   map[string]struct{}
}

// Repeats records key and reports whether it was seen before.
func (k *Keys) Repeats(key string) bool {
	if k.set != nil {
		if _, dup := k.set[key]; dup {
			return true
		}
		k.set[key] = struct{}{}
		return false
	}
	for _, s := range k.small[:k.n] {
		if s == key {
			return true
		}
	}
	if k.n < len(k.small) {
		k.small[k.n] = key
		k.n++
		return false
	}
	k.set = make(map[string]struct{}, 64)
	for _, s := range k.small {
		k.set[s] = struct{}{}
	}
	k.set[key] = struct{}{}
	return false
}
