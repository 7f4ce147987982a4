// Package driver runs the engine's exports for the exchange on the host's state: the
// needState loop (an export that asks for state keys gets them loaded, or leased and read,
// and is called once more), and the states a call loaded (Loaded), handed to every later
// export of the same call.
package driver

import (
	"context"
	"errors"
	"unsafe"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/stategate/stategate/abi"
	"github.com/stategate/stategate/exchange/jsonrpc"
	"github.com/stategate/stategate/exchange/state"
	"github.com/stategate/stategate/plugin/jsonx"
	"github.com/tidwall/gjson"
)

// Plugin runs one engine export (the exchange's Plugin).
type Plugin interface {
	Call(ctx context.Context, fn abi.Function, in []byte) ([]byte, error)
}

// Engine is the engine as the exchange calls it: its exports, on the host's state.
type Engine struct {
	Plugin Plugin
	State  state.State
	// Retries bounds StoreAll's rounds of compare-and-set conflicts; Conflict (nil: none)
	// is told of each.
	Retries  int
	Conflict func()
}

// Loaded is what was read for one call: the engine's keys, in its order, and their slots.
type Loaded struct {
	Keys  []string
	Slots []state.Slot
}

// Slot is key as read (an absent slot when key was not).
func (l *Loaded) Slot(key string) state.Slot {
	for i, k := range l.Keys {
		if k == key {
			return l.Slots[i]
		}
	}
	return state.Slot{}
}

// AppendStates appends ,"states":{key: snapshot|null, ...}. A stored value that is not JSON
// (it never is, unless something else wrote the key) goes as a JSON string, which the
// engine reads as "not a snapshot" and restarts (STATE_RESET).
func (l *Loaded) AppendStates(dst []byte) []byte {
	dst = append(dst, `,"states":{`...)
	for i, k := range l.Keys {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = jsonx.AppendString(dst, k)
		dst = append(dst, ':')
		v := l.Slots[i].Value
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

// ParseOwned is gjson.ParseBytes without the copy of b: the results read b itself, so b
// must not change while they are used (engine answers: fresh, and never written to).
func ParseOwned(b []byte) gjson.Result {
	return gjson.Parse(unsafe.String(unsafe.SliceData(b), len(b)))
}

// StatesSize is about what AppendStates appends (nil: nothing).
func (l *Loaded) StatesSize() int {
	if l == nil || len(l.Keys) == 0 {
		return 0
	}
	n := 16
	for i, k := range l.Keys {
		n += len(k) + len(l.Slots[i].Value) + 8
	}
	return n
}

// StoreError marks a failure of the host's state.
type StoreError struct{ Err error }

func (e StoreError) Error() string { return "state: " + e.Err.Error() }
func (e StoreError) Unwrap() error { return e.Err }

// PluginError is an engine export's error answer.
type PluginError struct{ Code, Message string }

func (e *PluginError) Error() string { return "plugin: " + e.Code + ": " + e.Message }

// CausedByRequest reports whether the engine refused its input because of what the client
// sent (the exchange builds every other part of the input itself).
func (e *PluginError) CausedByRequest() bool {
	return e.Code == abi.ErrInvalidInput || e.Code == abi.ErrInvalidJSON || e.Code == abi.ErrTooDeep
}

// AnswerError is err, or the error member of out as a PluginError (nil for none).
func AnswerError(out []byte, err error) error {
	if err != nil {
		return err
	}
	if e := gjson.GetBytes(out, "error"); e.Exists() {
		return &PluginError{Code: e.Get("code").Str, Message: e.Get("message").Str}
	}
	return nil
}

// Call runs fn on input (an object without its closing brace) with st's states, if any.
func (c Engine) Call(ctx context.Context, fn abi.Function, input []byte, st *Loaded) ([]byte, error) {
	out, err := c.Run(ctx, fn, input, st)
	return out, AnswerError(out, err)
}

// Run is Call without the look at the answer's error member.
func (c Engine) Run(ctx context.Context, fn abi.Function, input []byte, st *Loaded) ([]byte, error) {
	in := input[:len(input):len(input)]
	if st != nil && len(st.Keys) > 0 {
		// One buffer for the input and the states: growing it twice would copy both.
		in = st.AppendStates(append(make([]byte, 0, len(input)+st.StatesSize()+1), input...))
	}
	in = append(in, '}')
	return c.Plugin.Call(ctx, fn, in)
}

// CallOwned is call for an input the caller hands over (the states and the closing brace
// are appended to it in place, not to a copy), that also returns the answer's members
// named, read in the same pass as its error member: for answers as large as a decorated
// list of a thousand tools, each pass counts.
func (c Engine) CallOwned(ctx context.Context, fn abi.Function, input []byte, st *Loaded, names ...string) ([]byte, []gjson.Result, error) {
	in := input
	if st != nil && len(st.Keys) > 0 {
		in = st.AppendStates(in)
	}
	in = append(in, '}')
	out, err := c.Plugin.Call(ctx, fn, in)
	if err != nil {
		return out, nil, err
	}
	m := jsonrpc.Members(ParseOwned(out), append(names[:len(names):len(names)], "error")...)
	if e := m[len(names)]; e.Exists() {
		return out, nil, &PluginError{Code: e.Get("code").Str, Message: e.Get("message").Str}
	}
	return out, m[:len(names)], nil
}

// CallWithState runs fn on input. When st is nil and the engine asks for state, it calls
// lock with the keys (when lock is set), loads them (unless lock read them: non-nil slots)
// and calls once more: at most one extra call. It returns what was loaded (empty when
// nothing was needed).
func (c Engine) CallWithState(ctx context.Context, fn abi.Function, input []byte, st *Loaded, lock func([]string) ([]state.Slot, error)) ([]byte, *Loaded, error) {
	if st != nil {
		out, err := c.Call(ctx, fn, input, st)
		return out, st, err
	}
	out, err := c.Call(ctx, fn, input, nil)
	if err != nil {
		return nil, nil, err
	}
	need := gjson.GetBytes(out, "needState")
	if !need.Exists() {
		return out, &Loaded{}, nil
	}
	if st, err = c.LoadNeeded(ctx, fn, need, lock); err != nil {
		return nil, nil, err
	}
	out, err = c.Call(ctx, fn, input, st)
	if err != nil {
		return nil, nil, err
	}
	if gjson.GetBytes(out, "needState").Exists() {
		return nil, nil, errors.New("engine asked for state it was given")
	}
	return out, st, nil
}

// CallHanded runs fn on input with st's states, if any, for an input the caller hands
// over: the states and the closing brace are appended to it in place, not to a copy (its
// bytes up to len(input) stay as they are). An answer that begins with the member lead
// (the export's own answer: the engine writes an error or a needState answer as its only
// member) is taken without a walk over it; any other is read as Call, then CallWithState
// (without a lock) read it: the same engine calls, the same answer. For an answer as large as the result it carries
// (decorate_result's message), each walk and copy counts.
func (c Engine) CallHanded(ctx context.Context, fn abi.Function, input []byte, st *Loaded, lead string) ([]byte, error) {
	in := input
	if st != nil && len(st.Keys) > 0 {
		in = st.AppendStates(in)
	}
	out, err := c.Plugin.Call(ctx, fn, append(in, '}'))
	if err == nil && Leads(out, lead) {
		return out, nil
	}
	if err = AnswerError(out, err); err != nil {
		return nil, err
	}
	need := gjson.GetBytes(out, "needState")
	if !need.Exists() {
		return out, nil
	}
	if st != nil && len(st.Keys) > 0 {
		// The states given were not the ones needed: asked anew without them, as a caller
		// of Call and then CallWithState asks.
		return c.CallHanded(ctx, fn, input, nil, lead)
	}
	if st, err = c.LoadNeeded(ctx, fn, need, nil); err != nil {
		return nil, err
	}
	if out, err = c.Call(ctx, fn, input, st); err != nil {
		return nil, err
	}
	if gjson.GetBytes(out, "needState").Exists() {
		return nil, errors.New("engine asked for state it was given")
	}
	return out, nil
}

// Leads reports whether out (an engine answer) begins with the member name.
func Leads(out []byte, name string) bool {
	return len(out) > len(name)+3 && out[0] == '{' && out[1] == '"' && string(out[2:2+len(name)]) == name && out[2+len(name)] == '"'
}

// LoadNeeded reads the state keys an engine answer asked for (its needState): leased
// and read by lock when it is set and reads them, else loaded.
func (c Engine) LoadNeeded(ctx context.Context, fn abi.Function, need gjson.Result, lock func([]string) ([]state.Slot, error)) (*Loaded, error) {
	keys := Strings(need)
	var slots []state.Slot
	var err error
	if lock != nil {
		if slots, err = lock(keys); err != nil {
			return nil, err
		}
	}
	if slots == nil {
		// near: the admission of a call that moves nothing
		if slots, err = c.State.Load(ctx, keys, lock == nil && fn == abi.FuncCheckLimits); err != nil {
			return nil, StoreError{err}
		}
	}
	return &Loaded{Keys: keys, Slots: slots}, nil
}

// Strings is the strings of a JSON array.
func Strings(arr gjson.Result) []string {
	var out []string
	arr.ForEach(func(_, v gjson.Result) bool {
		out = append(out, v.Str)
		return true
	})
	return out
}

// HasHealthRecord reports whether a tool health record was loaded and exists.
func (l *Loaded) HasHealthRecord() bool {
	if l == nil {
		return false
	}
	for i, k := range l.Keys {
		if abi.IsHealthKey(k) && k != abi.HealthIndexKey && l.Slots[i].Exists {
			return true
		}
	}
	return false
}

// With returns a copy of l with keys' slots replaced.
func (l *Loaded) With(keys []string, slots []state.Slot) *Loaded {
	out := &Loaded{Keys: l.Keys, Slots: append([]state.Slot(nil), l.Slots...)}
	for i, k := range keys {
		for j, have := range out.Keys {
			if have == k {
				out.Slots[j] = slots[i]
			}
		}
	}
	return out
}

// Has reports whether key was read.
func (l *Loaded) Has(key string) bool {
	for _, k := range l.Keys {
		if k == key {
			return true
		}
	}
	return false
}

// StoreAll writes the engine's states with compare-and-set, re-reading a lost key and
// calling fn again on the fresh state (keys already written keep theirs), until every
// key is written or Retries run out (each lost round told to Conflict). It returns the last answer and whether every
// write committed.
func (c Engine) StoreAll(ctx context.Context, fn abi.Function, in []byte, st *Loaded, out []byte) ([]byte, bool, error) {
	written := map[string]bool{}
	for attempt := 0; attempt < c.Retries; attempt++ {
		var lost []string
		var err error
		gjson.GetBytes(out, "states").ForEach(func(k, v gjson.Result) bool {
			if written[k.Str] {
				return true
			}
			switch e := c.State.Store(ctx, "", k.Str, []byte(v.Raw), st.Slot(k.Str), nil); {
			case e == nil:
				written[k.Str] = true
			case errors.Is(e, state.ErrConflict):
				lost = append(lost, k.Str)
			default:
				err = e
			}
			return err == nil
		})
		if err != nil {
			return out, false, StoreError{Err: err}
		}
		if len(lost) == 0 {
			return out, true, nil
		}
		if c.Conflict != nil {
			c.Conflict()
		}
		fresh, err := c.State.Load(ctx, lost, false)
		if err != nil {
			return out, false, StoreError{Err: err}
		}
		st = st.With(lost, fresh)
		if out, err = c.Call(ctx, fn, in, st); err != nil {
			return nil, false, err
		}
	}
	return out, false, errors.New("too many compare-and-set conflicts")
}

// KeyMemo remembers the state keys check_limits asked for per tool name, for tools whose
// keys depend on the name alone (unbound tools with health); bounded, dropped whole when
// full.
type KeyMemo struct{ lru *lru.Cache[string, []string] }

// NewKeyMemo returns a memo of at most max names.
func NewKeyMemo(max int) *KeyMemo {
	c, _ := lru.New[string, []string](max) // max > 0: never an error
	return &KeyMemo{c}
}

// Get returns the keys remembered under key (nil: none).
func (k *KeyMemo) Get(key string) []string {
	keys, _ := k.lru.Get(key)
	return keys
}

// Put remembers keys under key; nil forgets it.
func (k *KeyMemo) Put(key string, keys []string) {
	if keys == nil {
		k.lru.Remove(key)
		return
	}
	k.lru.Add(key, keys)
}

// Len is how many names the memo holds.
func (k *KeyMemo) Len() int { return k.lru.Len() }
