package exchange

import (
	"context"
	"errors"
	"time"
	"unsafe"

	"github.com/stategate/stategate/abi"
	"github.com/stategate/stategate/plugin/jsonx"
	"github.com/tidwall/gjson"
)

// State is where a host keeps the engine's snapshots: a store for the gateway, Envoy shared
// data for the filter. Keys and values are the engine's; the host only keeps bytes.
type State interface {
	// Load reads keys, in order. A missing key is a Slot with Exists false.
	Load(ctx context.Context, keys []string) ([]Slot, error)
	// Store writes value under key if it still holds what prev was read as; ErrConflict
	// when it does not (re-read and re-apply). owner is the session the key belongs to
	// ("" for state handles, which outlive sessions).
	Store(ctx context.Context, owner, key string, value []byte, prev Slot) error
	// Lock leases keys for at most ttl and returns the release. It waits while another
	// holder has one until ctx ends, then fails with an error wrapping ErrBusy. A host
	// without leases (Envoy shared data) returns a no-op release.
	Lock(ctx context.Context, keys []string, ttl time.Duration) (func(), error)
	// Forget frees a session's state: keys are the session-keyed keys the engine names for
	// it (a host with its own session index may use that instead).
	Forget(ctx context.Context, session string, keys []string) error
}

// LockLoader is implemented by a State that can lease keys and read them in one step (the
// gateway on Redis: one script per hash slot instead of a lease round trip and a read round
// trip). The core uses it, when there, for the keys of a call that can move a workflow.
type LockLoader interface {
	// LockLoad is Lock followed by Load of the same keys, with their errors.
	LockLoad(ctx context.Context, keys []string, ttl time.Duration) (func(), []Slot, error)
}

// LeaseWriter is implemented by a State whose compare-and-set can also release a call's
// leases, in the same step (the gateway on Redis: the compare-and-set script deletes them,
// one round trip fewer per moving call). The core uses it, when there, for the leases of a
// call that can move a workflow and for the last write of its transition.
type LeaseWriter interface {
	// LockLease is Lock, returning the lease as a value StoreReleasing takes; with load it
	// reads keys too, as LockLoader.LockLoad does (slots are nil without).
	LockLease(ctx context.Context, keys []string, ttl time.Duration, load bool) (Lease, []Slot, error)
	// StoreReleasing is Store that, when it stores value and only then, also releases what
	// it can of lease (the rest is left to lease.Release). ErrConflict releases nothing.
	// Any other error leaves both unknown: the caller holds the lease, as for any failed
	// write.
	StoreReleasing(ctx context.Context, owner, key string, value []byte, prev Slot, lease Lease) error
}

// NearLoader is implemented by a State that can read keys from a cache of its own, kept
// coherent by its store (the gateway on one Redis server: client tracking), at no round
// trip when warm. Such a read may miss a write another replica made moments ago, so the
// core uses it for one read only: the admission of a call that cannot move a workflow,
// which writes nothing and so bases no write on what it read.
type NearLoader interface {
	// LoadNear is Load, possibly from the near cache.
	LoadNear(ctx context.Context, keys []string) ([]Slot, error)
}

// Lease is the leases a LeaseWriter took for one call.
type Lease interface {
	// Release releases what is still held. It may be called more than once, and does
	// nothing once StoreReleasing released it all.
	Release()
}

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

// Bounded is implemented by a State that can create only so many keys (Envoy shared data
// has no delete): a call whose transition would need a key beyond the bound is denied at
// admission rather than run with its state lost.
type Bounded interface {
	CanCreate(n int) bool
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
	in := input[:len(input):len(input)]
	if st != nil && len(st.keys) > 0 {
		in = st.appendStates(in)
	}
	in = append(in, '}')
	out, err := c.plugin.Call(ctx, fn, in)
	return out, pluginErr(out, err)
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
	m := members(parseOwned(out), append(names[:len(names):len(names)], "error")...)
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
	keys := strs(need)
	var slots []Slot
	if lock != nil {
		if slots, err = lock(keys); err != nil {
			return nil, nil, err
		}
	}
	if slots == nil {
		if nl, ok := c.state.(NearLoader); ok && lock == nil && fn == abi.FuncCheckLimits {
			slots, err = nl.LoadNear(ctx, keys) // the admission of a call that moves nothing
		} else {
			slots, err = c.state.Load(ctx, keys)
		}
		if err != nil {
			return nil, nil, storeError{err}
		}
	}
	st = &loaded{keys: keys, slots: slots}
	out, err = c.call(ctx, fn, input, st)
	if err != nil {
		return nil, nil, err
	}
	if gjson.GetBytes(out, "needState").Exists() {
		return nil, nil, errors.New("engine asked for state it was given")
	}
	return out, st, nil
}

func strs(arr gjson.Result) []string {
	var out []string
	arr.ForEach(func(_, v gjson.Result) bool {
		out = append(out, v.Str)
		return true
	})
	return out
}
