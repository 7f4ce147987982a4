package exchange

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stategate/stategate/abi"
	"github.com/stategate/stategate/plugin/engine"
)

// The release of a moving call's leases in the last write of its transition (Capabilities.ReleasingWrites),
// on the native engine and an in-memory State.

// leaseConfig: "flip" (per session) alternates on cart.add_item and tasks.update; "task"
// (per handle, the id argument) alternates on tasks.update. cart.add_item moves one key,
// tasks.update two.
const leaseConfig = `{"version":1,"workflows":[
 {"id":"flip","initial":"a","key":"session","states":{"a":{"on":{"NEXT":"b"}},"b":{"on":{"NEXT":"a"}}},
  "tools":{"cart.add_item":{"states":["a","b"],"event":"NEXT"},"tasks.update":{"states":["a","b"],"event":"NEXT"}}},
 {"id":"task","initial":"a","key":"argument:id","states":{"a":{"on":{"NEXT":"b"}},"b":{"on":{"NEXT":"a"}}},
  "tools":{"tasks.update":{"states":["a","b"],"event":"NEXT"}}}]}`

// leaseState is testState with a write that releases the leases (Capabilities.ReleasingWrites), a record
// of every write, and writes of one workflow's key that fail on demand.
type leaseState struct {
	*testState
	fail   string     // writes of this workflow's key fail (a store error)
	cur    *testLease // the last lease taken
	writes []leaseWrite
}

type leaseWrite struct {
	workflow string
	releases bool // a Store given the lease
	held     bool // every lease of the call was held when it ran
}

// testLease is a testState lease; separate counts the releases that were not a write's.
type testLease struct {
	keys     []string
	release  func()
	done     bool
	separate int
}

func (l *testLease) Release() {
	if !l.done {
		l.done = true
		l.separate++
		l.release()
	}
}

func (s *leaseState) Capabilities() Capabilities { return Capabilities{ReleasingWrites: true} }

// Lock is testState's, with the lease a testLease that a write can release.
func (s *leaseState) Lock(ctx context.Context, keys []string, ttl time.Duration, load bool) (Lease, []Slot, error) {
	lease, slots, err := s.testState.Lock(ctx, keys, ttl, load)
	if err != nil {
		return nil, nil, err
	}
	s.cur = &testLease{keys: keys, release: lease.Release}
	return s.cur, slots, nil
}

func (s *leaseState) Store(ctx context.Context, owner, key string, value []byte, prev Slot, lease Lease) error {
	l, _ := lease.(*testLease)
	return s.write(ctx, owner, key, value, prev, l)
}

// write is Store, and releases lease (when not nil) once the value is stored.
func (s *leaseState) write(ctx context.Context, owner, key string, value []byte, prev Slot, lease *testLease) error {
	w := leaseWrite{workflow: strings.Split(key, "/")[2], releases: lease != nil, held: s.cur != nil}
	s.mu.Lock()
	if s.cur != nil {
		for _, k := range s.cur.keys {
			w.held = w.held && time.Now().Before(s.leases[k])
		}
	}
	s.writes = append(s.writes, w)
	s.mu.Unlock()
	if w.workflow == s.fail {
		return errors.New("store down")
	}
	if err := s.testState.Store(ctx, owner, key, value, prev, nil); err != nil {
		return err
	}
	if lease != nil && !lease.done {
		lease.done = true // in the same step: not a separate release
		lease.release()
	}
	return nil
}

// leased reports whether any key is leased now.
func (s *testState) leased() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, until := range s.leases {
		if time.Now().Before(until) {
			return true
		}
	}
	return false
}

func TestTransition_lastWriteReleases(t *testing.T) {
	e, err := engine.New([]byte(leaseConfig))
	if err != nil {
		t.Fatal(err)
	}
	oneKey := `{"name":"cart.add_item","arguments":{"sku":"tea"}}`
	twoKeys := `{"name":"tasks.update","arguments":{"id":"T1"}}`
	tests := []struct {
		name   string
		params string
		setup  func(s *leaseState)
		// writes: the writes in order, "+" marking the one that releases; held: whether
		// the leases are still held after the exchange closed (a fault holds them).
		writes string
		held   bool
		fault  bool
	}{
		{name: "one_key_its_write_releases", params: oneKey, writes: "flip+"},
		{name: "two_keys_only_the_last_write_releases", params: twoKeys, writes: "flip task+"},
		{name: "a_conflict_on_the_releasing_write_re_applies_under_the_leases", params: oneKey,
			setup: func(s *leaseState) {
				s.race = func(key string) { // another writer: the key is gone
					s.mu.Lock()
					delete(s.vals, key)
					s.mu.Unlock()
				}
			},
			writes: "flip+ flip+"},
		{name: "a_failed_write_holds_the_leases_and_the_last_write_releases_nothing", params: twoKeys,
			setup:  func(s *leaseState) { s.fail = "flip" },
			writes: "flip task", held: true, fault: true},
		{name: "a_failed_releasing_write_holds_the_leases", params: oneKey,
			setup:  func(s *leaseState) { s.fail = "flip" },
			writes: "flip+", held: true, fault: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := &leaseState{testState: newTestState(true)}
			c := New(Options{Plugin: enginePlugin{e}, State: s, Config: []byte(leaseConfig), LeaseWait: 50 * time.Millisecond})
			ctx := context.Background()
			// The first call stores every key; the one under test moves them again.
			first := c.AdmitCall(ctx, "s1", []byte(twoKeys))
			first.FinishCall(ctx, []byte(okResult))
			first.Close()
			if s.leased() {
				t.Fatal("leases held after a first call")
			}
			s.writes = nil
			if tc.setup != nil {
				tc.setup(s)
			}
			before := c.Stats.Faults(abi.FaultTransition)
			ex := c.AdmitCall(ctx, "s1", []byte(tc.params))
			if ex.Verdict != Forward {
				t.Fatalf("not admitted: %s", ex.Body)
			}
			lease, ok := ex.call.lease.(*testLease)
			if !ok {
				t.Fatalf("the call's lease is %T, want the releasing store's", ex.call.lease)
			}
			ex.FinishCall(ctx, []byte(okResult))
			ex.Close()
			var got []string
			for _, w := range s.writes {
				name := w.workflow
				if w.releases {
					name += "+"
				}
				got = append(got, name)
				if !w.held {
					t.Errorf("a write of %s ran without the call's leases", w.workflow)
				}
			}
			if strings.Join(got, " ") != tc.writes {
				t.Errorf("writes %q, want %q", strings.Join(got, " "), tc.writes)
			}
			if s.leased() != tc.held {
				t.Errorf("leases held after Close: %v, want %v", s.leased(), tc.held)
			}
			if !tc.held && lease.separate != 0 {
				t.Errorf("%d releases apart from the write, want 0", lease.separate)
			}
			if faults := c.Stats.Faults(abi.FaultTransition) - before; (faults > 0) != tc.fault {
				t.Errorf("%d transition faults, want fault=%v", faults, tc.fault)
			}
		})
	}
}
