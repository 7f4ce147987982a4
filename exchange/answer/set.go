package answer

import (
	"unsafe"

	"github.com/stategate/stategate/exchange/jsonrpc"
	"github.com/stategate/stategate/plugin/jsonx"
)

// Set returns doc with the member named by path (names, outermost first) set to the JSON
// value raw, writing the bytes sjson's SetRawBytes writes for the same path: an existing
// value is replaced where it is; a missing member goes last in its object, with the
// objects of the rest of the path created around raw; a parent that is a string, number,
// boolean or null is replaced by an object. ok is false, and doc is returned as it is,
// where sjson fails: a parent that is an array.
//
// # Notes
//
//   - The names are member names as they read unescaped, not a path syntax: "a.b" is one
//     member. A name written anew is escaped as sjson escapes it (encoding/json's
//     encoder, HTML-safe). Names that read as array indexes ("0", "-1") are not
//     supported (sjson would make arrays of them); no caller writes one.
//   - doc is valid JSON; on other input Set does not panic, but the bytes are unspecified.
//   - Why not sjson: it links encoding/json (28 KB with internal/reflectlite 19 KB) into
//     the exchange module for the one string that needs escaping; the tests hold Set to
//     sjson byte for byte.
func Set(doc, raw []byte, path ...string) (out []byte, ok bool) {
	if len(path) == 0 {
		return doc, false
	}
	s := unsafe.String(unsafe.SliceData(doc), len(doc))
	out, ok = set(make([]byte, 0, len(doc)+len(raw)+32), s, raw, path)
	if !ok {
		return doc, false
	}
	return out, true
}

// SetString is Set with the string v as the value, quoted as sjson's SetBytes quotes it.
func SetString(doc []byte, v string, path ...string) ([]byte, bool) {
	return Set(doc, appendQuoted(make([]byte, 0, len(v)+2), v), path...)
}

// set appends v (a whole document, or a value exactly) with path set to raw.
func set(out []byte, v string, raw []byte, path []string) ([]byte, bool) {
	obj := jsonx.SkipWS(v, 0)
	switch {
	case obj < len(v) && v[obj] == '[':
		return out, false
	case obj >= len(v) || v[obj] != '{': // empty, or a value that is not an object
		out = append(out, '{')
		out = appendMember(out, raw, path)
		return append(out, '}'), true
	}
	if at, end := jsonrpc.MemberAt(v, obj, path[0]); at >= 0 && end <= len(v) {
		out = append(out, v[:at]...)
		if len(path) == 1 {
			out = append(out, raw...)
		} else {
			var ok bool
			if out, ok = set(out, v[at:end], raw, path[1:]); !ok {
				return out, false
			}
		}
		return append(out, v[end:]...), true
	}
	// A new last member: sjson keeps the object up to its last closing brace (from the
	// opening one: whitespace around the document goes) and adds a comma when the object
	// has members.
	o := v[obj:]
	end := len(o) - 1
	for ; end > 0 && o[end] != '}'; end-- {
	}
	out = append(out, o[:max(end, 0)]...)
	if i := jsonx.SkipWS(o, 1); i < len(o) && o[i] != '}' && o[i] != ']' {
		out = append(out, ',')
	}
	out = appendMember(out, raw, path)
	return append(out, '}'), true
}

// appendMember appends "path[0]":{"path[1]":...raw...}.
func appendMember(out, raw []byte, path []string) []byte {
	for _, name := range path {
		out = appendQuoted(out, name)
		out = append(out, ':', '{')
	}
	out = append(out[:len(out)-1], raw...)
	for range len(path) - 1 {
		out = append(out, '}')
	}
	return out
}

// appendQuoted appends s as a JSON string the way sjson writes it: as it is between quotes
// when it has no control character, quote, backslash or byte above 0x7f; otherwise as
// encoding/json's Marshal writes it (jsonx.MarshalEscaping: <, > and & escaped as \u003c...,
// \b \f \n \r \t short, other controls as \u00XX, invalid UTF-8 as \ufffd, U+2028 and
// U+2029 escaped).
func appendQuoted(dst []byte, s string) []byte {
	if jsonx.PlainASCII(s, 0) == len(s) {
		dst = append(dst, '"')
		dst = append(dst, s...)
		return append(dst, '"')
	}
	return jsonx.MarshalEscaping.AppendString(dst, s)
}
