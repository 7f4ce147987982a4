package gateway_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
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

// callKinds are the tools/call kinds whose Redis round trips are counted. Cache hit and
// miss are not among them: the gateway has no result cache yet.
var callKinds = []struct {
	name string
	tool string
	args map[string]any
}{
	{name: "ungated", tool: "tasks.list", args: map[string]any{}},
	{name: "gated_no_transition", tool: "users.get", args: map[string]any{"id": "u1"}},
	{name: "gated_transition_1_key", tool: "cart.add_item", args: map[string]any{"sku": "tea"}},
	{name: "gated_transition_2_keys", tool: "tasks.update", args: map[string]any{"id": "T1", "status": "in_progress"}},
}

// deployments are the Redis deployments counted: one server, a 3-master cluster, and a
// Sentinel-managed primary with one replica, with and without waiting for it.
var deployments = []struct {
	name string
	spec func(t testing.TB) string
}{
	{name: "redis", spec: func(t testing.TB) string { return storetest.Redis(t) }},
	{name: "redis_cluster", spec: func(t testing.TB) string { s, _ := storetest.Cluster(t, 3); return s }},
	{name: "redis_sentinel_wait1", spec: func(t testing.TB) string { return storetest.Sentinel(t, 1, 1).Spec() }},
	{name: "redis_sentinel_wait0", spec: func(t testing.TB) string { return storetest.Sentinel(t, 1, 1).Spec() + "?wait=0" }},
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
// and holds them to the design: on one server (or a Sentinel primary) an ungated call
// costs none, a gated one reads its keys in one, and a moving call takes its leases in
// one, reads in one, writes each key in one and releases in one. On a cluster the leases
// and the release cost one per slot group (or node), and are logged.
func TestRoundTrips(t *testing.T) {
	want := map[string]uint64{"ungated": 0, "gated_no_transition": 1, "gated_transition_1_key": 4, "gated_transition_2_keys": 5}
	for _, d := range deployments {
		t.Run(d.name, func(t *testing.T) {
			e := newScaleEnv(t, d.spec(t), tripsConfig)
			cs := e.connect(t)
			for _, k := range callKinds {
				call(t, cs, k.tool, k.args) // first calls create keys and load scripts
				const n = 20
				before := e.trips()
				for range n {
					call(t, cs, k.tool, k.args)
					// A moving call's lease is released after its answer is sent; a next
					// call that came first would poll for it, adding round trips.
					time.Sleep(20 * time.Millisecond)
				}
				got := e.trips() - before
				t.Logf("%s: %.2f round trips per call", k.name, float64(got)/n)
				if d.name == "redis_cluster" {
					if lo := want[k.name] * n; got < lo {
						t.Errorf("%s: %d round trips in %d calls, fewer than the %d of one server", k.name, got, n, lo)
					}
					continue
				}
				if got != want[k.name]*n {
					t.Errorf("%s: %d round trips in %d calls, want %d per call", k.name, got, n, want[k.name])
				}
			}
		})
	}
}

// BenchmarkRoundTrips times each call kind through two replicas on each deployment, with
// its round trips per call; ungated on the same deployment is the baseline.
func BenchmarkRoundTrips(b *testing.B) {
	for _, d := range deployments {
		b.Run(d.name, func(b *testing.B) {
			e := newScaleEnv(b, d.spec(b), tripsConfig)
			cs := e.connect(b)
			for _, k := range callKinds {
				call(b, cs, k.tool, k.args)
				b.Run(k.name, func(b *testing.B) {
					before := e.trips()
					for b.Loop() {
						call(b, cs, k.tool, k.args)
					}
					b.ReportMetric(float64(e.trips()-before)/float64(b.N), "trips/call")
				})
			}
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
