package jsonrpc

import (
	"strings"

	"github.com/stategate/stategate/plugin/jsonx"
	"github.com/tidwall/gjson"
)

// Envelope is what the core reads of a JSON-RPC request: its members, its params' and the
// protocol version in params._meta, each as gjson's Get finds it (the first of repeated
// members, Index into the document), and the first case variant of a member it reads
// (CaseVariant). ReadEnvelope finds them all in one pass over each object, where a Get per
// member is a pass each over the members before it (and over all of them, and every large
// argument, for one that is absent).
type Envelope struct {
	Method, ID, Params gjson.Result
	Call               Params       // params' members, when params is an object
	Version            gjson.Result // params._meta["io.modelcontextprotocol/protocolVersion"]
	Variant, VariantOf string       // a member differing from VariantOf only in case ("" for none)
}

// Params are the members of a tools/call's params the core reads. InputResponses and
// RequestState are a multi round-trip retry's (2026-07-28, SEP-2322): the client's answers
// to the server's inputRequests and the server's opaque state, echoed. URI is a
// resources/read request's target.
type Params struct{ Name, Arguments, Task, InputResponses, RequestState, URI gjson.Result }

// Retry reports whether the params carry a multi round-trip retry's inputResponses or
// requestState: the answer to such a request must never be cached, nor one served to it.
func (p Params) Retry() bool { return p.InputResponses.Exists() || p.RequestState.Exists() }

// versionMember is the member of params._meta holding the protocol version.
const versionMember = "io.modelcontextprotocol/protocolVersion"

// ReadEnvelope reads msg, a valid JSON document (anything but an object reads as no
// members).
func ReadEnvelope(msg gjson.Result) Envelope {
	var e Envelope
	var meta gjson.Result
	e.Variant, e.VariantOf = readMembers(msg, envelopeRead, []*gjson.Result{&e.Method, &e.ID, &e.Params}, envelopeMembers)
	variant, of := readMembers(e.Params, paramsRead, []*gjson.Result{&e.Call.Name, &e.Call.Arguments, &e.Call.Task, &meta,
		&e.Call.InputResponses, &e.Call.RequestState, &e.Call.URI}, paramsMembers)
	if e.Variant == "" {
		e.Variant, e.VariantOf = variant, of
	}
	if at, end := MemberAt(meta.Raw, 0, versionMember); at >= 0 {
		e.Version = valueAt(meta, at, end)
	}
	return e
}

// The members ReadEnvelope reads, in the order of its array.
var (
	envelopeRead = []string{"method", "id", "params"}
	paramsRead   = []string{"name", "arguments", "task", "_meta", "inputResponses", "requestState", "uri"}
	// callRead are the members ReadParams reads.
	callRead = []string{"name", "arguments", "task", "inputResponses", "requestState"}
)

// ReadParams reads a tools/call's params (a valid JSON document; anything but an object
// reads as no members).
func ReadParams(params gjson.Result) Params {
	var p Params
	readMembers(params, callRead, []*gjson.Result{&p.Name, &p.Arguments, &p.Task, &p.InputResponses, &p.RequestState}, nil)
	return p
}

// readMembers reads the object obj in one pass: the first member of each of names into
// *out[i], and the first member that differs from one of variants only in case (with that
// one). Anything but an object reads as no members.
func readMembers(obj gjson.Result, names []string, out []*gjson.Result, variants []string) (variant, of string) {
	if !obj.IsObject() {
		return "", ""
	}
	it := memberIter{s: obj.Raw, i: jsonx.SkipWS(obj.Raw, 1)}
	for {
		name, at, end, ok := it.next()
		if !ok {
			return variant, of
		}
		known := false
		for i, n := range names {
			if name == n {
				known = true
				if !out[i].Exists() {
					*out[i] = valueAt(obj, at, end)
				}
			}
		}
		if !known && variant == "" {
			variant, of = caseVariant(name, variants)
		}
	}
}

// caseVariant returns name and the member of names it differs from only in case, or "".
func caseVariant(name string, names []string) (string, string) {
	for _, n := range names {
		if name != n && strings.EqualFold(name, n) {
			return name, n
		}
	}
	return "", ""
}

// valueAt is the value at obj.Raw[at:end] as gjson's Get on obj returns it.
func valueAt(obj gjson.Result, at, end int) gjson.Result {
	v := gjson.Parse(obj.Raw[at:end])
	v.Index = obj.Index + at
	return v
}

// MemberAt returns the span of the value of the first member of the object at s[obj]
// whose name reads as name (unescaped, as gjson's Get reads names), or -1, -1; s is a
// valid document.
func MemberAt(s string, obj int, name string) (at, end int) {
	if obj >= len(s) || s[obj] != '{' {
		return -1, -1
	}
	it := memberIter{s: s, i: jsonx.SkipWS(s, obj+1)}
	for {
		n, at, end, ok := it.next()
		if !ok {
			return -1, -1
		}
		if n == name {
			return at, end
		}
	}
}

// memberIter walks the members of an object in a valid document: i is where the next
// member's name is (after the opening brace or a comma).
type memberIter struct {
	s string
	i int
}

// next returns the next member's name (unescaped as gjson reads it) and its value's span;
// ok is false at the end of the object (or on input that is not JSON).
func (it *memberIter) next() (name string, at, end int, ok bool) {
	s := it.s
	name, i := memberName(s, it.i)
	if i >= len(s) {
		return "", 0, 0, false
	}
	if at = jsonx.SkipWS(s, i+1); at >= len(s) {
		return "", 0, 0, false
	}
	end = jsonx.SkipValue(s, at)
	it.i = len(s) // the end, unless a comma follows
	if j := jsonx.SkipWS(s, end); j < len(s) && s[j] == ',' {
		it.i = jsonx.SkipWS(s, j+1)
	}
	return name, at, end, true
}
