package store

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stategate/stategate/host/store/storetest"
)

// busyScript keeps the server busy for ARGV[1] milliseconds: every other client waits,
// its commands unread, as behind any slow script or a stalled host.
const busyScript = `
local t = redis.call('TIME')
local start = t[1] * 1000000 + t[2]
repeat
  t = redis.call('TIME')
until t[1] * 1000000 + t[2] - start >= ARGV[1] * 1000
return 1
`

// TestRedis_lockDuringStallLeavesNoLease stalls the server while Lock's SET NX is in
// flight: the client times out, the server may set the key once it resumes (it does after
// a slow script), and the release Lock queued must delete it, so no lease outlives the
// stall for its ttl.
func TestRedis_lockDuringStallLeavesNoLease(t *testing.T) {
	url := storetest.Redis(t)
	ctx := context.Background()
	ro, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	admin := redis.NewClient(ro)
	defer admin.Close()
	const stall = 600 * time.Millisecond
	tests := []struct {
		name string
		// stall stalls the server for about stall and returns once it has resumed; started
		// is closed once the stall is certain to have begun, or soon after.
		stall func(started chan<- struct{}) error
	}{
		{name: "slow_script", stall: func(started chan<- struct{}) error {
			go func() { time.Sleep(50 * time.Millisecond); close(started) }()
			return admin.Eval(ctx, busyScript, nil, stall.Milliseconds()).Err()
		}},
		{name: "client_pause", stall: func(started chan<- struct{}) error {
			err := admin.ClientPause(ctx, stall).Err()
			close(started)
			time.Sleep(stall) // CLIENT PAUSE answers at once; PING would wait for the end
			return err
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// A 100ms read timeout stands for a client whose patience ends before the stall.
			r, err := NewRedis(ctx, url+"?read_timeout=100ms", Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			if err := admin.FlushDB(ctx).Err(); err != nil {
				t.Fatal(err)
			}
			for attempt := 0; ; attempt++ {
				started, resumed := make(chan struct{}), make(chan error, 1)
				go func() { resumed <- tc.stall(started) }()
				<-started
				unlock, lerr := r.Lock(ctx, []string{"a", "k"}, time.Minute)
				if err := <-resumed; err != nil {
					t.Fatalf("stall: %v", err)
				}
				if lerr == nil { // the stall began late: Lock got in first
					unlock()
					if attempt == 4 {
						t.Fatal("Lock never overlapped the stall in 5 attempts")
					}
					continue
				}
				if errors.Is(lerr, ErrBusy) {
					t.Errorf("Lock during a stall = %v, a store error and not ErrBusy", lerr)
				}
				t.Logf("Lock during the stall: %v", lerr)
				break
			}
			// The server has resumed (it answers), so it has run the SET NX whose reply was
			// lost; the janitor's release follows within its backoff.
			if err := admin.Ping(ctx).Err(); err != nil {
				t.Fatal(err)
			}
			for deadline := time.Now().Add(3 * time.Second); ; time.Sleep(5 * time.Millisecond) {
				n, err := admin.Exists(ctx, redisLockPrefix+"a", redisLockPrefix+"k").Result()
				if err != nil {
					t.Fatal(err)
				}
				if n == 0 {
					break
				}
				if time.Now().After(deadline) {
					ttl, _ := admin.PTTL(ctx, redisLockPrefix+"a").Result()
					t.Fatalf("%d lease keys left 3s after the stall (PTTL of a: %v)", n, ttl)
				}
			}
			wctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
			defer cancel()
			unlock, err := r.Lock(wctx, []string{"a", "k"}, time.Minute)
			if err != nil {
				t.Fatalf("Lock after the stall: %v", err)
			}
			unlock()
		})
	}
}

// TestRedis_compareAndSwapDuringStallSettles stalls the server while a compare-and-set is
// in flight: the client times out, the server runs the script once it resumes, and the
// store must learn that (the key holds the new value) and report success, not an error
// and not a conflict that would make the caller apply its transition twice.
func TestRedis_compareAndSwapDuringStallSettles(t *testing.T) {
	url := storetest.Redis(t)
	ctx := context.Background()
	ro, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	admin := redis.NewClient(ro)
	defer admin.Close()
	r, err := NewRedis(ctx, url+"?read_timeout=100ms", Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for attempt := 0; ; attempt++ {
		if err := admin.FlushDB(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		mustCAS(t, r, "s1", "k", nil, []byte("v1"), true)
		before := r.RoundTrips()
		resumed := make(chan error, 1)
		go func() { resumed <- admin.Eval(ctx, busyScript, nil, 600).Err() }()
		time.Sleep(50 * time.Millisecond)
		ok, err := r.CompareAndSwap(ctx, "s1", "k", []byte("v1"), []byte("v2"))
		if err := <-resumed; err != nil {
			t.Fatalf("stall: %v", err)
		}
		if err != nil || !ok {
			t.Fatalf("CompareAndSwap during a stall = %v, %v; want true, nil once the server resumed", ok, err)
		}
		mustGet(t, r, "k", []byte("v2"))
		if r.RoundTrips()-before > 1 {
			return // the compare-and-set overlapped the stall and settled
		}
		if attempt == 4 {
			t.Fatal("the compare-and-set never overlapped the stall in 5 attempts")
		}
	}
}

// TestRedis_compareAndSwapReleasingDuringStall stalls the server while a write that
// releases its lease is in flight: the client times out and the server runs the script
// once it resumes, so the write landed and the lease is gone. Settling must report the
// write, and when another holder wrote before the store could be read again (it could
// take the lease the script released) it must report an unknown outcome, never a conflict
// that would make the caller apply its transition twice.
func TestRedis_compareAndSwapReleasingDuringStall(t *testing.T) {
	url := storetest.Redis(t)
	ctx := context.Background()
	ro, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	admin, other := redis.NewClient(ro), redis.NewClient(ro)
	defer admin.Close()
	defer other.Close()
	r, err := NewRedis(ctx, url+"?read_timeout=100ms", Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	const k = "stategate/v1/cart/session/alice/S1"
	tests := []struct {
		name        string
		otherWrites bool // another client writes k after the script, before settle reads it
	}{
		{name: "the_write_landed", otherWrites: false},
		{name: "another_holder_wrote_after_it", otherWrites: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for attempt := 0; ; attempt++ {
				if err := admin.FlushDB(ctx).Err(); err != nil {
					t.Fatal(err)
				}
				// The other holder's connection is open before the stall: a connection dialled
				// during it is accepted, and says HELLO, only after the script, racing the
				// settling read's own new connection instead of arriving before it.
				if err := other.Ping(ctx).Err(); err != nil {
					t.Fatal(err)
				}
				mustCAS(t, r, "S1", k, nil, []byte("v1"), true)
				lease, _, err := r.LockLease(ctx, []string{k}, time.Minute, false)
				if err != nil {
					t.Fatal(err)
				}
				before := r.RoundTrips()
				resumed, wrote := make(chan error, 1), make(chan error, 1)
				go func() { resumed <- admin.Eval(ctx, busyScript, nil, 600).Err() }()
				time.Sleep(50 * time.Millisecond)
				if tc.otherWrites {
					// Sent after the script, read by the server after it, and before the
					// settling read, which waits 20ms after the client's 100ms timeout.
					go func() { time.Sleep(30 * time.Millisecond); wrote <- other.Set(ctx, r.lay.valueKey(k), "v3", 0).Err() }()
				}
				ok, err := r.CompareAndSwapReleasing(ctx, "S1", k, []byte("v1"), []byte("v2"), lease)
				if err := <-resumed; err != nil {
					t.Fatalf("stall: %v", err)
				}
				if tc.otherWrites {
					if err := <-wrote; err != nil {
						t.Fatal(err)
					}
				}
				if r.RoundTrips()-before == 1 { // the stall began late: the write got in first
					if attempt == 4 {
						t.Fatal("the write never overlapped the stall in 5 attempts")
					}
					lease.Release()
					continue
				}
				if n, err := admin.Exists(ctx, r.lay.lockKey(k)).Result(); err != nil || n != 0 {
					t.Errorf("lease left after the script ran: %d, %v", n, err)
				}
				if !tc.otherWrites {
					if err != nil || !ok {
						t.Fatalf("CompareAndSwapReleasing during a stall = %v, %v; want true, nil once the server resumed", ok, err)
					}
					mustGet(t, r, k, []byte("v2"))
					return
				}
				if err == nil || ok {
					t.Fatalf("CompareAndSwapReleasing whose key another holder wrote while its outcome was unknown = %v, %v; want an error, not a conflict", ok, err)
				}
				t.Logf("outcome unknown: %v", err)
				mustGet(t, r, k, []byte("v3"))
				return
			}
		})
	}
}

func TestRedis_lockLoad(t *testing.T) {
	r, err := NewRedis(context.Background(), storetest.Redis(t), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	testLockLoad(t, r)
}

// testLockLoad: LockLoad takes the leases as Lock does and reads every key as Get does.
func testLockLoad(t *testing.T, r *Redis) {
	t.Helper()
	ctx := context.Background()
	flush(t, r)
	keys := []string{"stategate/v1/cart/session/alice/S1", "stategate/v1/cart/arg.cart_id/alice/1", "absent", "empty"}
	mustCAS(t, r, "S1", keys[0], nil, []byte("v0"), true)
	mustCAS(t, r, "", keys[1], nil, []byte("v1"), true)
	mustCAS(t, r, "", keys[3], nil, []byte{}, true)
	release, values, err := r.LockLoad(ctx, keys, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	want := [][]byte{[]byte("v0"), []byte("v1"), nil, {}}
	for i := range keys {
		if (values[i] == nil) != (want[i] == nil) || string(values[i]) != string(want[i]) {
			t.Errorf("LockLoad value of %q = %q (nil: %v), want %q (nil: %v)", keys[i], values[i], values[i] == nil, want[i], want[i] == nil)
		}
	}
	// A deadline that ends before the script was sent (a stalled machine) gives a plain
	// deadline error: the LockLoad never learnt the key was held. Such a round is
	// inconclusive and runs again with a longer deadline (the key is held for 5 s).
	for i, wait := range []time.Duration{50 * time.Millisecond, 500 * time.Millisecond, time.Second} {
		wctx, cancel := context.WithTimeout(ctx, wait)
		other, _, err := r.LockLoad(wctx, keys[1:2], time.Second)
		cancel()
		if err != nil && !errors.Is(err, ErrBusy) && errors.Is(err, context.DeadlineExceeded) && i < 2 {
			t.Logf("LockLoad with a deadline of %v ended before it looked at the key (a stalled machine); again with a longer one", wait)
			continue
		}
		if err == nil {
			other()
		}
		if !errors.Is(err, ErrBusy) {
			t.Fatalf("LockLoad of a held key = %v, want ErrBusy", err)
		}
		break
	}
	release()
	again, _, err := r.LockLoad(ctx, keys, time.Second)
	if err != nil {
		t.Fatalf("after release: %v", err)
	}
	again()
}
