package jsonx

import (
	"errors"
	"math"
	"strconv"
	"unicode/utf8"

	"github.com/tidwall/gjson"
)

// ErrNotCanonicalizable is returned by AppendCanonical for a value RFC 8785 cannot
// represent: a repeated member name, a number out of float64 range, invalid UTF-8.
var ErrNotCanonicalizable = errors.New("jsonx: value has no canonical form")

// AppendCanonical appends v, valid JSON, in the JSON Canonicalization Scheme of RFC 8785:
// no whitespace, object members sorted by the UTF-16 code units of their names, numbers in
// the shortest ECMAScript form, strings with the minimal escapes. Two documents that mean
// the same get the same bytes, whatever their member order, whitespace or number spelling.
func AppendCanonical(dst []byte, v gjson.Result) ([]byte, error) {
	switch v.Type {
	case gjson.Null:
		return append(dst, "null"...), nil
	case gjson.True:
		return append(dst, "true"...), nil
	case gjson.False:
		return append(dst, "false"...), nil
	case gjson.Number:
		return appendCanonicalNumber(dst, v.Raw)
	case gjson.String:
		if !utf8.ValidString(v.Str) {
			return dst, ErrNotCanonicalizable
		}
		return appendCanonicalString(dst, v.Str), nil
	}
	if v.IsArray() {
		dst = append(dst, '[')
		var err error
		first := true
		v.ForEach(func(_, e gjson.Result) bool {
			if !first {
				dst = append(dst, ',')
			}
			first = false
			dst, err = AppendCanonical(dst, e)
			return err == nil
		})
		return append(dst, ']'), err
	}
	if !v.IsObject() {
		return dst, ErrNotCanonicalizable
	}
	var members []member
	v.ForEach(func(k, e gjson.Result) bool {
		members = append(members, member{name: k.Str, value: e})
		return true
	})
	sortMembers(members, make([]member, len(members)))
	dst = append(dst, '{')
	for i, m := range members {
		if i > 0 {
			if members[i-1].name == m.name {
				return dst, ErrNotCanonicalizable
			}
			dst = append(dst, ',')
		}
		if !utf8.ValidString(m.name) {
			return dst, ErrNotCanonicalizable
		}
		dst = appendCanonicalString(dst, m.name)
		dst = append(dst, ':')
		var err error
		if dst, err = AppendCanonical(dst, m.value); err != nil {
			return dst, err
		}
	}
	return append(dst, '}'), nil
}

type member struct {
	name  string
	value gjson.Result
}

// sortMembers sorts m by name in UTF-16 code-unit order (a stable merge sort; tmp has
// len(m)).
func sortMembers(m, tmp []member) {
	if len(m) < 2 {
		return
	}
	mid := len(m) / 2
	sortMembers(m[:mid], tmp[:mid])
	sortMembers(m[mid:], tmp[mid:])
	copy(tmp, m)
	i, j, k := 0, mid, 0
	for i < mid && j < len(m) {
		if compareUTF16(tmp[j].name, tmp[i].name) < 0 {
			m[k] = tmp[j]
			j++
		} else {
			m[k] = tmp[i]
			i++
		}
		k++
	}
	k += copy(m[k:], tmp[i:mid])
	copy(m[k:], tmp[j:])
}

// compareUTF16 compares two UTF-8 strings in the order of their UTF-16 code units without
// converting them: a supplementary character is written with surrogates (0xD800-0xDFFF),
// so it sorts after U+D7FF and before U+E000, unlike in UTF-8 or code point order.
func compareUTF16(a, b string) int {
	for a != "" && b != "" {
		ra, na := utf8.DecodeRuneInString(a)
		rb, nb := utf8.DecodeRuneInString(b)
		if wa, wb := utf16Weight(ra), utf16Weight(rb); wa != wb {
			if wa < wb {
				return -1
			}
			return 1
		}
		a, b = a[na:], b[nb:]
	}
	switch {
	case a == "" && b == "":
		return 0
	case a == "":
		return -1
	}
	return 1
}

func utf16Weight(r rune) rune {
	switch {
	case r >= 0x10000:
		return 0xD800 + (r - 0x10000) // after U+D7FF, before U+E000 (remapped below)
	case r >= 0xE000:
		return r + 0x110000
	}
	return r
}

// appendCanonicalString escapes only what RFC 8785 requires: '"', '\\' and the control
// characters (\b \t \n \f \r short, the others \u00xx in lower case).
func appendCanonicalString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		dst = append(dst, s[start:i]...)
		switch c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '\b':
			dst = append(dst, '\\', 'b')
		case '\t':
			dst = append(dst, '\\', 't')
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\f':
			dst = append(dst, '\\', 'f')
		case '\r':
			dst = append(dst, '\\', 'r')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		}
		start = i + 1
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// appendCanonicalNumber writes the number raw as ECMAScript's Number.prototype.toString
// does (RFC 8785 section 3.2.2.3): the shortest digits that round-trip, in plain notation
// for exponents from -6 to 20 and in exponent notation (1e+21, 1e-7) beyond.
func appendCanonicalNumber(dst []byte, raw string) ([]byte, error) {
	f, err := strconv.ParseFloat(raw, 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		return dst, ErrNotCanonicalizable
	}
	if f == 0 {
		return append(dst, '0'), nil // -0 too
	}
	if f < 0 {
		dst = append(dst, '-')
		f = -f
	}
	var buf [32]byte
	e := strconv.AppendFloat(buf[:0], f, 'e', -1, 64) // d.ddde±XX
	mant, exp := e, 0
	for i := range e {
		if e[i] == 'e' {
			mant = e[:i]
			exp, _ = strconv.Atoi(string(e[i+1:]))
			break
		}
	}
	var digits []byte
	for _, c := range mant {
		if c != '.' {
			digits = append(digits, c)
		}
	}
	k, n := len(digits), exp+1 // the value is 0.digits × 10^n
	switch {
	case k <= n && n <= 21:
		dst = append(dst, digits...)
		for range n - k {
			dst = append(dst, '0')
		}
	case 0 < n && n <= 21:
		dst = append(dst, digits[:n]...)
		dst = append(dst, '.')
		dst = append(dst, digits[n:]...)
	case -6 < n && n <= 0:
		dst = append(dst, '0', '.')
		for range -n {
			dst = append(dst, '0')
		}
		dst = append(dst, digits...)
	default:
		dst = append(dst, digits[0])
		if k > 1 {
			dst = append(dst, '.')
			dst = append(dst, digits[1:]...)
		}
		dst = append(dst, 'e')
		if n-1 >= 0 {
			dst = append(dst, '+')
		}
		dst = strconv.AppendInt(dst, int64(n-1), 10)
	}
	return dst, nil
}
