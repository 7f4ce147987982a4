//go:build wasip1

package main

import (
	"context"
	"crypto/rand"
	"errors"
	"strconv"
	"time"

	"github.com/extism/go-pdk"
	"github.com/stategate/stategate/exchange"
	"github.com/stategate/stategate/plugin/jsonx"
	"github.com/tidwall/gjson"
)

// The host's state: two Extism host functions, each taking and returning one memory
// offset holding UTF-8 JSON (abi/ABI.md, "The exchange exports").

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

// leasePrefix starts the key of a lease on a state key: its value is the holder's token
// and the lease's expiry (Unix ms), so a lease lapses without any timer.
const leasePrefix = "stategate/lease/"

// hostState is exchange.State over state_get and state_cas, with leases as keys.
type hostState struct {
	busy bool // a lease was refused since takeBusy last asked
}

func (s *hostState) takeBusy() bool {
	b := s.busy
	s.busy = false
	return b
}

func (s *hostState) Load(_ context.Context, keys []string) ([]exchange.Slot, error) {
	in := []byte{'['}
	for i, k := range keys {
		if i > 0 {
			in = append(in, ',')
		}
		in = jsonx.AppendString(in, k)
	}
	in = append(in, ']')
	r := hostCall(false, in)
	if !r.IsArray() {
		return nil, hostError("state_get", r)
	}
	vals := r.Array()
	if len(vals) != len(keys) {
		return nil, errors.New("state_get: answered " + strconv.Itoa(len(vals)) + " values for " + strconv.Itoa(len(keys)) + " keys")
	}
	out := make([]exchange.Slot, len(keys))
	for i, v := range vals {
		switch v.Type {
		case gjson.Null:
		case gjson.String:
			out[i] = exchange.Slot{Value: []byte(v.Str), Exists: true}
		default:
			return nil, errors.New("state_get: a value is neither a string nor null")
		}
	}
	return out, nil
}

// cas sets key to next (nil: delete) if it holds prev (nil: absent).
func (s *hostState) cas(owner, key string, prev, next []byte) error {
	in := append([]byte(`{"key":`), jsonx.AppendString(nil, key)...)
	in = append(in, `,"prev":`...)
	in = appendNullable(in, prev)
	in = append(in, `,"next":`...)
	in = appendNullable(in, next)
	in = append(in, `,"owner":`...)
	in = jsonx.AppendString(in, owner)
	in = append(in, '}')
	r := hostCall(true, in)
	switch r.Type {
	case gjson.True:
		return nil
	case gjson.False:
		return exchange.ErrConflict
	}
	return hostError("state_cas", r)
}

func appendNullable(dst, v []byte) []byte {
	if v == nil {
		return append(dst, "null"...)
	}
	return jsonx.AppendString(dst, string(v))
}

func hostError(fn string, r gjson.Result) error {
	if e := r.Get("error"); e.Exists() {
		return errors.New(fn + ": " + e.String())
	}
	return errors.New(fn + ": the host's answer is not what the ABI says")
}

func (s *hostState) Store(_ context.Context, owner, key string, value []byte, prev exchange.Slot) error {
	var p []byte
	if prev.Exists {
		p = prev.Value
		if p == nil {
			p = []byte{}
		}
	}
	if value == nil {
		value = []byte{}
	}
	return s.cas(owner, key, p, value)
}

func (s *hostState) Forget(ctx context.Context, session string, keys []string) error {
	slots, err := s.Load(ctx, keys)
	if err != nil {
		return err
	}
	for i, k := range keys {
		if slots[i].Exists {
			if err := s.cas(session, k, slots[i].Value, nil); err != nil && !errors.Is(err, exchange.ErrConflict) {
				return err
			}
		}
	}
	return nil
}

// Lock takes a lease on every key or none: a key leased by another holder whose lease has
// not expired makes it fail with ErrBusy at once (the flow turns that into a wait decision:
// the host waits, not the module).
func (s *hostState) Lock(ctx context.Context, keys []string, ttl time.Duration) (func(), error) {
	var lkeys []string
	seen := map[string]bool{}
	for _, k := range keys {
		if !seen[k] {
			seen[k] = true
			lkeys = append(lkeys, leasePrefix+k)
		}
	}
	slots, err := s.Load(ctx, lkeys)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	val := append([]byte(`{"token":"`), token()...)
	val = append(val, `","expires":`...)
	val = strconv.AppendInt(val, now.Add(ttl).UnixMilli(), 10)
	val = append(val, '}')
	var held []string
	release := func() {
		for _, k := range held {
			_ = s.cas("", k, val, nil) // only while it is still this lease
		}
		held = nil
	}
	for i, k := range lkeys {
		sl := slots[i]
		var prev []byte
		if sl.Exists {
			if exp := gjson.GetBytes(sl.Value, "expires"); exp.Exists() && exp.Int() > now.UnixMilli() {
				release()
				s.busy = true
				return nil, exchange.ErrBusy
			}
			prev = sl.Value
		}
		switch err := s.cas("", k, prev, val); {
		case errors.Is(err, exchange.ErrConflict):
			release()
			s.busy = true
			return nil, exchange.ErrBusy
		case err != nil:
			release()
			return nil, err
		}
		held = append(held, k)
	}
	return release, nil
}

// token returns 128 random bits as hex.
func token() []byte {
	var b [16]byte
	_, _ = rand.Read(b[:])
	const hexd = "0123456789abcdef"
	out := make([]byte, 32)
	for i, c := range b {
		out[2*i], out[2*i+1] = hexd[c>>4], hexd[c&15]
	}
	return out
}
