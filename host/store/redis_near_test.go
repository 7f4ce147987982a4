package store

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stategate/stategate/host/store/storetest"
)

// TestRedisNear_neverStale runs two stores on one redis-server (two gateway replicas),
// each with its near cache, and on both at once: writers that move a few keys through
// increasing versions by compare-and-set, readers that read them with GetNear, and, every
// few milliseconds, CLIENT KILL of both stores' tracking connections. Every value a reader
// gets is checked against what it must not be older than:
//
//   - own: the last version its own store's writers had acknowledged when the read began
//     (this store's writes go through other connections: the dirty mark makes the read go
//     past the cache);
//   - fenced: the last version any writer, on either store, had acknowledged before the
//     reader's store received a reply on its tracking connection (a PING sent after the
//     acknowledgement): the server sends an invalidation before it answers any later
//     command on that connection, and the read loop applies it before that reply;
//   - after a reconnect: a killed connection's cache goes with it, so the invalidations
//     lost meanwhile leave nothing stale (the fenced check spans kills: a fence on a
//     killed connection fails, one on its successor finds an empty cache).
//
// A read that starts after another replica's write was acknowledged, with no reply on its
// own tracking connection in between, is not held to that write: the invalidation may be
// on its way (RATIONALE.md, "A near cache for state a call does not move").
func TestRedisNear_neverStale(t *testing.T) {
	url := storetest.RedisNear(t)
	ctx := context.Background()
	admin := redis.NewClient(mustParse(t, strings.TrimSuffix(url, "?near_cache=on")))
	defer admin.Close()
	var stores [2]*Redis
	for i := range stores {
		r, err := NewRedis(ctx, url, Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		if !r.NearCache() {
			t.Fatal("no near cache on redis://")
		}
		stores[i] = r
	}
	const nkeys = 3
	keys := make([]string, nkeys)
	for i := range keys {
		keys[i] = fmt.Sprintf("stategate/v1/flip/session/p/s%d", i)
	}
	var acked [nkeys]atomic.Int64       // highest version acknowledged to any writer
	var ownAcked [2][nkeys]atomic.Int64 // ... to store i's writers
	version := func(b []byte) int64 {
		if b == nil {
			return 0
		}
		n, err := strconv.ParseInt(strings.TrimPrefix(string(b), "v"), 10, 64)
		if err != nil {
			t.Errorf("value %q", b)
		}
		return n
	}
	raise := func(a *atomic.Int64, v int64) {
		for {
			cur := a.Load()
			if v <= cur || a.CompareAndSwap(cur, v) {
				return
			}
		}
	}
	deadline := time.Now().Add(3 * time.Second)
	var wg sync.WaitGroup
	var reads, fenced, kills, errs, late atomic.Int64
	for s := range stores {
		r := stores[s]
		for w := range 2 { // writers
			wg.Add(1)
			go func() {
				defer wg.Done()
				for n := 0; time.Now().Before(deadline); n++ {
					k := (n + w) % nkeys
					cur, err := r.Get(ctx, keys[k])
					if err != nil {
						errs.Add(1)
						continue
					}
					next := []byte("v" + strconv.FormatInt(version(cur)+1, 10))
					ok, err := r.CompareAndSwap(ctx, "", keys[k], cur, next)
					if err != nil {
						errs.Add(1)
						continue
					}
					if ok {
						raise(&ownAcked[s][k], version(next))
						raise(&acked[k], version(next))
					}
				}
			}()
		}
		for range 2 { // readers
			wg.Add(1)
			go func() {
				defer wg.Done()
				for n := 0; time.Now().Before(deadline); n++ {
					k := n % nkeys
					own := ownAcked[s][k].Load()
					any := acked[k].Load()
					fence := n%2 == 0 && r.near.fence(ctx) == nil
					got, err := r.GetNear(ctx, []string{keys[k]})
					if err != nil {
						errs.Add(1)
						continue
					}
					v := version(got[0])
					reads.Add(1)
					if v < own {
						t.Errorf("store %d key %d: read v%d after its own store's write of v%d was acknowledged", s, k, v, own)
					}
					if fence {
						fenced.Add(1)
						if v < any {
							t.Errorf("store %d key %d: read v%d after a fence that followed the acknowledgement of v%d", s, k, v, any)
						}
					} else if v < any {
						late.Add(1) // another store's write whose invalidation was on its way
					}
				}
			}()
		}
	}
	wg.Add(1)
	go func() { // forced reconnects of the tracking connections
		defer wg.Done()
		for time.Now().Before(deadline) {
			time.Sleep(150 * time.Millisecond)
			list, err := admin.ClientList(ctx).Result()
			if err != nil {
				continue
			}
			for _, line := range strings.Split(list, "\n") {
				if strings.Contains(line, " name=stategate-near ") {
					id, _, _ := strings.Cut(strings.TrimPrefix(line, "id="), " ")
					if admin.Do(ctx, "client", "kill", "id", id).Err() == nil {
						kills.Add(1)
					}
				}
			}
		}
	}()
	wg.Wait()
	t.Logf("%d reads (%d fenced), %d tracking connections killed, %d operations failed (killed connections); unfenced reads older than a write acknowledged to the other store before they began: %d", reads.Load(), fenced.Load(), kills.Load(), errs.Load(), late.Load())
	if kills.Load() < 4 || fenced.Load() < 100 {
		t.Fatalf("too little exercised: %d kills, %d fenced reads", kills.Load(), fenced.Load())
	}
}

// TestRedisNear_flushedOnReconnect: a value cached before its tracking connection was
// killed is never served after the kill, though the write that changed it came while no
// connection was there to be told: the kill's end of stream is on the socket before the
// killer is answered, so before the write; a read that finds it (caughtUp) goes past the
// cache, onto a new connection whose cache starts empty.
func TestRedisNear_flushedOnReconnect(t *testing.T) {
	url := storetest.RedisNear(t)
	ctx := context.Background()
	admin := redis.NewClient(mustParse(t, strings.TrimSuffix(url, "?near_cache=on")))
	defer admin.Close()
	r, err := NewRedis(ctx, url, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	const key = "stategate/v1/flip/session/p/s1"
	vk := r.lay.valueKey(key)
	for i := range 50 {
		old := []byte("old" + strconv.Itoa(i))
		if err := admin.Set(ctx, vk, old, 0).Err(); err != nil {
			t.Fatal(err)
		}
		hit := false
		for try := 0; try < 100 && !hit; try++ { // until served from the cache
			before := r.RoundTrips()
			got, err := r.GetNear(ctx, []string{key})
			if err != nil || string(got[0]) != string(old) {
				t.Fatalf("round %d: %q, %v; want %q", i, got, err, old)
			}
			hit = r.RoundTrips() == before
		}
		if !hit {
			t.Fatalf("round %d: never served from the cache", i)
		}
		if err := admin.Do(ctx, "client", "kill", "skipme", "yes").Err(); err != nil {
			t.Fatal(err)
		}
		if err := admin.Set(ctx, vk, "new", 0).Err(); err != nil { // no tracking connection now
			t.Fatal(err)
		}
		got, err := r.GetNear(ctx, []string{key})
		if err != nil {
			t.Fatalf("round %d: %v", i, err)
		}
		if string(got[0]) != "new" {
			t.Fatalf("round %d: %q after the kill and a write, want %q", i, got[0], "new")
		}
	}
}

// TestRedisNear_ownWriteThenRead: a read right after this store's own write of the key
// returns the write, every time, though the write's acknowledgement came on another
// connection than the invalidation.
func TestRedisNear_ownWriteThenRead(t *testing.T) {
	url := storetest.RedisNear(t)
	ctx := context.Background()
	r, err := NewRedis(ctx, url, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	const key = "stategate/v1/flip/session/p/s1"
	var cur []byte
	for i := range 500 {
		if _, err := r.GetNear(ctx, []string{key}); err != nil { // warm
			t.Fatal(err)
		}
		next := []byte("v" + strconv.Itoa(i))
		if ok, err := r.CompareAndSwap(ctx, "s1", key, cur, next); err != nil || !ok {
			t.Fatalf("write %d: %v %v", i, ok, err)
		}
		got, err := r.GetNear(ctx, []string{key})
		if err != nil || string(got[0]) != string(next) {
			t.Fatalf("read after write %d: %q, %v", i, got, err)
		}
		cur = next
	}
	if err := r.Forget(ctx, "s1"); err != nil {
		t.Fatal(err)
	}
	if got, err := r.GetNear(ctx, []string{key}); err != nil || got[0] != nil {
		t.Fatalf("read after Forget: %q, %v", got, err)
	}
}

func mustParse(t *testing.T, url string) *redis.Options {
	t.Helper()
	ro, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	return ro
}

// TestRedisNear_refreshesIdleTTL: reads from the near cache keep a key alive as Get does:
// a hit on a key within half the idle TTL of expiring reads it again with GETEX (one round
// trip, which refreshes it), and the reads after it are hits again.
func TestRedisNear_refreshesIdleTTL(t *testing.T) {
	url := storetest.RedisNear(t)
	ctx := context.Background()
	const ttl = 1200 * time.Millisecond
	r, err := NewRedis(ctx, url, Options{IdleTTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	const key = "stategate/v1/flip/session/p/s1"
	if ok, err := r.CompareAndSwap(ctx, "", key, nil, []byte("v1")); err != nil || !ok {
		t.Fatal(ok, err)
	}
	read := func() uint64 {
		t.Helper()
		before := r.RoundTrips()
		got, err := r.GetNear(ctx, []string{key})
		if err != nil || string(got[0]) != "v1" {
			t.Fatalf("%q, %v (expired?)", got, err)
		}
		return r.RoundTrips() - before
	}
	read() // the write's dirty mark
	read() // fills the cache
	if n := read(); n != 0 {
		t.Fatalf("warm read: %d round trips", n)
	}
	deadline := time.Now().Add(3 * ttl)
	refreshes := 0
	for time.Now().Before(deadline) {
		time.Sleep(ttl / 8)
		if read() > 0 {
			refreshes++
		}
	}
	// Three idle TTLs of hits: the key lived through them, refreshed about every half TTL
	// (the reads after a refresh are a fill and then hits).
	if refreshes == 0 || refreshes > 16 {
		t.Fatalf("%d reads with a round trip over %v", refreshes, 3*ttl)
	}
	t.Logf("%d reads with a round trip over %v", refreshes, 3*ttl)
}

// TestRedisNear_readRightAfterAnotherStoresWrite: store b reads a key (cache warm), store
// a writes it, and b reads it again as soon as a's write returned, 2,000 times: b never
// gets the old value. The write's PING (Redis.eval) makes the server write b's
// invalidation before a's acknowledgement, and b's hit checks that its connection has
// nothing unread (caughtUp). Without the PING this found 6 stale reads in 2,000 here.
func TestRedisNear_readRightAfterAnotherStoresWrite(t *testing.T) {
	url := storetest.RedisNear(t)
	ctx := context.Background()
	a, err := NewRedis(ctx, url, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := NewRedis(ctx, url, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for i := range 2000 {
		key := "stategate/v1/x/session/p/k" + strconv.Itoa(i%50)
		for range 2 { // fill, then (usually) a hit
			if _, err := b.GetNear(ctx, []string{key}); err != nil {
				t.Fatal(err)
			}
		}
		cur, err := a.Get(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		next := []byte("v" + strconv.Itoa(i))
		if ok, err := a.CompareAndSwap(ctx, "s", key, cur, next); !ok || err != nil {
			t.Fatal(ok, err)
		}
		got, err := b.GetNear(ctx, []string{key})
		if err != nil {
			t.Fatal(err)
		}
		if string(got[0]) != string(next) {
			t.Fatalf("write %d: b read %q right after a's write of %q returned", i, got[0], next)
		}
	}
}
