package jsonx

import (
	"errors"
	"unicode/utf8"

	"github.com/tidwall/gjson"
)

// ErrNotCanonicalizable is returned by AppendCanonical for a value whose meaning readers
// disagree on: a repeated member name, a string with an unpaired UTF-16 surrogate escape or
// invalid UTF-8.
var ErrNotCanonicalizable = errors.New("jsonx: value has no canonical form")

// AppendCanonical appends v, valid JSON, in a canonical form that folds exactly what every
// JSON reader takes as the same value and keeps every distinction some reader makes:
//
//   - folded: whitespace, object member order (members sorted by the UTF-16 code units of
//     their names, as RFC 8785), and how a string is escaped (strings are written with
//     RFC 8785's minimal escapes);
//   - kept: every number literal as written (9007199254740993 is not 9007199254740992, nor
//     10.0 10, nor -0 0: readers that keep integers or decimals tell them apart), every
//     string, case, null against an absent member, array order.
//
// It differs from RFC 8785 only in numbers, which RFC 8785 rounds through float64. A value
// readers could disagree on has no form (ErrNotCanonicalizable): a repeated member name
// (first or last wins), a lone surrogate escape (U+FFFD for some readers, a lone code unit
// for others), invalid UTF-8.
func AppendCanonical(dst []byte, v gjson.Result) ([]byte, error) {
	switch v.Type {
	case gjson.Null:
		return append(dst, "null"...), nil
	case gjson.True:
		return append(dst, "true"...), nil
	case gjson.False:
		return append(dst, "false"...), nil
	case gjson.Number:
		return append(dst, v.Raw...), nil
	case gjson.String:
		s, ok := UnquoteExact(v.Raw)
		if !ok {
			return dst, ErrNotCanonicalizable
		}
		return appendCanonicalString(dst, s), nil
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
	exact := true
	v.ForEach(func(k, e gjson.Result) bool {
		name, ok := UnquoteExact(k.Raw)
		exact = exact && ok
		members = append(members, member{name: name, value: e})
		return ok
	})
	if !exact {
		return dst, ErrNotCanonicalizable
	}
	sortMembers(members, make([]member, len(members)))
	dst = append(dst, '{')
	for i, m := range members {
		if i > 0 {
			if members[i-1].name == m.name {
				return dst, ErrNotCanonicalizable
			}
			dst = append(dst, ',')
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
func appendCanonicalString(dst []byte, s string) []byte { return canonical.AppendString(dst, s) }
