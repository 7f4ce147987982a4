package cache

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/golang-lru/v2/simplelru"
)

// Memory holds the replica's entries in process memory, bounded in entries and bytes,
// expiring after their TTL, least recently used evicted first. The Service keeps them
// coherent across replicas (service.go).
//
// The invariants of the runtime design, each with its own test in memory_test.go:
//
//	INV-MCP-CACHE-001  total bytes never exceed MaxSizeBytes; eviction starts at the
//	                   high-water mark (a put that crosses it evicts down to it)
//	INV-MCP-CACHE-002  entries never exceed MaxEntries
//	INV-MCP-CACHE-003  an expired entry is never returned
//	INV-MCP-CACHE-004  least recently used entries are evicted first
//	INV-MCP-CACHE-005  no partial state is visible to a concurrent reader
//	INV-MCP-CACHE-006  the tracked size equals the sum of the entry sizes
//
// # Notes
//
//   - The order and the entry bound are golang-lru's simplelru (already in every build
//     of the exchange, which memoises with it); the byte bound, the expiry and the index
//     by tool are kept here, under one lock with it.
type Memory struct {
	limits Limits
	now    func() time.Time
	high   int // the byte level at which eviction starts

	mu     sync.Mutex
	lru    *simplelru.LRU[string, *item] // its evictions and removals all go through evicted
	byTool map[string]map[string]struct{}
	size   int

	// Figures for metrics and the admin API.
	Evictions atomic.Int64
	Expired   atomic.Int64
}

type item struct {
	key   string
	entry Entry
	size  int
}

// NewMemory returns a Memory cache with the given limits; now is the clock (nil:
// time.Now), injectable for tests.
func NewMemory(l Limits, now func() time.Time) *Memory {
	if now == nil {
		now = time.Now
	}
	if l.HighWaterMark <= 0 || l.HighWaterMark > 1 {
		l.HighWaterMark = 1
	}
	m := &Memory{limits: l, now: now, high: int(float64(l.MaxSizeBytes) * l.HighWaterMark), byTool: map[string]map[string]struct{}{}}
	m.lru, _ = simplelru.NewLRU(max(l.MaxEntries, 1), m.evicted) // size > 0: never an error; MaxEntries <= 0 stores nothing (Put)
	return m
}

// Get returns the entry under key unless it is missing or expired (an expired entry is
// removed); a hit makes the entry the most recently used.
func (m *Memory) Get(key string) (Entry, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	it, ok := m.lru.Peek(key)
	if !ok {
		return Entry{}, false
	}
	if !m.now().Before(it.entry.Expires) {
		m.lru.Remove(key)
		m.Expired.Add(1)
		return Entry{}, false
	}
	m.lru.Get(key) // the most recently used
	return it.entry, true
}

// Put stores e under key (replacing an entry there), then evicts least recently used
// entries while the entries are over MaxEntries or the bytes over the high-water mark.
// An entry larger than MaxEntryBytes or than the high-water mark itself is refused.
func (m *Memory) Put(key string, e Entry) bool {
	size := e.Size(key)
	if len(e.Result) > m.limits.MaxEntryBytes || size > m.high || m.limits.MaxEntries <= 0 {
		return false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.lru.Remove(key)
	if m.byTool[e.Tool] == nil {
		m.byTool[e.Tool] = map[string]struct{}{}
	}
	m.byTool[e.Tool][key] = struct{}{}
	m.size += size
	if m.lru.Add(key, &item{key: key, entry: e, size: size}) { // over MaxEntries: the oldest went
		m.Evictions.Add(1)
	}
	for m.size > m.high {
		m.lru.RemoveOldest()
		m.Evictions.Add(1)
	}
	return true
}

// Delete removes key.
func (m *Memory) Delete(key string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.lru.Remove(key)
}

// PurgeTools removes every entry of the named tools.
func (m *Memory) PurgeTools(tools []string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, t := range tools {
		for key := range m.byTool[t] {
			m.lru.Remove(key)
			n++
		}
	}
	return n
}

// PurgeAll removes every entry.
func (m *Memory) PurgeAll() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := m.lru.Len()
	m.lru.Purge()
	return n
}

// ToolEntries returns how many entries tool has.
func (m *Memory) ToolEntries(tool string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.byTool[tool])
}

// Stats returns the entries and the tracked bytes.
func (m *Memory) Stats() (entries, bytes int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.lru.Len(), m.size
}

// evicted forgets an entry the LRU let go (evicted, removed or purged), with m.mu held.
func (m *Memory) evicted(_ string, it *item) {
	if keys := m.byTool[it.entry.Tool]; keys != nil {
		delete(keys, it.key)
		if len(keys) == 0 {
			delete(m.byTool, it.entry.Tool)
		}
	}
	m.size -= it.size
}
