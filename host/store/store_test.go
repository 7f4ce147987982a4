package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stategate/stategate/host/store/storetest"
)

// opener gives a fresh, empty store and the clock its TTLs run on.
type opener func(t testing.TB, opts Options) (Store, clock)

// clock is the time a store's entries expire on: real time for Redis, a fake clock for
// Memory and Bolt. Leases always run on real time.
type clock interface {
	Now() time.Time
	Advance(d time.Duration) // lets at least d pass
}

// implementations are the stores the contract suite runs against. setup prepares a
// backend for the life of t (a test or benchmark and its subtests).
var implementations = []struct {
	name  string
	setup func(t testing.TB) opener
}{
	{name: "memory", setup: func(testing.TB) opener { return openMemory }},
	{name: "bolt", setup: func(testing.TB) opener { return openTempBolt }},
	{name: "redis", setup: func(t testing.TB) opener {
		url := storetest.Redis(t)
		return func(t testing.TB, opts Options) (Store, clock) {
			r, err := NewRedis(context.Background(), url, opts)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = r.Close() })
			flush(t, r)
			return r, realClock{}
		}
	}},
	{name: "redis_cluster", setup: func(t testing.TB) opener {
		spec, _ := storetest.Cluster(t, 3)
		return openRedisSpec(spec)
	}},
	{name: "redis_sentinel", setup: func(t testing.TB) opener {
		return openRedisSpec(storetest.Sentinel(t, 1, 1).Spec())
	}},
}

// openRedisSpec opens a fresh store for each test on the deployment spec names, emptied.
func openRedisSpec(spec string) opener {
	return func(t testing.TB, opts Options) (Store, clock) {
		s, err := Open(context.Background(), spec, opts)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		flush(t, s.(*Redis))
		return s, realClock{}
	}
}

// flush empties every database (every master's, on a cluster) r uses.
func flush(t testing.TB, r *Redis) {
	t.Helper()
	ctx := context.Background()
	var err error
	if cc, ok := r.client.(*redis.ClusterClient); ok {
		err = cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { return c.FlushDB(ctx).Err() })
	} else {
		err = r.client.FlushDB(ctx).Err()
	}
	if err != nil {
		t.Fatal(err)
	}
}

type realClock struct{}

func (realClock) Now() time.Time          { return time.Now() }
func (realClock) Advance(d time.Duration) { time.Sleep(d) }

type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time          { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *fakeClock) Advance(d time.Duration) { c.mu.Lock(); defer c.mu.Unlock(); c.now = c.now.Add(d) }

// openMemory gives a Memory store on a fake clock.
func openMemory(_ testing.TB, opts Options) (Store, clock) {
	m := NewMemory(opts)
	c := &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	m.now = c.Now
	return m, c
}

// openTempBolt gives a Bolt store in a new file, on a fake clock, its sweeper idle (tests
// call sweep).
func openTempBolt(t testing.TB, opts Options) (Store, clock) {
	c := &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	b, err := openBolt(filepath.Join(t.TempDir(), "stategate.db"), opts, c.Now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b, c
}

// hostileKeys are keys and session ids that break naive escaping, globbing, hash tags or
// line-based protocols.
var hostileKeys = []string{
	"", " ", "a b", "a/b/../c", "/", "ключ-日本語-🙂", "*", "key*?[x]", "{", "{tag}x", "}",
	"line\nbreak", "crlf\r\n", "\x00nul", "%41", "A", "session:x", "stategate:session:x",
	"stategate/v1/wf/session/p%2Fq/s-1",
}

func TestStore(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name string
		opts Options
		run  func(t *testing.T, s Store, c clock)
	}{
		{name: "get_absent_is_nil", run: func(t *testing.T, s Store, _ clock) {
			mustGet(t, s, "missing", nil)
		}},
		{name: "lock_is_exclusive_and_released", run: func(t *testing.T, s Store, _ clock) {
			unlock, err := s.Lock(ctx, []string{"b", "a"}, 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			wctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
			defer cancel()
			mustBusy(t, s, wctx, "a", "a")
			other, err := s.Lock(ctx, []string{"c"}, 5*time.Second)
			if err != nil {
				t.Fatalf("an unrelated key: %v", err)
			}
			other()
			unlock()
			again, err := s.Lock(ctx, []string{"a", "b"}, 5*time.Second)
			if err != nil {
				t.Fatalf("after release: %v", err)
			}
			again()
		}},
		{name: "lock_held_elsewhere_is_busy_at_the_deadline", run: func(t *testing.T, s Store, _ clock) {
			unlock, err := s.Lock(ctx, []string{"b"}, 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			defer unlock()
			const wait = 40 * time.Millisecond
			wctx, cancel := context.WithTimeout(ctx, wait)
			defer cancel()
			deadline, _ := wctx.Deadline()
			mustBusy(t, s, wctx, "b", "a", "b", "c")
			if early := time.Until(deadline); early > 0 {
				t.Errorf("gave up %v before the deadline (%v)", early, wait)
			}
			// The key taken before the busy one ("a") was released, the one after ("c")
			// never taken.
			free, err := s.Lock(ctx, []string{"a", "c"}, 5*time.Second)
			if err != nil {
				t.Fatalf("keys a busy Lock gave up: %v", err)
			}
			free()
		}},
		{name: "lock_lease_lapses_and_a_late_release_keeps_the_next", run: func(t *testing.T, s Store, _ clock) {
			first, err := s.Lock(ctx, []string{"k"}, 20*time.Millisecond)
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			second, err := s.Lock(wctx, []string{"k"}, 5*time.Second)
			if err != nil {
				t.Fatalf("a lapsed lease was not taken over: %v", err)
			}
			if took := time.Since(start); took < 15*time.Millisecond {
				t.Errorf("taken over after %v, before the 20ms lease lapsed", took)
			}
			first() // late: the lease it names lapsed, and k is the second holder's
			bctx, cancel := context.WithTimeout(ctx, 30*time.Millisecond)
			defer cancel()
			mustBusy(t, s, bctx, "k", "k")
			second()
			second() // twice: still nothing else released
			third, err := s.Lock(ctx, []string{"k"}, 5*time.Second)
			if err != nil {
				t.Fatalf("after the second holder's release: %v", err)
			}
			third()
		}},
		{name: "lock_refuses_a_ttl_under_1ms", run: func(t *testing.T, s Store, _ clock) {
			for _, d := range []time.Duration{0, -time.Second, time.Microsecond} {
				if unlock, err := s.Lock(ctx, []string{"k"}, d); err == nil {
					unlock()
					t.Errorf("Lock(ttl %v) succeeded", d)
				} else if errors.Is(err, ErrBusy) {
					t.Errorf("Lock(ttl %v) = %v, a store error and not ErrBusy", d, err)
				}
			}
		}},
		{name: "lock_serialises_concurrent_holders", run: func(t *testing.T, s Store, _ clock) {
			var inside, most atomic.Int32
			var wg sync.WaitGroup
			for i := 0; i < 20; i++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					unlock, err := s.Lock(ctx, []string{"k"}, 5*time.Second)
					if err != nil {
						t.Error(err)
						return
					}
					if n := inside.Add(1); n > most.Load() {
						most.Store(n)
					}
					time.Sleep(time.Millisecond)
					inside.Add(-1)
					unlock()
				}()
			}
			wg.Wait()
			if most.Load() != 1 {
				t.Fatalf("%d holders at once", most.Load())
			}
		}},
		{name: "create_succeeds_once", run: func(t *testing.T, s Store, _ clock) {
			mustCAS(t, s, "s1", "k", nil, []byte("v1"), true)
			mustCAS(t, s, "s1", "k", nil, []byte("v2"), false)
			mustGet(t, s, "k", []byte("v1"))
		}},
		{name: "wrong_old_fails_and_keeps_value", run: func(t *testing.T, s Store, _ clock) {
			mustCAS(t, s, "s1", "k", nil, []byte("v1"), true)
			mustCAS(t, s, "s1", "k", []byte("v0"), []byte("v2"), false)
			mustCAS(t, s, "s1", "k", []byte{}, []byte("v2"), false)
			mustGet(t, s, "k", []byte("v1"))
		}},
		{name: "old_of_absent_key_fails", run: func(t *testing.T, s Store, _ clock) {
			mustCAS(t, s, "s1", "k", []byte("v0"), []byte("v1"), false)
			mustCAS(t, s, "s1", "k", []byte{}, []byte("v1"), false)
			mustGet(t, s, "k", nil)
		}},
		{name: "right_old_swaps", run: func(t *testing.T, s Store, _ clock) {
			mustCAS(t, s, "s1", "k", nil, []byte("v1"), true)
			mustCAS(t, s, "s1", "k", []byte("v1"), []byte("v2"), true)
			mustGet(t, s, "k", []byte("v2"))
			mustCAS(t, s, "", "k", []byte("v2"), []byte("v3"), true)
			mustGet(t, s, "k", []byte("v3"))
		}},
		{name: "empty_value_is_present", run: func(t *testing.T, s Store, _ clock) {
			mustCAS(t, s, "s1", "k", nil, []byte{}, true)
			mustGet(t, s, "k", []byte{})
			mustCAS(t, s, "s1", "k", nil, []byte("v"), false)
			mustCAS(t, s, "s1", "k", []byte{}, []byte("v"), true)
			mustGet(t, s, "k", []byte("v"))
		}},
		{name: "forget_frees_only_that_session", run: func(t *testing.T, s Store, _ clock) {
			mustCAS(t, s, "s1", "a1", nil, []byte("1"), true)
			mustCAS(t, s, "s1", "a2", nil, []byte("2"), true)
			mustCAS(t, s, "s2", "b1", nil, []byte("3"), true)
			mustCAS(t, s, "", "shared", nil, []byte("4"), true)
			mustForget(t, s, "s1")
			mustGet(t, s, "a1", nil)
			mustGet(t, s, "a2", nil)
			mustGet(t, s, "b1", []byte("3"))
			mustGet(t, s, "shared", []byte("4"))
			mustForget(t, s, "s1") // again: nothing left
			mustForget(t, s, "")   // no session: nothing recorded
			mustForget(t, s, "never-seen")
			mustGet(t, s, "b1", []byte("3"))
			mustGet(t, s, "shared", []byte("4"))
			// A key forgotten can be created afresh.
			mustCAS(t, s, "s1", "a1", nil, []byte("5"), true)
			mustGet(t, s, "a1", []byte("5"))
		}},
		{name: "forget_keeps_hostile_session_ids_apart", run: func(t *testing.T, s Store, _ clock) {
			sessions := hostileKeys[1:] // "" means no session
			for i, id := range sessions {
				mustCAS(t, s, id, "k"+strconv.Itoa(i), nil, []byte(id), true)
			}
			for i, id := range sessions {
				mustForget(t, s, id)
				mustGet(t, s, "k"+strconv.Itoa(i), nil)
				for j := i + 1; j < len(sessions); j++ {
					mustGet(t, s, "k"+strconv.Itoa(j), []byte(sessions[j]))
				}
			}
		}},
		{name: "hostile_keys_round_trip", run: func(t *testing.T, s Store, _ clock) {
			for _, k := range hostileKeys {
				mustCAS(t, s, "s1", k, nil, []byte("value of "+k), true)
			}
			for _, k := range hostileKeys {
				mustGet(t, s, k, []byte("value of "+k))
				mustCAS(t, s, "s1", k, []byte("value of "+k), []byte("next "+k), true)
				mustGet(t, s, k, []byte("next "+k))
			}
			mustForget(t, s, "s1")
			for _, k := range hostileKeys {
				mustGet(t, s, k, nil)
			}
		}},
		{name: "zero_bytes_round_trip", run: func(t *testing.T, s Store, _ clock) {
			v1 := []byte("\x00a\x00\xff\x00")
			v2 := bytes.Repeat([]byte{0}, 4096)
			mustCAS(t, s, "s1", "k", nil, v1, true)
			mustGet(t, s, "k", v1)
			mustCAS(t, s, "s1", "k", []byte("\x00a\x00\xff"), v2, false) // a prefix is not equal
			mustCAS(t, s, "s1", "k", v1, v2, true)
			mustGet(t, s, "k", v2)
		}},
		{name: "caller_slices_are_not_retained", run: func(t *testing.T, s Store, _ clock) {
			v := []byte("v1")
			mustCAS(t, s, "s1", "k", nil, v, true)
			v[0] = 'x'
			got := mustGet(t, s, "k", []byte("v1"))
			got[0] = 'y'
			mustGet(t, s, "k", []byte("v1"))
		}},
		{name: "concurrent_increments_lose_nothing", run: func(t *testing.T, s Store, _ clock) {
			const workers, each = 50, 20
			var wg sync.WaitGroup
			errs := make(chan error, workers)
			for w := range workers {
				wg.Go(func() {
					session := "s" + strconv.Itoa(w%3)
					for range each {
						if err := increment(ctx, s, session, "counter"); err != nil {
							errs <- err
							return
						}
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			mustGet(t, s, "counter", []byte(strconv.Itoa(workers*each)))
		}},
	}
	for _, impl := range implementations {
		t.Run(impl.name, func(t *testing.T) {
			open := impl.setup(t)
			for _, tc := range tests {
				t.Run(tc.name, func(t *testing.T) {
					s, c := open(t, tc.opts)
					tc.run(t, s, c)
				})
			}
			for _, tc := range releasingTests {
				if !strings.HasPrefix(impl.name, "redis") {
					break // only Redis releases leases in a write
				}
				t.Run(tc.name, func(t *testing.T) {
					s, _ := open(t, Options{})
					r, ok := s.(*Redis)
					if !ok {
						t.Fatalf("%s opened a %T", impl.name, s)
					}
					tc.run(t, r)
				})
			}
			t.Run("idle_ttl_expires", func(t *testing.T) {
				// On real time a "still there" check only holds when the scheduler let less
				// than the TTL pass; a late attempt is tried again with twice the TTL, up to
				// 16 times the first. "Gone" checks always hold. A fake clock passes at once.
				for attempt := range 5 {
					d := ttl << attempt
					s, c := open(t, Options{IdleTTL: d})
					if idleTTLExpires(t, s, c, d, strconv.Itoa(attempt)+"/") {
						return
					}
					t.Logf("attempt %d (TTL %v): too late to check a refreshed key; retrying", attempt, d)
				}
				t.Fatalf("scheduler delays exceeded the TTL in every attempt, up to %v", ttl<<4)
			})
		})
	}
}

const ttl = 500 * time.Millisecond

// releasingTests hold CompareAndSwapReleasing, the write that also releases a moving
// call's leases, on every Redis deployment.
var releasingTests = []struct {
	name string
	run  func(t *testing.T, r *Redis)
}{
	{name: "a_swap_releases_its_leases_in_its_round_trip", run: func(t *testing.T, r *Redis) {
		ctx := context.Background()
		k := "stategate/v1/cart/session/alice/S1"
		lease, values, err := r.LockLease(ctx, []string{k}, 5*time.Second, true)
		if err != nil {
			t.Fatal(err)
		}
		if len(values) != 1 || values[0] != nil {
			t.Fatalf("LockLease read %q, want one absent value", values)
		}
		before := r.RoundTrips()
		mustSwapReleasing(t, r, "S1", k, nil, []byte("v1"), lease, true)
		if n := r.RoundTrips() - before; n != 1 {
			t.Errorf("the write and the release took %d round trips, want 1", n)
		}
		mustGet(t, r, k, []byte("v1"))
		// A held key would wait out the deadline; a free one is taken at once.
		wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		next, err := r.Lock(wctx, []string{k}, 5*time.Second)
		if err != nil {
			t.Fatalf("the lease is still held after the write that releases it: %v", err)
		}
		before = r.RoundTrips()
		lease.Release() // nothing left: no round trip, and the next holder keeps its lease
		if n := r.RoundTrips() - before; n != 0 {
			t.Errorf("Release after the write took %d round trips, want 0", n)
		}
		bctx, cancel := context.WithTimeout(ctx, 30*time.Millisecond)
		defer cancel()
		mustBusy(t, r, bctx, k, k)
		next()
		mustForget(t, r, "S1") // the key was recorded for its session
		mustGet(t, r, k, nil)
	}},
	{name: "a_conflict_keeps_the_leases", run: func(t *testing.T, r *Redis) {
		ctx := context.Background()
		k := "stategate/v1/cart/session/alice/S1"
		mustCAS(t, r, "S1", k, nil, []byte("v1"), true)
		lease, _, err := r.LockLease(ctx, []string{k}, 5*time.Second, false)
		if err != nil {
			t.Fatal(err)
		}
		mustSwapReleasing(t, r, "S1", k, []byte("v0"), []byte("v2"), lease, false)
		wctx, cancel := context.WithTimeout(ctx, 30*time.Millisecond)
		defer cancel()
		mustBusy(t, r, wctx, k, k)
		mustSwapReleasing(t, r, "S1", k, []byte("v1"), []byte("v2"), lease, true) // re-read, re-applied
		mustGet(t, r, k, []byte("v2"))
		again, err := r.Lock(ctx, []string{k}, time.Second)
		if err != nil {
			t.Fatalf("after the write that releases: %v", err)
		}
		again()
	}},
	{name: "leases_the_write_cannot_name_are_left_to_release", run: func(t *testing.T, r *Redis) {
		// A session's key and a handle's: one slot space on a server, two slots on a
		// cluster, where the write of one can release only the lease in its own slot.
		ctx := context.Background()
		a, b := "stategate/v1/cart/session/alice/S1", "stategate/v1/cart/arg.cart_id/alice/1"
		lease, _, err := r.LockLease(ctx, []string{a, b}, 5*time.Second, false)
		if err != nil {
			t.Fatal(err)
		}
		mustCAS(t, r, "S1", a, nil, []byte("va"), true)
		mustSwapReleasing(t, r, "", b, nil, []byte("vb"), lease, true)
		bctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		freeB, err := r.Lock(bctx, []string{b}, time.Second)
		if err != nil {
			t.Fatalf("the written key's lease is held after the write that releases it: %v", err)
		}
		freeB()
		if r.cluster {
			// Looked at directly, not by a Lock that waits it out: one whose deadline fails
			// its script hands its leases to the janitor (Redis.Lock's notes), whose release
			// would be counted below beside Release's.
			if got, err := r.client.Get(ctx, r.lay.lockKey(a)).Result(); err != nil || got != lease.token {
				t.Fatalf("the lease on %q the write could not name = %q, %v; want it held by the Lock", a, got, err)
			}
		} else {
			wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			free, err := r.Lock(wctx, []string{a}, time.Second)
			if err != nil {
				t.Fatalf("on one server the last write releases every lease; %q: %v", a, err)
			}
			free()
		}
		before := r.RoundTrips()
		lease.Release()
		if n, want := r.RoundTrips()-before, map[bool]uint64{true: 1, false: 0}[r.cluster]; n != want {
			t.Errorf("Release of what the write left took %d round trips, want %d", n, want)
		}
		both, err := r.Lock(ctx, []string{a, b}, time.Second)
		if err != nil {
			t.Fatalf("after Release: %v", err)
		}
		both()
	}},
	{name: "a_lapsed_lease_taken_by_another_holder_is_not_released", run: func(t *testing.T, r *Redis) {
		ctx := context.Background()
		k := "stategate/v1/cart/session/alice/S1"
		lease, _, err := r.LockLease(ctx, []string{k}, 20*time.Millisecond, false)
		if err != nil {
			t.Fatal(err)
		}
		wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		other, err := r.Lock(wctx, []string{k}, 5*time.Second) // once the first lapsed
		if err != nil {
			t.Fatal(err)
		}
		defer other()
		mustSwapReleasing(t, r, "S1", k, nil, []byte("v1"), lease, true)
		bctx, cancel := context.WithTimeout(ctx, 30*time.Millisecond)
		defer cancel()
		mustBusy(t, r, bctx, k, k)
	}},
}

func mustSwapReleasing(t *testing.T, r *Redis, session, key string, old, new []byte, lease *Lease, want bool) {
	t.Helper()
	got, err := r.CompareAndSwapReleasing(context.Background(), session, key, old, new, lease)
	if err != nil {
		t.Fatalf("CompareAndSwapReleasing(%q, %q, %q, %q): %v", session, key, old, new, err)
	}
	if got != want {
		t.Fatalf("CompareAndSwapReleasing(%q, %q, %q, %q) = %v, want %v", session, key, old, new, got, want)
	}
}

// idleTTLExpires checks that keys live for ttl (the store's IdleTTL) after their last read or write, and
// no longer. It returns false when c ran so late that a live key could have expired.
func idleTTLExpires(t *testing.T, s Store, c clock, ttl time.Duration, p string) bool {
	start := c.Now()
	mustCAS(t, s, "s1", p+"read", nil, []byte("r"), true)
	mustCAS(t, s, "s1", p+"written", nil, []byte("w0"), true)
	mustCAS(t, s, "s1", p+"idle", nil, []byte("i"), true)
	c.Advance(ttl * 3 / 5)
	refreshed := c.Now() // before the read and the write that refresh
	if !present(t, s, c, ttl, p+"read", []byte("r"), start) {
		return false
	}
	ok, err := s.CompareAndSwap(context.Background(), "s1", p+"written", []byte("w0"), []byte("w1"))
	if err != nil {
		t.Fatal(err)
	}
	if !ok {
		if c.Now().Sub(start) < ttl {
			t.Fatalf("CompareAndSwap(%q) within the TTL failed", p+"written")
		}
		return false
	}
	c.Advance(ttl * 3 / 5) // 6/5 TTL after the writes, 3/5 after the refreshes
	mustGet(t, s, p+"idle", nil)
	if !present(t, s, c, ttl, p+"read", []byte("r"), refreshed) || !present(t, s, c, ttl, p+"written", []byte("w1"), refreshed) {
		return false
	}
	c.Advance(ttl * 6 / 5)
	mustGet(t, s, p+"read", nil)
	mustGet(t, s, p+"written", nil)
	mustCAS(t, s, "s1", p+"idle", nil, []byte("again"), true)
	mustGet(t, s, p+"idle", []byte("again"))
	return true
}

// present checks that key holds want, last touched no earlier than since; it returns
// false, instead of failing, when key is gone but c says the TTL may have passed.
func present(t *testing.T, s Store, c clock, ttl time.Duration, key string, want []byte, since time.Time) bool {
	t.Helper()
	got, err := s.Get(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	if got == nil && c.Now().Sub(since) >= ttl {
		return false
	}
	if !bytes.Equal(got, want) || got == nil {
		t.Fatalf("Get(%q) = %q, want %q", key, got, want)
	}
	return true
}

// increment adds one to the decimal counter under key, re-reading on every conflict, as
// the gateway re-applies a transition.
func increment(ctx context.Context, s Store, session, key string) error {
	for {
		old, err := s.Get(ctx, key)
		if err != nil {
			return err
		}
		n := 0
		if old != nil {
			if n, err = strconv.Atoi(string(old)); err != nil {
				return fmt.Errorf("counter %q: %w", old, err)
			}
		}
		ok, err := s.CompareAndSwap(ctx, session, key, old, []byte(strconv.Itoa(n+1)))
		if err != nil || ok {
			return err
		}
	}
}

func TestMemory_evictsLeastRecentlyUsed(t *testing.T) {
	ctx := context.Background()
	m := NewMemory(Options{MaxEntries: 100})
	for i := range 1000 {
		mustCAS(t, m, "s"+strconv.Itoa(i%7), "k"+strconv.Itoa(i), nil, []byte{byte(i)}, true)
		if m.Len() > 100 {
			t.Fatalf("after %d inserts: Len() = %d, want <= 100", i+1, m.Len())
		}
	}
	for i := range 1000 {
		want := []byte(nil)
		if i >= 900 {
			want = []byte{byte(i)}
		}
		mustGet(t, m, "k"+strconv.Itoa(i), want)
	}
	recorded := 0
	for _, keys := range m.sessions {
		recorded += len(keys)
	}
	if recorded != 100 {
		t.Errorf("session index holds %d keys, want the 100 stored", recorded)
	}

	// A read makes an entry recent: the next insert evicts the one after it.
	m = NewMemory(Options{MaxEntries: 3})
	for _, k := range []string{"a", "b", "c"} {
		mustCAS(t, m, "s", k, nil, []byte(k), true)
	}
	mustGet(t, m, "a", []byte("a"))
	mustCAS(t, m, "s", "d", nil, []byte("d"), true)
	mustGet(t, m, "b", nil)
	for _, k := range []string{"a", "c", "d"} {
		mustGet(t, m, k, []byte(k))
	}
	if err := m.Forget(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	if m.Len() != 0 || len(m.sessions) != 0 {
		t.Errorf("after Forget: Len() = %d, sessions = %v, want both empty", m.Len(), m.sessions)
	}
}

func TestMemory_writesSweepExpiredEntries(t *testing.T) {
	s, c := openMemory(t, Options{IdleTTL: time.Minute})
	m := s.(*Memory)
	for i := range 10 {
		mustCAS(t, m, "s", "old"+strconv.Itoa(i), nil, []byte("v"), true)
	}
	c.Advance(time.Minute)
	mustCAS(t, m, "t", "new", nil, []byte("v"), true)
	if m.Len() != 1 || len(m.sessions) != 1 {
		t.Errorf("Len() = %d, sessions = %d, want 1 and 1", m.Len(), len(m.sessions))
	}
}

func TestOpen(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, "memory", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := s.(*Memory); !ok {
		t.Errorf("Open(memory) = %T, want *Memory", s)
	}
	_ = s.Close()
	s, err = Open(ctx, "bolt:"+filepath.Join(t.TempDir(), "s.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := s.(*Bolt); !ok {
		t.Errorf("Open(bolt:...) = %T, want *Bolt", s)
	}
	_ = s.Close()

	tests := []struct {
		name, spec, wantErr string
	}{
		{name: "unknown_scheme", spec: "etcd://x", wantErr: `store: unknown spec[etcd://x]: want "memory", "bolt:PATH", "redis://HOST:PORT/DB", "redis+cluster://HOST:PORT,..." or "redis+sentinel://HOST:PORT,.../MASTER"`},
		{name: "bolt_without_path", spec: "bolt:", wantErr: `store: spec[bolt:] names no file: want "bolt:PATH"`},
		{name: "bolt_in_missing_directory", spec: "bolt:" + filepath.Join(t.TempDir(), "no", "such", "dir", "s.db"), wantErr: "store[bolt] path["},
		{name: "empty", spec: "", wantErr: `store: unknown spec[]`},
		{name: "bad_redis_url", spec: "redis://127.0.0.1:6379/notadb", wantErr: "store[redis] url[redis://127.0.0.1:6379/notadb]: "},
		{name: "nothing_listening", spec: "redis://:secret@127.0.0.1:1/0", wantErr: "store[redis] url[redis://:xxxxx@127.0.0.1:1/0]: ping: "},
		{name: "cluster_nothing_listening", spec: "redis+cluster://:secret@127.0.0.1:1,127.0.0.1:2", wantErr: "store[redis] url[redis+cluster://:xxxxx@127.0.0.1:1,127.0.0.1:2]: ping: "},
		{name: "cluster_with_a_database", spec: "redis+cluster://127.0.0.1:1/0", wantErr: "store[redis] url[redis+cluster://127.0.0.1:1/0]: a cluster has no databases"},
		{name: "cluster_without_hosts", spec: "redis+cluster://", wantErr: "store[redis] url[redis+cluster:]: names no HOST:PORT"},
		{name: "cluster_bad_wait", spec: "redis+cluster://127.0.0.1:1?wait=x", wantErr: "store[redis] url[redis+cluster://127.0.0.1:1?wait=x]: wait[x] is not a number of replicas"},
		{name: "sentinel_without_master", spec: "redis+sentinel://127.0.0.1:1", wantErr: "store[redis] url[redis+sentinel://127.0.0.1:1]: want the master's name as the path"},
		{name: "sentinel_bad_wait_timeout", spec: "redis+sentinel://127.0.0.1:1/m?wait_timeout=-1s", wantErr: "store[redis] url[redis+sentinel://127.0.0.1:1/m?wait_timeout=-1s]: wait_timeout[-1s] is not a positive duration"},
		{name: "sentinel_nothing_listening", spec: "redis+sentinel://u:secret@127.0.0.1:1,127.0.0.1:2/mymaster", wantErr: "store[redis] url[redis+sentinel://u:xxxxx@127.0.0.1:1,127.0.0.1:2/mymaster]: ping: "},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			s, err := Open(ctx, tc.spec, Options{})
			if s != nil {
				t.Errorf("Open(%q) = %#v with its error, want a nil Store", tc.spec, s)
			}
			if err == nil {
				_ = s.Close()
				t.Fatalf("Open(%q) succeeded, want error %q", tc.spec, tc.wantErr)
			}
			if !strings.HasPrefix(err.Error(), tc.wantErr) {
				t.Errorf("Open(%q) error = %q, want prefix %q", tc.spec, err, tc.wantErr)
			}
			if strings.Contains(err.Error(), "secret") {
				t.Errorf("error leaks the password: %q", err)
			}
		})
	}
}

func TestEscapeSession(t *testing.T) {
	seen := map[string]string{}
	for _, id := range append(hostileKeys, "a%20b", "a%2520b", "AbZ09._~-") {
		got := escapeSession(id)
		if prev, dup := seen[got]; dup {
			t.Errorf("escapeSession(%q) = escapeSession(%q) = %q", id, prev, got)
		}
		seen[got] = id
		if strings.ContainsFunc(got, func(r rune) bool { return !strings.ContainsRune(safeSessionChars, r) }) {
			t.Errorf("escapeSession(%q) = %q, has characters outside [A-Za-z0-9._~%%-]", id, got)
		}
	}
	if got := escapeSession("AbZ09._~-"); got != "AbZ09._~-" {
		t.Errorf("escapeSession(unreserved) = %q, want it unchanged", got)
	}
}

const safeSessionChars = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._~-%"

func BenchmarkStore(b *testing.B) {
	ctx := context.Background()
	value := bytes.Repeat([]byte(`{"workflow":"w","fingerprint":"f","state":"s","seq":1}`), 2)
	other := append(bytes.Clone(value), '!')
	for _, impl := range implementations {
		b.Run(impl.name, func(b *testing.B) {
			open := impl.setup(b)
			b.Run("Get", func(b *testing.B) {
				s, _ := open(b, Options{})
				mustCAS(b, s, "s", "k", nil, value, true)
				for b.Loop() {
					if _, err := s.Get(ctx, "k"); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run("CompareAndSwap", func(b *testing.B) {
				s, _ := open(b, Options{})
				mustCAS(b, s, "s", "k", nil, value, true)
				old, next := value, other
				for b.Loop() {
					ok, err := s.CompareAndSwap(ctx, "s", "k", old, next)
					if err != nil || !ok {
						b.Fatalf("CompareAndSwap = %v, %v", ok, err)
					}
					old, next = next, old
				}
			})
		})
	}
}

// mustBusy checks that Lock(keys) waits until ctx ends, then fails with ErrBusy (and
// ctx's error) naming busy.
//
// # Notes
//
//   - A machine that stalls the Lock past ctx's deadline before it first looked at the
//     keys (Redis sends no script once ctx has ended) makes a plain deadline error the
//     right answer: the Lock never learnt busy was held. Such a round is inconclusive and
//     runs again with a deadline of 200 ms, then 1 s (the callers hold busy for 5 s).
func mustBusy(t testing.TB, s Store, ctx context.Context, busy string, keys ...string) {
	t.Helper()
	for _, wait := range []time.Duration{0, 200 * time.Millisecond, time.Second} {
		wctx, cancel := ctx, context.CancelFunc(func() {})
		if wait > 0 {
			t.Logf("Lock(%q) ended before it looked at the keys (a stalled machine); again with a deadline of %v", keys, wait)
			wctx, cancel = context.WithTimeout(context.Background(), wait)
		}
		unlock, err := s.Lock(wctx, keys, 5*time.Second)
		if err != nil && !errors.Is(err, ErrBusy) && errors.Is(err, context.DeadlineExceeded) {
			cancel()
			continue
		}
		wantBusy(t, wctx, unlock, err, busy, keys...)
		cancel()
		return
	}
	t.Fatalf("Lock(%q): every deadline tried ended before it looked at the keys", keys)
}

// wantBusy checks that a Lock of keys on ctx returned (unlock, err) because busy was held
// until ctx ended.
func wantBusy(t testing.TB, ctx context.Context, unlock func(), err error, busy string, keys ...string) {
	t.Helper()
	if err == nil {
		unlock()
		t.Fatalf("Lock(%q) succeeded while %q was held", keys, busy)
	}
	if !errors.Is(err, ErrBusy) || !errors.Is(err, ctx.Err()) || ctx.Err() == nil {
		t.Fatalf("Lock(%q) = %v, want ErrBusy and ctx's error %v", keys, err, ctx.Err())
	}
	if want := fmt.Sprintf("key[%q]", busy); !strings.Contains(err.Error(), want) {
		t.Errorf("Lock(%q) error %q does not name %s", keys, err, want)
	}
}

func mustGet(t testing.TB, s Store, key string, want []byte) []byte {
	t.Helper()
	got, err := s.Get(context.Background(), key)
	if err != nil {
		t.Fatalf("Get(%q): %v", key, err)
	}
	if (got == nil) != (want == nil) || !bytes.Equal(got, want) {
		t.Fatalf("Get(%q) = %q (nil: %v), want %q (nil: %v)", key, got, got == nil, want, want == nil)
	}
	return got
}

func mustCAS(t testing.TB, s Store, session, key string, old, new []byte, want bool) {
	t.Helper()
	got, err := s.CompareAndSwap(context.Background(), session, key, old, new)
	if err != nil {
		t.Fatalf("CompareAndSwap(%q, %q, %q, %q): %v", session, key, old, new, err)
	}
	if got != want {
		t.Fatalf("CompareAndSwap(%q, %q, %q, %q) = %v, want %v", session, key, old, new, got, want)
	}
}

func mustForget(t testing.TB, s Store, session string) {
	t.Helper()
	if err := s.Forget(context.Background(), session); err != nil {
		t.Fatalf("Forget(%q): %v", session, err)
	}
}
