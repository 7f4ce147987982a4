package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"

	"github.com/stategate/stategate/abi"
	"github.com/tidwall/gjson"
)

// states is what the gateway loaded for one request: key -> stored snapshot (nil when
// nothing is stored), in the engine's key order.
type states struct {
	keys []string
	vals [][]byte
}

func (s *states) appendJSON(dst []byte) []byte {
	dst = append(dst, '{')
	for i, k := range s.keys {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = strconv.AppendQuote(dst, k)
		dst = append(dst, ':')
		if s.vals[i] == nil || !json.Valid(s.vals[i]) {
			dst = append(dst, "null"...)
		} else {
			dst = append(dst, s.vals[i]...)
		}
	}
	return append(dst, '}')
}

func (s *states) get(key string) []byte {
	for i, k := range s.keys {
		if k == key {
			return s.vals[i]
		}
	}
	return nil
}

// errStore marks a failure of the state store.
type errStore struct{ err error }

func (e errStore) Error() string { return "state store: " + e.err.Error() }
func (e errStore) Unwrap() error { return e.err }

// input is the common part of an engine input, without its closing brace.
func (c *call) input(extra func([]byte) []byte) []byte {
	in := make([]byte, 0, 256)
	in = append(in, `{"session":`...)
	in = strconv.AppendQuote(in, c.session)
	in = append(in, `,"principal":`...)
	in = strconv.AppendQuote(in, c.principal)
	in = append(in, `,"protocolVersion":`...)
	in = strconv.AppendQuote(in, c.version)
	if extra != nil {
		in = extra(in)
	}
	return in
}

// callWithState runs fn on input (an object without its closing brace). When the engine
// asks for state, it loads those keys and calls once more: at most one extra call.
// known, when not nil, is passed up front and skips the first round.
func (g *Gateway) callWithState(ctx context.Context, fn abi.Function, input []byte, known *states) ([]byte, *states, error) {
	return g.callWithStateLocked(ctx, fn, input, known, nil)
}

// callWithStateLocked is callWithState that, when the engine names keys, first calls
// lock with them (and fails if it does), so the state it loads cannot move underneath.
func (g *Gateway) callWithStateLocked(ctx context.Context, fn abi.Function, input []byte, known *states, lock func([]string) error) ([]byte, *states, error) {
	if known != nil {
		out, err := g.opts.Plugin.Call(ctx, fn, closeWith(input, known))
		return out, known, pluginErr(out, err)
	}
	out, err := g.opts.Plugin.Call(ctx, fn, append(input, '}'))
	if err := pluginErr(out, err); err != nil {
		return nil, nil, err
	}
	need := gjson.GetBytes(out, "needState")
	if !need.Exists() {
		return out, &states{}, nil
	}
	if lock != nil {
		var keys []string
		need.ForEach(func(_, k gjson.Result) bool {
			keys = append(keys, k.Str)
			return true
		})
		if err := lock(keys); err != nil {
			return nil, nil, err
		}
	}
	st, err := g.load(ctx, need)
	if err != nil {
		return nil, nil, err
	}
	out, err = g.opts.Plugin.Call(ctx, fn, closeWith(input[:len(input):len(input)], st))
	if err := pluginErr(out, err); err != nil {
		return nil, nil, err
	}
	if gjson.GetBytes(out, "needState").Exists() {
		return nil, nil, errors.New("engine asked for state twice")
	}
	return out, st, nil
}

func (g *Gateway) load(ctx context.Context, need gjson.Result) (*states, error) {
	st := &states{}
	var err error
	need.ForEach(func(_, k gjson.Result) bool {
		var v []byte
		v, err = g.opts.Store.Get(ctx, k.Str)
		if err != nil {
			return false
		}
		st.keys = append(st.keys, k.Str)
		st.vals = append(st.vals, v)
		return true
	})
	if err != nil {
		return nil, errStore{err}
	}
	return st, nil
}

func closeWith(input []byte, st *states) []byte {
	in := append(input, `,"states":`...)
	in = st.appendJSON(in)
	return append(in, '}')
}

// pluginErr turns a failed call or an error answer into an error.
func pluginErr(out []byte, err error) error {
	if err != nil {
		return err
	}
	if e := gjson.GetBytes(out, "error"); e.Exists() {
		return errors.New("plugin: " + e.Get("code").Str + ": " + e.Get("message").Str)
	}
	return nil
}
