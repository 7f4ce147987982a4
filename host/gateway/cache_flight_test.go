package gateway_test

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stategate/stategate/host/store"
)

// TestCache_readAfterMutationNeverJoinsAnOlderFlight (issue 25, finding 5): a read sent
// after a mutation's answer is never served from a coalesced fetch that began before the
// mutation. Deterministic: the first items.list is held inside the upstream (it has read
// the item count) while items.add runs and answers; a second items.list sent then must
// reach the upstream itself and see the new item, without waiting for the held one.
func TestCache_readAfterMutationNeverJoinsAnOlderFlight(t *testing.T) {
	up := newKeyedUpstream()
	e := newEnv(t, envOptions{config: keyedConfig(`{}`, ""), upstream: up.handler()})
	first, writer, second := e.connect(t, sessionEra), e.connect(t, sessionEra), e.connect(t, sessionEra)
	started, release := up.holdList()
	t.Cleanup(release)
	firstDone := make(chan string, 1)
	go func() {
		res := first.call(t, "items.list", nil)
		firstDone <- texts(res)[0]
	}()
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("the first items.list never reached the upstream")
	}
	if got, _ := writer.callText(t, "items.add", nil); !strings.HasSuffix(got, "items=1") {
		t.Fatalf("items.add answered %q", got)
	}
	// The mutation has answered: a read sent now is ordered after it.
	secondDone := make(chan []string, 1)
	go func() {
		res := second.call(t, "items.list", nil)
		secondDone <- append(texts(res), cacheText(res))
	}()
	select {
	case got := <-secondDone:
		if got[0] != "items=1" {
			t.Fatalf("the read after the mutation answered %q (cache %s), want items=1", got[0], got[1])
		}
	case <-time.After(5 * time.Second):
		release()
		got := <-secondDone
		t.Fatalf("the read after the mutation waited for a fetch that began before it, and answered %q (cache %s)", got[0], got[1])
	}
	release()
	if got := <-firstDone; got != "items=0" {
		t.Fatalf("the held read answered %q, want its own items=0", got)
	}
	// Whatever was stored since, a read now is not older than the mutation.
	if got, res := first.callText(t, "items.list", nil); got != "items=1" {
		t.Fatalf("a later read answered %q (cache %s)", got, cacheText(res))
	}
	if n := e.upstream.count("items.list"); n < 2 || n > 3 {
		t.Fatalf("the upstream ran items.list %d times, want 2 or 3", n)
	}
}

// cacheText is a result's _meta cache member as JSON ("none" without one).
func cacheText(res *mcp.CallToolResult) string {
	m := cacheMeta(res)
	if m == nil {
		return "none"
	}
	b, _ := json.Marshal(m)
	return string(b)
}

// expiringStore is a real memory store whose keys a test can expire, as a store's idle
// TTL does (an expired key reads as absent until it is written again).
type expiringStore struct {
	store.Store
	mu    sync.Mutex
	epoch map[string]int
}

func (s *expiringStore) name(key string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return key + "#" + strconv.Itoa(s.epoch[key])
}

func (s *expiringStore) expire(key string) {
	s.mu.Lock()
	s.epoch[key]++
	s.mu.Unlock()
}

func (s *expiringStore) Get(ctx context.Context, key string) ([]byte, error) {
	return s.Store.Get(ctx, s.name(key))
}

func (s *expiringStore) CompareAndSwap(ctx context.Context, session, key string, old, new []byte) (bool, error) {
	return s.Store.CompareAndSwap(ctx, session, s.name(key), old, new)
}

// TestCache_expiredGenerationNeverRevivesAnEntry: a tool's generation key that expires in
// the store (idle TTL; an entry may live longer, cache.ttlMs up to 7 days) must not make
// an entry older than a mutation current again on a replica that still holds it.
// Replica B caches items.list, replica A runs items.add, the generation expires, and B's
// next items.list must see the item.
func TestCache_expiredGenerationNeverRevivesAnEntry(t *testing.T) {
	up := newKeyedUpstream()
	st := &expiringStore{Store: store.NewMemory(store.Options{}), epoch: map[string]int{}}
	cfg := keyedConfig(`{}`, "")
	a := newEnv(t, envOptions{config: cfg, upstream: up.handler(), store: st})
	b := newEnv(t, envOptions{config: cfg, upstream: up.handler(), store: st})
	ca, cb := a.connect(t, sessionEra), b.connect(t, sessionEra)
	const gen = "stategate/v1/cache/gen/items.list"
	cached := func(want string) {
		t.Helper()
		cb.callText(t, "items.list", nil)
		if got, res := cb.callText(t, "items.list", nil); got != want || cacheMeta(res)["hit"] != true {
			t.Fatalf("B answered %q (cache %s), want %s from its cache", got, cacheText(res), want)
		}
	}
	read := func(want, after string) {
		t.Helper()
		if got, res := cb.callText(t, "items.list", nil); got != want {
			t.Fatalf("after %s B answered %q (cache %s), want %s", after, got, cacheText(res), want)
		}
	}
	// The tool's first entry, then a mutation, then the generation expires.
	cached("items=0")
	ca.callText(t, "items.add", nil)
	st.expire(gen)
	read("items=1", "a mutation and the generation's expiry")
	// An entry of a later generation: the generation expires, and mutations count again.
	cached("items=1")
	ca.callText(t, "items.add", nil)
	st.expire(gen)
	ca.callText(t, "items.add", nil)
	read("items=3", "a mutation, the generation's expiry and another mutation")
}
