package store

import (
	"context"
	"strconv"
	"testing"
	"time"
)

// A lease its holder drops without releasing (the exchange's HoldLease policy: the outcome
// unknown, a failed transition) lapses after its ttl and leaves nothing behind, on a key
// nobody locks again too: later locks sweep lapsed leases once the map has doubled, so it
// holds about twice the live leases, not every lease ever dropped (Memory's MaxEntries
// does not cover leases).
func TestLeases_droppedLeasesDoNotAccumulate(t *testing.T) {
	for _, st := range []struct {
		name string
		l    func(t *testing.T) *leases
	}{
		{"memory", func(t *testing.T) *leases { return NewMemory(Options{MaxEntries: 10}).leases }},
		{"bolt", func(t *testing.T) *leases {
			b, err := NewBolt(t.TempDir()+"/s.db", Options{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { b.Close() })
			return b.leases
		}},
	} {
		t.Run(st.name, func(t *testing.T) {
			l := st.l(t)
			ctx := context.Background()
			const n = 5000
			for round := range 4 {
				for i := range n {
					if _, err := l.lock(ctx, []string{"k" + strconv.Itoa(round*n+i)}, time.Millisecond); err != nil {
						t.Fatal(err)
					}
					// the release is dropped
				}
				time.Sleep(20 * time.Millisecond) // every lease of the round has lapsed
			}
			l.mu.Lock()
			left := len(l.held)
			l.mu.Unlock()
			if left > n+64 { // one round's at most, when the sweep ran just before it
				t.Errorf("%d lapsed leases still in the map after %d were dropped", left, 4*n)
			}
		})
	}
}

// A single key is copied like several: a caller that reuses its keys slice after Lock
// returns does not change the key its release ends.
func TestLeases_keysAreCopied(t *testing.T) {
	m := NewMemory(Options{})
	ctx := context.Background()
	keys := []string{"a"}
	release, err := m.Lock(ctx, keys, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	keys[0] = "b" // the caller's slice, reused
	release()
	wctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	r2, err := m.Lock(wctx, []string{"a"}, time.Second)
	if err != nil {
		t.Fatalf("key a still leased after its release: %v", err)
	}
	r2()
}
