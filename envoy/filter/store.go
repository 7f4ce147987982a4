package filter

import (
	"context"
	"errors"
	"time"

	"github.com/proxy-wasm/proxy-wasm-go-sdk/proxywasm"
	"github.com/proxy-wasm/proxy-wasm-go-sdk/proxywasm/types"

	"github.com/stategate/stategate/exchange"
)

// sharedState is the exchange core's State over Envoy shared data (per Envoy process and
// vm_id), under the keys the engine names.
//
// # Notes
//
//   - Snapshots are stored as the engine gave them and written back with compare-and-set on
//     the cas Envoy returned with the read.
//   - Shared data has no delete: an empty value is a tombstone and reads as absent (null).
//     Keys therefore never shrink; maxKeys bounds the keys this VM creates (Capabilities.CanCreate).
//   - Envoy ignores cas 0 ("write unconditionally") and creates an absent key whatever the
//     cas. A key read as absent is therefore created with casCreate, a cas no live entry is
//     expected to hold: Envoy creates the key if it is still absent and answers CasMismatch
//     if another worker created it meanwhile, which gives create-if-absent semantics.
//   - Shared data has no leases: Lock does nothing, so racing workflow calls on two Envoy
//     workers are serialised only by compare-and-set (each transition applies once; both
//     calls may be admitted). docs/envoy.md says so.
type sharedState struct {
	maxKeys int
	created int // keys this VM created
	retries int // tombstone retries on conflict
}

// casCreate is the cas used to create a key read as absent. Envoy's cas counter is
// process-wide, starts at 1 and would have to reach 2^32-2 and sit on exactly this key for
// the create to be mistaken for an update.
const casCreate = 0xfffffffe

var errFull = errors.New("state key bound reached (maxStateKeys)")

// Capabilities implements exchange.State: writes release nothing, and the keys this VM
// may create are bounded.
func (s *sharedState) Capabilities() exchange.Capabilities {
	return exchange.Capabilities{CanCreate: s.canCreate}
}

// Load implements exchange.State (shared data has no near cache: near reads as any read).
func (s *sharedState) Load(_ context.Context, keys []string, _ bool) ([]exchange.Slot, error) {
	out := make([]exchange.Slot, len(keys))
	for i, k := range keys {
		v, cas, err := proxywasm.GetSharedData(k)
		switch {
		case errors.Is(err, types.ErrorStatusNotFound):
		case err != nil:
			return nil, errors.New("reading shared data key[" + k + "]: " + err.Error())
		case len(v) == 0: // a tombstone: absent, but written back with its cas
			out[i] = exchange.Slot{CAS: cas, Exists: true}
		default:
			// Copy: the host's buffer is not ours to keep.
			out[i] = exchange.Slot{Value: append([]byte(nil), v...), CAS: cas, Exists: true}
		}
	}
	return out, nil
}

// canCreate is Capabilities.CanCreate: n more keys stay within maxKeys.
func (s *sharedState) canCreate(n int) bool { return s.created+n <= s.maxKeys }

// Store implements exchange.State (its writes release no lease: lease is never given).
func (s *sharedState) Store(_ context.Context, _, key string, value []byte, prev exchange.Slot, _ exchange.Lease) error {
	cas := prev.CAS
	if !prev.Exists {
		if !s.canCreate(1) {
			return errFull
		}
		cas = casCreate
	}
	err := proxywasm.SetSharedData(key, value, cas)
	switch {
	case errors.Is(err, types.ErrorStatusCasMismatch):
		return exchange.ErrConflict
	case err != nil:
		return errors.New("writing shared data key[" + key + "]: " + err.Error())
	}
	if !prev.Exists {
		s.created++
	}
	return nil
}

// Lock implements exchange.State: shared data has no leases; with load it reads keys.
func (s *sharedState) Lock(ctx context.Context, keys []string, _ time.Duration, load bool) (exchange.Lease, []exchange.Slot, error) {
	if !load {
		return noLease, nil, nil
	}
	slots, err := s.Load(ctx, keys, false)
	if err != nil {
		return nil, nil, err
	}
	return noLease, slots, nil
}

// noLease is the lease shared data gives: it holds nothing.
var noLease = exchange.LeaseFunc(func() {})

// Forget implements exchange.State: the session's keys, as the engine names them, are
// emptied (shared data has no delete).
func (s *sharedState) Forget(_ context.Context, _ string, keys []string) error {
	var errs []error
	for _, k := range keys {
		errs = append(errs, s.tombstone(k))
	}
	return errors.Join(errs...)
}

// tombstone empties key, retrying conflicts. An absent or already empty key is left alone.
func (s *sharedState) tombstone(key string) error {
	for i := 0; ; i++ {
		v, cas, err := proxywasm.GetSharedData(key)
		if errors.Is(err, types.ErrorStatusNotFound) || (err == nil && len(v) == 0) {
			return nil
		}
		if err != nil {
			return err
		}
		err = proxywasm.SetSharedData(key, nil, cas)
		if err == nil || !errors.Is(err, types.ErrorStatusCasMismatch) || i >= s.retries {
			return err
		}
	}
}
