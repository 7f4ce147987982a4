package gateway_test

import (
	"context"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stategate/stategate/host/store"
	"github.com/stategate/stategate/host/store/storetest"
)

// doorConfig: users.get is allowed only while the door is open; cart.add_item closes it and
// tasks.update opens it again (per session).
var doorConfig = []byte(`{"version":1,"workflows":[
 {"id":"door","initial":"open","key":"session","states":{"open":{"on":{"CLOSE":"closed"}},"closed":{"on":{"OPEN":"open"}}},
  "tools":{"cart.add_item":{"states":["open"],"event":"CLOSE"},"tasks.update":{"states":["closed"],"event":"OPEN"},
   "users.get":{"states":["open"]}}}]}`)

// TestNearCache_decisionsAcrossReplicas: two replicas on one redis-server, each with its
// near cache; one client's requests alternate between them, so every read-only call
// (users.get, admitted from one replica's near cache) comes right after a move made on
// the other, whose answer the client had. Each decision must be the one the state after
// that move gives: denied while closed, admitted while open, 200 times each. A stale
// near-cache entry would admit a call while the door is closed, or deny it while open.
// (Before the writes' PING (Redis.eval), this failed about one run in five here: the
// server had written the acknowledgement before the invalidation.)
func TestNearCache_decisionsAcrossReplicas(t *testing.T) {
	spec := storetest.RedisNear(t)
	e := newScaleEnv(t, spec, doorConfig)
	for _, s := range e.stores {
		if !s.Store.(*store.Redis).NearCache() {
			t.Fatal("no near cache")
		}
	}
	cs := e.connect(t) // requests alternate: replica 0, 1, 0, 1, ...
	ctx := context.Background()
	isError := func(tool string, args map[string]any) bool {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
		if err != nil {
			t.Fatalf("%s: %v", tool, err)
		}
		return res.IsError
	}
	read := map[string]any{"id": "u1"}
	if isError("users.get", read) || isError("users.get", read) { // both replicas' caches warm
		t.Fatal("users.get refused while open")
	}
	trips := func() (n uint64) {
		for _, s := range e.stores {
			n += s.Store.(*store.Redis).RoundTrips()
		}
		return n
	}
	before := trips()
	const rounds = 200
	for i := range rounds {
		if isError("cart.add_item", map[string]any{"sku": "tea"}) { // closes
			t.Fatalf("round %d: cart.add_item refused", i)
		}
		if !isError("users.get", read) { // the other replica
			t.Fatalf("round %d: users.get admitted right after the other replica closed the door (stale state)", i)
		}
		if isError("tasks.update", map[string]any{"id": "T1", "status": "done"}) { // opens
			t.Fatalf("round %d: tasks.update refused", i)
		}
		if isError("users.get", read) { // the other replica
			t.Fatalf("round %d: users.get refused right after the other replica opened the door (stale state)", i)
		}
	}
	t.Logf("%d round trips for %d moves and %d read-only calls, each read right after a move on the other replica (invalidated: read again)",
		trips()-before, 2*rounds, 2*rounds)
}
