package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stategate/stategate/abi"
	"github.com/stategate/stategate/exchange"
	"github.com/stategate/stategate/exchange/stats"
	"github.com/stategate/stategate/exchange/toollist"
	"github.com/stategate/stategate/host/demo"
	"github.com/stategate/stategate/host/gateway"
	"github.com/stategate/stategate/host/ops"
	"github.com/stategate/stategate/host/store"
)

// cacheConfig is the demo configuration with a cache: sprints.list is immutable until
// sprints.create (which invalidates sprints.*) says otherwise.
func cacheConfig(t *testing.T, extra string) []byte {
	t.Helper()
	var cfg map[string]any
	if err := json.Unmarshal(demo.Config(), &cfg); err != nil {
		t.Fatal(err)
	}
	ss := cfg["stateSync"].(map[string]any)
	pols := ss["policies"].([]any)
	ss["policies"] = append([]any{map[string]any{"match": "sprints.list", "cacheControl": "immutable"}}, pols...)
	cfg["cache"] = map[string]any{}
	if extra != "" {
		var c map[string]any
		if err := json.Unmarshal([]byte(extra), &c); err != nil {
			t.Fatal(err)
		}
		cfg["cache"] = c
	}
	out, _ := json.Marshal(cfg)
	return out
}

func cacheMeta(res *mcp.CallToolResult) map[string]any {
	m, _ := res.Meta[abi.MetaCache].(map[string]any)
	return m
}

func sprintNames(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	b, _ := json.Marshal(res.StructuredContent)
	return string(b)
}

// TestCache_hitPurgeAndMiss: the second identical call of an immutable tool is answered
// by the gateway (the upstream counts one call) with _meta cache {hit, ageMs}; other
// arguments are another entry; a mutation that invalidates the tool makes the next call
// reach the upstream and see the change.
func TestCache_hitPurgeAndMiss(t *testing.T) {
	e := newEnv(t, envOptions{config: cacheConfig(t, "")})
	c := e.connect(t, sessionEra)
	first := c.call(t, "sprints.list", nil)
	if first.IsError || cacheMeta(first) != nil {
		t.Fatalf("first call: isError %v, cache meta %v", first.IsError, cacheMeta(first))
	}
	second := c.call(t, "sprints.list", nil)
	if n := e.upstream.count("sprints.list"); n != 1 {
		t.Fatalf("upstream ran sprints.list %d times, want 1 (the second from the cache)", n)
	}
	if m := cacheMeta(second); m["hit"] != true {
		t.Fatalf("second call: cache meta %v, want a hit", m)
	}
	if sprintNames(t, second) != sprintNames(t, first) {
		t.Fatalf("the cached answer differs: %s vs %s", sprintNames(t, second), sprintNames(t, first))
	}
	if _, ok := second.Meta[abi.MetaDuration]; !ok {
		t.Error("a cache hit carries no duration of its own")
	}
	created := c.call(t, "sprints.create", map[string]any{"name": "S9"})
	if created.IsError || !strings.Contains(strings.Join(texts(created), ""), "sprints.*") {
		t.Fatalf("sprints.create: %q", texts(created))
	}
	third := c.call(t, "sprints.list", nil)
	if n := e.upstream.count("sprints.list"); n != 2 {
		t.Fatalf("after the mutation the upstream ran sprints.list %d times, want 2", n)
	}
	if cacheMeta(third) != nil || !strings.Contains(sprintNames(t, third), "S9") {
		t.Fatalf("after the mutation: cache meta %v, sprints %s", cacheMeta(third), sprintNames(t, third))
	}
	if got := e.gw.Stats.Get(stats.CountCacheHits); got != 1 {
		t.Errorf("cache_hits = %d, want 1", got)
	}
	if got := e.gw.Stats.Get(stats.CountCachePurged); got != 1 {
		t.Errorf("cache_purged = %d, want 1", got)
	}
}

// TestCache_notCached: no-store tools, failures and tools without a cache section are
// never answered from the cache.
func TestCache_notCached(t *testing.T) {
	e := newEnv(t, envOptions{config: cacheConfig(t, "")})
	c := e.connect(t, sessionEra)
	for range 2 {
		c.call(t, "tasks.list", nil) // no-store by the defaults
	}
	if n := e.upstream.count("tasks.list"); n != 2 {
		t.Fatalf("a no-store tool reached the upstream %d times of 2", n)
	}
	plain := newEnv(t, envOptions{}) // the demo configuration: no cache section
	pc := plain.connect(t, sessionEra)
	for range 2 {
		pc.call(t, "countries.list", nil)
	}
	if n := plain.upstream.count("countries.list"); n != 2 {
		t.Fatalf("without a cache section an immutable tool reached the upstream %d times of 2", n)
	}
}

// TestCache_singleFlight: identical concurrent misses make one upstream call; the others
// get its answer.
func TestCache_singleFlight(t *testing.T) {
	cfg := cacheConfig(t, "")
	cfg = []byte(strings.Replace(string(cfg), `"match":"sprints.list"`, `"match":"slow.wait"`, 1))
	e := newEnv(t, envOptions{config: cfg, demo: demo.Options{SlowDelay: 300_000_000}})
	c := e.connect(t, sessionEra)
	const n = 8
	var wg sync.WaitGroup
	results := make([]*mcp.CallToolResult, n)
	for i := range n {
		wg.Go(func() { results[i] = c.call(t, "slow.wait", nil) })
	}
	wg.Wait()
	if got := e.upstream.count("slow.wait"); got != 1 {
		t.Fatalf("%d identical concurrent calls reached the upstream %d times, want 1", n, got)
	}
	coalesced := 0
	for _, r := range results {
		if r.IsError {
			t.Fatalf("a call failed: %q", texts(r))
		}
		if cacheMeta(r)["coalesced"] == true {
			coalesced++
		}
	}
	if coalesced != n-1 {
		t.Fatalf("%d answers say coalesced, want %d", coalesced, n-1)
	}
}

// TestCache_replicasStayCoherent: two replicas on one Redis, each with its own entries.
// Replica B caches sprints.list; replica A runs sprints.create; the next sprints.list on
// B must not be B's old entry. Repeated, alternating which replica mutates.
func TestCache_replicasStayCoherent(t *testing.T) {
	cs, lb := redisReplicas(t, cacheConfig(t, ""), demo.Options{JSONResponse: true})
	ctx := context.Background()
	call := func(name string, args map[string]any) *mcp.CallToolResult {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil || res.IsError {
			t.Fatalf("%s: %v %v", name, err, res)
		}
		return res
	}
	hits := 0
	for i := range 30 {
		// Requests alternate between the replicas: list, list (one of them fills, the
		// other fills its own), list (a hit on one of them), create, list.
		for range 3 {
			if cacheMeta(call("sprints.list", nil))["hit"] == true {
				hits++
			}
		}
		name := fmt.Sprintf("R%d", i)
		call("sprints.create", map[string]any{"name": name})
		after := call("sprints.list", nil)
		if cacheMeta(after)["hit"] == true || !strings.Contains(sprintNames(t, after), `"`+name+`"`) {
			t.Fatalf("round %d (request %d): after sprints.create %s the list is stale: %s (cache %v)",
				i, lb.n.Load(), name, sprintNames(t, after), cacheMeta(after))
		}
	}
	if hits < 30 {
		t.Fatalf("only %d cache hits in 30 rounds: the replicas do not cache", hits)
	}
}

// brokenCacheStore is a real memory store whose cache keys fail, as a Redis that drops
// them would (a unit-level stand-in for one failing part; everything else is real).
type brokenCacheStore struct{ store.Store }

var errCacheKeys = errors.New("cache keys unavailable")

func (b brokenCacheStore) Get(ctx context.Context, key string) ([]byte, error) {
	if strings.HasPrefix(key, "stategate/v1/cache/") {
		return nil, errCacheKeys
	}
	return b.Store.Get(ctx, key)
}

func (b brokenCacheStore) CompareAndSwap(ctx context.Context, session, key string, old, new []byte) (bool, error) {
	if strings.HasPrefix(key, "stategate/v1/cache/") {
		return false, errCacheKeys
	}
	return b.Store.CompareAndSwap(ctx, session, key, old, new)
}

// TestCache_failingCacheNeverFailsACall (XC-002): with the cache's state unreadable, every
// call still gets the upstream's answer, mutations included, and the fault is counted.
func TestCache_failingCacheNeverFailsACall(t *testing.T) {
	e := newEnv(t, envOptions{config: cacheConfig(t, ""), store: brokenCacheStore{store.NewMemory(store.Options{})}})
	c := e.connect(t, sessionEra)
	for range 3 {
		if res := c.call(t, "sprints.list", nil); res.IsError || cacheMeta(res) != nil {
			t.Fatalf("sprints.list with a broken cache: %q %v", texts(res), cacheMeta(res))
		}
	}
	if res := c.call(t, "sprints.create", map[string]any{"name": "S7"}); res.IsError {
		t.Fatalf("sprints.create with a broken cache: %q", texts(res))
	}
	if n := e.upstream.count("sprints.list"); n != 3 {
		t.Fatalf("the upstream ran sprints.list %d times of 3", n)
	}
	if n := e.gw.Stats.Faults(abi.FaultCache); n < 3 {
		t.Fatalf("cache faults counted: %d, want one per call at least", n)
	}
}

// TestCache_operatorPurge: POST /admin/cache/purge on the admin handler over the real core
// purges the matching cached tools (the next call reaches the upstream), answers 400 for a
// bad glob and needs the token.
func TestCache_operatorPurge(t *testing.T) {
	var cfg map[string]any
	_ = json.Unmarshal(cacheConfig(t, ""), &cfg)
	cfg["health"] = map[string]any{} // GET /admin/tools lists the tools health knows
	withHealth, _ := json.Marshal(cfg)
	e := newEnv(t, envOptions{config: withHealth})
	c := e.connect(t, sessionEra)
	c.tools(t)
	c.call(t, "sprints.list", nil)
	if cacheMeta(c.call(t, "sprints.list", nil))["hit"] != true {
		t.Fatal("no cache hit before the purge")
	}
	admin := httptest.NewServer(ops.NewAdmin(ops.AdminOptions{Token: "s3cret", Gateway: coreGateway{e.gw}}))
	t.Cleanup(admin.Close)
	post := func(token, body string) (int, string) {
		req, _ := http.NewRequest(http.MethodPost, admin.URL+"/admin/cache/purge", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, _ := post("wrong", `{"match":"sprints.*"}`); code != http.StatusUnauthorized {
		t.Fatalf("wrong token: %d", code)
	}
	figures := func() map[string]any {
		req, _ := http.NewRequest(http.MethodGet, admin.URL+"/admin/tools", nil)
		req.Header.Set("Authorization", "Bearer s3cret")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out struct {
			Tools []struct {
				Name  string         `json:"name"`
				Cache map[string]any `json:"cache"`
			} `json:"tools"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
			t.Fatalf("GET /admin/tools (%d): %v", resp.StatusCode, err)
		}
		for _, tl := range out.Tools {
			if tl.Name == "sprints.list" {
				return tl.Cache
			}
		}
		t.Fatalf("GET /admin/tools lists no sprints.list: %+v", out.Tools)
		return nil
	}
	if f := figures(); f["hits"] != 1.0 || f["misses"] != 1.0 || f["entries"] != 1.0 {
		t.Fatalf("cache figures before the purge: %v, want 1 hit, 1 miss, 1 entry", f)
	}
	// GET /admin/cache lists the same figures without going through tool health.
	{
		req, _ := http.NewRequest(http.MethodGet, admin.URL+"/admin/cache", nil)
		req.Header.Set("Authorization", "Bearer s3cret")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var out struct {
			Tools map[string]map[string]any `json:"tools"`
		}
		err = json.NewDecoder(resp.Body).Decode(&out)
		resp.Body.Close()
		if f := out.Tools["sprints.list"]; err != nil || resp.StatusCode != http.StatusOK || f["hits"] != 1.0 || f["entries"] != 1.0 {
			t.Fatalf("GET /admin/cache (%d, %v): %+v", resp.StatusCode, err, out.Tools)
		}
	}
	if code, body := post("s3cret", `{"match":"get*"}`); code != http.StatusBadRequest {
		t.Fatalf("bad glob: %d %s", code, body)
	}
	code, body := post("s3cret", `{"match":"sprints.*"}`)
	if code != http.StatusOK || !strings.Contains(body, `"sprints.list"`) {
		t.Fatalf("purge: %d %s", code, body)
	}
	if f := figures(); f["invalidations"] != 1.0 || f["entries"] != 0.0 {
		t.Fatalf("cache figures after the purge: %v, want 1 invalidation, no entry", f)
	}
	if res := c.call(t, "sprints.list", nil); cacheMeta(res) != nil {
		t.Fatalf("served from the cache after the purge: %v", cacheMeta(res))
	}
	if n := e.upstream.count("sprints.list"); n != 2 {
		t.Fatalf("the upstream ran sprints.list %d times, want 2", n)
	}
}

// coreGateway is the admin API's view of a test gateway: its exchange core.
type coreGateway struct{ gw *gateway.Gateway }

func (g coreGateway) Operator() ops.Operator { return g.gw.Core().Operator() }
func (coreGateway) State() exchange.State    { return nil }
func (coreGateway) StateKey(string, string, string) (string, error) {
	return "", errors.New("no state")
}
func (coreGateway) Stats() map[string]int64              { return nil }
func (coreGateway) Listed() []string                     { return nil }
func (coreGateway) ToolHint(string) string               { return "" }
func (coreGateway) UnknownTools() []toollist.UnknownTool { return nil }
func (coreGateway) Workflows() any                       { return []any{} }
