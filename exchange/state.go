package exchange

import (
	"context"
	"errors"
	"time"
	"unsafe"

	"github.com/stategate/stategate/abi"
	"github.com/stategate/stategate/exchange/jsonrpc"
	"github.com/stategate/stategate/plugin/jsonx"
	"github.com/tidwall/gjson"
)

// State is where a host keeps the engine's snapshots: a store for the gateway, Envoy shared
// data for the filter, any key-value map with compare-and-set for a host of the module.
// Keys and values are the engine's; the host only keeps bytes. It is the one state
// contract of every host: what a store can do beyond its floor is declared once, by
// Capabilities, which the core reads when it is made (New), never probed per call.
//
// # Notes
//
//   - The floor is a read, a compare-and-set write, a lease and a forget. A store that can
//     do more in one step (lease and read, write and release) does it inside these
//     methods; the core's calls are the same on every store.
//   - One lease's path: admission (leaseKeys) calls Lock; the transition's last write
//     passes the lease to Store; Exchange.Close releases what is left.
type State interface {
	// Capabilities declares what the store does beyond the floor. The core reads it once.
	Capabilities() Capabilities
	// Load reads keys, in order. A missing key is a Slot with Exists false. With near, the
	// read may come from a cache of the store's own kept coherent by it (Redis client
	// tracking), at no round trip when warm; a store without one reads as without near.
	// Such a read may miss a write another replica made moments ago, so the core asks for
	// it for one read only: the admission of a call that cannot move a workflow, which
	// writes nothing and so bases no write on what it read.
	Load(ctx context.Context, keys []string, near bool) ([]Slot, error)
	// Store writes value under key if it still holds what prev was read as; ErrConflict
	// when it does not (re-read and re-apply). owner is the session the key belongs to
	// ("" for state handles, which outlive sessions). lease, when not nil, is the call's
	// lease (given only when Capabilities.ReleasingWrites): the store releases what it can
	// of it in the same step, when it stores value and only then (ErrConflict releases
	// nothing; the rest is left to lease.Release). Any other error leaves both unknown:
	// the caller holds the lease, as for any failed write.
	Store(ctx context.Context, owner, key string, value []byte, prev Slot, lease Lease) error
	// Lock leases keys for at most ttl. It waits while another holder has one until ctx
	// ends, then fails with an error wrapping ErrBusy. A host without leases (Envoy shared
	// data) returns a lease that holds nothing. With load it also reads keys, in the same
	// step where the store can (the gateway on Redis: one script per hash slot), after the
	// lease where it cannot; slots are nil without load.
	Lock(ctx context.Context, keys []string, ttl time.Duration, load bool) (Lease, []Slot, error)
	// Forget frees a session's state: keys are the session-keyed keys the engine names for
	// it (a host with its own session index may use that instead).
	Forget(ctx context.Context, session string, keys []string) error
}

// Capabilities is what a State declares it does beyond the floor.
type Capabilities struct {
	// ReleasingWrites: Store releases the lease it is given in the same step (the gateway
	// on Redis: the compare-and-set script deletes it, one round trip fewer per moving
	// call). The core then writes a transition's workflow keys last and gives the last
	// write the call's lease.
	ReleasingWrites bool
	// CanCreate, when set, reports whether n more keys may be created: the store can hold
	// only so many (Envoy shared data has no delete). A call whose transition would need a
	// key beyond the bound is denied at admission rather than run with its state lost.
	CanCreate func(n int) bool
}

// Lease is the leases Lock took for one call.
type Lease interface {
	// Release releases what is still held. It may be called more than once, and does
	// nothing once a releasing Store released it all.
	Release()
}

// LeaseFunc is a release as a Lease, for stores whose writes cannot release.
type LeaseFunc func()

// Release implements Lease.
func (f LeaseFunc) Release() { f() }

// Slot is one key as read.
type Slot struct {
	Value  []byte // the stored snapshot; nil when absent
	CAS    uint32 // the host's own version token (Envoy's cas), if it has one
	Exists bool
}

// Errors a State returns.
var (
	ErrConflict = errors.New("state: compare-and-set conflict")
	ErrBusy     = errors.New("state: keys leased by another call")
)

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

// Replace replaces the value under key by the core's state protocol, as a transition stores
// a snapshot: the key is leased (waiting at most wait for a moving call that holds it) and
// read in one step, fn's value stored by compare-and-set against what was read, under the
// lease, and the lease released. fn gets what is stored (Exists false: nothing) and returns
// the new value, or an error that leaves the key unchanged (returned as it is). owner is the
// session the key belongs to ("" for a state handle's). Errors: one wrapping ErrBusy when the
// lease could not be had within wait, ErrConflict when the value changed under the lease
// (it lapsed), any other the store's. Operators' changes (POST /admin/state/reset) go
// through it, so they can never interleave with a call's transition.
func Replace(ctx context.Context, st State, owner, key string, wait time.Duration, fn func(Slot) ([]byte, error)) error {
	lctx, cancel := context.WithTimeout(ctx, wait)
	lease, slots, err := st.Lock(lctx, []string{key}, 2*wait, true)
	cancel()
	if err != nil {
		return err
	}
	defer lease.Release()
	if len(slots) != 1 {
		return errors.New("state: a lease with its read gave no value")
	}
	value, err := fn(slots[0])
	if err != nil {
		return err
	}
	var pass Lease
	if st.Capabilities().ReleasingWrites {
		pass = lease
	}
	return st.Store(ctx, owner, key, value, slots[0], pass)
}
