// Package answer edits an MCP answer in place, keeping every other byte: the duration the
// gateway reports on a tools/call answer, and the listChanged capability it declares on an
// initialize answer.
package answer

import (
	"bytes"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"github.com/stategate/stategate/abi"
	"github.com/stategate/stategate/exchange/jsonrpc"
	"github.com/stategate/stategate/plugin/jsonx"
	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
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
//     the splice leaves to sjson: _meta (or data) present but not an object.
func WithDuration(msg []byte, start time.Time) []byte {
	return withDurationMs(msg, float64(time.Since(start).Microseconds())/1000)
}

func withDurationMs(msg []byte, ms float64) []byte {
	s := unsafe.String(unsafe.SliceData(msg), len(msg))
	top := jsonx.SkipWS(s, 0)
	if top >= len(s) || s[top] != '{' {
		return msg // neither a result nor an error object
	}
	obj, name, path := memberAt(s, top, "result"), "_meta", durationPath
	if obj < 0 || s[obj] != '{' {
		obj = memberAt(s, top, "error")
		if obj < 0 || s[obj] != '{' {
			return msg
		}
		if d := memberAt(s, obj, "data"); d >= 0 && s[d] != '{' {
			return msg
		}
		name, path = "data", errorDurationPath
	}
	at := memberAt(s, obj, name)
	switch {
	case at < 0: // no _meta (data) yet: the member holding the duration goes last in obj
		end := objectEnd(s, obj)
		out := openMember(msg, s, obj, end, len(name)+len(abi.MetaDuration)+32)
		out = append(out, '"')
		out = append(out, name...)
		out = append(out, `":{"`...)
		out = append(out, abi.MetaDuration...)
		out = append(out, `":`...)
		out = strconv.AppendFloat(out, ms, 'f', -1, 64)
		out = append(out, '}')
		return append(out, msg[end:]...)
	case s[at] != '{': // sjson replaces a _meta that is not an object
		out, err := sjson.SetBytes(msg, path, ms)
		if err != nil {
			return msg
		}
		return out
	}
	if d := memberAt(s, at, abi.MetaDuration); d >= 0 { // replaced where it is
		e := jsonx.SkipValue(s, d)
		out := make([]byte, 0, len(msg)-(e-d)+24)
		out = append(out, msg[:d]...)
		out = strconv.AppendFloat(out, ms, 'f', -1, 64)
		return append(out, msg[e:]...)
	}
	end := objectEnd(s, at)
	out := openMember(msg, s, at, end, len(abi.MetaDuration)+28)
	out = append(out, '"')
	out = append(out, abi.MetaDuration...)
	out = append(out, `":`...)
	out = strconv.AppendFloat(out, ms, 'f', -1, 64)
	return append(out, msg[end:]...)
}

// memberAt returns the offset of the value of the first member of the object at s[obj]
// whose name reads as name (unescaped, as gjson's Get reads it), or -1.
func memberAt(s string, obj int, name string) int {
	i := jsonx.SkipWS(s, obj+1)
	for i < len(s) && s[i] == '"' {
		end := jsonx.SkipValue(s, i)
		if end-i < 2 || end > len(s) {
			return -1
		}
		k := s[i+1 : end-1]
		match := k == name || strings.IndexByte(k, '\\') >= 0 && gjson.Parse(s[i:end]).Str == name
		if i = jsonx.SkipWS(s, end); i >= len(s) || s[i] != ':' {
			return -1
		}
		if i = jsonx.SkipWS(s, i+1); i >= len(s) {
			return -1
		}
		if match {
			return i
		}
		if i = jsonx.SkipWS(s, jsonx.SkipValue(s, i)); i >= len(s) || s[i] != ',' {
			return -1
		}
		i = jsonx.SkipWS(s, i+1)
	}
	return -1
}

// objectEnd returns the offset of the closing brace of the object at s[obj].
func objectEnd(s string, obj int) int {
	return max(jsonx.SkipValue(s, obj)-1, obj+1)
}

// openMember starts a copy of msg with room for n more bytes: msg up to end (the closing
// brace of the object at s[obj]) and the comma a new last member needs after others.
func openMember(msg []byte, s string, obj, end, n int) []byte {
	out := make([]byte, 0, len(msg)+n)
	out = append(out, msg[:end]...)
	if jsonx.SkipWS(s, obj+1) < end {
		out = append(out, ',')
	}
	return out
}

var (
	durationPath      = "result._meta." + strings.ReplaceAll(abi.MetaDuration, ".", `\.`)
	errorDurationPath = "error.data." + strings.ReplaceAll(abi.MetaDuration, ".", `\.`)
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
