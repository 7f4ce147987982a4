// Package policy resolves a tool name to its State Sync policy: first match wins, the
// defaults as fallback, memoised in a bounded cache that hostile names cannot grow.
package policy

import (
	"strings"
	"sync"

	"github.com/stategate/stategate/plugin/internal/config"
)

// Memoisation bounds: engine tuning, not part of the ABI.
const (
	// MaxNameBytes is the tool-name length up to which resolutions are memoised; longer
	// names are matched every time, so one entry's memory stays bounded.
	MaxNameBytes = 256
	// ResolveCacheSize bounds the memoised resolutions (FIFO eviction).
	ResolveCacheSize = 2048
)

// Resolver answers which policy applies to a tool name. It is safe for concurrent use.
type Resolver struct {
	cfg *config.Config

	mu    sync.Mutex
	cache map[string]int32 // name -> policy index, or -1 for the defaults
	ring  []string         // cached names in insertion order, for FIFO eviction
	next  int
}

// New returns a Resolver over cfg.
func New(cfg *config.Config) *Resolver {
	return &Resolver{cfg: cfg, cache: make(map[string]int32, 64)}
}

// Resolve returns the cache control for name and the policy that matched it (nil when
// the defaults apply).
func (r *Resolver) Resolve(name string) (config.CacheControl, *config.Policy) {
	i := r.index(name)
	if i < 0 {
		return r.cfg.Default, nil
	}
	p := &r.cfg.Policies[i]
	return p.CacheControl, p
}

func (r *Resolver) index(name string) int32 {
	if len(r.cfg.Policies) == 0 {
		return -1
	}
	if len(name) > MaxNameBytes {
		return r.match(name) // never cached: bounded memory per entry
	}
	r.mu.Lock()
	i, ok := r.cache[name]
	r.mu.Unlock()
	if ok {
		return i
	}
	i = r.match(name)
	r.mu.Lock()
	if _, ok := r.cache[name]; !ok {
		name = strings.Clone(name) // the caller's string may view a reused input buffer
		if len(r.ring) < ResolveCacheSize {
			r.ring = append(r.ring, name)
		} else {
			delete(r.cache, r.ring[r.next])
			r.ring[r.next] = name
			r.next = (r.next + 1) % len(r.ring)
		}
		r.cache[name] = i
	}
	r.mu.Unlock()
	return i
}

func (r *Resolver) match(name string) int32 {
	for i := range r.cfg.Policies {
		if r.cfg.Policies[i].Match.Match(name) {
			return int32(i)
		}
	}
	return -1
}

// CacheLen reports how many names are memoised (for tests).
func (r *Resolver) CacheLen() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.cache)
}
