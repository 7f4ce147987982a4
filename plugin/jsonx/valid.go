// Package jsonx holds the small JSON pieces the engine needs beyond gjson: an iterative
// validator with a depth bound (gjson's validator recurses, and a deep document would
// overflow the guest's fixed stack), a checked walk that reads a document while it
// validates it (Checked), scanners for validated documents, and a string encoder.
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
	var v members // not &members{}: TinyGo would allocate it
	end, f := validate(data, 0, maxDepth, true, &v)
	return v.errorAt(data, end, f, maxDepth)
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
		if err := Validate(data, maxDepth); err != nil {
			return err
		}
		return &SyntaxError{Offset: i, Msg: "not an object"}
	}
	v := members{fn: fn, sub: sub}
	end, f := validate(data, 0, maxDepth, true, &v)
	return v.errorAt(data, end, f, maxDepth)
}

// ValidValue validates the one JSON value that starts at s[i] (no whitespace before it),
// nested at most maxDepth deep, and returns the offset just past it; what follows it is
// not looked at. A maxDepth over 512 counts as 512.
func ValidValue(s string, i, maxDepth int) (int, error) {
	end, f := validValue(s, i, maxDepth)
	if f != faultNone {
		return end, errorOf(view(s), end, f, min(maxDepth, inPlaceLevels))
	}
	return end, nil
}

// validValue is ValidValue with a fault for an error: it never allocates (see faultNone).
//
//go:nobounds
func validValue(s string, i, maxDepth int) (int, uint8) {
	data := view(s)
	if i < len(data) && data[i] != '{' && data[i] != '[' {
		return scalarEnd(data, i)
	}
	return validate(data, i, min(maxDepth, inPlaceLevels), false, flat{})
}

// Faults: the scanners report where and why they stopped instead of an error value. In
// TinyGo a function that may allocate (an error, a closure call) gets a GC frame, which
// costs on every call, and the one-pass readers call these for every string and value;
// the error is built once, by the caller that reports it.
const (
	faultNone uint8 = iota
	faultEOF
	faultUEscape
	faultEscape
	faultControl
	faultChar     // an invalid character at the offset (or the end of input)
	faultDeep     // nesting past the bound
	faultTrailing // data after the top-level value
	faultRead     // a visitor's own reader failed (members.err)
)

// errorOf builds the error of fault f at offset at.
func errorOf(data []byte, at int, f uint8, maxDepth int) error {
	msg := "unexpected end of input"
	switch f {
	case faultNone:
		return nil
	case faultUEscape:
		msg = "invalid \\u escape"
	case faultEscape:
		msg = "invalid escape"
	case faultControl:
		msg = "control character in string"
	case faultChar:
		if at < len(data) {
			msg = "invalid character " + strconv.QuoteRune(rune(data[at]))
		}
	case faultDeep:
		return &SyntaxError{Offset: at, Msg: "nesting deeper than " + strconv.Itoa(maxDepth), Deep: true}
	case faultTrailing:
		msg = "unexpected data after the top-level value"
	}
	return &SyntaxError{Offset: at, Msg: msg}
}

// A visitor is what the validator tells about a document besides whether it is valid:
// flat (nothing, and at most 512 levels: no allocation, no frame in TinyGo) or members
// (the top-level members, for the engine's inputs, and any depth).
type visitor interface {
	// wants reports whether member and read are wanted at all.
	wants() bool
	// member is told each top-level member: the key's literal and the value's span.
	member(data []byte, keyStart, keyEnd, start, end int)
	// read may read a top-level member's value itself: the offset past it, -1 to leave it
	// to the validator, or false on an error.
	read(data []byte, keyStart, keyEnd, at int) (int, bool)
	// setDeep and deep keep the kinds of containers past the first 512 levels.
	setDeep(d int, object bool)
	deep(d int) bool
}

type flat struct{}

func (flat) wants() bool                            { return false }
func (flat) member(_ []byte, _, _, _, _ int)        {}
func (flat) read(_ []byte, _, _, _ int) (int, bool) { return -1, true }
func (flat) setDeep(int, bool)                      {}
func (flat) deep(int) bool                          { return false }

type members struct {
	fn   func(key string, start, end int)
	sub  func(key string, at int) (int, error)
	err  error    // sub's
	more []uint64 // container kinds past 512 levels
}

func (m *members) wants() bool { return m.fn != nil || m.sub != nil }

func (m *members) member(data []byte, keyStart, keyEnd, start, end int) {
	if m.fn != nil {
		m.fn(Unquote(unsafeString(data[keyStart:keyEnd])), start, end)
	}
}

func (m *members) read(data []byte, keyStart, keyEnd, at int) (int, bool) {
	if m.sub == nil {
		return -1, true
	}
	end, err := m.sub(Unquote(unsafeString(data[keyStart:keyEnd])), at)
	if err != nil {
		m.err = err
		return 0, false
	}
	return end, true
}

func (m *members) setDeep(d int, object bool) {
	for len(m.more) <= d>>6 {
		m.more = append(m.more, 0)
	}
	if object {
		m.more[d>>6] |= 1 << (d & 63)
	} else {
		m.more[d>>6] &^= 1 << (d & 63)
	}
}

func (m *members) deep(d int) bool { return m.more[d>>6]&(1<<(d&63)) != 0 }

func (m *members) errorAt(data []byte, at int, f uint8, maxDepth int) error {
	if f == faultRead {
		return m.err
	}
	return errorOf(data, at, f, maxDepth)
}

// inPlaceLevels is how many open containers the validator tracks in its own frame (one
// bit each, set for an object); a slice over a local array, or a struct with methods,
// would move to the heap in TinyGo, an allocation on every validation.
const inPlaceLevels = 512

// validate checks the value at start (the whole of data when whole is set, else the one
// value there, returning the offset past it), telling v what it wants to know. On a fault
// the offset is where it is.
func validate[V visitor](data []byte, start, maxDepth int, whole bool, v V) (int, uint8) {
	depth := 0 // open containers
	var levels [inPlaceLevels / 64]uint64
	wants := v.wants()
	memberStart, keyStart, keyEnd := -1, 0, 0
	i := skipWS(data, start)
	for {
		if i >= len(data) {
			return i, faultEOF
		}
		if wants && i == memberStart && depth == 1 {
			end, ok := v.read(data, keyStart, keyEnd, i)
			if !ok {
				return i, faultRead
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
				return i, faultDeep
			}
			if d := depth; d < inPlaceLevels {
				if c == '{' {
					levels[d>>6] |= 1 << (d & 63)
				} else {
					levels[d>>6] &^= 1 << (d & 63)
				}
			} else {
				v.setDeep(d-inPlaceLevels, c == '{')
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
				var f uint8
				if i, f = objectKey(data, i); f != faultNone {
					return i, f
				}
				if wants && depth == 1 {
					memberStart, keyStart, keyEnd = i, ks, keyEndAt(data, ks)
				}
			}
			continue
		case c == '"':
			n, f := stringEnd(data, i+1)
			if f != faultNone {
				return n, f
			}
			i = n
		default:
			n, f := scalarEnd(data, i)
			if f != faultNone {
				return n, f
			}
			i = n
		}
	afterValue:
		if memberStart >= 0 && depth == 1 {
			v.member(data, keyStart, keyEnd, memberStart, i)
			memberStart = -1
		}
		for {
			if depth == 0 && !whole {
				return i, faultNone
			}
			if i < len(data) && data[i] <= ' ' {
				i = skipWS(data, i)
			}
			if depth == 0 {
				if i != len(data) {
					return i, faultTrailing
				}
				return i, faultNone
			}
			if i >= len(data) {
				return i, faultEOF
			}
			top := byte('[')
			if d := depth - 1; (d < inPlaceLevels && levels[d>>6]&(1<<(d&63)) != 0) ||
				(d >= inPlaceLevels && v.deep(d-inPlaceLevels)) {
				top = '{'
			}
			switch c := data[i]; {
			case c == ',':
				if i++; i < len(data) && data[i] <= ' ' {
					i = skipWS(data, i)
				}
				if top == '{' {
					ks := i
					var f uint8
					if i, f = objectKey(data, i); f != faultNone {
						return i, f
					}
					if wants && depth == 1 {
						memberStart, keyStart, keyEnd = i, ks, keyEndAt(data, ks)
					}
				}
			case (c == '}' && top == '{') || (c == ']' && top == '['):
				depth--
				i++
				if memberStart >= 0 && depth == 1 {
					v.member(data, keyStart, keyEnd, memberStart, i)
					memberStart = -1
				}
				continue
			default:
				return i, faultChar
			}
			break
		}
	}
}

// keyEndAt returns the offset just past the (valid) string literal at i.
func keyEndAt(data []byte, i int) int {
	n, _ := stringEnd(data, i+1)
	return n
}

// objectKey scans `"key" :` at i and returns the offset of the value that follows.
//
//go:nobounds
func objectKey(data []byte, i int) (int, uint8) {
	if i >= len(data) {
		return i, faultEOF
	}
	if data[i] != '"' {
		return i, faultChar
	}
	n, f := stringEnd(data, i+1)
	if f != faultNone {
		return n, f
	}
	if n < len(data) && data[n] <= ' ' {
		n = skipWS(data, n)
	}
	if n >= len(data) {
		return n, faultEOF
	}
	if data[n] != ':' {
		return n, faultChar
	}
	if n++; n < len(data) && data[n] <= ' ' {
		n = skipWS(data, n)
	}
	return n, faultNone
}

// scalarEnd validates the string, number or literal at data[i] and returns the offset
// past it.
//
//go:nobounds
func scalarEnd(data []byte, i int) (int, uint8) {
	switch c := data[i]; {
	case c == '"':
		return stringEnd(data, i+1)
	case c == '-' || (c >= '0' && c <= '9'):
		return numberEnd(data, i)
	case c == 't' && hasLit(data, i, "true"):
		return i + 4, faultNone
	case c == 'f' && hasLit(data, i, "false"):
		return i + 5, faultNone
	case c == 'n' && hasLit(data, i, "null"):
		return i + 4, faultNone
	}
	return i, faultChar
}

// hasLit compares byte by byte: TinyGo allocates for string(data[...]) == lit.
//
//go:nobounds
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

//go:nobounds
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

// stringEnd scans a string from i (inside it, at a character boundary) and returns the
// offset past its closing quote, or a fault and the offset where it is.
//
//go:nobounds
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

// numberEnd validates the number at data[i] and returns the offset past it.
//
//go:nobounds
func numberEnd(data []byte, i int) (int, uint8) {
	if data[i] == '-' {
		i++
	}
	if i >= len(data) {
		return i, faultEOF
	}
	switch {
	case data[i] == '0':
		i++
	case data[i] >= '1' && data[i] <= '9':
		for i < len(data) && data[i] >= '0' && data[i] <= '9' {
			i++
		}
	default:
		return i, faultChar
	}
	if i < len(data) && data[i] == '.' {
		i++
		start := i
		for i < len(data) && data[i] >= '0' && data[i] <= '9' {
			i++
		}
		if i == start {
			return i, faultChar
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
			return i, faultChar
		}
	}
	return i, faultNone
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
