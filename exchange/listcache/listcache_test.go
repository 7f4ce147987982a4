package listcache

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stategate/stategate/exchange"
	"github.com/stategate/stategate/exchange/answer"
	"github.com/tidwall/gjson"
)

// memState is the exchange's State in a map (compare-and-set by value).
type memState struct {
	mu sync.Mutex
	m  map[string][]byte
}

func (s *memState) Capabilities() exchange.Capabilities { return exchange.Capabilities{} }
func (s *memState) Load(_ context.Context, keys []string, _ bool) ([]exchange.Slot, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]exchange.Slot, len(keys))
	for i, k := range keys {
		v, ok := s.m[k]
		out[i] = exchange.Slot{Value: v, Exists: ok}
	}
	return out, nil
}
func (s *memState) Store(_ context.Context, _, key string, value []byte, prev exchange.Slot, _ exchange.Lease) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if v, ok := s.m[key]; ok != prev.Exists || string(v) != string(prev.Value) {
		return exchange.ErrConflict
	}
	s.m[key] = value
	return nil
}
func (s *memState) Lock(context.Context, []string, time.Duration, bool) (exchange.Lease, []exchange.Slot, error) {
	return nil, nil, errors.New("no leases")
}
func (s *memState) Forget(context.Context, string, []string) error { return nil }

type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func newTest(sessions bool) (*Cache, *clock, *memState) {
	st := &memState{m: map[string][]byte{}}
	clk := &clock{t: time.Unix(1e9, 0)}
	return New(Config{State: st, Sessions: sessions, Now: clk.now, MaxEntries: 8, MaxBytes: 1 << 20}), clk, st
}

func req2026(auth, params string) Request {
	h := http.Header{}
	if auth != "" {
		h.Set("Authorization", auth)
	}
	return Request{Version: CacheableVersion, Params: gjson.Parse(params), Headers: h, Principal: "X-User"}
}

const list = `{"tools":[{"name":"a"}],"ttlMs":1000,"cacheScope":"private"}`

func fill(t *testing.T, c *Cache, r Request, result string) {
	t.Helper()
	_, f, ok := c.Lookup(context.Background(), r)
	if ok || f == nil {
		t.Fatalf("lookup before the fill: hit %v, fill %v", ok, f)
	}
	c.Store(f, result)
}

func TestNeverKept(t *testing.T) {
	for _, result := range []string{
		`{"tools":[],"ttlMs":0}`, `{"tools":[]}`, `{"tools":[],"ttlMs":"1000"}`, `{"tools":[],"ttlMs":-5}`,
		`{"resultType":"input_required","inputRequests":{},"ttlMs":1000}`, `{"resultType":"task","ttlMs":1000}`,
		`[1,2]`, ``, `"x"`,
	} {
		c, _, _ := newTest(false)
		fill(t, c, req2026("", ""), result)
		if _, _, ok := c.Lookup(context.Background(), req2026("", "")); ok {
			t.Errorf("%s: kept", result)
		}
	}
	c, _, _ := newTest(false)
	if _, f, _ := c.Lookup(context.Background(), req2026("", `{"cursor":"c","limit":3}`)); f != nil {
		t.Error("a request with params besides cursor and _meta may fill a copy")
	}
	if _, f, _ := c.Lookup(context.Background(), Request{Version: "2025-11-25"}); f != nil {
		t.Error("a session-era list without Sessions may fill a copy")
	}
}

func TestScopesAndTTL(t *testing.T) {
	ctx := context.Background()
	c, clk, _ := newTest(false)
	fill(t, c, req2026("Bearer a", ""), list)
	clk.t = clk.t.Add(400 * time.Millisecond)
	h, _, ok := c.Lookup(ctx, req2026("Bearer a", `{"_meta":{"k":1}}`))
	if !ok || h.TTL != 600*time.Millisecond {
		t.Fatalf("hit %v, remaining %v; want 600ms", ok, h.TTL)
	}
	for _, r := range []Request{req2026("Bearer b", ""), req2026("", ""), req2026("Bearer a", `{"cursor":"p2"}`)} {
		if _, _, ok := c.Lookup(ctx, r); ok {
			t.Fatalf("a private copy answered %v", r.Headers)
		}
	}
	other := req2026("Bearer a", "")
	other.Headers.(http.Header).Set("X-User", "mallory")
	if _, _, ok := c.Lookup(ctx, other); ok {
		t.Fatal("a private copy answered another principal")
	}
	clk.t = clk.t.Add(600 * time.Millisecond)
	if _, _, ok := c.Lookup(ctx, req2026("Bearer a", "")); ok {
		t.Fatal("an expired copy answered")
	}

	c, _, _ = newTest(false)
	fill(t, c, req2026("Bearer a", ""), strings.Replace(list, "private", "public", 1))
	if _, _, ok := c.Lookup(ctx, req2026("Bearer b", "")); !ok {
		t.Fatal("a public copy not shared with another credential")
	}
	if _, _, ok := c.Lookup(ctx, req2026("", "")); ok {
		t.Fatal("a public copy filled with credentials answered a caller without any")
	}
}

func TestGenerations(t *testing.T) {
	ctx := context.Background()
	st := &memState{m: map[string][]byte{}}
	a := New(Config{State: st})
	b := New(Config{State: st}) // another replica
	r := req2026("", "")
	for _, c := range []*Cache{a, b} {
		fill(t, c, r, list)
		if _, _, ok := c.Lookup(ctx, r); !ok {
			t.Fatal("no hit after the fill")
		}
	}
	a.Observe(ctx, []byte(`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`))
	if _, _, ok := b.Lookup(ctx, r); ok {
		t.Fatal("the other replica's copy answered after list_changed")
	}
	// A fill that began before a change is never served after it.
	_, f, _ := a.Lookup(ctx, r)
	b.Observe(ctx, []byte(`{"jsonrpc":"2.0","method":"notifications\/tools\/list_changed"}`))
	a.Store(f, list)
	if _, _, ok := a.Lookup(ctx, r); ok {
		t.Fatal("a copy filled across a change answered")
	}
	// What names list_changed without being another message ends the copies too; a
	// response that mentions it does not.
	fill(t, a, r, list)
	a.Observe(ctx, []byte(`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"notifications/tools/list_changed"}]}}`))
	if _, _, ok := a.Lookup(ctx, r); !ok {
		t.Fatal("a result's text ended the copies")
	}
	a.Observe(ctx, []byte(`[{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}]`))
	if _, _, ok := a.Lookup(ctx, r); ok {
		t.Fatal("a batch holding list_changed left the copies")
	}
}

func TestSessions(t *testing.T) {
	ctx := context.Background()
	c, _, _ := newTest(true)
	r := Request{Version: "2025-11-25", Session: "s1"}
	if _, f, _ := c.Lookup(ctx, r); f != nil {
		t.Fatal("a session that declared nothing may fill a copy")
	}
	c.Declared("s1", `{"capabilities":{"tools":{"listChanged":true}}}`)
	if _, f, _ := c.Lookup(ctx, r); f != nil {
		t.Fatal("a session without its stream relayed may fill a copy")
	}
	release := c.Hold("s1")
	fill(t, c, r, `{"tools":[]}`)
	if _, _, ok := c.Lookup(ctx, r); !ok {
		t.Fatal("no hit while the stream is held")
	}
	if _, _, ok := c.Lookup(ctx, Request{Version: "2025-11-25", Session: "s2"}); ok {
		t.Fatal("another session's lookup hit")
	}
	_, f, _ := c.Lookup(ctx, Request{Version: "2025-11-25", Session: "s1", Params: gjson.Parse(`{"cursor":"x"}`)})
	release()
	release()
	again := c.Hold("s1")
	defer again()
	if _, _, ok := c.Lookup(ctx, r); ok {
		t.Fatal("a copy from before the stream dropped answered")
	}
	c.Store(f, `{"tools":[]}`) // began under the dropped stream
	if _, _, ok := c.Lookup(ctx, Request{Version: "2025-11-25", Session: "s1", Params: gjson.Parse(`{"cursor":"x"}`)}); ok {
		t.Fatal("a fill that began under the dropped stream answered")
	}
}

func TestSetTTL(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"jsonrpc":"2.0","id":1,"result":{"ttlMs":1000,"tools":[]}}`, `{"jsonrpc":"2.0","id":1,"result":{"ttlMs":5,"tools":[]}}`},
		{`{"jsonrpc":"2.0","id":1,"result":{"tools":[],"ttlMs":1000}}`, `{"jsonrpc":"2.0","id":1,"result":{"tools":[],"ttlMs":5}}`},
		{`{"jsonrpc":"2.0","id":"\"result\":{\"ttlMs\":1,","result":{"tools":[],"ttlMs":1000}}`, `{"jsonrpc":"2.0","id":"\"result\":{\"ttlMs\":1,","result":{"tools":[],"ttlMs":5}}`},
	} {
		out, ok := SetTTL([]byte(tc.in), 5, answer.Set)
		if !ok || string(out) != tc.want {
			t.Errorf("%s: %s", tc.in, out)
		}
	}
	r := gjson.Parse(`{"tools":[{"name":"a"}],"cacheScope":"public","ttlMs":70}`)
	if got := string(ttlFirst(r)); got != `{"ttlMs":70,"tools":[{"name":"a"}],"cacheScope":"public"}` {
		t.Fatal(got)
	}
}

func TestBounded(t *testing.T) {
	c, _, _ := newTest(false)
	for i := range 20 {
		fill(t, c, req2026("Bearer "+string(rune('a'+i)), ""), list)
	}
	if n, _ := c.Stats(); n > 8 {
		t.Fatalf("%d copies; want at most 8", n)
	}
	big := `{"ttlMs":1000,"tools":[{"name":"` + strings.Repeat("x", 2<<20) + `"}]}`
	c2, _, _ := newTest(false)
	fill(t, c2, req2026("", ""), big)
	if n, _ := c2.Stats(); n != 0 {
		t.Fatal("a copy over the bytes bound kept")
	}
}
