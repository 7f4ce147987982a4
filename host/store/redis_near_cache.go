package store

import (
	"sync"
	"time"
)

// nearCache is one tracking connection's local cache: GET replies by key, least recently
// used first out past max bytes, each until its pxat (the key's expiry on the server or
// the store's idle TTL from the read, whichever is sooner). The read loop fills it and
// applies the server's invalidations to it, in the order the server sent them.
type nearCache struct {
	mu   sync.Mutex
	m    map[string]*nearEntry
	lru  nearEntry // sentinel: lru.next the most recently used, lru.prev the least
	size int
	max  int
}

// nearEntry is one cached GET reply: val (nil: the key was absent), until pxat (Unix
// milliseconds; 0: until invalidated).
type nearEntry struct {
	key        string
	val        []byte
	pxat       int64
	prev, next *nearEntry
}

// nearEntryOverhead approximates what an entry costs beyond its key and value.
const nearEntryOverhead = 96

func newNearCache(max int) *nearCache {
	c := &nearCache{m: map[string]*nearEntry{}, max: max}
	c.lru.next, c.lru.prev = &c.lru, &c.lru
	return c
}

func (e *nearEntry) cost() int { return len(e.key) + len(e.val) + nearEntryOverhead }

// get returns key's entry when it is cached and not expired at now. The value's bytes are
// shared: copy before handing them out.
func (c *nearCache) get(key string, now time.Time) (val []byte, pxat int64, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.m[key]
	if e == nil {
		return nil, 0, false
	}
	if e.pxat != 0 && now.UnixMilli() >= e.pxat {
		c.remove(e)
		return nil, 0, false
	}
	c.unlink(e)
	c.pushFront(e)
	return e.val, e.pxat, true
}

// put caches val for key until pxat, replacing what was there; a value larger than the
// whole cache is not kept.
func (c *nearCache) put(key string, val []byte, pxat int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.m[key]; e != nil {
		c.remove(e)
	}
	e := &nearEntry{key: key, val: val, pxat: pxat}
	if e.cost() > c.max {
		return
	}
	c.m[key] = e
	c.pushFront(e)
	c.size += e.cost()
	for c.size > c.max {
		c.remove(c.lru.prev)
	}
}

// invalidate drops key's entry.
func (c *nearCache) invalidate(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.m[key]; e != nil {
		c.remove(e)
	}
}

// flush drops every entry (the server's flush-all invalidation).
func (c *nearCache) flush() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.m = map[string]*nearEntry{}
	c.lru.next, c.lru.prev = &c.lru, &c.lru
	c.size = 0
}

// len is the number of entries (expired ones included until they are met).
func (c *nearCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m)
}

func (c *nearCache) remove(e *nearEntry) {
	c.unlink(e)
	delete(c.m, e.key)
	c.size -= e.cost()
}

func (c *nearCache) unlink(e *nearEntry) {
	e.prev.next, e.next.prev = e.next, e.prev
	e.prev, e.next = nil, nil
}

func (c *nearCache) pushFront(e *nearEntry) {
	e.prev, e.next = &c.lru, c.lru.next
	c.lru.next.prev = e
	c.lru.next = e
}
