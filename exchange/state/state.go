// Package state is the one state contract of every host of the exchange (State): where a
// host keeps the engine's snapshots, with compare-and-set writes and leases, and Replace,
// the core's protocol for replacing one value. The exchange names its types as its own
// (exchange.State, exchange.Slot, ...).
package state

import (
	"context"
	"errors"
	"time"
)

// State is where a host keeps the engine's snapshots: a store for the gateway, Envoy shared
// data for the filter, any key-value map with compare-and-set for a host of the module.
// Keys and values are the engine's; the host only keeps bytes. It is the one state
// contract of every host: what a store can do beyond its floor is declared once, by
// Capabilities, which the core reads when it is made (exchange.New), never probed per call.
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

// Unleased is S read and written one key at a time, never leased, owned by no session: the
// response cache's shared generations and index (exchange/cache's Shared). A write
// compares with the Slot its read gave (token).
type Unleased struct{ S State }

func (s Unleased) Read(ctx context.Context, key string) ([]byte, any, error) {
	slots, err := s.S.Load(ctx, []string{key}, false)
	if err != nil {
		return nil, nil, err
	}
	return slots[0].Value, slots[0], nil
}

func (s Unleased) Write(ctx context.Context, key string, value []byte, token any) (bool, error) {
	prev, _ := token.(Slot)
	switch err := s.S.Store(ctx, "", key, value, prev, nil); {
	case errors.Is(err, ErrConflict):
		return false, nil
	case err != nil:
		return false, err
	}
	return true, nil
}
