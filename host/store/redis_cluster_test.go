package store

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stategate/stategate/host/store/storetest"
)

func TestSlot(t *testing.T) {
	tests := []struct {
		name string
		key  string
		want int
	}{
		// Vectors from the Redis Cluster specification (CRC16/XMODEM of "123456789" is 0x31C3).
		{name: "spec_check_value", key: "123456789", want: 0x31C3 & 16383},
		{name: "tag_hashes_alone", key: "{123456789}.following", want: 0x31C3 & 16383},
		{name: "first_tag_wins", key: "x{123456789}{other}", want: 0x31C3 & 16383},
		{name: "empty_tag_hashes_whole_key", key: "{}123456789", want: slot("{}123456789")},
		{name: "unclosed_brace_hashes_whole_key", key: "{123456789", want: slot("{123456789")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := slot(tc.key); got != tc.want {
				t.Fatalf("slot(%q) = %d, want %d", tc.key, got, tc.want)
			}
		})
	}
	if slot("{}123456789") == slot("123456789") {
		t.Error("an empty tag must not hash as the rest of the key")
	}
}

func TestSlotTag(t *testing.T) {
	l := layout{tagged: true}
	same := []struct {
		name string
		a, b string // Redis names that must share a slot
	}{
		{name: "workflows_of_one_session", a: l.valueKey("stategate/v1/cart/session/alice/S1"), b: l.valueKey("stategate/v1/tasks/session/alice/S1")},
		{name: "session_state_and_its_set", a: l.valueKey("stategate/v1/cart/session/alice/S1"), b: l.sessionKey("S1")},
		{name: "escaped_session_and_its_set", a: l.valueKey("stategate/v1/cart/session/p%2Fq/a%7Bb%7D%20c"), b: l.sessionKey("a{b} c")},
		{name: "value_and_lease", a: l.valueKey("stategate/v1/cart/arg.cart_id/alice/42"), b: l.lockKey("stategate/v1/cart/arg.cart_id/alice/42")},
		{name: "workflows_of_one_handle", a: l.valueKey("stategate/v1/cart/arg.cart_id/alice/42"), b: l.valueKey("stategate/v1/refund/arg.cart_id/alice/42")},
		{name: "gateway_session_record_and_its_set", a: l.valueKey("stategate/v1/~gateway/session//stategate.Ab-_9"), b: l.sessionKey("stategate.Ab-_9")},
		{name: "per_tool_keys", a: l.valueKey("stategate/v1/health/tool/cart.pay"), b: l.valueKey("stategate/v1/cache/tool/cart.pay")},
		{name: "hostile_key_and_its_lease", a: l.valueKey("{tag}x}"), b: l.lockKey("{tag}x}")},
	}
	for _, tc := range same {
		t.Run(tc.name, func(t *testing.T) {
			if slot(tc.a) != slot(tc.b) {
				t.Fatalf("%q (slot %d) and %q (slot %d) must share a slot", tc.a, slot(tc.a), tc.b, slot(tc.b))
			}
		})
	}
	// Units spread: 1000 sessions, handles and tools land on many slots.
	slots := map[int]bool{}
	for i := range 1000 {
		slots[slot(l.valueKey("stategate/v1/cart/session/alice/s"+strconv.Itoa(i)))] = true
		slots[slot(l.valueKey("stategate/v1/cart/arg.cart_id/alice/"+strconv.Itoa(i)))] = true
	}
	// A uniform hash puts 2000 units on 16384(1-e^(-2000/16384)) ≈ 1883 distinct slots.
	if len(slots) < 1800 {
		t.Errorf("2000 units on %d slots: the tags do not spread them", len(slots))
	}
}

// TestRedisCluster runs what only a real cluster shows: our slots agree with the server's,
// keys spread over every master, and leases over keys of several slots are exclusive, all
// or nothing, and deadlock-free.
func TestRedisCluster(t *testing.T) {
	spec, masters := storetest.Cluster(t, 3)
	ctx := context.Background()
	s, err := Open(ctx, spec, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	r := s.(*Redis)

	t.Run("slots_agree_with_the_server", func(t *testing.T) {
		for _, k := range append(hostileKeys, "stategate/v1/cart/session/alice/S1", "stategate/v1/cart/arg.cart_id/alice/42") {
			for _, name := range []string{r.lay.valueKey(k), r.lay.lockKey(k), r.lay.sessionKey(k)} {
				want, err := r.client.ClusterKeySlot(ctx, name).Result()
				if err != nil {
					t.Fatal(err)
				}
				if got := slot(name); int64(got) != want {
					t.Errorf("slot(%q) = %d, server says %d", name, got, want)
				}
			}
		}
	})

	t.Run("keys_spread_over_every_master", func(t *testing.T) {
		flush(t, r)
		for i := range 300 {
			sid := "s" + strconv.Itoa(i)
			mustCAS(t, s, sid, "stategate/v1/cart/session/alice/"+sid, nil, []byte(`{"state":"a"}`), true)
		}
		total := int64(0)
		for _, m := range masters {
			c := redis.NewClient(&redis.Options{Addr: m.Addr()})
			n, err := c.DBSize(ctx).Result()
			c.Close()
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("master %s: %d keys", m.Addr(), n)
			if n < 100 { // 600 keys (value and set per session): about 200 each
				t.Errorf("master %s holds %d of 600 keys", m.Addr(), n)
			}
			total += n
		}
		if total != 600 {
			t.Errorf("%d keys in the cluster, want 600 (a value and a set per session)", total)
		}
	})

	t.Run("forget_reaches_keys_of_other_slots", func(t *testing.T) {
		flush(t, r)
		own, handle := "stategate/v1/cart/session/alice/S9", "stategate/v1/cart/arg.cart_id/alice/77"
		if slot(r.lay.valueKey(handle)) == slot(r.lay.sessionKey("S9")) {
			t.Fatal("pick a handle in another slot")
		}
		mustCAS(t, s, "S9", own, nil, []byte("1"), true)
		mustCAS(t, s, "S9", handle, nil, []byte("2"), true) // recorded across slots
		mustForget(t, s, "S9")
		mustGet(t, s, own, nil)
		mustGet(t, s, handle, nil)
	})

	t.Run("multi_slot_leases_are_exclusive_and_deadlock_free", func(t *testing.T) {
		keys := []string{
			"stategate/v1/cart/session/alice/S1", "stategate/v1/cart/arg.cart_id/alice/1",
			"stategate/v1/cart/arg.cart_id/alice/2", "stategate/v1/order/arg.order_id/alice/3",
			"stategate/v1/health/tool/cart.pay",
		}
		if len(r.groups(sortedKeys(keys))) < 4 {
			t.Fatalf("keys fall in %d slot groups; the test needs several", len(r.groups(sortedKeys(keys))))
		}
		holders := make([]atomic.Int32, len(keys))
		var wg sync.WaitGroup
		var taken atomic.Int64
		errs := make(chan error, 16)
		for w := range 16 {
			wg.Go(func() {
				rng := rand.New(rand.NewPCG(uint64(w), 1))
				for range 25 {
					idx := rng.Perm(len(keys))[:2+rng.IntN(3)] // 2 to 4 keys, in any order
					pick := make([]string, len(idx))
					for i, j := range idx {
						pick[i] = keys[j]
					}
					wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
					unlock, err := s.Lock(wctx, pick, 10*time.Second)
					cancel()
					if err != nil {
						errs <- fmt.Errorf("Lock(%q): %w (a deadlock waits until the deadline)", pick, err)
						return
					}
					for _, j := range idx {
						if holders[j].Add(1) != 1 {
							errs <- fmt.Errorf("key %q held twice", keys[j])
						}
					}
					time.Sleep(time.Duration(rng.IntN(500)) * time.Microsecond)
					for _, j := range idx {
						holders[j].Add(-1)
					}
					unlock()
					taken.Add(1)
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		if taken.Load() != 16*25 {
			t.Errorf("%d of %d locks taken", taken.Load(), 16*25)
		}
	})

	t.Run("lock_load", func(t *testing.T) { testLockLoad(t, r) })

	t.Run("a_busy_group_releases_the_groups_taken", func(t *testing.T) {
		// A machine that stalls the Lock past its context's deadline before the busy group
		// answered once (CI runs packages side by side on two cores) makes a plain
		// deadline error the right answer: the Lock never learnt a key was held. Such a
		// round is inconclusive and runs again, on keys of its own (its leases may be with
		// the janitor), with a longer deadline.
		for round, wait := range []time.Duration{50 * time.Millisecond, 500 * time.Millisecond, 5 * time.Second} {
			if busyGroupReleases(t, r, round, wait) {
				return
			}
			t.Logf("deadline %v: it ended before the busy group answered (a stalled machine); again with a longer one", wait)
		}
		t.Fatal("every deadline tried ended before the busy group answered")
	})
}

// busyGroupReleases runs one round of TestRedisCluster/a_busy_group_releases_the_groups_taken
// with a Lock deadline of wait. It reports false when the round was inconclusive: the
// deadline ended before the Lock saw the busy group held.
func busyGroupReleases(t *testing.T, r *Redis, round int, wait time.Duration) bool {
	ctx := context.Background()
	a := fmt.Sprintf("stategate/v1/cart/session/alice/S%d", round+1)
	b := fmt.Sprintf("stategate/v1/cart/arg.cart_id/alice/%d", round+1)
	first, second := a, b
	if slot(r.lay.lockKey(a)) > slot(r.lay.lockKey(b)) {
		first, second = b, a
	}
	if slot(r.lay.lockKey(first)) == slot(r.lay.lockKey(second)) {
		t.Fatalf("%q and %q share a slot: one group, nothing to release", first, second)
	}
	hold, err := r.Lock(ctx, []string{second}, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer hold()
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	unlock, err := r.Lock(wctx, []string{first, second}, 5*time.Second)
	if err != nil && !errors.Is(err, ErrBusy) && errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	wantBusy(t, wctx, unlock, err, second, first, second)
	// first was taken (its slot comes first) and must have been released: by the Lock at
	// once, or by its janitor when the deadline failed a script (see Redis.Lock's notes).
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		n, err := r.client.Exists(ctx, r.lay.lockKey(first)).Result()
		if err == nil && n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("lease on %q left 5s after a busy Lock: %d, %v", first, n, err)
		}
	}
	hold()
	both, err := r.Lock(ctx, []string{first, second}, time.Second)
	if err != nil {
		t.Fatalf("both keys after the holder left: %v", err)
	}
	both()
	return true
}

// TestRedisCluster_waitForReplicas: with wait=1 on a cluster whose masters each have a
// replica, writes and leases go through (WAIT reaches the primary of their slot); on a
// cluster without replicas the same setting fails them closed.
func TestRedisCluster_waitForReplicas(t *testing.T) {
	ctx := context.Background()
	keys := []string{"stategate/v1/cart/session/alice/S1", "stategate/v1/cart/arg.cart_id/alice/1", "stategate/v1/health/tool/cart.pay"}
	t.Run("with_replicas", func(t *testing.T) {
		s, err := Open(ctx, storetest.ClusterWithReplicas(t, 3, 1)+"?wait=1", Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		for _, k := range keys {
			mustCAS(t, s, "S1", k, nil, []byte("v"), true)
			mustCAS(t, s, "S1", k, []byte("v"), []byte("w"), true)
			mustGet(t, s, k, []byte("w"))
		}
		release, err := s.Lock(ctx, keys, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		release()
		mustForget(t, s, "S1")
		for _, k := range keys {
			mustGet(t, s, k, nil)
		}
	})
	t.Run("without_replicas", func(t *testing.T) {
		spec, _ := storetest.Cluster(t, 3)
		s, err := Open(ctx, spec+"?wait=1&wait_timeout=50ms", Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		defer cancel()
		ok, err := s.CompareAndSwap(cctx, "", keys[1], nil, []byte("v"))
		if err == nil || ok || !strings.Contains(err.Error(), "acknowledged by 0 of 1 replicas") {
			t.Fatalf("CompareAndSwap with wait=1 and no replica = %v, %v; want an error naming the replicas", ok, err)
		}
		if _, err := s.Lock(ctx, keys[:1], time.Second); err == nil || errors.Is(err, ErrBusy) {
			t.Fatalf("Lock with wait=1 and no replica = %v, want a store error", err)
		}
	})
}
