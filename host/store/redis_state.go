package store

import (
	"context"
	"time"

	"github.com/stategate/stategate/abi"
	"github.com/stategate/stategate/exchange"
)

// State implements Stater: the exchange core's state contract in the fewest round trips
// Redis allows (one for several keys, one for a lease with its read, and the last write of
// a transition releasing the call's lease in its compare-and-set).
func (r *Redis) State() exchange.State { return redisState{r} }

type redisState struct{ r *Redis }

// Capabilities implements exchange.State: writes release leases.
func (s redisState) Capabilities() exchange.Capabilities {
	return exchange.Capabilities{ReleasingWrites: true}
}

// Load implements exchange.State: with near, workflow snapshots from the near cache (a
// read naming any other key, such as tool health's compare-and-set counters, goes to
// Redis); several keys in one round trip.
func (s redisState) Load(ctx context.Context, keys []string, near bool) ([]exchange.Slot, error) {
	var values [][]byte
	var err error
	switch {
	case len(keys) == 0:
		return nil, nil
	case near && allWorkflowKeys(keys):
		values, err = s.r.GetNear(ctx, keys)
	case len(keys) == 1:
		var v []byte
		v, err = s.r.Get(ctx, keys[0])
		values = [][]byte{v}
	default:
		values, err = s.r.GetMany(ctx, keys)
	}
	if err != nil {
		return nil, err
	}
	return slotsOf(values), nil
}

func allWorkflowKeys(keys []string) bool {
	for _, k := range keys {
		if !abi.IsWorkflowKey(k) {
			return false
		}
	}
	return true
}

// Store implements exchange.State: given the call's lease, one compare-and-set that also
// releases it.
func (s redisState) Store(ctx context.Context, owner, key string, value []byte, prev exchange.Slot, lease exchange.Lease) error {
	if l, ok := lease.(*Lease); ok && l != nil {
		return swapped(s.r.CompareAndSwapReleasing(ctx, owner, key, prevValue(prev), value, l))
	}
	return swapped(s.r.CompareAndSwap(ctx, owner, key, prevValue(prev), value))
}

// Lock implements exchange.State: the leases, with their read (load) in the same scripts.
func (s redisState) Lock(ctx context.Context, keys []string, ttl time.Duration, load bool) (exchange.Lease, []exchange.Slot, error) {
	lease, values, err := s.r.LockLease(ctx, keys, ttl, load)
	if err != nil {
		return nil, nil, busy(err)
	}
	if !load {
		return lease, nil, nil
	}
	return lease, slotsOf(values), nil
}

// Forget implements exchange.State.
func (s redisState) Forget(ctx context.Context, session string, _ []string) error {
	return s.r.Forget(ctx, session)
}
