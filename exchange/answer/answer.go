// Package answer edits an MCP answer in place, keeping every other byte: the duration the
// gateway reports on a tools/call answer, and the listChanged capability it declares on an
// initialize answer. It also reads what a lenient client could take for the answer to a
// request in a message the exchange cannot read (unreadable.go).
package answer

import (
	"bytes"
	"strconv"
	"time"
	"unsafe"

	"github.com/stategate/stategate/abi"
	"github.com/stategate/stategate/exchange/jsonrpc"
	"github.com/stategate/stategate/plugin/jsonx"
	"github.com/tidwall/gjson"
)

// WithDuration sets result._meta["dev.stategate/durationMs"] on a JSON-RPC response to a
// tools/call, or error.data["dev.stategate/durationMs"] on an error answer whose data is
// absent or an object (other data is the server's and stays as it is).
//
// # Notes
//
//   - msg is valid JSON (an answer the core validated or wrote). The bytes are sjson's
//     (SetBytes on that path, which the tests hold it to): a new member goes last in its
//     object, an existing one has its value replaced; but the member is spliced in where
//     one walk over msg found it, with no path parsing and one allocation. The rare shape
//     the splice leaves to Set: _meta (or data) present but not an object.
func WithDuration(msg []byte, start time.Time) []byte {
	return withDurationMs(msg, float64(time.Since(start).Microseconds())/1000)
}

func withDurationMs(msg []byte, ms float64) []byte {
	s := unsafe.String(unsafe.SliceData(msg), len(msg))
	top := jsonx.SkipWS(s, 0)
	obj, name, member, path := memberAt(s, top, "result"), "_meta", metaMember, durationPath
	if obj < 0 || s[obj] != '{' {
		obj = memberAt(s, top, "error")
		if obj < 0 || s[obj] != '{' {
			return msg // neither a result nor an error object
		}
		if d := memberAt(s, obj, "data"); d >= 0 && s[d] != '{' {
			return msg
		}
		name, member, path = "data", dataMember, errorDurationPath
	}
	// One walk over obj's members finds the member or, when it is absent, obj's end.
	at, _, end := jsonrpc.MemberAtEnd(s, obj, name)
	switch {
	case at < 0: // no _meta (data) yet: the member holding the duration goes last in obj
		return spliceDuration(msg, s, obj, closing(s, obj, end), -1, member, ms)
	case s[at] != '{': // Set (as sjson) replaces a _meta that is not an object
		out, _ := Set(msg, strconv.AppendFloat(nil, ms, 'f', -1, 64), path...)
		return out
	}
	d, dend, end := jsonrpc.MemberAtEnd(s, at, abi.MetaDuration)
	if d >= 0 { // replaced where it is
		return spliceDuration(msg, s, at, d, dend, "", ms)
	}
	return spliceDuration(msg, s, at, closing(s, at, end), -1, durationMember, ms)
}

// closing is end (the closing brace of the object at s[obj] as MemberAtEnd found it), or
// objectEnd where it found none.
func closing(s string, obj, end int) int {
	if end < 0 {
		return objectEnd(s, obj)
	}
	return end
}

// The members WithDuration adds: its own, and the _meta or data object holding it.
var (
	durationMember = `"` + abi.MetaDuration + `":`
	metaMember     = `"_meta":{` + durationMember
	dataMember     = `"data":{` + durationMember
)

// spliceDuration returns msg with ms in place of msg[at:end] (a value replaced), or, for
// end -1, inserted at at (the closing brace of the object at s[obj]) after member (a new
// last member of obj: a comma after others, a brace closing what member opened).
func spliceDuration(msg []byte, s string, obj, at, end int, member string, ms float64) []byte {
	out := make([]byte, 0, len(msg)+len(member)+26)
	out = append(out, msg[:at]...)
	if end < 0 {
		end = at
		if jsonx.SkipWS(s, obj+1) < at {
			out = append(out, ',')
		}
		out = append(out, member...)
	}
	out = strconv.AppendFloat(out, ms, 'f', -1, 64)
	if member != "" && member != durationMember {
		out = append(out, '}')
	}
	return append(out, msg[end:]...)
}

// memberAt returns the offset of the value of the first member of the object at s[obj]
// whose name reads as name (unescaped, as gjson's Get reads it), or -1.
func memberAt(s string, obj int, name string) int {
	at, _ := jsonrpc.MemberAt(s, obj, name)
	return at
}

// objectEnd returns the offset of the closing brace of the object at s[obj].
func objectEnd(s string, obj int) int {
	return max(jsonx.SkipValue(s, obj)-1, obj+1)
}

var (
	durationPath      = []string{"result", "_meta", abi.MetaDuration}
	errorDurationPath = []string{"error", "data", abi.MetaDuration}
)

// WithListChanged returns an initialize answer whose result declares
// capabilities.tools.listChanged: true, editing only that member and keeping every other
// byte. ok is false when there is nothing to change (already true) or no result object.
func WithListChanged(msg []byte) (out []byte, ok bool) {
	if !gjson.GetBytes(msg, "result").IsObject() {
		return nil, false
	}
	if lc := gjson.GetBytes(msg, "result.capabilities.tools.listChanged"); lc.Exists() {
		if lc.Type == gjson.True {
			return nil, false
		}
		return jsonrpc.Splice(msg, lc, []byte("true")), true
	}
	if tools := gjson.GetBytes(msg, "result.capabilities.tools"); tools.Exists() {
		if !tools.IsObject() {
			return jsonrpc.Splice(msg, tools, []byte(`{"listChanged":true}`)), true
		}
		return insertMember(msg, tools, `"listChanged":true`)
	}
	if caps := gjson.GetBytes(msg, "result.capabilities"); caps.Exists() {
		if !caps.IsObject() {
			return jsonrpc.Splice(msg, caps, []byte(`{"tools":{"listChanged":true}}`)), true
		}
		return insertMember(msg, caps, `"tools":{"listChanged":true}`)
	}
	return insertMember(msg, gjson.GetBytes(msg, "result"), `"capabilities":{"tools":{"listChanged":true}}`)
}

// insertMember inserts member as the first member of the object obj.
func insertMember(msg []byte, obj gjson.Result, member string) ([]byte, bool) {
	if obj.Index <= 0 || obj.Index+len(obj.Raw) > len(msg) || len(obj.Raw) < 2 {
		return nil, false
	}
	at := obj.Index + 1
	empty := len(bytes.TrimSpace([]byte(obj.Raw[1:len(obj.Raw)-1]))) == 0
	out := make([]byte, 0, len(msg)+len(member)+1)
	out = append(out, msg[:at]...)
	out = append(out, member...)
	if !empty {
		out = append(out, ',')
	}
	return append(out, msg[at:]...), true
}
