//go:build wasip1

package main

import (
	"errors"

	"github.com/extism/go-pdk"
	"github.com/stategate/stategate/exchange/kvstate"
	"github.com/stategate/stategate/plugin/jsonx"
	"github.com/tidwall/gjson"
)

// The host's store: two Extism host functions, each taking and returning one memory offset
// holding UTF-8 JSON (abi/ABI.md, "The exchange exports"). Leases are kvstate's.

//go:wasmimport extism:host/user state_get
func stateGetImport(offset uint64) uint64

//go:wasmimport extism:host/user state_cas
func stateCASImport(offset uint64) uint64

func hostCall(cas bool, in []byte) gjson.Result {
	mem := pdk.AllocateBytes(in)
	var off uint64
	if cas {
		off = stateCASImport(mem.Offset())
	} else {
		off = stateGetImport(mem.Offset())
	}
	mem.Free()
	if off == 0 {
		return gjson.Result{}
	}
	out := pdk.FindMemory(off)
	b := out.ReadBytes()
	out.Free()
	if !gjson.ValidBytes(b) {
		return gjson.Result{}
	}
	return gjson.ParseBytes(b)
}

// hostKV is kvstate.KV over state_get and state_cas.
type hostKV struct{}

func (hostKV) Get(keys []string) ([]kvstate.Value, error) {
	in := []byte{'['}
	for i, k := range keys {
		if i > 0 {
			in = append(in, ',')
		}
		in = jsonx.AppendString(in, k)
	}
	r := hostCall(false, append(in, ']'))
	if !r.IsArray() {
		return nil, hostError("state_get", r)
	}
	var out []kvstate.Value
	ok := true
	r.ForEach(func(_, v gjson.Result) bool {
		switch v.Type {
		case gjson.Null:
			out = append(out, kvstate.Value{})
		case gjson.String:
			out = append(out, kvstate.Value{B: []byte(v.Str), Ok: true})
		default:
			ok = false
		}
		return ok
	})
	if !ok {
		return nil, errors.New("state_get: a value is neither a string nor null")
	}
	return out, nil
}

func (hostKV) CAS(owner, key string, prev, next kvstate.Value) (bool, error) {
	in := append([]byte(`{"key":`), jsonx.AppendString(nil, key)...)
	in = append(in, `,"prev":`...)
	in = appendValue(in, prev)
	in = append(in, `,"next":`...)
	in = appendValue(in, next)
	in = append(in, `,"owner":`...)
	in = jsonx.AppendString(in, owner)
	r := hostCall(true, append(in, '}'))
	switch r.Type {
	case gjson.True:
		return true, nil
	case gjson.False:
		return false, nil
	}
	return false, hostError("state_cas", r)
}

func appendValue(dst []byte, v kvstate.Value) []byte {
	if !v.Ok {
		return append(dst, "null"...)
	}
	return jsonx.AppendString(dst, string(v.B))
}

func hostError(fn string, r gjson.Result) error {
	if e := r.Get("error"); e.Exists() {
		return errors.New(fn + ": " + e.String())
	}
	return errors.New(fn + ": the host's answer is not what the ABI says")
}
