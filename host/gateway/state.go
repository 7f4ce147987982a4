package gateway

import (
	"context"
	"errors"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/stategate/stategate/abi"
	"github.com/stategate/stategate/exchange"
	"github.com/stategate/stategate/host/store"
)

// storeState is the exchange core's State over a store: compare-and-set on the bytes read.
type storeState struct {
	s  store.Store
	tr trace.Tracer // nil: no spans
}

// getMany is implemented by stores that read several keys in one round trip (Redis).
type getMany interface {
	GetMany(ctx context.Context, keys []string) ([][]byte, error)
}

func (st storeState) Load(ctx context.Context, keys []string) (out []exchange.Slot, err error) {
	if st.tr != nil {
		var end func(error)
		ctx, end = st.storeSpan(ctx, "load")
		defer func() { end(err) }()
	}
	out = make([]exchange.Slot, len(keys))
	if gm, ok := st.s.(getMany); ok && len(keys) > 1 {
		vs, err := gm.GetMany(ctx, keys)
		if err != nil {
			return nil, err
		}
		for i, v := range vs {
			out[i] = exchange.Slot{Value: v, Exists: v != nil}
		}
		return out, nil
	}
	for i, k := range keys {
		v, err := st.s.Get(ctx, k)
		if err != nil {
			return nil, err
		}
		out[i] = exchange.Slot{Value: v, Exists: v != nil}
	}
	return out, nil
}

// nearGetter is implemented by stores with a near cache (Redis on one server).
type nearGetter interface {
	GetNear(ctx context.Context, keys []string) ([][]byte, error)
}

// LoadNear implements exchange.NearLoader: workflow snapshots from the store's near cache
// when it has one; a read that names any other key (tool health, whose records are
// compare-and-set counters) is Load.
func (st storeState) LoadNear(ctx context.Context, keys []string) (out []exchange.Slot, err error) {
	ng, ok := st.s.(nearGetter)
	if !ok || !allWorkflowKeys(keys) {
		return st.Load(ctx, keys)
	}
	if st.tr != nil {
		var end func(error)
		ctx, end = st.storeSpan(ctx, "load_near")
		defer func() { end(err) }()
	}
	vs, err := ng.GetNear(ctx, keys)
	if err != nil {
		return nil, err
	}
	out = make([]exchange.Slot, len(keys))
	for i, v := range vs {
		out[i] = exchange.Slot{Value: v, Exists: v != nil}
	}
	return out, nil
}

// allWorkflowKeys reports whether every key is a workflow snapshot's (not tool health,
// not the principal's annotation record, not the cache's keys).
func allWorkflowKeys(keys []string) bool {
	for _, k := range keys {
		if !strings.HasPrefix(k, "stategate/v1/") || abi.IsHealthKey(k) || strings.HasPrefix(k, "stategate/v1/cache/") {
			return false
		}
	}
	return true
}

func (st storeState) Store(ctx context.Context, owner, key string, value []byte, prev exchange.Slot) (err error) {
	if st.tr != nil {
		var end func(error)
		ctx, end = st.storeSpan(ctx, "store")
		defer func() { end(err) }()
	}
	old := prev.Value
	if !prev.Exists {
		old = nil
	}
	ok, err := st.s.CompareAndSwap(ctx, owner, key, old, value)
	if err != nil {
		return err
	}
	if !ok {
		return exchange.ErrConflict
	}
	return nil
}

func (st storeState) Lock(ctx context.Context, keys []string, ttl time.Duration) (func(), error) {
	if st.tr != nil {
		var end func(error)
		ctx, end = st.storeSpan(ctx, "lock")
		release, err := st.lock(ctx, keys, ttl)
		end(err)
		return release, err
	}
	return st.lock(ctx, keys, ttl)
}

func (st storeState) lock(ctx context.Context, keys []string, ttl time.Duration) (func(), error) {
	release, err := st.s.Lock(ctx, keys, ttl)
	// Only a wait that another holder's lease ended is "busy" (retryable); a store that
	// stalls or fails is a state fault, which the core treats as such.
	if err != nil && errors.Is(err, store.ErrBusy) {
		return nil, errors.Join(exchange.ErrBusy, err)
	}
	return release, err
}

// lockLoader is implemented by stores that lease and read keys in one step (Redis).
type lockLoader interface {
	LockLoad(ctx context.Context, keys []string, ttl time.Duration) (func(), [][]byte, error)
}

// LockLoad implements exchange.LockLoader: one step on stores that can (Redis: one round
// trip per hash slot), Lock then Load on the others.
func (st storeState) LockLoad(ctx context.Context, keys []string, ttl time.Duration) (func(), []exchange.Slot, error) {
	ll, ok := st.s.(lockLoader)
	if !ok {
		release, err := st.Lock(ctx, keys, ttl)
		if err != nil {
			return nil, nil, err
		}
		slots, err := st.Load(ctx, keys)
		if err != nil {
			release()
			return nil, nil, err
		}
		return release, slots, nil
	}
	var end func(error) = func(error) {}
	if st.tr != nil {
		ctx, end = st.storeSpan(ctx, "lock_load")
	}
	release, values, err := ll.LockLoad(ctx, keys, ttl)
	end(err)
	if err != nil {
		if errors.Is(err, store.ErrBusy) {
			return nil, nil, errors.Join(exchange.ErrBusy, err)
		}
		return nil, nil, err
	}
	slots := make([]exchange.Slot, len(keys))
	for i, v := range values {
		slots[i] = exchange.Slot{Value: v, Exists: v != nil}
	}
	return release, slots, nil
}

// leaseWriter is implemented by stores whose compare-and-set can release a Lock's leases in
// the same step (Redis).
type leaseWriter interface {
	LockLease(ctx context.Context, keys []string, ttl time.Duration, load bool) (*store.Lease, [][]byte, error)
	CompareAndSwapReleasing(ctx context.Context, session, key string, old, new []byte, lease *store.Lease) (bool, error)
}

// LockLease implements exchange.LeaseWriter: the store's lease on stores that can release
// it with a write (Redis), LockLoad or Lock wrapped on the others, whose writes then
// release nothing (the core's release does, as before).
func (st storeState) LockLease(ctx context.Context, keys []string, ttl time.Duration, load bool) (exchange.Lease, []exchange.Slot, error) {
	lw, ok := st.s.(leaseWriter)
	if !ok {
		var release func()
		var slots []exchange.Slot
		var err error
		if load {
			release, slots, err = st.LockLoad(ctx, keys, ttl)
		} else {
			release, err = st.Lock(ctx, keys, ttl)
		}
		if err != nil {
			return nil, nil, err
		}
		return releaseFunc(release), slots, nil
	}
	var end func(error) = func(error) {}
	if st.tr != nil {
		ctx, end = st.storeSpan(ctx, "lock_lease")
	}
	lease, values, err := lw.LockLease(ctx, keys, ttl, load)
	end(err)
	if err != nil {
		if errors.Is(err, store.ErrBusy) {
			return nil, nil, errors.Join(exchange.ErrBusy, err)
		}
		return nil, nil, err
	}
	var slots []exchange.Slot
	if load {
		slots = make([]exchange.Slot, len(keys))
		for i, v := range values {
			slots[i] = exchange.Slot{Value: v, Exists: v != nil}
		}
	}
	return lease, slots, nil
}

// StoreReleasing implements exchange.LeaseWriter: one compare-and-set that also releases
// the lease on stores that can, Store on the others.
func (st storeState) StoreReleasing(ctx context.Context, owner, key string, value []byte, prev exchange.Slot, lease exchange.Lease) error {
	lw, ok := st.s.(leaseWriter)
	sl, isStore := lease.(*store.Lease)
	if !ok || !isStore {
		return st.Store(ctx, owner, key, value, prev)
	}
	old := prev.Value
	if !prev.Exists {
		old = nil
	}
	var end func(error) = func(error) {}
	if st.tr != nil {
		ctx, end = st.storeSpan(ctx, "store")
	}
	swapped, err := lw.CompareAndSwapReleasing(ctx, owner, key, old, value, sl)
	end(err)
	if err != nil {
		return err
	}
	if !swapped {
		return exchange.ErrConflict
	}
	return nil
}

// releaseFunc is a release as a Lease, for stores whose writes cannot release.
type releaseFunc func()

func (f releaseFunc) Release() { f() }

func (st storeState) Forget(ctx context.Context, session string, _ []string) error {
	return st.s.Forget(ctx, session) // the store keeps its own index of a session's keys
}

// State is the exchange core's State over a store, for other hosts of the core in this
// module (`stategate intercept`).
func State(s store.Store) exchange.State { return storeState{s: s} }
