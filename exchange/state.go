package exchange

import (
	"context"
	"errors"
	"time"
	"unsafe"

	"github.com/stategate/stategate/abi"
	"github.com/stategate/stategate/exchange/jsonrpc"
	"github.com/stategate/stategate/exchange/state"
	"github.com/stategate/stategate/plugin/jsonx"
	"github.com/tidwall/gjson"
)

// The state contract every host keeps (exchange/state), under the names hosts know it by.
type (
	State        = state.State
	Capabilities = state.Capabilities
	Lease        = state.Lease
	LeaseFunc    = state.LeaseFunc
	Slot         = state.Slot
)

// Errors a State returns (state.ErrConflict, state.ErrBusy).
var (
	ErrConflict = state.ErrConflict
	ErrBusy     = state.ErrBusy
)

// Replace replaces the value under key by the core's state protocol (state.Replace).
func Replace(ctx context.Context, st State, owner, key string, wait time.Duration, fn func(Slot) ([]byte, error)) error {
	return state.Replace(ctx, st, owner, key, wait, fn)
}

// loaded is what was read for one call: the engine's keys, in its order, and their slots.
type loaded struct {
	keys  []string
	slots []Slot
}

func (l *loaded) slot(key string) Slot {
	for i, k := range l.keys {
		if k == key {
			return l.slots[i]
		}
	}
	return Slot{}
}

// appendStates appends ,"states":{key: snapshot|null, ...}. A stored value that is not JSON
// (it never is, unless something else wrote the key) goes as a JSON string, which the
// engine reads as "not a snapshot" and restarts (STATE_RESET).
func (l *loaded) appendStates(dst []byte) []byte {
	dst = append(dst, `,"states":{`...)
	for i, k := range l.keys {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = jsonx.AppendString(dst, k)
		dst = append(dst, ':')
		v := l.slots[i].Value
		switch {
		case len(v) == 0:
			dst = append(dst, "null"...)
		case gjson.ValidBytes(v):
			dst = append(dst, v...)
		default:
			dst = jsonx.AppendString(dst, string(v))
		}
	}
	return append(dst, '}')
}

// parseOwned is gjson.ParseBytes without the copy of b: the results read b itself, so b
// must not change while they are used (engine answers: fresh, and never written to).
func parseOwned(b []byte) gjson.Result {
	return gjson.Parse(unsafe.String(unsafe.SliceData(b), len(b)))
}

// ownedBytes is the bytes of a member read by parseOwned (or of any string), not a copy:
// they must never be written to (nil for "").
func ownedBytes(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }

// ownedString is b as a string, not a copy: b must not change while it is used.
func ownedString(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// statesSize is about what appendStates appends (nil: nothing).
func (l *loaded) statesSize() int {
	if l == nil || len(l.keys) == 0 {
		return 0
	}
	n := 16
	for i, k := range l.keys {
		n += len(k) + len(l.slots[i].Value) + 8
	}
	return n
}

// storeError marks a failure of the host's state.
type storeError struct{ err error }

func (e storeError) Error() string { return "state: " + e.err.Error() }
func (e storeError) Unwrap() error { return e.err }

// PluginError is an engine export's error answer.
type PluginError struct{ Code, Message string }

func (e *PluginError) Error() string { return "plugin: " + e.Code + ": " + e.Message }

// causedByRequest reports whether the engine refused its input because of what the client
// sent (the core builds every other part of the input itself).
func (e *PluginError) causedByRequest() bool {
	return e.Code == abi.ErrInvalidInput || e.Code == abi.ErrInvalidJSON || e.Code == abi.ErrTooDeep
}

func pluginErr(out []byte, err error) error {
	if err != nil {
		return err
	}
	if e := gjson.GetBytes(out, "error"); e.Exists() {
		return &PluginError{Code: e.Get("code").Str, Message: e.Get("message").Str}
	}
	return nil
}

// call runs fn on input (an object without its closing brace) with st's states, if any.
func (c *Core) call(ctx context.Context, fn abi.Function, input []byte, st *loaded) ([]byte, error) {
	out, err := c.run(ctx, fn, input, st)
	return out, pluginErr(out, err)
}

// run is call without the look at the answer's error member.
func (c *Core) run(ctx context.Context, fn abi.Function, input []byte, st *loaded) ([]byte, error) {
	in := input[:len(input):len(input)]
	if st != nil && len(st.keys) > 0 {
		// One buffer for the input and the states: growing it twice would copy both.
		in = st.appendStates(append(make([]byte, 0, len(input)+st.statesSize()+1), input...))
	}
	in = append(in, '}')
	return c.plugin.Call(ctx, fn, in)
}

// callOwned is call for an input the caller hands over (the states and the closing brace
// are appended to it in place, not to a copy), that also returns the answer's members
// named, read in the same pass as its error member: for answers as large as a decorated
// list of a thousand tools, each pass counts.
func (c *Core) callOwned(ctx context.Context, fn abi.Function, input []byte, st *loaded, names ...string) ([]byte, []gjson.Result, error) {
	in := input
	if st != nil && len(st.keys) > 0 {
		in = st.appendStates(in)
	}
	in = append(in, '}')
	out, err := c.plugin.Call(ctx, fn, in)
	if err != nil {
		return out, nil, err
	}
	m := jsonrpc.Members(parseOwned(out), append(names[:len(names):len(names)], "error")...)
	if e := m[len(names)]; e.Exists() {
		return out, nil, &PluginError{Code: e.Get("code").Str, Message: e.Get("message").Str}
	}
	return out, m[:len(names)], nil
}

// callWithState runs fn on input. When st is nil and the engine asks for state, it calls
// lock with the keys (when lock is set), loads them (unless lock read them: non-nil slots)
// and calls once more: at most one extra call. It returns what was loaded (empty when
// nothing was needed).
func (c *Core) callWithState(ctx context.Context, fn abi.Function, input []byte, st *loaded, lock func([]string) ([]Slot, error)) ([]byte, *loaded, error) {
	if st != nil {
		out, err := c.call(ctx, fn, input, st)
		return out, st, err
	}
	out, err := c.call(ctx, fn, input, nil)
	if err != nil {
		return nil, nil, err
	}
	need := gjson.GetBytes(out, "needState")
	if !need.Exists() {
		return out, &loaded{}, nil
	}
	if st, err = c.loadNeeded(ctx, fn, need, lock); err != nil {
		return nil, nil, err
	}
	out, err = c.call(ctx, fn, input, st)
	if err != nil {
		return nil, nil, err
	}
	if gjson.GetBytes(out, "needState").Exists() {
		return nil, nil, errors.New("engine asked for state it was given")
	}
	return out, st, nil
}

// loadNeeded reads the state keys an engine answer asked for (its needState): leased
// and read by lock when it is set and reads them, else loaded.
func (c *Core) loadNeeded(ctx context.Context, fn abi.Function, need gjson.Result, lock func([]string) ([]Slot, error)) (*loaded, error) {
	keys := strs(need)
	var slots []Slot
	var err error
	if lock != nil {
		if slots, err = lock(keys); err != nil {
			return nil, err
		}
	}
	if slots == nil {
		// near: the admission of a call that moves nothing
		if slots, err = c.state.Load(ctx, keys, lock == nil && fn == abi.FuncCheckLimits); err != nil {
			return nil, storeError{err}
		}
	}
	return &loaded{keys: keys, slots: slots}, nil
}

func strs(arr gjson.Result) []string {
	var out []string
	arr.ForEach(func(_, v gjson.Result) bool {
		out = append(out, v.Str)
		return true
	})
	return out
}
