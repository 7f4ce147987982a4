package exchange

import (
	"context"
	"sync"
	"time"

	"github.com/stategate/stategate/abi"
	"github.com/stategate/stategate/plugin/engine"
)

// enginePlugin runs the engine in process.
type enginePlugin struct{ e *engine.Engine }

func (p enginePlugin) Call(_ context.Context, fn abi.Function, in []byte) ([]byte, error) {
	return p.e.Call(fn, in), nil
}

// testState is the exchange tests' State: a map with compare-and-set, leases when asked
// for, a hook that runs before a Store as a concurrent writer would (race), and a record of
// the keys leased and forgotten.
type testState struct {
	mu     sync.Mutex
	vals   map[string][]byte
	leases map[string]time.Time // nil: Lock grants at once, without leases
	race   func(key string)     // runs once, before the next Store
	locked [][]string
	forgot [][]string
}

func newTestState(leases bool) *testState {
	s := &testState{vals: map[string][]byte{}}
	if leases {
		s.leases = map[string]time.Time{}
	}
	return s
}

func (s *testState) Capabilities() Capabilities { return Capabilities{} }

func (s *testState) Load(_ context.Context, keys []string, _ bool) ([]Slot, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Slot, len(keys))
	for i, k := range keys {
		v, ok := s.vals[k]
		out[i] = Slot{Value: v, Exists: ok}
	}
	return out, nil
}

func (s *testState) Store(_ context.Context, _, key string, value []byte, prev Slot, _ Lease) error {
	s.mu.Lock()
	race := s.race
	s.race = nil
	s.mu.Unlock()
	if race != nil {
		race(key)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, ok := s.vals[key]
	if ok != prev.Exists || string(cur) != string(prev.Value) {
		return ErrConflict
	}
	s.vals[key] = value
	return nil
}

// Lock is lock, then Load with load.
func (s *testState) Lock(ctx context.Context, keys []string, ttl time.Duration, load bool) (Lease, []Slot, error) {
	release, err := s.lock(ctx, keys, ttl)
	if err != nil {
		return nil, nil, err
	}
	var slots []Slot
	if load {
		slots, _ = s.Load(ctx, keys, false)
	}
	return LeaseFunc(release), slots, nil
}

// lock records keys; with leases it waits (polling) until no key is leased, or answers
// ErrBusy when ctx ends first.
func (s *testState) lock(ctx context.Context, keys []string, ttl time.Duration) (func(), error) {
	s.mu.Lock()
	s.locked = append(s.locked, keys)
	s.mu.Unlock()
	if s.leases == nil {
		return func() {}, nil
	}
	for {
		s.mu.Lock()
		free := true
		for _, k := range keys {
			if time.Now().Before(s.leases[k]) {
				free = false
			}
		}
		if free {
			for _, k := range keys {
				s.leases[k] = time.Now().Add(ttl)
			}
			s.mu.Unlock()
			return func() {
				s.mu.Lock()
				defer s.mu.Unlock()
				for _, k := range keys {
					delete(s.leases, k)
				}
			}, nil
		}
		s.mu.Unlock()
		select {
		case <-ctx.Done():
			return nil, ErrBusy
		case <-time.After(2 * time.Millisecond):
		}
	}
}

// Forget records keys (the values stay: tests read what a session left).
func (s *testState) Forget(_ context.Context, _ string, keys []string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.forgot = append(s.forgot, keys)
	return nil
}
