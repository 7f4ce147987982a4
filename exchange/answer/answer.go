// Package answer edits an MCP answer in place, keeping every other byte: the duration the
// gateway reports on a tools/call answer, and the listChanged capability it declares on an
// initialize answer.
package answer

import (
	"bytes"
	"strings"
	"time"

	"github.com/stategate/stategate/abi"
	"github.com/stategate/stategate/exchange/jsonrpc"
	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
)

// WithDuration sets result._meta["dev.stategate/durationMs"] on a JSON-RPC response to a
// tools/call, or error.data["dev.stategate/durationMs"] on an error answer whose data is
// absent or an object (other data is the server's and stays as it is).
func WithDuration(msg []byte, start time.Time) []byte {
	path := durationPath
	if !gjson.GetBytes(msg, "result").IsObject() {
		e := gjson.GetBytes(msg, "error")
		if d := e.Get("data"); !e.IsObject() || (d.Exists() && !d.IsObject()) {
			return msg
		}
		path = errorDurationPath
	}
	ms := float64(time.Since(start).Microseconds()) / 1000
	out, err := sjson.SetBytes(msg, path, ms)
	if err != nil {
		return msg
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
