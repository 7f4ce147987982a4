package store

import (
	"bytes"
	"container/list"
	"context"
	"slices"
	"sync"
	"time"
)

// Memory is the embedded Store: a map and an LRU list under one mutex.
//
// # Notes
//
//   - At most Options.MaxEntries entries are kept; a write past the bound evicts the least
//     recently used entry (and drops it from its sessions' key sets).
//   - Expiry is lazy: an idle entry is dropped when it is next touched, or when writes
//     sweep the tail of the LRU list. With one TTL for every entry the list order is also
//     the expiry order, so the sweep stops at the first live entry.
//   - The session index only holds keys that are stored, so it is bounded by MaxEntries.
//   - Values are copied in and out; callers may reuse their slices.
type Memory struct {
	max int
	ttl time.Duration
	now func() time.Time // the clock; tests replace it

	mu       sync.Mutex
	lru      *list.List               // of *entry, most recently used first
	entries  map[string]*list.Element // key -> element of lru
	sessions map[string]map[string]struct{}
	leases   *leases
}

// Lock implements Store.Lock with leases in this process (see leases): they lapse after
// ttl like Redis leases, on real time (not on the clock tests replace).
func (m *Memory) Lock(ctx context.Context, keys []string, ttl time.Duration) (func(), error) {
	return m.leases.lock(ctx, keys, ttl)
}

type entry struct {
	key      string
	value    []byte
	expires  time.Time
	sessions []string // sessions that wrote key; usually one
}

var _ Store = (*Memory)(nil)

// NewMemory returns an empty Memory store.
func NewMemory(opts Options) *Memory {
	opts = opts.withDefaults()
	return &Memory{
		max:      opts.MaxEntries,
		ttl:      opts.IdleTTL,
		now:      time.Now,
		lru:      list.New(),
		entries:  make(map[string]*list.Element),
		sessions: make(map[string]map[string]struct{}),
		leases:   newLeases("memory"),
	}
}

// Get implements Store.Get.
func (m *Memory) Get(ctx context.Context, key string) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.lookup(key, m.now())
	if e == nil {
		return nil, nil
	}
	return bytes.Clone(e.value), nil
}

// CompareAndSwap implements Store.CompareAndSwap.
func (m *Memory) CompareAndSwap(ctx context.Context, session, key string, old, new []byte) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	e := m.lookup(key, now)
	switch {
	case old == nil && e != nil, old != nil && (e == nil || !bytes.Equal(e.value, old)):
		return false, nil
	case e == nil:
		e = &entry{key: key}
		m.entries[key] = m.lru.PushFront(e)
	}
	e.value = append(make([]byte, 0, len(new)), new...)
	e.expires = now.Add(m.ttl)
	if session != "" && !slices.Contains(e.sessions, session) {
		e.sessions = append(e.sessions, session)
		keys := m.sessions[session]
		if keys == nil {
			keys = make(map[string]struct{})
			m.sessions[session] = keys
		}
		keys[key] = struct{}{}
	}
	m.sweep(now)
	return true, nil
}

// Forget implements Store.Forget.
func (m *Memory) Forget(ctx context.Context, session string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for key := range m.sessions[session] {
		if el, ok := m.entries[key]; ok {
			m.remove(el)
		}
	}
	delete(m.sessions, session) // already gone unless it was empty
	return nil
}

// Close implements Store.Close. A Memory store holds nothing outside the Go heap.
func (m *Memory) Close() error { return nil }

// Len returns the number of entries held, expired ones not yet dropped included.
func (m *Memory) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.entries)
}

// lookup returns the live entry under key, refreshed and moved to the front, or nil.
func (m *Memory) lookup(key string, now time.Time) *entry {
	el, ok := m.entries[key]
	if !ok {
		return nil
	}
	e := el.Value.(*entry)
	if !now.Before(e.expires) {
		m.remove(el)
		return nil
	}
	e.expires = now.Add(m.ttl)
	m.lru.MoveToFront(el)
	return e
}

// sweep drops expired entries from the tail, then evicts down to the bound.
func (m *Memory) sweep(now time.Time) {
	for el := m.lru.Back(); el != nil && !now.Before(el.Value.(*entry).expires); el = m.lru.Back() {
		m.remove(el)
	}
	for m.lru.Len() > m.max {
		m.remove(m.lru.Back())
	}
}

func (m *Memory) remove(el *list.Element) {
	e := m.lru.Remove(el).(*entry)
	delete(m.entries, e.key)
	for _, s := range e.sessions {
		keys := m.sessions[s]
		delete(keys, e.key)
		if len(keys) == 0 {
			delete(m.sessions, s)
		}
	}
}
