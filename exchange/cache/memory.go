package cache

import (
	"container/list"
	"sync"
	"sync/atomic"
	"time"
)

// Memory is a Cache in process memory: entries bounded in entries and bytes, expiring
// after their TTL, least recently used evicted first. It is safe for concurrent use; the
// Service keeps its entries coherent across replicas (service.go).
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
//   - The order is a container/list of its own, not golang-lru's simplelru (which the
//     exchange uses elsewhere): another instantiation of it costs the exchange module
//     917 B (806,651 against 807,568 B, budget 810,000), and the byte bound, the expiry
//     and the index by tool would sit beside it anyway.
type Memory struct {
	limits Limits
	now    func() time.Time
	high   int // the byte level at which eviction starts

	mu      sync.Mutex
	entries map[string]*list.Element
	lru     *list.List // front: most recently used
	byTool  map[string]map[string]struct{}
	size    int

	// Figures for metrics and the admin API.
	Evictions atomic.Int64
	Expired   atomic.Int64
}

type item struct {
	key   string
	entry Entry
	size  int
}

// NewMemory returns a Memory cache with the given limits; now is the clock (nil: time.Now),
// injectable for tests.
func NewMemory(l Limits, now func() time.Time) *Memory {
	if now == nil {
		now = time.Now
	}
	if l.HighWaterMark <= 0 || l.HighWaterMark > 1 {
		l.HighWaterMark = 1
	}
	return &Memory{limits: l, now: now, high: int(float64(l.MaxSizeBytes) * l.HighWaterMark),
		entries: map[string]*list.Element{}, lru: list.New(), byTool: map[string]map[string]struct{}{}}
}

// Get returns the entry under key unless it is missing or expired (an expired entry is
// removed); a hit makes the entry the most recently used.
func (m *Memory) Get(key string) (Entry, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	el, ok := m.entries[key]
	if !ok {
		return Entry{}, false
	}
	it := el.Value.(*item)
	if !m.now().Before(it.entry.Expires) {
		m.remove(el)
		m.Expired.Add(1)
		return Entry{}, false
	}
	m.lru.MoveToFront(el)
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
	if el, ok := m.entries[key]; ok {
		m.remove(el)
	}
	el := m.lru.PushFront(&item{key: key, entry: e, size: size})
	m.entries[key] = el
	if m.byTool[e.Tool] == nil {
		m.byTool[e.Tool] = map[string]struct{}{}
	}
	m.byTool[e.Tool][key] = struct{}{}
	m.size += size
	for len(m.entries) > m.limits.MaxEntries || m.size > m.high {
		m.remove(m.lru.Back())
		m.Evictions.Add(1)
	}
	return true
}

// Delete removes key.
func (m *Memory) Delete(key string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if el, ok := m.entries[key]; ok {
		m.remove(el)
	}
}

// PurgeTools removes every entry of the named tools.
func (m *Memory) PurgeTools(tools []string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, t := range tools {
		for key := range m.byTool[t] {
			m.remove(m.entries[key])
			n++
		}
	}
	return n
}

// PurgeAll removes every entry.
func (m *Memory) PurgeAll() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := len(m.entries)
	m.entries = map[string]*list.Element{}
	m.byTool = map[string]map[string]struct{}{}
	m.lru.Init()
	m.size = 0
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
	return len(m.entries), m.size
}

func (m *Memory) remove(el *list.Element) {
	it := el.Value.(*item)
	m.lru.Remove(el)
	delete(m.entries, it.key)
	if keys := m.byTool[it.entry.Tool]; keys != nil {
		delete(keys, it.key)
		if len(keys) == 0 {
			delete(m.byTool, it.entry.Tool)
		}
	}
	m.size -= it.size
}
