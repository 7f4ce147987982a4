// Package jsonrpc reads and writes JSON-RPC 2.0 messages as the exchange core needs them:
// answers and errors written byte for byte, answers matched to requests by id value, ids a
// server may not echo faithfully, and the reading rules that keep the gate and the server on
// the same message (repeated members, members that differ only in case).
package jsonrpc

import (
	"strconv"
	"sync/atomic"
	"unicode/utf8"

	"github.com/stategate/stategate/plugin/jsonx"
	"github.com/tidwall/gjson"
)

// JSON-RPC error codes the core answers with.
const (
	CodeParseError     = -32700
	CodeInvalidRequest = -32600
	CodeInvalidParams  = -32602
	CodeInternal       = -32603
)

// AppendError appends a JSON-RPC error response. id is raw JSON ("" for null).
func AppendError(dst, id []byte, code int, msg string) []byte {
	dst = append(dst, `{"jsonrpc":"2.0","id":`...)
	dst = appendID(dst, id)
	dst = append(dst, `,"error":{"code":`...)
	dst = strconv.AppendInt(dst, int64(code), 10)
	dst = append(dst, `,"message":`...)
	dst = jsonx.AppendString(dst, msg)
	return append(dst, "}}"...)
}

// AppendResult appends a JSON-RPC response carrying result (raw JSON).
func AppendResult(dst, id, result []byte) []byte {
	dst = append(dst, `{"jsonrpc":"2.0","id":`...)
	dst = appendID(dst, id)
	dst = append(dst, `,"result":`...)
	dst = append(dst, result...)
	return append(dst, '}')
}

func appendID(dst, id []byte) []byte {
	if len(id) == 0 {
		return append(dst, "null"...)
	}
	return append(dst, id...)
}

// SameID reports whether got (an answer's id) is the id whose raw JSON is want: ids compare
// by value (1.0 and 1, "\u0061" and "a" are the same id).
func SameID(got gjson.Result, want []byte) bool {
	w := gjson.ParseBytes(want)
	switch {
	case got.Type == gjson.String && w.Type == gjson.String:
		return got.Str == w.Str
	case got.Type == gjson.Number && w.Type == gjson.Number:
		return got.Raw == w.Raw || got.Num == w.Num
	}
	return false
}

// IsAnswer reports whether msg is a JSON-RPC response (result or error, no method) to the
// request whose raw id is id.
func IsAnswer(msg gjson.Result, id []byte) bool {
	_, ok := AnswerOf(msg, id)
	return ok
}

// AnswerOf is IsAnswer that also returns msg's result member, reading msg once.
func AnswerOf(msg gjson.Result, id []byte) (result gjson.Result, ok bool) {
	m := Members(msg, "method", "id", "result", "error")
	return (&AnswerMembers{method: m[0], id: m[1], result: m[2], error: m[3]}).Answer(id)
}

// AnswerMembers are the Members that make a message the answer to a request (the first of
// repeated ones), read by Members (AnswerOf) or by the validator's pass over an answer
// (RewriteJSON).
type AnswerMembers struct {
	method, id, result, error gjson.Result
	keys                      jsonx.Keys
	repeated                  bool
}

// Repeated reports whether the answer names a top-level member twice: the core reads the
// first, a client's decoder (encoding/json, JSON.parse) the last.
func (m *AnswerMembers) Repeated() bool { return m.repeated }

// See returns the validator's callback that fills m from s, the answer as a string.
func (m *AnswerMembers) See(s string) func(key string, start, end int) {
	return func(key string, start, end int) {
		if m.keys.Repeats(key) {
			m.repeated = true
		}
		var slot *gjson.Result
		switch key {
		case "method":
			slot = &m.method
		case "id":
			slot = &m.id
		case "result":
			slot = &m.result
		case "error":
			slot = &m.error
		default:
			return
		}
		if !slot.Exists() {
			*slot = gjson.Parse(s[start:end]) // an object or array is not scanned by Parse
			slot.Index = start
		}
	}
}

// Answer reports whether the Members are those of an answer to the request whose raw id
// is id, and returns its result.
func (m *AnswerMembers) Answer(id []byte) (result gjson.Result, ok bool) {
	if m.method.Exists() || !SameID(m.id, id) {
		return m.result, false
	}
	return m.result, m.result.Exists() || m.error.Exists()
}

// NotAnObject reports the validator's error for a valid document that is not an object.
func NotAnObject(err error) bool {
	se, ok := err.(*jsonx.SyntaxError)
	return ok && se.Msg == "not an object"
}

// Members returns the named Members of the object obj (the first of repeated ones, as
// gjson's Get does), in one pass over it: each Get is a pass over every member before the
// one it finds (or all of them), which counts on a list of a thousand tools.
func Members(obj gjson.Result, names ...string) []gjson.Result {
	out := make([]gjson.Result, len(names))
	var at [8]*gjson.Result
	ptrs := at[:0]
	for i := range out {
		ptrs = append(ptrs, &out[i])
	}
	readMembers(obj, names, ptrs, nil)
	return out
}

// MembersTo is Members into out (out[i] receives names[i]; out as long as names), for a
// caller that reads a fixed set of members into its own variables: nothing is allocated.
func MembersTo(obj gjson.Result, names []string, out []*gjson.Result) {
	readMembers(obj, names, out, nil)
}

// EchoSafe reports whether servers echo id so that it still compares equal by value: an
// integer of at most 15 digits, or a string of valid UTF-8 with no escapes and no control
// characters. Others (fractions, exponents, huge integers, escapes, invalid UTF-8) are not
// echoed faithfully by common SDKs (the Go SDK turns 1.5 into 1 and invalid UTF-8 into
// U+FFFD), so the core sends its own id upstream in their place.
func EchoSafe(id gjson.Result) bool {
	raw := id.Raw
	switch id.Type {
	case gjson.Number:
		digits := raw
		if len(digits) > 0 && digits[0] == '-' {
			digits = digits[1:]
		}
		if len(digits) == 0 || len(digits) > 15 {
			return false
		}
		for i := 0; i < len(digits); i++ {
			if digits[i] < '0' || digits[i] > '9' {
				return false
			}
		}
		return true
	case gjson.String:
		if len(raw) < 2 || !utf8.ValidString(raw) {
			return false
		}
		for i := 1; i < len(raw)-1; i++ {
			if raw[i] == '\\' || raw[i] < 0x20 {
				return false
			}
		}
		return true
	}
	return false
}

var idCounter atomic.Uint64

// MintID returns a string id of exactly n bytes of JSON (n >= 3), unique enough within one
// session: the upstream sees it in place of an id it would not echo faithfully. Keeping the
// length lets a host that already sent Content-Length (the Envoy filter) swap the body.
func MintID(n int) []byte {
	const digits = "0123456789abcdefghijklmnopqrstuvwxyz"
	out := make([]byte, n)
	out[0], out[n-1] = '"', '"'
	v := idCounter.Add(1)
	for i := n - 2; i >= 1; i-- {
		out[i] = digits[v%36]
		v /= 36
	}
	return out
}

// Splice returns msg with the bytes of v (at v.Index) replaced by raw; msg unchanged when
// v's position is not known.
func Splice[T ~string | ~[]byte](msg []byte, v gjson.Result, raw T) []byte {
	if v.Index <= 0 || v.Index+len(v.Raw) > len(msg) {
		return msg
	}
	out := make([]byte, 0, len(msg)-len(v.Raw)+len(raw))
	out = append(out, msg[:v.Index]...)
	out = append(out, raw...)
	return append(out, msg[v.Index+len(v.Raw):]...)
}

// envelopeMembers and paramsMembers are the member names the core reads; a member that
// differs from one of them only in case ("metHod", "Params", "NAME", or with a Unicode
// fold such as "paramſ") is refused: the core reads names exactly, while servers that
// decode into structs (Go's encoding/json) match them case-insensitively, so such a
// request could pass ungated as one method and run as another.
var (
	envelopeMembers = []string{"jsonrpc", "id", "method", "params"}
	paramsMembers   = []string{"name", "arguments", "_meta", "uri", "inputResponses", "requestState"}
)

// CaseVariant returns the first member of a message (or of its params) that differs from
// a member the core reads only in case, and that member's name (ReadEnvelope's Variant).
func CaseVariant(msg gjson.Result) (variant, name string) {
	e := ReadEnvelope(msg)
	return e.Variant, e.VariantOf
}

func CaseVariantText(variant, name string) string {
	if variant == "" {
		return ""
	}
	return "request member " + strconv.Quote(variant) + " differs from " + strconv.Quote(name) +
		" only in case; servers that match names case-insensitively could read it as " + strconv.Quote(name)
}

// CaseVariantIn sets *refuse when msg has a case variant of a member the core reads.
func CaseVariantIn(msg gjson.Result, refuse *string) bool {
	v, n := CaseVariant(msg)
	*refuse = CaseVariantText(v, n)
	return v != ""
}
