package filter

import (
	"bytes"

	"github.com/tidwall/gjson"
)

// withListChanged returns an initialize response whose result declares
// capabilities.tools.listChanged: true, editing only that member and keeping every other
// byte. ok is false when there is nothing to change (already true) or no result object.
func withListChanged(msg []byte) (out []byte, ok bool) {
	if !gjson.GetBytes(msg, "result").IsObject() {
		return nil, false
	}
	if lc := gjson.GetBytes(msg, "result.capabilities.tools.listChanged"); lc.Exists() {
		if lc.Type == gjson.True {
			return nil, false
		}
		return splice(msg, lc, "true")
	}
	if tools := gjson.GetBytes(msg, "result.capabilities.tools"); tools.Exists() {
		if !tools.IsObject() {
			return splice(msg, tools, `{"listChanged":true}`)
		}
		return insertMember(msg, tools, `"listChanged":true`)
	}
	if caps := gjson.GetBytes(msg, "result.capabilities"); caps.Exists() {
		if !caps.IsObject() {
			return splice(msg, caps, `{"tools":{"listChanged":true}}`)
		}
		return insertMember(msg, caps, `"tools":{"listChanged":true}`)
	}
	return insertMember(msg, gjson.GetBytes(msg, "result"), `"capabilities":{"tools":{"listChanged":true}}`)
}

// splice replaces the bytes of v (found at v.Index in msg) with raw.
func splice(msg []byte, v gjson.Result, raw string) ([]byte, bool) {
	if v.Index <= 0 || v.Index+len(v.Raw) > len(msg) {
		return nil, false
	}
	out := make([]byte, 0, len(msg)+len(raw))
	out = append(out, msg[:v.Index]...)
	out = append(out, raw...)
	return append(out, msg[v.Index+len(v.Raw):]...), true
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
