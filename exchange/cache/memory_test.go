package cache

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"time"
)

// clock is an injected clock: tests move it, nothing sleeps.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func newCache(maxEntries, maxBytes int, hwm float64) (*Memory, *clock) {
	c := &clock{t: time.Unix(1_700_000_000, 0)}
	return NewMemory(Limits{MaxEntries: maxEntries, MaxSizeBytes: maxBytes, MaxEntryBytes: maxBytes,
		TTL: time.Hour, HighWaterMark: hwm}, c.now), c
}

func entry(c *clock, tool string, n int, ttl time.Duration) Entry {
	return Entry{Tool: tool, Result: bytes.Repeat([]byte{'x'}, n), Gen: "1", Stored: c.now(), Expires: c.now().Add(ttl)}
}

// sumSizes recomputes the size of every entry held, for the invariants.
func (m *Memory) sumSizes() (n, sum int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for e := m.lru.Front(); e != nil; e = e.Next() {
		it := e.Value.(*item)
		sum += it.entry.Size(it.key)
		n++
	}
	return n, sum
}

// TestINV_MCP_CACHE_001_size: after any sequence of puts, the bytes held never exceed
// MaxSizeBytes, and a put that crosses the high-water mark evicts down to it.
func TestINV_MCP_CACHE_001_size(t *testing.T) {
	const max = 64 << 10
	m, c := newCache(1<<20, max, 0.75)
	r := rand.New(rand.NewPCG(1, 1))
	for i := range 5000 {
		m.Put("k"+strconv.Itoa(r.IntN(400)), entry(c, "t"+strconv.Itoa(i%7), r.IntN(4000), time.Hour))
		_, size := m.Stats()
		if size > max {
			t.Fatalf("put %d: %d bytes held, over MaxSizeBytes %d", i, size, max)
		}
		if size > int(max*0.75) {
			t.Fatalf("put %d: %d bytes held, over the high-water mark %d after the put", i, size, int(max*0.75))
		}
	}
	if m.Evictions.Load() == 0 {
		t.Fatal("no eviction happened: the test did not reach the bound")
	}
	if m.Put("big", entry(c, "t", max, time.Hour)) {
		t.Fatal("an entry over the high-water mark was stored")
	}
}

// TestINV_MCP_CACHE_002_entries: the entries never exceed MaxEntries.
func TestINV_MCP_CACHE_002_entries(t *testing.T) {
	m, c := newCache(50, 1<<30, 0.9)
	for i := range 1000 {
		m.Put("k"+strconv.Itoa(i), entry(c, "t", 10, time.Hour))
		if n, _ := m.Stats(); n > 50 {
			t.Fatalf("put %d: %d entries, over MaxEntries 50", i, n)
		}
	}
	if n, _ := m.Stats(); n != 50 {
		t.Fatalf("%d entries after 1000 puts, want the bound 50", n)
	}
}

// TestINV_MCP_CACHE_003_expiry: an expired entry is never returned, at the instant of
// expiry included; an entry within its TTL is.
func TestINV_MCP_CACHE_003_expiry(t *testing.T) {
	m, c := newCache(100, 1<<20, 0.9)
	m.Put("short", entry(c, "t", 10, time.Second))
	m.Put("long", entry(c, "t", 10, time.Minute))
	c.advance(999 * time.Millisecond)
	if _, ok := m.Get("short"); !ok {
		t.Fatal("an entry within its TTL was not returned")
	}
	c.advance(time.Millisecond)
	if _, ok := m.Get("short"); ok {
		t.Fatal("an entry was returned at its expiry")
	}
	if _, ok := m.Get("long"); !ok {
		t.Fatal("a live entry was lost with an expired one")
	}
	c.advance(time.Hour)
	if _, ok := m.Get("long"); ok {
		t.Fatal("an expired entry was returned")
	}
	if n, size := m.Stats(); n != 0 || size != 0 {
		t.Fatalf("expired entries still held: %d entries, %d bytes", n, size)
	}
}

// TestINV_MCP_CACHE_004_lru: the least recently used entry goes first; a read counts as
// a use.
func TestINV_MCP_CACHE_004_lru(t *testing.T) {
	m, c := newCache(3, 1<<20, 0.9)
	m.Put("a", entry(c, "t", 10, time.Hour))
	m.Put("b", entry(c, "t", 10, time.Hour))
	m.Put("c", entry(c, "t", 10, time.Hour))
	m.Get("a") // a is now the most recently used; b the least
	m.Put("d", entry(c, "t", 10, time.Hour))
	if _, ok := m.Get("b"); ok {
		t.Fatal("b, the least recently used, was kept")
	}
	for _, k := range []string{"a", "c", "d"} {
		if _, ok := m.Get(k); !ok {
			t.Fatalf("%s was evicted before the least recently used entry", k)
		}
	}
	// By bytes too: the high-water mark evicts from the back.
	m2, c2 := newCache(100, 4096, 1)
	sz := entry(c2, "t", 1000, time.Hour).Size("k0")
	for i := range 3 {
		m2.Put("k"+strconv.Itoa(i), entry(c2, "t", 1000, time.Hour))
	}
	m2.Get("k0")
	m2.Put("k3", entry(c2, "t", 1000, time.Hour)) // 4 × ~1.1 KB > 4 KB: one goes
	if _, ok := m2.Get("k1"); ok || sz*4 <= 4096 {
		t.Fatalf("k1, the least recently used, was kept (entry size %d)", sz)
	}
}

// TestINV_MCP_CACHE_005_atomicity: readers racing writers (under -race) only ever see an
// entry exactly as it was put, never a mix of two puts or a half-removed one.
func TestINV_MCP_CACHE_005_atomicity(t *testing.T) {
	m, c := newCache(64, 256<<10, 0.9)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	errs := make(chan error, 16)
	for w := range 4 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(w), 7))
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				k := "k" + strconv.Itoa(r.IntN(100))
				switch r.IntN(10) {
				case 0:
					m.PurgeTools([]string{k})
				case 1:
					m.Delete(k)
				default:
					// The result names its key and generation: a reader can check it whole.
					gen := strconv.Itoa(i)
					e := Entry{Tool: k, Result: []byte(k + "|" + gen + "|" + string(bytes.Repeat([]byte{'v'}, r.IntN(2000)))),
						Gen: gen, Stored: c.now(), Expires: c.now().Add(time.Hour)}
					m.Put(k, e)
				}
			}
		})
	}
	for range 4 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(99, 3))
			for range 20000 {
				k := "k" + strconv.Itoa(r.IntN(100))
				e, ok := m.Get(k)
				if !ok {
					continue
				}
				want := k + "|" + e.Gen + "|"
				if e.Tool != k || !bytes.HasPrefix(e.Result, []byte(want)) {
					errs <- fmt.Errorf("Get(%s) = tool %s gen %s result %.40q: parts of different puts", k, e.Tool, e.Gen, e.Result)
					return
				}
			}
		})
	}
	go func() { time.Sleep(300 * time.Millisecond); close(stop) }()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if n, sum := m.sumSizes(); func() bool { en, sz := m.Stats(); return en != n || sz != sum }() {
		t.Fatalf("after the race: tracked entries/bytes differ from the held ones (%d, %d)", n, sum)
	}
}

// TestINV_MCP_CACHE_006_sizeAccuracy: the tracked size equals the sum of the entry sizes
// (within 1 % is the requirement; it is exact) after every operation of a random mix.
func TestINV_MCP_CACHE_006_sizeAccuracy(t *testing.T) {
	m, c := newCache(200, 128<<10, 0.8)
	r := rand.New(rand.NewPCG(5, 5))
	for i := range 20000 {
		k := "k" + strconv.Itoa(r.IntN(300))
		switch r.IntN(12) {
		case 0:
			m.PurgeTools([]string{"t" + strconv.Itoa(r.IntN(5))})
		case 1:
			m.Delete(k)
		case 2:
			c.advance(time.Duration(r.IntN(5)) * time.Second)
			m.Get(k)
		case 3:
			if r.IntN(50) == 0 {
				m.PurgeAll()
			}
		default:
			m.Put(k, entry(c, "t"+strconv.Itoa(r.IntN(5)), r.IntN(3000), time.Duration(1+r.IntN(20))*time.Second))
		}
		n, sum := m.sumSizes()
		en, size := m.Stats()
		if en != n || size != sum {
			t.Fatalf("op %d: tracked %d entries / %d bytes, held %d / %d", i, en, size, n, sum)
		}
	}
}

func TestPurgeTools(t *testing.T) {
	m, c := newCache(100, 1<<20, 0.9)
	m.Put("a1", entry(c, "a", 1, time.Hour))
	m.Put("a2", entry(c, "a", 1, time.Hour))
	m.Put("b1", entry(c, "b", 1, time.Hour))
	if n := m.PurgeTools([]string{"a", "zzz"}); n != 2 {
		t.Fatalf("PurgeTools removed %d, want 2", n)
	}
	if _, ok := m.Get("a1"); ok {
		t.Fatal("a purged entry is returned")
	}
	if _, ok := m.Get("b1"); !ok {
		t.Fatal("another tool's entry was purged")
	}
}
