// Package jsonx holds the small JSON pieces the engine needs beyond gjson: an iterative
// validator with a depth bound (gjson's validator recurses, and a deep document would
// overflow the guest's fixed stack), and a string encoder.
package jsonx

import (
	"strconv"
	"unsafe"
)

// SyntaxError describes why a document is not valid JSON.
type SyntaxError struct {
	Offset int
	Msg    string
	Deep   bool // the document nests deeper than the allowed depth
}

func (e *SyntaxError) Error() string {
	return e.Msg + " at offset " + strconv.Itoa(e.Offset)
}

// Validate checks that data is exactly one JSON value (RFC 8259) nested at most maxDepth
// deep. It never recurses, so any input is safe.
func Validate(data []byte, maxDepth int) error {
	return validate(data, maxDepth, nil)
}

// ValidateObject is Validate for a document that must be an object; it also reports each
// top-level member (key unescaped, value span) to fn, so callers need no second pass to
// find them.
func ValidateObject(data []byte, maxDepth int, fn func(key string, start, end int)) error {
	i := skipWS(data, 0)
	if i < len(data) && data[i] != '{' {
		if err := validate(data, maxDepth, nil); err != nil {
			return err
		}
		return &SyntaxError{Offset: i, Msg: "not an object"}
	}
	return validate(data, maxDepth, fn)
}

func validate(data []byte, maxDepth int, fn func(key string, start, end int)) error {
	// stack holds one byte per open container: '{' or '['. Its length is the depth.
	var stackBuf [64]byte
	stack := stackBuf[:0]
	memberStart, keyStart, keyEnd := -1, 0, 0
	i := skipWS(data, 0)
	// expecting: 0 = a value, 1 = after a value
	for {
		if i >= len(data) {
			return &SyntaxError{Offset: i, Msg: "unexpected end of input"}
		}
		// parse a value at i
		switch c := data[i]; {
		case c == '{' || c == '[':
			if len(stack) >= maxDepth {
				return &SyntaxError{Offset: i, Msg: "nesting deeper than " + strconv.Itoa(maxDepth), Deep: true}
			}
			stack = append(stack, c)
			if i++; i < len(data) && data[i] <= ' ' {
				i = skipWS(data, i)
			}
			if i < len(data) && ((c == '{' && data[i] == '}') || (c == '[' && data[i] == ']')) {
				stack = stack[:len(stack)-1]
				i++
				goto afterValue
			}
			if c == '{' {
				ks := i
				var err error
				if i, err = objectKey(data, i); err != nil {
					return err
				}
				if len(stack) == 1 {
					memberStart, keyStart, keyEnd = i, ks, keyEndAt(data, ks)
				}
			}
			continue
		case c == '"':
			n, err := scanString(data, i)
			if err != nil {
				return err
			}
			i = n
		case c == '-' || (c >= '0' && c <= '9'):
			n, err := scanNumber(data, i)
			if err != nil {
				return err
			}
			i = n
		case c == 't':
			if !hasLit(data, i, "true") {
				return bad(data, i)
			}
			i += 4
		case c == 'f':
			if !hasLit(data, i, "false") {
				return bad(data, i)
			}
			i += 5
		case c == 'n':
			if !hasLit(data, i, "null") {
				return bad(data, i)
			}
			i += 4
		default:
			return bad(data, i)
		}
	afterValue:
		if fn != nil && memberStart >= 0 && len(stack) == 1 {
			fn(Unquote(unsafeString(data[keyStart:keyEnd])), memberStart, i)
			memberStart = -1
		}
		for {
			if i < len(data) && data[i] <= ' ' {
				i = skipWS(data, i)
			}
			if len(stack) == 0 {
				if i != len(data) {
					return &SyntaxError{Offset: i, Msg: "unexpected data after the top-level value"}
				}
				return nil
			}
			if i >= len(data) {
				return &SyntaxError{Offset: i, Msg: "unexpected end of input"}
			}
			top := stack[len(stack)-1]
			switch c := data[i]; {
			case c == ',':
				if i++; i < len(data) && data[i] <= ' ' {
					i = skipWS(data, i)
				}
				if top == '{' {
					ks := i
					var err error
					if i, err = objectKey(data, i); err != nil {
						return err
					}
					if len(stack) == 1 {
						memberStart, keyStart, keyEnd = i, ks, keyEndAt(data, ks)
					}
				}
			case (c == '}' && top == '{') || (c == ']' && top == '['):
				stack = stack[:len(stack)-1]
				i++
				if fn != nil && memberStart >= 0 && len(stack) == 1 {
					fn(Unquote(unsafeString(data[keyStart:keyEnd])), memberStart, i)
					memberStart = -1
				}
				continue
			default:
				return bad(data, i)
			}
			break
		}
	}
}

// keyEndAt returns the offset just past the (valid) string literal at i.
func keyEndAt(data []byte, i int) int {
	n, _ := scanString(data, i)
	return n
}

// objectKey scans `"key" :` at i and returns the offset of the value that follows.
func objectKey(data []byte, i int) (int, error) {
	if i >= len(data) {
		return i, &SyntaxError{Offset: i, Msg: "unexpected end of input"}
	}
	if data[i] != '"' {
		return i, bad(data, i)
	}
	n, err := scanString(data, i)
	if err != nil {
		return n, err
	}
	if n < len(data) && data[n] <= ' ' {
		n = skipWS(data, n)
	}
	if n >= len(data) {
		return n, &SyntaxError{Offset: n, Msg: "unexpected end of input"}
	}
	if data[n] != ':' {
		return n, bad(data, n)
	}
	if n++; n < len(data) && data[n] <= ' ' {
		n = skipWS(data, n)
	}
	return n, nil
}

func bad(data []byte, i int) error {
	if i >= len(data) {
		return &SyntaxError{Offset: i, Msg: "unexpected end of input"}
	}
	return &SyntaxError{Offset: i, Msg: "invalid character " + strconv.QuoteRune(rune(data[i]))}
}

// hasLit compares byte by byte: TinyGo allocates for string(data[...]) == lit.
func hasLit(data []byte, i int, lit string) bool {
	if len(data)-i < len(lit) {
		return false
	}
	for k := 0; k < len(lit); k++ {
		if data[i+k] != lit[k] {
			return false
		}
	}
	return true
}

func skipWS(data []byte, i int) int {
	for i < len(data) {
		switch data[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// scanString scans the string starting at the quote at i and returns the offset after it.
func scanString(data []byte, i int) (int, error) {
	i++
	for {
		i = plainRunBytes(data, i)
		if i >= len(data) {
			break
		}
		c := data[i]
		switch {
		case c == '"':
			return i + 1, nil
		case c == '\\':
			if i+1 >= len(data) {
				return i, &SyntaxError{Offset: i, Msg: "unexpected end of input"}
			}
			switch data[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if len(data)-i < 6 {
					return i, &SyntaxError{Offset: i, Msg: "unexpected end of input"}
				}
				for k := i + 2; k < i+6; k++ {
					if !isHex(data[k]) {
						return k, &SyntaxError{Offset: k, Msg: "invalid \\u escape"}
					}
				}
				i += 6
			default:
				return i, &SyntaxError{Offset: i + 1, Msg: "invalid escape"}
			}
		default: // below 0x20
			return i, &SyntaxError{Offset: i, Msg: "control character in string"}
		}
	}
	return i, &SyntaxError{Offset: i, Msg: "unexpected end of input"}
}

func isHex(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

func scanNumber(data []byte, i int) (int, error) {
	if data[i] == '-' {
		i++
	}
	if i >= len(data) {
		return i, &SyntaxError{Offset: i, Msg: "unexpected end of input"}
	}
	switch {
	case data[i] == '0':
		i++
	case data[i] >= '1' && data[i] <= '9':
		for i < len(data) && data[i] >= '0' && data[i] <= '9' {
			i++
		}
	default:
		return i, bad(data, i)
	}
	if i < len(data) && data[i] == '.' {
		i++
		start := i
		for i < len(data) && data[i] >= '0' && data[i] <= '9' {
			i++
		}
		if i == start {
			return i, bad(data, i)
		}
	}
	if i < len(data) && (data[i] == 'e' || data[i] == 'E') {
		i++
		if i < len(data) && (data[i] == '+' || data[i] == '-') {
			i++
		}
		start := i
		for i < len(data) && data[i] >= '0' && data[i] <= '9' {
			i++
		}
		if i == start {
			return i, bad(data, i)
		}
	}
	return i, nil
}

// unsafeString views b as a string; Unquote copies when it has to unescape, and callers
// keep keys only while data is alive and unchanged.
func unsafeString(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}
