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
	_, err := validate(data, 0, maxDepth, nil, nil, true)
	return err
}

// ValidateObject is Validate for a document that must be an object; it also reports each
// top-level member (key unescaped, value span) to fn, so callers need no second pass to
// find them.
func ValidateObject(data []byte, maxDepth int, fn func(key string, start, end int)) error {
	return ValidateObjectWith(data, maxDepth, fn, nil)
}

// ValidateObjectWith is ValidateObject that lets sub read the values of chosen top-level
// members itself: before each such value, sub(key, at) returns -1 to leave it to the
// validator, or the offset just past the value, which sub has validated (nested at most
// maxDepth-1 deep, since the object is one level) while reading it: one pass for both.
// An error from sub ends the validation with that error.
func ValidateObjectWith(data []byte, maxDepth int, fn func(key string, start, end int), sub func(key string, at int) (int, error)) error {
	i := skipWS(data, 0)
	if i < len(data) && data[i] != '{' {
		if _, err := validate(data, 0, maxDepth, nil, nil, true); err != nil {
			return err
		}
		return &SyntaxError{Offset: i, Msg: "not an object"}
	}
	_, err := validate(data, 0, maxDepth, fn, sub, true)
	return err
}

// ValidValue validates the one JSON value that starts at s[i] (no whitespace before it),
// nested at most maxDepth deep, and returns the offset just past it; what follows it is
// not looked at.
func ValidValue(s string, i, maxDepth int) (int, error) {
	data := view(s)
	if i < len(data) && data[i] != '{' && data[i] != '[' {
		return validScalar(data, i)
	}
	return validate(data, i, maxDepth, nil, nil, false)
}

// validScalar validates the string, number or literal at data[i].
func validScalar(data []byte, i int) (int, error) {
	switch c := data[i]; {
	case c == '"':
		return scanString(data, i)
	case c == '-' || (c >= '0' && c <= '9'):
		return scanNumber(data, i)
	case c == 't' && hasLit(data, i, "true"):
		return i + 4, nil
	case c == 'f' && hasLit(data, i, "false"):
		return i + 5, nil
	case c == 'n' && hasLit(data, i, "null"):
		return i + 4, nil
	}
	return i, bad(data, i)
}

// validate checks the value at start (the whole of data when whole is set, else the one
// value there, returning the offset past it).
func validate(data []byte, start, maxDepth int, fn func(key string, start, end int), sub func(key string, at int) (int, error), whole bool) (int, error) {
	depth := 0 // open containers
	var levels [inPlaceLevels / 64]uint64
	var more []uint64
	memberStart, keyStart, keyEnd := -1, 0, 0
	i := skipWS(data, start)
	for {
		if i >= len(data) {
			return i, &SyntaxError{Offset: i, Msg: "unexpected end of input"}
		}
		if sub != nil && i == memberStart && depth == 1 {
			end, err := sub(Unquote(unsafeString(data[keyStart:keyEnd])), i)
			if err != nil {
				return i, err
			}
			if end >= 0 {
				i = end
				goto afterValue
			}
		}
		// parse a value at i
		switch c := data[i]; {
		case c == '{' || c == '[':
			if depth >= maxDepth {
				return i, &SyntaxError{Offset: i, Msg: "nesting deeper than " + strconv.Itoa(maxDepth), Deep: true}
			}
			if d := depth; d < inPlaceLevels {
				if c == '{' {
					levels[d>>6] |= 1 << (d & 63)
				} else {
					levels[d>>6] &^= 1 << (d & 63)
				}
			} else {
				more = setLevel(more, d-inPlaceLevels, c == '{')
			}
			depth++
			if i++; i < len(data) && data[i] <= ' ' {
				i = skipWS(data, i)
			}
			if i < len(data) && ((c == '{' && data[i] == '}') || (c == '[' && data[i] == ']')) {
				depth--
				i++
				goto afterValue
			}
			if c == '{' {
				ks := i
				var err error
				if i, err = objectKey(data, i); err != nil {
					return i, err
				}
				if depth == 1 {
					memberStart, keyStart, keyEnd = i, ks, keyEndAt(data, ks)
				}
			}
			continue
		case c == '"':
			n, f := stringEnd(data, i+1) // the call layers of scanString cost in the guest
			if f != faultNone {
				return i, faultError(n, f)
			}
			i = n
		case c == '-' || (c >= '0' && c <= '9'):
			n, err := scanNumber(data, i)
			if err != nil {
				return i, err
			}
			i = n
		case c == 't':
			if !hasLit(data, i, "true") {
				return i, bad(data, i)
			}
			i += 4
		case c == 'f':
			if !hasLit(data, i, "false") {
				return i, bad(data, i)
			}
			i += 5
		case c == 'n':
			if !hasLit(data, i, "null") {
				return i, bad(data, i)
			}
			i += 4
		default:
			return i, bad(data, i)
		}
	afterValue:
		if memberStart >= 0 && depth == 1 {
			if fn != nil {
				fn(Unquote(unsafeString(data[keyStart:keyEnd])), memberStart, i)
			}
			memberStart = -1
		}
		for {
			if depth == 0 && !whole {
				return i, nil
			}
			if i < len(data) && data[i] <= ' ' {
				i = skipWS(data, i)
			}
			if depth == 0 {
				if i != len(data) {
					return i, &SyntaxError{Offset: i, Msg: "unexpected data after the top-level value"}
				}
				return i, nil
			}
			if i >= len(data) {
				return i, &SyntaxError{Offset: i, Msg: "unexpected end of input"}
			}
			top := byte('[')
			if d := depth - 1; (d < inPlaceLevels && levels[d>>6]&(1<<(d&63)) != 0) ||
				(d >= inPlaceLevels && more[(d-inPlaceLevels)>>6]&(1<<((d-inPlaceLevels)&63)) != 0) {
				top = '{'
			}
			switch c := data[i]; {
			case c == ',':
				if i++; i < len(data) && data[i] <= ' ' {
					i = skipWS(data, i)
				}
				if top == '{' {
					ks := i
					var err error
					if i, err = objectKey(data, i); err != nil {
						return i, err
					}
					if depth == 1 {
						memberStart, keyStart, keyEnd = i, ks, keyEndAt(data, ks)
					}
				}
			case (c == '}' && top == '{') || (c == ']' && top == '['):
				depth--
				i++
				if memberStart >= 0 && depth == 1 {
					if fn != nil {
						fn(Unquote(unsafeString(data[keyStart:keyEnd])), memberStart, i)
					}
					memberStart = -1
				}
				continue
			default:
				return i, bad(data, i)
			}
			break
		}
	}
}

// Open containers, one bit each (set: an object), indexed by depth - 1: the first 512
// levels in an array of the validator's frame, the rest (when a caller allows that many)
// in a slice. A slice over a local array, or a struct with methods, moves to the heap in
// TinyGo: an allocation on every validation.
const inPlaceLevels = 512

func setLevel(more []uint64, d int, object bool) []uint64 {
	for len(more) <= d>>6 {
		more = append(more, 0)
	}
	if object {
		more[d>>6] |= 1 << (d & 63)
	} else {
		more[d>>6] &^= 1 << (d & 63)
	}
	return more
}

// keyEndAt returns the offset just past the (valid) string literal at i.
func keyEndAt(data []byte, i int) int {
	n, _ := stringEnd(data, i+1)
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
	n, f := stringEnd(data, i+1)
	if f != faultNone {
		return n, faultError(n, f)
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
	return scanStringFrom(data, i+1)
}

// scanStringFrom is scanString from i, inside the string and at a character boundary.
func scanStringFrom(data []byte, i int) (int, error) {
	end, f := stringEnd(data, i)
	if f != faultNone {
		return end, faultError(end, f)
	}
	return end, nil
}

// Faults of the scanners that must not allocate: in TinyGo a function that may allocate
// (an error value) gets a GC frame, which costs on every call, so the hot scanners report
// a fault and its offset and the error is built once, by the caller.
const (
	faultNone uint8 = iota
	faultEOF
	faultUEscape
	faultEscape
	faultControl
)

func faultError(at int, f uint8) error {
	msg := "unexpected end of input"
	switch f {
	case faultUEscape:
		msg = "invalid \\u escape"
	case faultEscape:
		msg = "invalid escape"
	case faultControl:
		msg = "control character in string"
	}
	return &SyntaxError{Offset: at, Msg: msg}
}

// stringEnd scans a string from i (inside it, at a character boundary) and returns the
// offset past its closing quote, or a fault and the offset where it is.
func stringEnd(data []byte, i int) (int, uint8) {
	for {
		i = plainRunBytes(data, i)
		if i >= len(data) {
			return i, faultEOF
		}
		switch c := data[i]; {
		case c == '"':
			return i + 1, faultNone
		case c == '\\':
			if i+1 >= len(data) {
				return i, faultEOF
			}
			switch data[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if len(data)-i < 6 {
					return i, faultEOF
				}
				for k := i + 2; k < i+6; k++ {
					if !isHex(data[k]) {
						return k, faultUEscape
					}
				}
				i += 6
			default:
				return i + 1, faultEscape
			}
		default: // below 0x20
			return i, faultControl
		}
	}
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

// view sees s as bytes, for the validator; nothing writes through it.
func view(s string) []byte {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Slice(unsafe.StringData(s), len(s))
}
