package store

import (
	"context"
	"errors"
	"time"

	"github.com/stategate/stategate/exchange"
)

// The exchange core's state contract (exchange.State) over a store: the one contract every
// host of the core keeps its state by. Each store answers it with what it can do in one
// step, decided by the store itself (Stater), never probed per call.

// Stater is a store that answers the exchange core's state contract itself, with more than
// the floor (Redis: a read of several keys, a lease with its read and a write that releases
// the lease, each in one round trip).
type Stater interface {
	State() exchange.State
}

// StateOf returns s as the exchange core's State: its own (Stater) when it has one, else
// the floor over Get, CompareAndSwap, Lock and Forget (Memory, Bolt, and any wrapper).
func StateOf(s Store) exchange.State {
	if v, ok := s.(Stater); ok {
		return v.State()
	}
	return floorState{s}
}

// floorState is exchange.State over any Store: a read per key, a compare-and-set per
// write, a lease then a read.
type floorState struct{ s Store }

// Capabilities implements exchange.State: nothing beyond the floor.
func (f floorState) Capabilities() exchange.Capabilities { return exchange.Capabilities{} }

// Load implements exchange.State (near reads as a plain read: no near cache).
func (f floorState) Load(ctx context.Context, keys []string, _ bool) ([]exchange.Slot, error) {
	out := make([]exchange.Slot, len(keys))
	for i, k := range keys {
		v, err := f.s.Get(ctx, k)
		if err != nil {
			return nil, err
		}
		out[i] = exchange.Slot{Value: v, Exists: v != nil}
	}
	return out, nil
}

// Store implements exchange.State: a compare-and-set on the bytes read (the lease is left
// to its Release).
func (f floorState) Store(ctx context.Context, owner, key string, value []byte, prev exchange.Slot, _ exchange.Lease) error {
	return swapped(f.s.CompareAndSwap(ctx, owner, key, prevValue(prev), value))
}

// Lock implements exchange.State: the store's lease, then (load) a read of the keys.
func (f floorState) Lock(ctx context.Context, keys []string, ttl time.Duration, load bool) (exchange.Lease, []exchange.Slot, error) {
	release, err := f.s.Lock(ctx, keys, ttl)
	if err != nil {
		return nil, nil, busy(err)
	}
	if !load {
		return exchange.LeaseFunc(release), nil, nil
	}
	slots, err := f.Load(ctx, keys, false)
	if err != nil {
		release()
		return nil, nil, err
	}
	return exchange.LeaseFunc(release), slots, nil
}

// Forget implements exchange.State: the store keeps its own index of a session's keys.
func (f floorState) Forget(ctx context.Context, session string, _ []string) error {
	return f.s.Forget(ctx, session)
}

// prevValue is what a compare-and-set expects under the key: nil for absent.
func prevValue(prev exchange.Slot) []byte {
	if !prev.Exists {
		return nil
	}
	return prev.Value
}

// swapped turns a compare-and-set's answer into the contract's: ErrConflict when it lost.
func swapped(ok bool, err error) error {
	if err != nil {
		return err
	}
	if !ok {
		return exchange.ErrConflict
	}
	return nil
}

// busy marks a wait that another holder's lease ended as the contract's ErrBusy
// (retryable); a store that stalls or fails stays a state fault.
func busy(err error) error {
	if errors.Is(err, ErrBusy) {
		return errors.Join(exchange.ErrBusy, err)
	}
	return err
}

// slotsOf turns values read (nil: absent) into slots.
func slotsOf(values [][]byte) []exchange.Slot {
	out := make([]exchange.Slot, len(values))
	for i, v := range values {
		out[i] = exchange.Slot{Value: v, Exists: v != nil}
	}
	return out
}
