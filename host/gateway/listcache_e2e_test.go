package gateway_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stategate/stategate/exchange/listcache"
	"github.com/stategate/stategate/exchange/stats"
	"github.com/stategate/stategate/host/gateway"
	"github.com/stategate/stategate/host/store"
	"github.com/stategate/stategate/host/store/storetest"
	"github.com/stategate/stategate/host/wasmrt"
)

// The gateway's copy of the upstream's tools/list (exchange/listcache), end to end: a real
// Streamable HTTP server whose list changes while the gateway runs, and every path by
// which a copy could go stale.

// listConfig decorates t.a (its description says immutable), so a list answered from the
// copy shows that the decoration still ran.
const listConfig = `{"version": 1, "names": {"separator": "."},
 "stateSync": {"policies": [{"match": "t.a", "cacheControl": "immutable"}]}}`

// listServer is a 2026-07-28 MCP server over the raw wire whose tool list changes while the
// gateway runs. Its lists carry ttlMs and cacheScope; with scope private each credential
// (Authorization) also gets a tool of its own. Pages hold three tools: t.revN (the list's
// revision) comes first. A tools/call of
// "admin.change" changes the list and answers as an event stream with list_changed before
// the result (or, with {"quiet": true}, changes it and tells no one); its
// subscriptions/listen streams get list_changed whenever the list changes by change(true).
type listServer struct {
	ttlMs int
	scope string

	mu      sync.Mutex
	rev     int
	refused string // a credential (Authorization) the server answers 401
	listens []chan struct{}
	lists   atomic.Int64 // tools/list requests that reached it
}

func (s *listServer) names(auth string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := []string{fmt.Sprintf("t.rev%d", s.rev)}
	if s.scope == "private" {
		n = append(n, "t.for-"+strings.TrimPrefix(auth, "Bearer "))
	}
	return append(n, "t.a", "t.b", "t.z")
}

// change changes the list; notify: its listen streams are told.
func (s *listServer) change(notify bool) {
	s.mu.Lock()
	s.rev++
	ls := s.listens
	s.mu.Unlock()
	if notify {
		for _, c := range ls {
			c <- struct{}{}
		}
	}
}

const listChangedMsg = `{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`

func (s *listServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params struct {
			Cursor    string         `json:"cursor"`
			Name      string         `json:"name"`
			Arguments map[string]any `json:"arguments"`
		} `json:"params"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || r.Header.Get("MCP-Protocol-Version") != "2026-07-28" {
		http.Error(w, "bad request", 400)
		return
	}
	result := func(res string) string { return `{"jsonrpc":"2.0","id":` + string(req.ID) + `,"result":` + res + `}` }
	switch req.Method {
	case "tools/list":
		s.lists.Add(1)
		s.mu.Lock()
		refused := s.refused != "" && r.Header.Get("Authorization") == s.refused
		s.mu.Unlock()
		if refused {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		names := s.names(r.Header.Get("Authorization"))
		page, next := names[:3], `,"nextCursor":"2"`
		if req.Params.Cursor == "2" {
			page, next = names[3:], ""
		}
		var tools []string
		for _, n := range page {
			tools = append(tools, `{"name":"`+n+`","description":"Tool `+n+`.","inputSchema":{"type":"object"}}`)
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, result(fmt.Sprintf(`{"tools":[%s]%s,"ttlMs":%d,"cacheScope":"%s"}`, strings.Join(tools, ","), next, s.ttlMs, s.scope)))
	case "tools/call":
		quiet := req.Params.Arguments["quiet"] == true
		s.change(false)
		if quiet {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, result(`{"content":[{"type":"text","text":"changed"}]}`))
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "event: message\ndata: "+listChangedMsg+"\n\n")
		io.WriteString(w, "event: message\ndata: "+result(`{"content":[{"type":"text","text":"changed"}]}`)+"\n\n")
	case "subscriptions/listen":
		c := make(chan struct{}, 8)
		s.mu.Lock()
		s.listens = append(s.listens, c)
		s.mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		w.(http.Flusher).Flush()
		for {
			select {
			case <-c:
				io.WriteString(w, "event: message\ndata: "+listChangedMsg+"\n\n")
				w.(http.Flusher).Flush()
			case <-r.Context().Done():
				return
			}
		}
	default:
		http.Error(w, "unknown method", 400)
	}
}

// listGateway starts a gateway with the list cache in front of upstream, on st.
func listGateway(t *testing.T, upstream string, st store.Store) (*gateway.Gateway, string) {
	t.Helper()
	ctx := context.Background()
	pool, err := wasmrt.NewPool(ctx, pluginRuntime(t), []byte(listConfig), wasmrt.PoolOptions{Size: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pool.Close(ctx) })
	u, _ := url.Parse(upstream)
	gw, err := gateway.New(gateway.Options{Upstream: u, Plugin: pool, Config: []byte(listConfig), Store: st,
		ListCache: &listcache.Config{}})
	if err != nil {
		t.Fatal(err)
	}
	front := httptest.NewServer(gw)
	t.Cleanup(front.Close)
	return gw, front.URL + "/mcp"
}

// wireList sends one tools/list in the 2026-07-28 wire (params: nil or a JSON object),
// with Authorization auth ("" for none), and returns the answer's id and result.
func wireList(t *testing.T, gw, auth, params string, id int) (string, map[string]any) {
	t.Helper()
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/list"`, id)
	if params != "" {
		body += `,"params":` + params
	}
	body += "}"
	req, _ := http.NewRequest("POST", gw, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "tools/list")
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out struct {
		ID     json.RawMessage `json:"id"`
		Result map[string]any  `json:"result"`
	}
	if err := json.Unmarshal(raw, &out); err != nil || out.Result == nil {
		t.Fatalf("tools/list: %d %s", resp.StatusCode, raw)
	}
	return string(out.ID), out.Result
}

// wireCall sends a tools/call of admin.change (quiet: no notification) and returns the
// answer's body as the client got it.
func wireCall(t *testing.T, gw string, quiet bool) string {
	t.Helper()
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":99,"method":"tools/call","params":{"name":"admin.change","arguments":{"quiet":%v}}}`, quiet)
	req, _ := http.NewRequest("POST", gw, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "tools/call")
	req.Header.Set("Mcp-Name", "admin.change")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return string(raw)
}

func toolNames(r map[string]any) []string {
	var n []string
	tools, _ := r["tools"].([]any)
	for _, t := range tools {
		n = append(n, t.(map[string]any)["name"].(string))
	}
	return n
}

func hasTool(r map[string]any, name string) bool {
	for _, n := range toolNames(r) {
		if n == name {
			return true
		}
	}
	return false
}

// TestListCache_2026: the copy in the 2026-07-28 era, each path by which it could go stale.
func TestListCache_2026(t *testing.T) {
	srv := &listServer{ttlMs: 60_000, scope: "private"}
	up := httptest.NewServer(srv)
	t.Cleanup(up.Close)
	gw, url := listGateway(t, up.URL+"/mcp", store.NewMemory(store.Options{}))
	lists := func() int64 { return srv.lists.Load() }
	page1 := `{"_meta":{"io.modelcontextprotocol/clientInfo":{"name":"test","version":"1"}}}`

	// A miss, then a hit that never reaches the upstream: decorated, with the request's
	// own id and the remaining ttlMs.
	_, first := wireList(t, url, "Bearer alice", "", 1)
	id, hit := wireList(t, url, "Bearer alice", page1, 2)
	if lists() != 1 {
		t.Fatalf("the upstream got %d lists; want 1 (the second answered from the copy)", lists())
	}
	if id != "2" || !hasTool(hit, "t.for-alice") || !strings.Contains(mustJSON(hit), "immutable") {
		t.Fatalf("the copy's answer: id %s, %s; want id 2, alice's list, decorated", id, mustJSON(hit))
	}
	if ttl := hit["ttlMs"].(float64); ttl <= 0 || ttl > first["ttlMs"].(float64) || ttl > 60_000 {
		t.Fatalf("remaining ttlMs %v; want in (0, %v]", ttl, first["ttlMs"])
	}
	if hit["cacheScope"] != "private" {
		t.Fatalf("cacheScope %v", hit["cacheScope"])
	}
	if gw.Stats.Get(stats.CountListCacheHits) != 1 || gw.Stats.Get(stats.CountListCacheMisses) != 1 {
		t.Fatalf("hits %d, misses %d; want 1 and 1", gw.Stats.Get(stats.CountListCacheHits), gw.Stats.Get(stats.CountListCacheMisses))
	}

	// Another credential: a private list is never shared.
	if _, bob := wireList(t, url, "Bearer bob", "", 3); lists() != 2 || !hasTool(bob, "t.for-bob") || hasTool(bob, "t.for-alice") {
		t.Fatalf("bob: upstream lists %d, %v; want his own list from the upstream", lists(), toolNames(bob))
	}
	// No credential at all: neither.
	if _, anon := wireList(t, url, "", "", 4); lists() != 3 || hasTool(anon, "t.for-alice") || hasTool(anon, "t.for-bob") {
		t.Fatalf("anonymous: upstream lists %d, %v", lists(), toolNames(anon))
	}

	// Another page: a copy of its own.
	_, p2 := wireList(t, url, "Bearer alice", `{"cursor":"2"}`, 5)
	if lists() != 4 || !hasTool(p2, "t.z") || hasTool(p2, "t.a") {
		t.Fatalf("page 2: upstream lists %d, %v", lists(), toolNames(p2))
	}
	if _, p2 = wireList(t, url, "Bearer alice", `{"cursor":"2"}`, 6); lists() != 4 || !hasTool(p2, "t.z") {
		t.Fatalf("page 2 again: upstream lists %d, %v; want it from its copy", lists(), toolNames(p2))
	}
	// Params other than cursor and _meta: never from the copy.
	if wireList(t, url, "Bearer alice", `{"filter":"x"}`, 7); lists() != 5 {
		t.Fatalf("a list with other params: upstream lists %d; want it sent upstream", lists())
	}

	// list_changed inside a POST answer's stream: every copy ends before the client has it.
	if out := wireCall(t, url, false); !strings.Contains(out, "list_changed") {
		t.Fatalf("the call's answer: %s", out)
	}
	before := lists()
	if _, l := wireList(t, url, "Bearer alice", "", 8); lists() != before+1 || !hasTool(l, "t.rev1") {
		t.Fatalf("after list_changed on the call's stream: upstream lists %d (was %d), %v; want the new list", lists(), before, toolNames(l))
	}
	if _, l := wireList(t, url, "Bearer alice", `{"cursor":"2"}`, 9); lists() != before+2 || !hasTool(l, "t.z") {
		t.Fatalf("page 2 after list_changed: %v (upstream lists %d)", toolNames(l), lists())
	}

	// list_changed on a subscriptions/listen stream (a passed request's event stream).
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events := listen(t, ctx, url)
	wireList(t, url, "Bearer alice", "", 10) // from the copy
	before = lists()
	srv.change(true)
	waitEvent(t, events, "list_changed")
	if _, l := wireList(t, url, "Bearer alice", "", 11); lists() != before+1 || !hasTool(l, "t.rev2") {
		t.Fatalf("after list_changed on the listen stream: upstream lists %d (was %d), %v", lists(), before, toolNames(l))
	}
}

// listen opens a subscriptions/listen stream through the gateway and returns its events.
func listen(t *testing.T, ctx context.Context, gw string) <-chan string {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, "POST", gw, strings.NewReader(`{"jsonrpc":"2.0","id":"l1","method":"subscriptions/listen","params":{}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "subscriptions/listen")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		t.Fatalf("listen: %d", resp.StatusCode)
	}
	return readEvents(resp.Body)
}

// readEvents sends each data line of an event stream on the channel until it ends.
func readEvents(body io.ReadCloser) <-chan string {
	ch := make(chan string, 16)
	go func() {
		defer body.Close()
		defer close(ch)
		sc := bufio.NewScanner(body)
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				ch <- d
			}
		}
	}()
	return ch
}

func waitEvent(t *testing.T, ch <-chan string, want string) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case d, ok := <-ch:
			if !ok {
				t.Fatalf("the stream ended before %q", want)
			}
			if strings.Contains(d, want) {
				return
			}
		case <-deadline:
			t.Fatalf("no %q within 10 s", want)
		}
	}
}

// TestListCache_2026_ttl: a copy lives for the upstream's ttlMs and no longer, even when
// the list changed without a word; public lists are shared across credentials.
func TestListCache_2026_ttl(t *testing.T) {
	srv := &listServer{ttlMs: 400, scope: "public"}
	up := httptest.NewServer(srv)
	t.Cleanup(up.Close)
	_, url := listGateway(t, up.URL+"/mcp", store.NewMemory(store.Options{}))
	wireList(t, url, "Bearer alice", "", 1)
	_, l := wireList(t, url, "Bearer bob", "", 2) // public: shared
	if srv.lists.Load() != 1 || l["cacheScope"] != "public" {
		t.Fatalf("a public list for another credential: upstream lists %d, scope %v; want 1, public", srv.lists.Load(), l["cacheScope"])
	}
	wireCall(t, url, true) // the list changes; nobody is told
	time.Sleep(450 * time.Millisecond)
	if _, l := wireList(t, url, "Bearer alice", "", 4); srv.lists.Load() != 2 || !hasTool(l, "t.rev1") {
		t.Fatalf("after ttlMs: upstream lists %d, %v; want the expired copy refetched, with the change", srv.lists.Load(), toolNames(l))
	}

	// ttlMs 0 or absent: never kept.
	srv0 := &listServer{ttlMs: 0, scope: "public"}
	up0 := httptest.NewServer(srv0)
	t.Cleanup(up0.Close)
	_, url0 := listGateway(t, up0.URL+"/mcp", store.NewMemory(store.Options{}))
	wireList(t, url0, "", "", 1)
	if wireList(t, url0, "", "", 2); srv0.lists.Load() != 2 {
		t.Fatalf("ttlMs 0: upstream lists %d; want 2", srv0.lists.Load())
	}
}

// TestListCache_replicas: two gateways on one redis-server (near cache on): a list_changed
// one of them sees ends the other's copies too.
func TestListCache_replicas(t *testing.T) {
	spec := storetest.RedisNear(t)
	srv := &listServer{ttlMs: 60_000, scope: "public"}
	up := httptest.NewServer(srv)
	t.Cleanup(up.Close)
	var urls []string
	for range 2 {
		st, err := store.Open(context.Background(), spec, store.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		_, u := listGateway(t, up.URL+"/mcp", st)
		urls = append(urls, u)
	}
	a, b := urls[0], urls[1]
	wireList(t, a, "", "", 1)
	wireList(t, b, "", "", 2)
	wireList(t, a, "", "", 3)
	wireList(t, b, "", "", 4)
	if srv.lists.Load() != 2 {
		t.Fatalf("upstream lists %d; want 2 (one per replica, then copies)", srv.lists.Load())
	}
	for round := range 20 {
		wireCall(t, a, false) // list_changed on replica a's stream
		before := srv.lists.Load()
		if _, l := wireList(t, b, "", "", 5); srv.lists.Load() != before+1 || !hasTool(l, fmt.Sprintf("t.rev%d", round+1)) {
			t.Fatalf("round %d: replica b after a saw list_changed: upstream lists %d (was %d), %v", round, srv.lists.Load(), before, toolNames(l))
		}
		wireList(t, b, "", "", 6)
		if srv.lists.Load() != before+1 {
			t.Fatalf("round %d: replica b's fresh copy not used", round)
		}
	}
}

// sdkListServer is the official Go SDK's server (event-stream answers, sessions), whose tool
// list the test changes while the gateway runs; lists counts the tools/list requests that
// reach it.
func sdkListServer(t *testing.T) (*mcp.Server, *atomic.Int64, string) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "lists", Version: "1"}, nil)
	add := func(name string) {
		mcp.AddTool(srv, &mcp.Tool{Name: name, Description: "Tool " + name + "."},
			func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil, nil
			})
	}
	add("t.a")
	add("t.b")
	var lists atomic.Int64
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			if bytes.Contains(body, []byte(`"tools/list"`)) {
				lists.Add(1)
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(up.Close)
	return srv, &lists, up.URL + "/mcp"
}

// sessionClient speaks the 2025-11-25 wire to the gateway by hand, so the test holds its
// GET stream itself.
type sessionClient struct {
	t   *testing.T
	url string
	sid string
}

func (c *sessionClient) post(body string) (*http.Response, string) {
	c.t.Helper()
	req, _ := http.NewRequest("POST", c.url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", sessionEra)
	if c.sid != "" {
		req.Header.Set("Mcp-Session-Id", c.sid)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp, string(raw)
}

func newSessionClient(t *testing.T, gw string) *sessionClient {
	c := &sessionClient{t: t, url: gw}
	resp, _ := c.post(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"` + sessionEra + `","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	c.sid = resp.Header.Get("Mcp-Session-Id")
	if c.sid == "" {
		t.Fatal("no session")
	}
	c.post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return c
}

// list returns the tool names of one tools/list (an SSE or JSON answer).
func (c *sessionClient) list(id int) []string {
	c.t.Helper()
	_, raw := c.post(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/list"}`, id))
	for _, line := range strings.Split(raw, "\n") {
		line = strings.TrimPrefix(line, "data: ")
		var m struct {
			ID     int            `json:"id"`
			Result map[string]any `json:"result"`
		}
		if json.Unmarshal([]byte(line), &m) == nil && m.Result != nil {
			if m.ID != id {
				c.t.Fatalf("answer id %d; want %d", m.ID, id)
			}
			return toolNames(m.Result)
		}
	}
	c.t.Fatalf("tools/list: no result in %s", raw)
	return nil
}

// stream opens the session's GET stream; cancel drops it.
func (c *sessionClient) stream(ctx context.Context) <-chan string {
	c.t.Helper()
	req, _ := http.NewRequestWithContext(ctx, "GET", c.url, nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("MCP-Protocol-Version", sessionEra)
	req.Header.Set("Mcp-Session-Id", c.sid)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		c.t.Fatalf("GET stream: %d", resp.StatusCode)
	}
	return readEvents(resp.Body)
}

// TestListCache_2025: a session whose server declared listChanged is answered from the copy
// only while the gateway relays its GET stream; list_changed on it ends the copy, and so
// does the stream's end.
func TestListCache_2025(t *testing.T) {
	srv, lists, upURL := sdkListServer(t)
	_, url := listGateway(t, upURL, store.NewMemory(store.Options{}))
	c := newSessionClient(t, url)

	// No GET stream: every list goes upstream.
	c.list(1)
	c.list(2)
	if lists.Load() != 2 {
		t.Fatalf("without the GET stream: upstream lists %d; want 2", lists.Load())
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel) // before the servers close: they wait for the stream
	events := c.stream(ctx)
	c.list(3)
	if n := c.list(4); lists.Load() != 3 || len(n) != 2 {
		t.Fatalf("with the GET stream: upstream lists %d, %v; want 3 (the second from the copy)", lists.Load(), n)
	}

	// The server's list changes: list_changed on the GET stream ends the copy.
	mcp.AddTool(srv, &mcp.Tool{Name: "t.c", Description: "Tool t.c."},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			return nil, nil, nil
		})
	waitEvent(t, events, "list_changed")
	if n := c.list(5); lists.Load() != 4 || len(n) != 3 {
		t.Fatalf("after list_changed: upstream lists %d, %v; want the new list from the upstream", lists.Load(), n)
	}
	c.list(6)
	if lists.Load() != 4 {
		t.Fatalf("the new copy: upstream lists %d; want 4", lists.Load())
	}

	// A dropped GET stream ends the copy at once: the next change would go unheard.
	cancel()
	for range events { // the stream's end, as the client saw it
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		before := lists.Load()
		c.list(7)
		if lists.Load() == before+1 {
			break // the gateway saw the stream end
		}
		if time.Now().After(deadline) {
			t.Fatal("the copy was still used 5 s after the GET stream dropped")
		}
		time.Sleep(10 * time.Millisecond)
	}
	srv.RemoveTools("t.c") // unheard: no stream
	if n := c.list(8); len(n) != 2 {
		t.Fatalf("after an unheard change: %v; want the server's list", n)
	}
}

// wireListStatus is wireList that returns the HTTP status and body as they came.
func wireListStatus(t *testing.T, gw, auth string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", gw, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "tools/list")
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(raw)
}

// TestListCache_aCredentialTheServerRefuses is the case that keeps the copy off by default:
// the server never sees a request answered from the copy, so a credential it refuses gets
// the list it would not give. A "public" list is shared by every caller that sends an
// Authorization header, so a token the server never issued gets it; a "private" list
// keeps going to a credential the server revoked until its ttlMs runs out.
func TestListCache_aCredentialTheServerRefuses(t *testing.T) {
	for _, scope := range []string{"public", "private"} {
		t.Run(scope, func(t *testing.T) {
			srv := &listServer{ttlMs: 60_000, scope: scope}
			up := httptest.NewServer(srv)
			t.Cleanup(up.Close)
			_, url := listGateway(t, up.URL+"/mcp", store.NewMemory(store.Options{}))
			wireList(t, url, "Bearer alice", "", 1) // fills the copy
			refused := "Bearer mallory"             // public: any other token
			if scope == "private" {
				refused = "Bearer alice" // private: alice's token, revoked at the server
			}
			srv.mu.Lock()
			srv.refused = refused
			srv.mu.Unlock()
			if status, _ := wireListStatus(t, up.URL+"/mcp", refused); status != http.StatusUnauthorized {
				t.Fatalf("the server itself answers %s with %d; want 401", refused, status)
			}
			before := srv.lists.Load()
			status, body := wireListStatus(t, url, refused)
			if status != 200 || !strings.Contains(body, `"t.a"`) || srv.lists.Load() != before {
				t.Fatalf("through the gateway: %d %.200s, upstream lists %d (was %d); want the list from the copy, unasked", status, body, srv.lists.Load(), before)
			}
		})
	}
}

// TestListCache_2025_serverEndsTheStream: the server ending the session's GET stream (a
// restart, a closed connection) ends the copy as the client dropping it does: the next
// list goes upstream.
func TestListCache_2025_serverEndsTheStream(t *testing.T) {
	srv, lists, upURL := sdkListServer(t)
	// The GET streams the upstream serves end when cut is called (the server's side).
	var mu sync.Mutex
	var cuts []context.CancelFunc
	cut := func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range cuts {
			c()
		}
		cuts = nil
	}
	target, _ := url.Parse(upURL)
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			ctx, cancel := context.WithCancel(r.Context())
			mu.Lock()
			cuts = append(cuts, cancel)
			mu.Unlock()
			r = r.WithContext(ctx)
		}
		(&httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) { pr.SetURL(target) }, FlushInterval: -1}).ServeHTTP(w, r)
	}))
	t.Cleanup(front.Close)
	_, gw := listGateway(t, front.URL+"/mcp", store.NewMemory(store.Options{}))
	c := newSessionClient(t, gw)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	events := c.stream(ctx)
	c.list(1)
	c.list(2)
	if lists.Load() != 1 {
		t.Fatalf("with the GET stream: upstream lists %d; want 1", lists.Load())
	}
	cut()
	for range events { // the stream's end, as the client saw it
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		before := lists.Load()
		c.list(3)
		if lists.Load() == before+1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the copy was still used 5 s after the server ended the GET stream")
		}
		time.Sleep(10 * time.Millisecond)
	}
	srv.RemoveTools("t.b") // unheard: no stream
	if n := c.list(4); len(n) != 1 {
		t.Fatalf("after an unheard change: %v; want the server's list", n)
	}
}

// TestListCache_2025_anotherReplica: a session whose GET stream one replica relays is
// answered from no copy on another replica (which neither relays the stream nor saw the
// server declare listChanged), and a list_changed the first replica reads ends the other's
// copies of 2026 lists too (TestListCache_replicas).
func TestListCache_2025_anotherReplica(t *testing.T) {
	_, lists, upURL := sdkListServer(t)
	spec := storetest.RedisNear(t)
	if spec == "" {
		t.Skip("redis-server not installed")
	}
	var gws []string
	for range 2 {
		st, err := store.Open(context.Background(), spec, store.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		_, u := listGateway(t, upURL, st)
		gws = append(gws, u)
	}
	a := newSessionClient(t, gws[0])
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	a.stream(ctx)
	a.list(1)
	a.list(2)
	if lists.Load() != 1 {
		t.Fatalf("replica a with the GET stream: upstream lists %d; want 1", lists.Load())
	}
	b := &sessionClient{t: t, url: gws[1], sid: a.sid} // the session's next request lands on b
	b.list(3)
	b.list(4)
	if lists.Load() != 3 {
		t.Fatalf("replica b: upstream lists %d; want 3 (b holds no stream of the session)", lists.Load())
	}
}
