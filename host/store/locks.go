package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
)

// ErrBusy is the error Lock wraps (with the key and ctx's error) when its wait ended
// because another holder kept a lease on the key: the store itself worked. Any other Lock
// error is a failure of the store, or ctx ending before the store answered.
var ErrBusy = errors.New("lease held by another holder")

// leases are the in-process leases behind Memory.Lock and Bolt.Lock.
//
// # Notes
//
//   - A lease lapses ttl after it was taken: it carries its deadline, and whoever next
//     finds it there past that deadline (a lock call, a waiter's timer) ends it, so a
//     holder that never releases blocks a key for ttl only. The holder's own path (take,
//     release) runs no timer; a waiter sleeps on one until the deadline it waits for. A
//     lease dropped unreleased on a key nobody locks again is ended by a sweep: a lock call
//     that finds the map past twice its size at the last sweep ends every lapsed lease.
//   - Every lock call holds its leases under a generation of its own. Releasing or lapsing
//     ends a key's lease only while that generation still holds it, so a late release by a
//     holder whose lease lapsed never frees the next holder's (the Redis unlock script
//     compares tokens for the same reason).
//   - Keys are taken in sorted order, so two calls never deadlock. A call waiting for a
//     later key keeps its earlier leases, which may lapse meanwhile (as in Redis).
//   - Waiters wake together when a lease ends and race for it: no FIFO fairness.
type leases struct {
	name string // the store, for errors: "memory", "bolt"

	mu    sync.Mutex
	gen   uint64
	held  map[string]*lease
	sweep int // len(held) past which lock sweeps lapsed leases (a dropped release)
}

type lease struct {
	gen   uint64
	until time.Time     // lapses the lease (monotonic)
	ended chan struct{} // made by the first waiter; closed when the lease ends
}

// holding is one lock call's leases: keys (sorted) of which the first n are held.
type holding struct {
	l    *leases
	gen  uint64
	keys []string
	n    int
	done bool // released; under l.mu
}

func newLeases(name string) *leases {
	return &leases{name: name, held: make(map[string]*lease)}
}

// lock takes every key for ttl and returns the function that releases them (safe to call
// more than once). A wait that ctx ends gives an error wrapping ErrBusy and ctx's error.
func (l *leases) lock(ctx context.Context, keys []string, ttl time.Duration) (func(), error) {
	if err := checkLease(ttl); err != nil {
		return nil, fmt.Errorf("store[%s]: lock: %w", l.name, err)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("store[%s]: lock: %w", l.name, err)
	}
	h := &holding{l: l, keys: sortedKeys(keys)}
	l.mu.Lock()
	l.gen++
	h.gen = l.gen
	l.mu.Unlock()
	for _, k := range h.keys {
		for {
			l.mu.Lock()
			now := time.Now()
			cur := l.held[k]
			if cur != nil && !now.Before(cur.until) {
				l.endLocked(k, cur.gen) // lapsed
				cur = nil
			}
			if cur == nil {
				if len(l.held) >= l.sweep {
					for sk, le := range l.held {
						if !now.Before(le.until) {
							l.endLocked(sk, le.gen)
						}
					}
					l.sweep = 2*len(l.held) + 64
				}
				l.held[k] = &lease{gen: h.gen, until: now.Add(ttl)}
				h.n++
				l.mu.Unlock()
				break
			}
			if cur.ended == nil {
				cur.ended = make(chan struct{})
			}
			ended, gen, wait := cur.ended, cur.gen, cur.until.Sub(now)
			l.mu.Unlock()
			t := time.NewTimer(wait)
			select {
			case <-ended:
				t.Stop()
			case <-t.C:
				l.lapse(k, gen)
			case <-ctx.Done():
				t.Stop()
				h.release()
				return nil, fmt.Errorf("store[%s] key[%q]: lock: %w (%w)", l.name, k, ErrBusy, ctx.Err())
			}
		}
	}
	return h.release, nil
}

// release ends the leases h holds, once.
func (h *holding) release() {
	h.l.mu.Lock()
	defer h.l.mu.Unlock()
	if h.done {
		return
	}
	h.done = true
	for _, k := range h.keys[:h.n] {
		h.l.endLocked(k, h.gen)
	}
}

// lapse ends the lease on k if generation gen still holds it and its time is up.
func (l *leases) lapse(k string, gen uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if le := l.held[k]; le != nil && le.gen == gen && !time.Now().Before(le.until) {
		l.endLocked(k, gen)
	}
}

// endLocked ends the lease on k if generation gen still holds it; l.mu is held.
func (l *leases) endLocked(k string, gen uint64) {
	le := l.held[k]
	if le == nil || le.gen != gen {
		return
	}
	delete(l.held, k)
	if le.ended != nil {
		close(le.ended)
	}
}

// checkLease refuses a ttl that would give no lease at all.
func checkLease(ttl time.Duration) error {
	if ttl < time.Millisecond {
		return fmt.Errorf("ttl[%s] is under 1ms", ttl)
	}
	return nil
}

// sortedKeys returns keys sorted, without repeats, in a new slice.
func sortedKeys(keys []string) []string {
	keys = slices.Clone(keys)
	slices.Sort(keys)
	return slices.Compact(keys)
}
