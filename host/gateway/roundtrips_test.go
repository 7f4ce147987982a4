package gateway_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/redis/go-redis/v9"
	"github.com/stategate/stategate/host/store"
	"github.com/stategate/stategate/host/store/storetest"
)

// tripsConfig: "flip" (per session) alternates between two states on every cart.add_item
// and tasks.update; "task" (per handle, the id argument) alternates on tasks.update. So
// every call kind can repeat for ever: tasks.list is ungated, users.get is gated without
// moving, cart.add_item moves one key, tasks.update moves two (a session's and a handle's).
var tripsConfig = []byte(`{"version":1,"workflows":[
 {"id":"flip","initial":"a","key":"session","states":{"a":{"on":{"NEXT":"b"}},"b":{"on":{"NEXT":"a"}}},
  "tools":{"cart.add_item":{"states":["a","b"],"event":"NEXT"},"tasks.update":{"states":["a","b"],"event":"NEXT"},
   "users.get":{"states":["a","b"]}}},
 {"id":"task","initial":"a","key":"argument:id","states":{"a":{"on":{"NEXT":"b"}},"b":{"on":{"NEXT":"a"}}},
  "tools":{"tasks.update":{"states":["a","b"],"event":"NEXT"}}}]}`)

type callKind struct {
	name string
	tool string
	args map[string]any
}

// callKinds are the tools/call kinds whose Redis round trips are counted. Cache hit and
// miss are not among them: the gateway has no result cache yet.
var callKinds = []callKind{
	{name: "ungated", tool: "tasks.list", args: map[string]any{}},
	{name: "gated_no_transition", tool: "users.get", args: map[string]any{"id": "u1"}},
	{name: "gated_transition_1_key", tool: "cart.add_item", args: map[string]any{"sku": "tea"}},
	{name: "gated_transition_2_keys", tool: "tasks.update", args: map[string]any{"id": "T1", "status": "in_progress"}},
}

// deployments are the Redis deployments counted: one server, a 3-master cluster, and a
// Sentinel-managed primary with one replica, with and without waiting for it.
var deployments = []struct {
	name string
	// start starts the deployment and returns its spec and its primaries' addresses.
	start func(t testing.TB) (string, []string)
}{
	{name: "redis", start: func(t testing.TB) (string, []string) {
		url := storetest.Redis(t)
		return url + "?near_cache=on", []string{strings.TrimSuffix(strings.TrimPrefix(url, "redis://"), "/0")}
	}},
	{name: "redis_cluster", start: func(t testing.TB) (string, []string) {
		spec, masters := storetest.Cluster(t, 3)
		var addrs []string
		for _, m := range masters {
			addrs = append(addrs, m.Addr())
		}
		return spec, addrs
	}},
	{name: "redis_sentinel_wait1", start: func(t testing.TB) (string, []string) {
		set := storetest.Sentinel(t, 1, 1)
		return set.Spec(), []string{set.Primary.Addr()}
	}},
	{name: "redis_sentinel_wait0", start: func(t testing.TB) (string, []string) {
		set := storetest.Sentinel(t, 1, 1)
		return set.Spec() + "?wait=0", []string{set.Primary.Addr()}
	}},
}

// serverCPU sums the CPU time (user and system) the primaries at addrs have used.
func serverCPU(t testing.TB, addrs []string) time.Duration {
	t.Helper()
	var total time.Duration
	for _, a := range addrs {
		c := redis.NewClient(&redis.Options{Addr: a})
		info, err := c.Info(context.Background(), "cpu").Result()
		c.Close()
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(info, "\r\n") {
			k, v, _ := strings.Cut(line, ":")
			if k == "used_cpu_sys" || k == "used_cpu_user" {
				f, err := strconv.ParseFloat(v, 64)
				if err != nil {
					t.Fatal(err)
				}
				total += time.Duration(f * float64(time.Second))
			}
		}
	}
	return total
}

// trips sums the round trips of both replicas' stores.
func (e *scaleEnv) trips() uint64 {
	var n uint64
	for _, s := range e.stores {
		n += s.Store.(*store.Redis).RoundTrips()
	}
	return n
}

// TestRoundTrips counts the Redis round trips of each tools/call kind through two replicas,
// and holds them to the design: an ungated call costs none; a gated one that moves nothing
// reads its keys from the near cache on one server (redis://: none once warm, every key
// clean) and in one round trip elsewhere (Sentinel and the cluster have no near cache);
// a moving call leases and reads its keys in one script per hash slot, writes each key it
// moves in one, and releases its leases in its last write. On one server (or a Sentinel
// primary) every key is in one slot space, so a move of one key costs 2 and of two keys 3.
// On the cluster a session's and a handle's keys are two slots: two lease scripts, two
// writes, and the lease of the slot the last write does not share released in one more
// (5). Through a store whose writes cannot release (releaseApart, on one server) the
// release is a round trip of its own, as before: 3 and 4.
//
// The near cache's other counts: a gated call that moves nothing right after a move of
// the same key on the same replica reads it fresh (1: the key is dirty until a read after
// the write), the next fills the cache (1), and the rest are warm (0); see
// TestRoundTrips_nearAfterMove.
func TestRoundTrips(t *testing.T) {
	type trips struct{ server, sentinel, cluster uint64 }
	want := map[string]trips{
		"ungated":                 {0, 0, 0},
		"gated_no_transition":     {0, 1, 1},
		"gated_transition_1_key":  {2, 2, 2},
		"gated_transition_2_keys": {3, 3, 5},
	}
	apart := map[string]uint64{"gated_transition_1_key": 3, "gated_transition_2_keys": 4}
	for _, d := range deployments {
		t.Run(d.name, func(t *testing.T) {
			spec, _ := d.start(t)
			for k, n := range countTrips(t, newScaleEnv(t, spec, tripsConfig), callKinds) {
				w := want[k].server
				switch {
				case d.name == "redis_cluster":
					w = want[k].cluster
					if k == "gated_transition_2_keys" && n == 3 {
						w = 3 // the random session's slot is the handle's (1 in 16384): one group
					}
				case strings.HasPrefix(d.name, "redis_sentinel"):
					w = want[k].sentinel
				}
				if n != float64(w) {
					t.Errorf("%s: %.2f round trips per call, want %d", k, n, w)
				}
			}
			if d.name != "redis" {
				return
			}
			e := newScaleEnvOf(t, spec, tripsConfig, func(a *ackStore) store.Store { return releaseApart{a} })
			for k, n := range countTrips(t, e, callKinds[2:]) {
				if n != float64(apart[k]) {
					t.Errorf("release apart: %s: %.2f round trips per call, want %d", k, n, apart[k])
				}
			}
		})
	}
}

// TestRoundTrips_nearAfterMove counts the near cache's round trips around a move, on one
// server, through one replica: a gated call that moves nothing, after a move of the key it
// reads, reads it past the cache (1: the key is dirty), the next one fills the cache (1),
// the one after that reads it from the cache (0); and the move itself still costs 2 (the
// near cache adds nothing to a moving call).
func TestRoundTrips_nearAfterMove(t *testing.T) {
	spec := storetest.RedisNear(t)
	e := newScaleEnv(t, spec, tripsConfig)
	st := e.stores[0]
	cs := e.connectTo(t, 0)
	read, move := callKinds[1], callKinds[2]
	call(t, cs, move.tool, move.args)
	call(t, cs, read.tool, read.args)
	time.Sleep(20 * time.Millisecond)
	trips := func(k callKind) uint64 {
		before := st.Store.(*store.Redis).RoundTrips()
		call(t, cs, k.tool, k.args)
		time.Sleep(20 * time.Millisecond) // the lease's release after the answer
		return st.Store.(*store.Redis).RoundTrips() - before
	}
	for i := range 5 {
		if n := trips(move); n != 2 {
			t.Errorf("round %d: move: %d round trips, want 2", i, n)
		}
		if n := trips(read); n != 1 {
			t.Errorf("round %d: first read after the move: %d round trips, want 1", i, n)
		}
		if n := trips(read); n != 1 {
			t.Errorf("round %d: second read after the move: %d round trips, want 1", i, n)
		}
		if n := trips(read); n != 0 {
			t.Errorf("round %d: third read after the move: %d round trips, want 0", i, n)
		}
	}
}

// awaitReleasedApart waits until every lease a releaseApart store took was released: the
// release is a round trip of its own after the answer, which a loaded machine can delay
// past the pause between calls (the next call would poll for the lease, or the count end
// before the release).
func (e *scaleEnv) awaitReleasedApart(t *testing.T) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		var held int64
		for _, s := range e.stores {
			held += s.apart.Load()
		}
		if held == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d leases taken apart not released 10 s after the answer", held)
		}
	}
}

// countTrips makes 20 calls of each kind through e (after two that create keys, load
// scripts and warm each replica's near cache) and returns the round trips per call, by kind.
func countTrips(t *testing.T, e *scaleEnv, kinds []callKind) map[string]float64 {
	t.Helper()
	cs := e.connect(t)
	out := map[string]float64{}
	for _, k := range kinds {
		call(t, cs, k.tool, k.args)
		call(t, cs, k.tool, k.args) // each replica once: both warm
		const n = 20
		before := e.trips()
		for range n {
			call(t, cs, k.tool, k.args)
			// A next call that came before a moving call's lease was released would poll
			// for it, adding round trips.
			time.Sleep(20 * time.Millisecond)
			e.awaitReleasedApart(t)
		}
		out[k.name] = float64(e.trips()-before) / n
		t.Logf("%s: %.2f round trips per call", k.name, out[k.name])
	}
	return out
}

// BenchmarkRoundTrips times each call kind through two replicas on each deployment, with
// its round trips per call and the CPU time the Redis primaries spent per call (the
// figure the capacity model in docs/scaling.md divides a core by); ungated on the same
// deployment is the baseline. The moving kinds run twice: with the release in the last
// write, and with the release apart (releaseApart: the path before it), on the same
// servers in the same run.
func BenchmarkRoundTrips(b *testing.B) {
	apart := func(a *ackStore) store.Store { return releaseApart{a} }
	for _, d := range deployments {
		b.Run(d.name, func(b *testing.B) {
			spec, primaries := d.start(b)
			benchTrips(b, newScaleEnv(b, spec, tripsConfig), primaries, callKinds, "")
			benchTrips(b, newScaleEnvOf(b, spec, tripsConfig, apart), primaries, callKinds[2:], "/release_apart")
		})
	}
}

func benchTrips(b *testing.B, e *scaleEnv, primaries []string, kinds []callKind, suffix string) {
	cs := e.connect(b)
	for _, k := range kinds {
		call(b, cs, k.tool, k.args)
		b.Run(k.name+suffix, func(b *testing.B) {
			before, cpu := e.trips(), serverCPU(b, primaries)
			for b.Loop() {
				call(b, cs, k.tool, k.args)
			}
			b.ReportMetric(float64(e.trips()-before)/float64(b.N), "trips/call")
			b.ReportMetric(float64(serverCPU(b, primaries)-cpu)/float64(time.Microsecond)/float64(b.N), "redis-µs/call")
		})
	}
}

func call(t testing.TB, cs *mcp.ClientSession, tool string, args map[string]any) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	if res.IsError {
		t.Fatalf("%s: %v", tool, fmt.Sprint(texts(res)))
	}
}

// TestBytesStored measures what one session and one handle keep in Redis (MEMORY USAGE:
// key, value and the server's per-key overhead) after a call that moves both, on one
// server and on a cluster, and holds it under a bound so growth shows.
func TestBytesStored(t *testing.T) {
	for _, d := range deployments[:2] {
		t.Run(d.name, func(t *testing.T) {
			spec, primaries := d.start(t)
			e := newScaleEnv(t, spec, tripsConfig)
			cs := e.connect(t)
			call(t, cs, "tasks.update", map[string]any{"id": "T1", "status": "in_progress"})
			time.Sleep(50 * time.Millisecond) // the lease is released after the answer
			bytes := map[string]int64{}
			for _, a := range primaries {
				c := redis.NewClient(&redis.Options{Addr: a})
				keys, err := c.Keys(context.Background(), "*").Result()
				if err != nil {
					t.Fatal(err)
				}
				for _, k := range keys {
					n, err := c.MemoryUsage(context.Background(), k).Result()
					if err != nil {
						t.Fatal(err)
					}
					kind := "other"
					switch {
					case strings.Contains(k, "lock:"):
						kind = "lease"
					case strings.Contains(k, "/session/"):
						kind = "session_state"
					case strings.Contains(k, "/arg."):
						kind = "handle_state"
					case strings.Contains(k, "session"):
						kind = "session_set"
					}
					bytes[kind] += n
					t.Logf("%s: %d bytes: %q", kind, n, k)
				}
				c.Close()
			}
			perSession := bytes["session_state"] + bytes["session_set"]
			t.Logf("per session (one workflow): %d bytes; per handle (one workflow): %d bytes", perSession, bytes["handle_state"])
			if bytes["lease"] != 0 || bytes["other"] != 0 {
				t.Errorf("keys left besides state: %v", bytes)
			}
			if perSession == 0 || bytes["handle_state"] == 0 || perSession > 1024 || bytes["handle_state"] > 512 {
				t.Errorf("per session %d bytes (want 1..1024), per handle %d (want 1..512)", perSession, bytes["handle_state"])
			}
		})
	}
}
