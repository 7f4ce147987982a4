package admission

import (
	"encoding/base64"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/tidwall/gjson"
)

// Mcp-Param-* headers (2026-07-28, SEP-2243): a tool's input schema may mark a property with
// "x-mcp-header": NAME, and clients then mirror the argument's value into the header
// Mcp-Param-NAME so that intermediaries can route on it without reading the body. Whatever
// reads the body must refuse a request whose header and body disagree (400, -32020), or a
// load balancer routing on the header and the server acting on the body could see two
// different requests.

// ParamHeaderPrefix starts every header mirrored from a tool argument.
const ParamHeaderPrefix = "Mcp-Param-"

// base64 sentinel of the 2026-07-28 "Value Encoding" (case-sensitive).
const (
	sentinelOpen  = "=?base64?"
	sentinelClose = "?="
)

// ParamHeader is one x-mcp-header declaration of a tool's input schema: the name part of
// the header (Mcp-Param-Name) and the chain of properties keys leading to the argument.
type ParamHeader struct {
	Name string
	Path []string
}

// DecodeHeaderValue decodes an Mcp-Name or Mcp-Param-* header value: a value wrapped as
// =?base64?...?= is the Base64 (standard alphabet) of UTF-8 text; any other value is the
// text itself and must hold only printable ASCII (0x20-0x7E) and horizontal tabs. ok is false
// for a value that is neither (invalid characters, bad Base64, invalid UTF-8): the request
// is refused, as the spec asks for a header with invalid characters.
func DecodeHeaderValue(v string) (string, bool) {
	if len(v) >= len(sentinelOpen)+len(sentinelClose) && strings.HasPrefix(v, sentinelOpen) && strings.HasSuffix(v, sentinelClose) {
		enc := v[len(sentinelOpen) : len(v)-len(sentinelClose)]
		b, err := base64.StdEncoding.DecodeString(enc)
		if err != nil {
			if b, err = base64.RawStdEncoding.DecodeString(enc); err != nil {
				return "", false
			}
		}
		if !utf8.Valid(b) {
			return "", false
		}
		return string(b), true
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; (c < 0x20 || c > 0x7e) && c != '\t' {
			return "", false
		}
	}
	return v, true
}

// ValidParamName reports whether name may follow Mcp-Param- (an RFC 9110 token: 1*tchar).
func ValidParamName(name string) bool {
	if name == "" || len(name) > 256 {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// Params refuses a tools/call whose Mcp-Param-* headers disagree with its arguments, for
// the declarations decl of the tool's listed input schema: a header sent more than once, a
// header with invalid characters, a header whose argument is absent or null, a header whose
// decoded value differs from the argument (strings exactly, numbers numerically, booleans as
// "true"/"false"; an object or array can never match). strict (a 2026-07-28 request) also
// refuses an argument present in the body whose header the client left out: the spec's
// "client omits header but value is in body". Headers no declaration names pass untouched.
func Params(h Headers, decl []ParamHeader, args gjson.Result, strict bool) *Refusal {
	for _, d := range decl {
		header := ParamHeaderPrefix + d.Name
		vals := h.Values(header)
		v, ambiguous := argumentAt(args, d.Path)
		present := v.Exists() && v.Type != gjson.Null
		switch {
		case ambiguous:
			return mismatch("argument " + strconv.Quote(strings.Join(d.Path, ".")) + " is mirrored into the " + header +
				" header, and the arguments also hold a member of that name in another case: the server could read either")
		case len(vals) > 1:
			return mismatch("the " + header + " header is sent " + strconv.Itoa(len(vals)) + " times; send it once")
		case len(vals) == 0:
			if strict && present {
				return mismatch("the " + header + " header is missing: the tool's input schema mirrors argument " + strconv.Quote(strings.Join(d.Path, ".")) + " into it, and the body carries that argument")
			}
			continue
		}
		got, ok := DecodeHeaderValue(vals[0])
		switch {
		case !ok:
			return mismatch("the " + header + " header holds invalid characters or an invalid =?base64?...?= value")
		case !present:
			return mismatch("the " + header + " header is sent, but the body carries no value for argument " + strconv.Quote(strings.Join(d.Path, ".")))
		case !paramMatches(got, v):
			return mismatch("the " + header + " header does not match the body's argument " + strconv.Quote(strings.Join(d.Path, ".")))
		}
	}
	return nil
}

func mismatch(text string) *Refusal {
	return &Refusal{400, CodeHeaderMismatch, "header mismatch: " + text}
}

// argumentAt is the value at path in the arguments object (nothing when a step is not an
// object member); ambiguous when an object on the way has a member whose name differs from
// the step only in case: the server may read that one (encoding/json matches names
// case-insensitively) while the header mirrors the other.
func argumentAt(args gjson.Result, path []string) (v gjson.Result, ambiguous bool) {
	v = args
	for _, k := range path {
		if !v.IsObject() {
			return gjson.Result{}, false
		}
		var next gjson.Result
		v.ForEach(func(name, val gjson.Result) bool {
			switch {
			case name.Str == k:
				if !next.Exists() {
					next = val
				}
			case strings.EqualFold(name.Str, k):
				ambiguous = true
			}
			return !ambiguous
		})
		if ambiguous {
			return gjson.Result{}, true
		}
		v = next
	}
	return v, false
}

// paramMatches reports whether a decoded header value mirrors the argument v: a string
// exactly, a boolean as "true" or "false", a number when the header is a JSON number of the
// same value (compared exactly, digit by digit: 42.0 and 4.2e1 match 42, 9007199254740993
// does not match 9007199254740992).
func paramMatches(header string, v gjson.Result) bool {
	switch v.Type {
	case gjson.String:
		return header == v.Str
	case gjson.True:
		return header == "true"
	case gjson.False:
		return header == "false"
	case gjson.Number:
		h, ok := canonicalNumber(header)
		b, okb := canonicalNumber(v.Raw)
		return ok && okb && h == b
	}
	return false
}

// maxNumberLen bounds the numbers canonicalNumber reads (an exponent could otherwise ask
// for any number of zeros).
const maxNumberLen = 64

// canonicalNumber is a JSON number (RFC 8259 grammar only: no '+', hex, '_' or spaces) as
// sign, significant digits and exponent ("-42e0" for -42.0), so that two numbers are equal
// exactly when their forms are; false for anything else.
func canonicalNumber(s string) (string, bool) {
	if len(s) == 0 || len(s) > maxNumberLen {
		return "", false
	}
	i, neg := 0, false
	if s[0] == '-' {
		neg, i = true, 1
	}
	digits := func() string {
		j := i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		return s[j:i]
	}
	intPart := digits()
	if intPart == "" || (len(intPart) > 1 && intPart[0] == '0') {
		return "", false
	}
	frac := ""
	if i < len(s) && s[i] == '.' {
		i++
		if frac = digits(); frac == "" {
			return "", false
		}
	}
	exp := 0
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		eneg := false
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			eneg, i = s[i] == '-', i+1
		}
		e := digits()
		if e == "" || len(e) > 6 {
			return "", false
		}
		exp, _ = strconv.Atoi(e)
		if eneg {
			exp = -exp
		}
	}
	if i != len(s) {
		return "", false
	}
	mant := strings.TrimLeft(intPart+frac, "0")
	exp -= len(frac)
	if mant == "" {
		return "0", true // -0 and 0.000 are 0
	}
	for len(mant) > 1 && mant[len(mant)-1] == '0' {
		mant, exp = mant[:len(mant)-1], exp+1
	}
	out := mant + "e" + strconv.Itoa(exp)
	if neg {
		out = "-" + out
	}
	return out, true
}
