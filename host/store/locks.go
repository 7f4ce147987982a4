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
//   - A lease lapses ttl after it was taken: a timer per lease ends it and wakes its
//     waiters, so nothing polls and a holder that never releases blocks a key for ttl only.
//   - Every lock call holds its leases under a generation of its own. Releasing or lapsing
//     ends a key's lease only while that generation still holds it, so a late release by a
//     holder whose lease lapsed never frees the next holder's (the Redis unlock script
//     compares tokens for the same reason).
//   - Keys are taken in sorted order, so two calls never deadlock. A call waiting for a
//     later key keeps its earlier leases, which may lapse meanwhile (as in Redis).
//   - Waiters wake together when a lease ends and race for it: no FIFO fairness.
type leases struct {
	name string // the store, for errors: "memory", "bolt"

	mu   sync.Mutex
	gen  uint64
	held map[string]*lease
}

type lease struct {
	gen   uint64
	timer *time.Timer   // lapses the lease
	ended chan struct{} // closed when the lease ends
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
	keys = sortedKeys(keys)
	l.mu.Lock()
	l.gen++
	gen := l.gen
	l.mu.Unlock()
	held := make([]string, 0, len(keys))
	release := func() {
		for _, k := range held {
			l.end(k, gen)
		}
	}
	for _, k := range keys {
		for {
			l.mu.Lock()
			cur := l.held[k]
			if cur == nil {
				le := &lease{gen: gen, ended: make(chan struct{})}
				le.timer = time.AfterFunc(ttl, func() { l.end(k, gen) })
				l.held[k] = le
				l.mu.Unlock()
				held = append(held, k)
				break
			}
			l.mu.Unlock()
			select {
			case <-cur.ended:
			case <-ctx.Done():
				release()
				return nil, fmt.Errorf("store[%s] key[%q]: lock: %w (%w)", l.name, k, ErrBusy, ctx.Err())
			}
		}
	}
	var once sync.Once
	return func() { once.Do(release) }, nil
}

// end ends the lease on k if generation gen still holds it.
func (l *leases) end(k string, gen uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	le := l.held[k]
	if le == nil || le.gen != gen {
		return
	}
	le.timer.Stop()
	delete(l.held, k)
	close(le.ended)
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
