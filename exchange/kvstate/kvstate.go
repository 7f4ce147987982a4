// Package kvstate is exchange.State over a key-value store with compare-and-set alone, the
// whole store a host of the exchange module keeps (abi/ABI.md, "The exchange exports"):
// leases are keys holding a token and an expiry, so they lapse without a timer, and a
// lease another call holds is refused at once (the caller decides whether to wait).
package kvstate

import (
	"context"
	"crypto/rand"
	"errors"
	"strconv"
	"time"

	"github.com/stategate/stategate/exchange"
	"github.com/tidwall/gjson"
)

// Value is one key's value; Ok is false for an absent key.
type Value struct {
	B  []byte
	Ok bool
}

// KV is a store with compare-and-set.
type KV interface {
	// Get reads keys, in order.
	Get(keys []string) ([]Value, error)
	// CAS sets key to next (absent: delete) only if it holds prev (absent: is absent), and
	// reports whether it did. owner is the session the key belongs to ("" for none).
	CAS(owner, key string, prev, next Value) (bool, error)
}

// LeasePrefix starts the key of a lease on a state key; its value is
// {"token":"<hex>","expires":<unix ms>}.
const LeasePrefix = "stategate/lease/"

// State is exchange.State over a KV.
type State struct {
	KV  KV
	Now func() time.Time // the clock leases expire by (nil: time.Now)
	// busy: a lease was refused since TakeBusy last asked.
	busy bool
}

// TakeBusy reports, and forgets, whether a lease was refused because another holder has
// it (flow.Options.Busy).
func (s *State) TakeBusy() bool {
	b := s.busy
	s.busy = false
	return b
}

func (s *State) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// Load implements exchange.State.
func (s *State) Load(_ context.Context, keys []string) ([]exchange.Slot, error) {
	vals, err := s.KV.Get(keys)
	if err != nil {
		return nil, err
	}
	if len(vals) != len(keys) {
		return nil, errors.New("kvstate: the store answered " + strconv.Itoa(len(vals)) + " values for " + strconv.Itoa(len(keys)) + " keys")
	}
	out := make([]exchange.Slot, len(keys))
	for i, v := range vals {
		if v.Ok {
			out[i] = exchange.Slot{Value: v.B, Exists: true}
		}
	}
	return out, nil
}

func (s *State) cas(owner, key string, prev, next Value) error {
	ok, err := s.KV.CAS(owner, key, prev, next)
	switch {
	case err != nil:
		return err
	case !ok:
		return exchange.ErrConflict
	}
	return nil
}

// Store implements exchange.State.
func (s *State) Store(_ context.Context, owner, key string, value []byte, prev exchange.Slot) error {
	return s.cas(owner, key, Value{B: prev.Value, Ok: prev.Exists}, Value{B: value, Ok: true})
}

// Forget implements exchange.State: the session's keys are deleted.
func (s *State) Forget(ctx context.Context, session string, keys []string) error {
	slots, err := s.Load(ctx, keys)
	if err != nil {
		return err
	}
	for i, k := range keys {
		if !slots[i].Exists {
			continue
		}
		if err := s.cas(session, k, Value{B: slots[i].Value, Ok: true}, Value{}); err != nil && !errors.Is(err, exchange.ErrConflict) {
			return err
		}
	}
	return nil
}

// Lock implements exchange.State: it leases every key or none. A key another holder
// leases, until its expiry, fails it at once with exchange.ErrBusy.
func (s *State) Lock(ctx context.Context, keys []string, ttl time.Duration) (func(), error) {
	var lkeys []string
	seen := map[string]bool{}
	for _, k := range keys {
		if !seen[k] {
			seen[k] = true
			lkeys = append(lkeys, LeasePrefix+k)
		}
	}
	slots, err := s.Load(ctx, lkeys)
	if err != nil {
		return nil, err
	}
	now := s.now()
	val := Value{B: leaseValue(now.Add(ttl)), Ok: true}
	var held []string
	release := func() {
		for _, k := range held {
			_ = s.cas("", k, val, Value{}) // only while it is still this lease
		}
		held = nil
	}
	for i, k := range lkeys {
		prev := Value{B: slots[i].Value, Ok: slots[i].Exists}
		if prev.Ok && gjson.GetBytes(prev.B, "expires").Int() > now.UnixMilli() {
			release()
			s.busy = true
			return nil, exchange.ErrBusy
		}
		switch err := s.cas("", k, prev, val); {
		case errors.Is(err, exchange.ErrConflict):
			release()
			s.busy = true
			return nil, exchange.ErrBusy
		case err != nil:
			release()
			return nil, err
		}
		held = append(held, k)
	}
	return release, nil
}

// leaseValue is a lease's value: a new token and its expiry.
func leaseValue(expires time.Time) []byte {
	var b [16]byte
	_, _ = rand.Read(b[:])
	const hexd = "0123456789abcdef"
	v := append(make([]byte, 0, 64), `{"token":"`...)
	for _, c := range b {
		v = append(v, hexd[c>>4], hexd[c&15])
	}
	v = append(v, `","expires":`...)
	v = strconv.AppendInt(v, expires.UnixMilli(), 10)
	return append(v, '}')
}
