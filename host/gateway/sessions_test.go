package gateway_test

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stategate/stategate/exchange/session"
	"github.com/stategate/stategate/exchange/stats"
	"github.com/stategate/stategate/host/demo"
	"github.com/stategate/stategate/host/gateway"
	"github.com/stategate/stategate/host/store"
	"github.com/stategate/stategate/host/store/storetest"
	"github.com/stategate/stategate/host/wasmrt"
	"github.com/tidwall/gjson"
)

// Gateway sessions in front of the official Go SDK's stateless mode (the demo upstream with
// StreamableHTTPOptions.Stateless): the official Go SDK client, the built plugin, real
// stores. testharness/field_test.go drives the same through `stategate serve` with the
// official TypeScript client.

// sessionSpy records what reaches the upstream: every Mcp-Session-Id it was sent, and the
// HTTP methods of requests other than POST.
type sessionSpy struct {
	mu       sync.Mutex
	sessions []string
	methods  []string
}

func (s *sessionSpy) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		if v := r.Header.Get("Mcp-Session-Id"); v != "" {
			s.sessions = append(s.sessions, v)
		}
		if r.Method != http.MethodPost {
			s.methods = append(s.methods, r.Method)
		}
		s.mu.Unlock()
		h.ServeHTTP(w, r)
	})
}

func (s *sessionSpy) seen() (sessions, methods []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.sessions...), append([]string(nil), s.methods...)
}

// statelessEnv is the gateway with st in front of the Go SDK's stateless server.
func statelessEnv(t *testing.T, st store.Store) (*env, *sessionSpy) {
	t.Helper()
	spy := &sessionSpy{}
	e := newEnv(t, envOptions{upstream: spy.wrap(demo.Handler(demo.Options{Stateless: true})), store: st})
	return e, spy
}

// TestSessions_goSDKStatelessUpstream: each client of the session era gets a gateway
// session, its own; the session-keyed workflow advances within it (step two admitted after
// step one, list_changed delivered) and not in the other client's; the upstream never sees a
// session id.
func TestSessions_goSDKStatelessUpstream(t *testing.T) {
	e, spy := statelessEnv(t, nil)
	a, b := e.connect(t, sessionEra), e.connect(t, sessionEra)
	for _, c := range []*client{a, b} {
		if id := c.cs.ID(); !session.IsGateway(id) {
			t.Fatalf("client session %q: want one the gateway issued", id)
		}
	}
	if a.cs.ID() == b.cs.ID() {
		t.Fatalf("two clients share session %s", a.cs.ID())
	}
	if _, listed := a.tools(t)["cart.checkout"]; listed {
		t.Error("cart.checkout listed in state empty")
	}
	if res := a.call(t, "cart.add_item", map[string]any{"sku": "coffee"}); res.IsError {
		t.Fatalf("cart.add_item: %v", texts(res))
	}
	select {
	case <-a.changed:
	case <-time.After(5 * time.Second):
		t.Error("no notifications/tools/list_changed after cart.add_item")
	}
	if _, listed := a.tools(t)["cart.checkout"]; !listed {
		t.Error("cart.checkout not listed after cart.add_item")
	}
	if res := a.call(t, "cart.checkout", nil); res.IsError {
		t.Errorf("cart.checkout after cart.add_item refused: %v", texts(res))
	}
	if res := b.call(t, "cart.checkout", nil); !res.IsError || metaCode(res) != "TOOL_NOT_AVAILABLE" {
		t.Errorf("cart.checkout in the other client's session: %v %v", metaCode(res), texts(res))
	}
	if got := e.upstream.count("cart.checkout"); got != 1 {
		t.Errorf("the upstream ran cart.checkout %d times, want 1", got)
	}
	if sessions, _ := spy.seen(); len(sessions) > 0 {
		t.Errorf("the upstream was sent Mcp-Session-Id %q", sessions)
	}
	if got := e.gw.Stats.Get(stats.CountSessionsIssued); got != 2 {
		t.Errorf("sessions_issued = %d, want 2", got)
	}
}

// TestSessions_statefulUpstreamUnchanged: an upstream that issues sessions keeps them: the
// client gets the upstream's id, the upstream is sent it, and the gateway issues none.
func TestSessions_statefulUpstreamUnchanged(t *testing.T) {
	spy := &sessionSpy{}
	e := newEnv(t, envOptions{upstream: spy.wrap(demo.Handler(demo.Options{}))})
	c := e.connect(t, sessionEra)
	if id := c.cs.ID(); id == "" || session.IsGateway(id) {
		t.Fatalf("client session %q: want the upstream's", id)
	}
	c.call(t, "cart.add_item", map[string]any{"sku": "tea"})
	sessions, _ := spy.seen()
	if len(sessions) == 0 || sessions[len(sessions)-1] != c.cs.ID() {
		t.Errorf("the upstream was sent %q, want its own %s", sessions, c.cs.ID())
	}
	if got := e.gw.Stats.Get(stats.CountSessionsIssued); got != 0 {
		t.Errorf("sessions_issued = %d in front of a stateful upstream", got)
	}
}

// rawInit initializes over plain HTTP and returns the session the answer carries.
func rawInit(t *testing.T, endpoint string) string {
	t.Helper()
	resp := sessPost(t, endpoint, "", `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("initialize: %d", resp.StatusCode)
	}
	return resp.Header.Get("Mcp-Session-Id")
}

func sessPost(t *testing.T, endpoint, session, body string) *http.Response {
	t.Helper()
	return rawDo(t, http.MethodPost, endpoint, session, body, "application/json, text/event-stream")
}

func rawDo(t *testing.T, method, endpoint, session, body, accept string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(method, endpoint, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", accept)
	req.Header.Set("MCP-Protocol-Version", "2025-06-18")
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
	}
	resp, err := rawClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// rawClient gives up on an answer after 10 s (a standing stream opened where a 404 was due).
var rawClient = &http.Client{Timeout: 10 * time.Second}

// wantNotFound checks a 404 with the JSON-RPC error -32001 and the request's id.
func wantNotFound(t *testing.T, what string, resp *http.Response, id string) {
	t.Helper()
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 404 || gjson.GetBytes(body, "error.code").Int() != session.CodeNotFound || gjson.GetBytes(body, "id").Raw != id {
		t.Errorf("%s: %d %s; want 404, -32001, id %s", what, resp.StatusCode, body, id)
	}
}

const sessListBody = `{"jsonrpc":"2.0","id":3,"method":"tools/list"}`

// TestSessions_deleteEndsIt: DELETE ends a gateway session without reaching the upstream;
// every later request with it is 404 (the client initializes again, and gets a new one);
// forged ids are 404 too, and none of them reaches the upstream.
func TestSessions_deleteEndsIt(t *testing.T) {
	e, spy := statelessEnv(t, nil)
	id := rawInit(t, e.url)
	if !session.IsGateway(id) {
		t.Fatalf("initialize answered session %q", id)
	}
	if resp := sessPost(t, e.url, id, sessListBody); resp.StatusCode != 200 {
		t.Fatalf("tools/list in a live session: %d", resp.StatusCode)
	}
	resp := rawDo(t, http.MethodDelete, e.url, id, "", "*/*")
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("DELETE: %d", resp.StatusCode)
	}
	wantNotFound(t, "tools/list after DELETE", sessPost(t, e.url, id, sessListBody), "3")
	wantNotFound(t, "GET after DELETE", rawDo(t, http.MethodGet, e.url, id, "", "text/event-stream"), "null")
	wantNotFound(t, "DELETE after DELETE", rawDo(t, http.MethodDelete, e.url, id, "", "*/*"), "null")
	wantNotFound(t, "a forged id", sessPost(t, e.url, session.Prefix+strings.Repeat("x", 43), sessListBody), "3")
	if again := rawInit(t, e.url); !session.IsGateway(again) || again == id {
		t.Errorf("initialize after DELETE answered %q", again)
	}
	sessions, methods := spy.seen()
	if len(sessions) > 0 || len(methods) > 0 {
		t.Errorf("the upstream saw sessions %q and methods %q", sessions, methods)
	}
	if got := e.gw.Stats.Get(stats.CountSessionsEnded); got != 1 {
		t.Errorf("sessions_ended = %d, want 1", got)
	}
}

// TestSessions_standingStream: the gateway serves a gateway session's GET stream itself (the
// stateless upstream has none): a list_changed that a JSON-only answer could not carry
// arrives there, and DELETE closes it.
func TestSessions_standingStream(t *testing.T) {
	e, spy := statelessEnv(t, nil)
	id := rawInit(t, e.url)
	req, _ := http.NewRequest(http.MethodGet, e.url, nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", id)
	get, err := http.DefaultClient.Do(req) // no timeout: the stream stays open
	if err != nil {
		t.Fatal(err)
	}
	if get.StatusCode != 200 || !strings.HasPrefix(get.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("GET: %d %s", get.StatusCode, get.Header.Get("Content-Type"))
	}
	events := make(chan string, 8)
	go func() {
		defer close(events)
		sc := bufio.NewScanner(get.Body)
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				events <- data
			}
		}
	}()
	call := rawDo(t, http.MethodPost, e.url, id, `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"cart.add_item","arguments":{"sku":"mug"}}}`, "application/json")
	body, _ := io.ReadAll(call.Body)
	call.Body.Close()
	if call.StatusCode != 200 || !strings.HasPrefix(call.Header.Get("Content-Type"), "application/json") || gjson.GetBytes(body, "result.isError").Bool() {
		t.Fatalf("JSON-only cart.add_item: %d %s %s", call.StatusCode, call.Header.Get("Content-Type"), body)
	}
	select {
	case ev := <-events:
		if gjson.Get(ev, "method").Str != "notifications/tools/list_changed" {
			t.Errorf("standing stream carried %s", ev)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no list_changed on the gateway's standing stream")
	}
	resp := rawDo(t, http.MethodDelete, e.url, id, "", "*/*")
	resp.Body.Close()
	select {
	case _, open := <-events:
		if open {
			t.Error("an event after DELETE")
		}
	case <-time.After(5 * time.Second):
		t.Error("the standing stream stayed open after DELETE")
	}
	get.Body.Close()
	if _, methods := spy.seen(); len(methods) > 0 {
		t.Errorf("the upstream saw %q", methods)
	}
}

// TestSessions_expireWithTheStoresIdleTTL: a gateway session lives while requests keep
// coming within the store's idle TTL, and is 404 once the TTL passed without one, on every
// store the gateway serves with.
func TestSessions_expireWithTheStoresIdleTTL(t *testing.T) {
	for _, tc := range []struct {
		name string
		open func(t *testing.T, opts store.Options) store.Store
	}{
		{"memory", func(_ *testing.T, opts store.Options) store.Store { return store.NewMemory(opts) }},
		{"bolt", func(t *testing.T, opts store.Options) store.Store {
			st, err := store.NewBolt(filepath.Join(t.TempDir(), "stategate.db"), opts)
			if err != nil {
				t.Fatal(err)
			}
			return st
		}},
		{"redis", func(t *testing.T, opts store.Options) store.Store {
			st, err := store.NewRedis(context.Background(), storetest.Redis(t), opts)
			if err != nil {
				t.Fatal(err)
			}
			return st
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// A machine that stalls a request past the TTL (CI runs packages side by side on
			// two cores, bolt syncs every write) makes a 404 the right answer: such a round
			// is inconclusive and runs again with a longer TTL. A 404 that came sooner than
			// the TTL after the previous request was sent fails at once.
			for _, ttl := range []time.Duration{1200 * time.Millisecond, 3 * time.Second, 6 * time.Second} {
				if sessionOutlivesRequests(t, tc.open(t, store.Options{IdleTTL: ttl}), ttl) {
					return
				}
				t.Logf("idle TTL %v: a request came later than the TTL (a stalled machine); again with a longer TTL", ttl)
			}
			t.Fatal("every TTL tried was outlasted by the machine's stalls")
		})
	}
}

// sessionOutlivesRequests runs one round of TestSessions_expireWithTheStoresIdleTTL on st:
// requests ttl/4 apart keep the session alive past the TTL, and it is 404 once the TTL
// passed without one. It reports false when the round was inconclusive (a 404 after a
// gap longer than the TTL).
func sessionOutlivesRequests(t *testing.T, st store.Store, ttl time.Duration) bool {
	t.Cleanup(func() { st.Close() })
	e, _ := statelessEnv(t, st)
	// prev is when the request that last refreshed the session was sent: the refresh came
	// after it, and a 404 is read before time.Now(), so time.Since(prev) bounds the idle
	// time the store saw.
	prev := time.Now()
	id := rawInit(t, e.url)
	for range 6 { // 6 x ttl/4, longer than the TTL: alive only because each request refreshes it
		time.Sleep(ttl / 4)
		start := time.Now()
		resp := sessPost(t, e.url, id, sessListBody)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			if time.Since(prev) > ttl {
				return false
			}
			t.Fatalf("tools/list within the idle TTL: %d", resp.StatusCode)
		}
		prev = start
	}
	time.Sleep(ttl + ttl/2)
	wantNotFound(t, "tools/list after the idle TTL", sessPost(t, e.url, id, sessListBody), "3")
	return true
}

// TestSessions_replicasShareThem: two gateways on one Redis: a session issued by one works
// on the other, its workflow advances across them, and a DELETE on one ends it on both.
func TestSessions_replicasShareThem(t *testing.T) {
	redisURL := storetest.Redis(t)
	rt := pluginRuntime(t)
	up := httptest.NewServer(demo.Handler(demo.Options{Stateless: true}))
	t.Cleanup(up.Close)
	u, _ := url.Parse(up.URL + "/mcp")
	var urls []string
	for range 2 {
		st, err := store.NewRedis(context.Background(), redisURL, store.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		pool, err := wasmrt.NewPool(context.Background(), rt, demo.Config(), wasmrt.PoolOptions{Size: 2})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { pool.Close(context.Background()) })
		gw, err := gateway.New(gateway.Options{Upstream: u, Plugin: pool, Config: demo.Config(), Store: st})
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(gw)
		t.Cleanup(srv.Close)
		urls = append(urls, srv.URL+"/mcp")
	}
	id := rawInit(t, urls[0])
	callTool := func(gw, tool, args string) string {
		resp := rawDo(t, http.MethodPost, gw, id, `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"`+tool+`","arguments":`+args+`}}`, "application/json")
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("%s on %s: %d %s", tool, gw, resp.StatusCode, body)
		}
		return string(body)
	}
	if out := callTool(urls[1], "cart.add_item", `{"sku":"apple"}`); gjson.Get(out, "result.isError").Bool() {
		t.Fatalf("cart.add_item on the other replica: %s", out)
	}
	if out := callTool(urls[0], "cart.checkout", `{}`); gjson.Get(out, "result.isError").Bool() {
		t.Errorf("cart.checkout on the first replica after cart.add_item on the other: %s", out)
	}
	resp := rawDo(t, http.MethodDelete, urls[1], id, "", "*/*")
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("DELETE: %d", resp.StatusCode)
	}
	wantNotFound(t, "the first replica after a DELETE on the other", sessPost(t, urls[0], id, sessListBody), "3")
}

// BenchmarkSessions: what presenting a gateway session costs a request (the record's read)
// against the same request without a session, in front of the Go SDK's stateless server, on
// the memory store and on Redis.
//
//	go test ./host/gateway -run '^$' -bench Sessions -benchtime 2000x
func BenchmarkSessions(b *testing.B) {
	for _, kind := range []string{"memory", "redis"} {
		var st store.Store = store.NewMemory(store.Options{})
		if kind == "redis" {
			r, err := store.NewRedis(context.Background(), storetest.Redis(b), store.Options{})
			if err != nil {
				b.Fatal(err)
			}
			st = r
		}
		b.Cleanup(func() { st.Close() })
		rt := pluginRuntime(b)
		up := httptest.NewServer(demo.Handler(demo.Options{Stateless: true, JSONResponse: true}))
		b.Cleanup(up.Close)
		u, _ := url.Parse(up.URL + "/mcp")
		pool, err := wasmrt.NewPool(context.Background(), rt, demo.Config(), wasmrt.PoolOptions{Size: 4})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { pool.Close(context.Background()) })
		gw, err := gateway.New(gateway.Options{Upstream: u, Plugin: pool, Config: demo.Config(), Store: st})
		if err != nil {
			b.Fatal(err)
		}
		srv := httptest.NewServer(gw)
		b.Cleanup(srv.Close)
		endpoint := srv.URL + "/mcp"
		for _, mode := range []string{"no_session", "gateway_session"} {
			b.Run(kind+"/"+mode, func(b *testing.B) {
				sid := ""
				if mode == "gateway_session" {
					sid = benchSession(b, endpoint)
					if !session.IsGateway(sid) {
						b.Fatalf("session %q", sid)
					}
				}
				post(b, endpoint, sid, callBody)
				lat := make([]time.Duration, 0, b.N)
				var trips uint64
				if r, ok := st.(*store.Redis); ok {
					trips = r.RoundTrips()
				}
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					start := time.Now()
					post(b, endpoint, sid, callBody)
					lat = append(lat, time.Since(start))
				}
				b.StopTimer()
				reportPercentiles(b, lat)
				if r, ok := st.(*store.Redis); ok {
					b.ReportMetric(float64(r.RoundTrips()-trips)/float64(b.N), "trips/op")
				}
			})
		}
	}
}
