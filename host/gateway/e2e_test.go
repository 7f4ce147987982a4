package gateway_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stategate/stategate/abi"
	"github.com/stategate/stategate/host/demo"
	"github.com/stategate/stategate/host/gateway"
	"github.com/stategate/stategate/host/store"
	"github.com/stategate/stategate/host/store/storetest"
	"github.com/stategate/stategate/host/wasmrt"
	"github.com/stategate/stategate/internal/testenv"
)

// End-to-end tests: the official MCP Go SDK as client and as upstream server, the built
// TinyGo plugin on the project's host, through the gateway, in both protocol eras and
// both response modes.

const (
	sessionEra   = "2025-11-25"
	statelessEra = "2026-07-28"
)

var (
	runtimeOnce sync.Once
	sharedRT    *wasmrt.Runtime
	rtErr       error
)

func pluginRuntime(t testing.TB) *wasmrt.Runtime {
	t.Helper()
	runtimeOnce.Do(func() {
		wasm, err := os.ReadFile("../../build/stategate.wasm")
		if err != nil {
			rtErr = err
			return
		}
		sharedRT, rtErr = wasmrt.New(context.Background(), wasm, wasmrt.Options{})
	})
	if rtErr != nil {
		testenv.Missing(t, fmt.Errorf("plugin: %w (run make build)", rtErr))
	}
	return sharedRT
}

// upstreamCounter counts tools/call requests per tool name reaching the upstream.
type upstreamCounter struct {
	mu    sync.Mutex
	calls map[string]int
}

func (u *upstreamCounter) wrap(h http.Handler) http.Handler {
	return testenv.OnToolCall(h, func(r *http.Request, tool string) {
		u.mu.Lock()
		u.calls[tool]++
		u.mu.Unlock()
	})
}

func (u *upstreamCounter) count(tool string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.calls[tool]
}

type env struct {
	gw       *gateway.Gateway
	url      string
	store    store.Store
	upstream *upstreamCounter
	// upstreamSrv is the upstream's server (tests close it to take the upstream down).
	upstreamSrv *httptest.Server
}

type envOptions struct {
	demo     demo.Options
	config   []byte
	store    store.Store
	upstream http.Handler // replaces the demo upstream
	gateway  gateway.Options
}

func newEnv(t *testing.T, o envOptions) *env {
	t.Helper()
	rt := pluginRuntime(t)
	ctx := context.Background()
	cfg := o.config
	if cfg == nil {
		cfg = demo.Config()
	}
	counter := &upstreamCounter{calls: map[string]int{}}
	h := o.upstream
	if h == nil {
		h = demo.Handler(o.demo)
	}
	up := httptest.NewServer(counter.wrap(h))
	t.Cleanup(up.Close)
	pool, err := wasmrt.NewPool(ctx, rt, cfg, wasmrt.PoolOptions{Size: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pool.Close(ctx) })
	st := o.store
	if st == nil {
		st = store.NewMemory(store.Options{})
	}
	u, _ := url.Parse(up.URL + "/mcp")
	gopts := o.gateway
	gopts.Upstream, gopts.Plugin, gopts.Config, gopts.Store = u, pool, cfg, st
	gw, err := gateway.New(gopts)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gw)
	t.Cleanup(srv.Close)
	probeUpstream(t, gw, u.String())
	return &env{gw: gw, url: srv.URL + "/mcp", store: st, upstream: counter, upstreamSrv: up}
}

// probeUpstream lists the upstream's tools once, as `stategate serve` does at start-up
// (its tools probe), and hands them to the gateway's core: tool health and the response
// cache keep records only for listed tools. Best effort: an upstream that does not list
// (a test's raw handler) leaves the core knowing no tool.
func probeUpstream(t testing.TB, gw *gateway.Gateway, upstream string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	mc := mcp.NewClient(&mcp.Implementation{Name: "probe", Version: "1"}, nil)
	cs, err := mc.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: upstream}, nil)
	if err != nil {
		return
	}
	defer cs.Close()
	res, err := cs.ListTools(ctx, nil)
	if err != nil {
		return
	}
	tools, _ := json.Marshal(res.Tools)
	gw.Core().ToolsListed(ctx, tools)
}

type client struct {
	cs      *mcp.ClientSession
	changed chan struct{}
}

func (e *env) connect(t *testing.T, version string) *client {
	t.Helper()
	c := &client{changed: make(chan struct{}, 16)}
	mc := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { c.changed <- struct{}{} },
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cs, err := mc.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: e.url}, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("connect %s: %v", version, err)
	}
	t.Cleanup(func() { cs.Close() })
	c.cs = cs
	return c
}

func (c *client) tools(t *testing.T) map[string]*mcp.Tool {
	t.Helper()
	res, err := c.cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]*mcp.Tool{}
	for _, tool := range res.Tools {
		m[tool.Name] = tool
	}
	return m
}

func (c *client) call(t *testing.T, name string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	if args == nil {
		args = map[string]any{}
	}
	res, err := c.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("call %s: %v", name, err)
	}
	return res
}

func texts(res *mcp.CallToolResult) []string {
	var out []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			out = append(out, tc.Text)
		}
	}
	return out
}

func metaCode(res *mcp.CallToolResult) string {
	m, _ := res.Meta[abi.MetaError].(map[string]any)
	code, _ := m["code"].(string)
	return code
}

type mode struct {
	name    string
	version string
	demo    demo.Options
}

var modes = []mode{
	{"session_era/sse", sessionEra, demo.Options{}},
	{"session_era/json", sessionEra, demo.Options{JSONResponse: true}},
	{"stateless_era/sse", statelessEra, demo.Options{Stateless: true}},
	{"stateless_era/json", statelessEra, demo.Options{Stateless: true, JSONResponse: true}},
}

func TestE2E_toolsListDecorated(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			e := newEnv(t, envOptions{demo: m.demo})
			c := e.connect(t, m.version)
			tools := c.tools(t)
			if d := tools["countries.list"].Description; !strings.HasSuffix(d, " [Cache-Control: immutable]") {
				t.Errorf("countries.list: %q", d)
			}
			if d := tools["tasks.list"].Description; !strings.HasSuffix(d, " [Cache-Control: no-store]") {
				t.Errorf("tasks.list: %q", d)
			}
			if tools["tasks.update"].InputSchema == nil {
				t.Error("tasks.update lost its input schema")
			}
			pay, visible := tools["cart.pay"]
			if m.version == sessionEra {
				if visible {
					t.Errorf("session era: cart.pay visible in state empty: %q", pay.Description)
				}
			} else {
				if !visible || !strings.Contains(pay.Description, "[Workflow checkout: available only in state payment]") {
					t.Errorf("stateless era: cart.pay should be kept and marked, got %v", pay)
				}
			}
		})
	}
}

func TestE2E_mutationGetsInvalidationBlock(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			e := newEnv(t, envOptions{demo: m.demo})
			c := e.connect(t, m.version)
			res := c.call(t, "tasks.update", map[string]any{"id": "T1", "status": "done"})
			got := texts(res)
			want := "[System: Cache invalidated for tasks.*, sprints.* — caused by tasks.update]"
			if res.IsError || len(got) < 2 || got[0] != want {
				t.Fatalf("content = %q, want the block first", got)
			}
			if _, ok := res.Meta[abi.MetaDuration]; !ok {
				t.Errorf("no %s in _meta: %v", abi.MetaDuration, res.Meta)
			}
			failed := c.call(t, "tasks.update", map[string]any{"id": "T999", "status": "done"})
			if !failed.IsError || strings.Contains(strings.Join(texts(failed), ""), "Cache invalidated") {
				t.Fatalf("a failed mutation must not invalidate: %q", texts(failed))
			}
		})
	}
}

func TestE2E_gateDeniesThenWorkflowAdvances(t *testing.T) {
	for _, m := range modes {
		if m.version != sessionEra {
			continue // session-keyed workflow: the stateless era has no session (see the handle test)
		}
		t.Run(m.name, func(t *testing.T) {
			e := newEnv(t, envOptions{demo: m.demo})
			c := e.connect(t, m.version)
			denied := c.call(t, "cart.pay", nil)
			if !denied.IsError || metaCode(denied) != abi.DenyToolNotAvailable {
				t.Fatalf("cart.pay in empty: %v %q", metaCode(denied), texts(denied))
			}
			if txt := strings.Join(texts(denied), ""); !strings.Contains(txt, "Available now: cart.add_item") {
				t.Errorf("denial does not say what is possible now: %q", txt)
			}
			if n := e.upstream.count("cart.pay"); n != 0 {
				t.Fatalf("upstream ran cart.pay %d times despite the denial", n)
			}
			if res := c.call(t, "cart.add_item", map[string]any{"sku": "tea"}); res.IsError {
				t.Fatalf("add_item: %q", texts(res))
			}
			select {
			case <-c.changed:
			case <-time.After(3 * time.Second):
				t.Fatal("no notifications/tools/list_changed after the workflow moved")
			}
			if _, ok := c.tools(t)["cart.checkout"]; !ok {
				t.Fatal("cart.checkout not visible in has_items")
			}
			if res := c.call(t, "cart.checkout", nil); res.IsError {
				t.Fatalf("checkout: %q", texts(res))
			}
			if res := c.call(t, "cart.pay", nil); res.IsError {
				t.Fatalf("pay in payment: %q", texts(res))
			}
			if again := c.call(t, "cart.add_item", map[string]any{"sku": "tea"}); metaCode(again) != abi.DenyToolNotAvailable ||
				!strings.Contains(strings.Join(texts(again), ""), "has finished") {
				t.Fatalf("after the final state: %q", texts(again))
			}
		})
	}
}

func TestE2E_initializeAdvertisesListChanged(t *testing.T) {
	e := newEnv(t, envOptions{})
	c := e.connect(t, sessionEra)
	res := c.cs.InitializeResult()
	if res == nil || res.Capabilities == nil || res.Capabilities.Tools == nil || !res.Capabilities.Tools.ListChanged {
		t.Fatalf("initialize result does not declare tools.listChanged: %+v", res)
	}
}

func TestE2E_limits(t *testing.T) {
	cfg := []byte(strings.Replace(string(demo.Config()), `"maxResponseBytes": 65536`, `"maxResponseBytes": 8192`, 1))
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			o := m.demo
			o.SlowDelay = 3 * time.Second
			e := newEnv(t, envOptions{demo: o, config: cfg})
			c := e.connect(t, m.version)
			rows := make([]any, 101)
			for i := range rows {
				rows[i] = i
			}
			big := c.call(t, "sprints.create", map[string]any{"name": "x", "tags": rows})
			if metaCode(big) != abi.DenyArrayTooLarge || !strings.Contains(strings.Join(texts(big), ""), "tags") {
				t.Fatalf("101 tags: %s %q", metaCode(big), texts(big))
			}
			if e.upstream.count("sprints.create") != 0 {
				t.Fatal("upstream ran an oversized call")
			}
			if ok := c.call(t, "bulk.import", map[string]any{"rows": rows}); ok.IsError {
				t.Fatalf("bulk.import has its own limit of 5000: %q", texts(ok))
			}
			// The upstream sleeps 3 s and the tool's timeout is 1 s: an answer that is the
			// engine's TOOL_TIMEOUT result came from the gateway giving up first.
			slow := c.call(t, "slow.wait", nil)
			if metaCode(slow) != abi.DenyToolTimeout {
				t.Fatalf("slow.wait: %s: %q", metaCode(slow), texts(slow))
			}
			rep := c.call(t, "reports.big", map[string]any{"kb": 64})
			// The limit bounds what decorate_result answers; the host's durationMs comes
			// after it (abi/ABI.md, "Durations"), and its digits follow the machine's
			// speed: measured without it, the size does not depend on timing.
			if _, ok := rep.Meta[abi.MetaDuration]; !ok {
				t.Errorf("no %s on a truncated result", abi.MetaDuration)
			}
			delete(rep.Meta, abi.MetaDuration)
			raw, _ := json.Marshal(rep)
			if len(raw) > 8192 {
				t.Errorf("truncated result is %d bytes without the duration, over 8192", len(raw))
			}
			all := strings.Join(texts(rep), "\n")
			if !strings.Contains(all, "Result truncated") {
				t.Errorf("no truncation notice: %.200q", all)
			}
			if _, ok := rep.Meta[abi.MetaTruncated]; !ok {
				t.Errorf("no %s flag", abi.MetaTruncated)
			}
		})
	}
}

func TestE2E_handleKeyedWorkflowInStatelessEra(t *testing.T) {
	cfg := []byte(`{"version":1,"principal":{"header":"X-User"},
	 "workflows":[{"id":"cart","initial":"empty","key":"argument:cart_id",
	  "states":{"empty":{"on":{"ADD_ITEM":"has_items"}},"has_items":{"on":{"ADD_ITEM":"has_items","CHECKOUT":"payment"}},
	            "payment":{"on":{"PAY":"confirmed"}},"confirmed":{"type":"final"}},
	  "tools":{"cart.add_item":{"states":["empty","has_items"],"event":"ADD_ITEM"},
	           "cart.checkout":{"states":["has_items"],"event":"CHECKOUT"},
	           "cart.pay":{"states":["payment"],"event":"PAY"}}}]}`)
	e := newEnv(t, envOptions{demo: demo.Options{Stateless: true}, config: cfg})
	c := e.connect(t, statelessEra)
	created := c.call(t, "cart.create", nil)
	var sc struct {
		CartID string `json:"cart_id"`
	}
	b, _ := json.Marshal(created.StructuredContent)
	if err := json.Unmarshal(b, &sc); err != nil || sc.CartID == "" {
		t.Fatalf("cart.create: %s", b)
	}
	if res := c.call(t, "cart.pay", nil); metaCode(res) != abi.DenyMissingHandle {
		t.Fatalf("pay without cart_id: %s %q", metaCode(res), texts(res))
	}
	if res := c.call(t, "cart.pay", map[string]any{"cart_id": sc.CartID}); metaCode(res) != abi.DenyToolNotAvailable {
		t.Fatalf("pay on an empty cart: %s", metaCode(res))
	}
	for _, step := range []struct {
		tool string
		args map[string]any
	}{{"cart.add_item", map[string]any{"cart_id": sc.CartID, "sku": "mug"}}, {"cart.checkout", map[string]any{"cart_id": sc.CartID}}, {"cart.pay", map[string]any{"cart_id": sc.CartID}}} {
		if res := c.call(t, step.tool, step.args); res.IsError {
			t.Fatalf("%s: %q", step.tool, texts(res))
		}
	}
}

func TestE2E_headersMustMatchBody(t *testing.T) {
	e := newEnv(t, envOptions{})
	req, _ := http.NewRequest(http.MethodPost, e.url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"cart.pay","arguments":{}}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", statelessEra)
	req.Header.Set("Mcp-Method", "tools/list")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "does not match") {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	if e.upstream.count("cart.pay") != 0 {
		t.Fatal("a mismatched request reached the upstream")
	}
}

func TestE2E_oversizedRequestBody(t *testing.T) {
	e := newEnv(t, envOptions{})
	big := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"tasks.update","arguments":{"title":"` + strings.Repeat("x", 17<<20) + `"}}}`
	resp, err := http.Post(e.url, "application/json", strings.NewReader(big))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(string(body), `"code":-32600`) {
		t.Fatalf("status %d: %.200s", resp.StatusCode, body)
	}
}

// rawSession initializes a session-era session over plain HTTP and returns its id.
func rawSession(t *testing.T, url string) string {
	t.Helper()
	resp := rawPost(t, url, "", `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`, "application/json, text/event-stream")
	sid := resp.Header.Get("Mcp-Session-Id")
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if sid == "" {
		t.Fatal("no session id")
	}
	r := rawPost(t, url, sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, "application/json, text/event-stream")
	r.Body.Close()
	return sid
}

func rawPost(t *testing.T, url, sid, body, accept string) *http.Response {
	t.Helper()
	return rawPostVersion(t, url, sid, body, accept, "2025-06-18")
}

func rawPostVersion(t *testing.T, url, sid, body, accept, version string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", accept)
	req.Header.Set("MCP-Protocol-Version", version)
	if sid != "" {
		req.Header.Set("Mcp-Session-Id", sid)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// TestE2E_notificationOnGetStream: a client that accepts only JSON on its POSTs gets the
// list_changed notification on its open GET stream.
func TestE2E_notificationOnGetStream(t *testing.T) {
	e := newEnv(t, envOptions{demo: demo.Options{JSONResponse: true}})
	sid := rawSession(t, e.url)
	req, _ := http.NewRequest(http.MethodGet, e.url, nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("MCP-Protocol-Version", "2025-06-18")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stream, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Body.Close()
	if stream.StatusCode != http.StatusOK {
		t.Fatalf("GET stream: %d", stream.StatusCode)
	}
	got := make(chan string, 4)
	go func() {
		buf := make([]byte, 4096)
		var acc []byte
		for {
			n, err := stream.Body.Read(buf)
			acc = append(acc, buf[:n]...)
			if bytes.Contains(acc, []byte("list_changed")) {
				got <- string(acc)
				return
			}
			if err != nil {
				return
			}
		}
	}()
	time.Sleep(100 * time.Millisecond) // the stream is registered once its headers are out
	resp := rawPost(t, e.url, sid, `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"cart.add_item","arguments":{"sku":"tea"}}}`, "application/json")
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(resp.Header.Get("Content-Type"), "application/json") || !strings.Contains(string(body), "Cache invalidated for cart.view") {
		t.Fatalf("POST answer (%s): %.300s", resp.Header.Get("Content-Type"), body)
	}
	select {
	case s := <-got:
		if !strings.Contains(s, `"method":"notifications/tools/list_changed"`) {
			t.Fatalf("stream: %q", s)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("no list_changed on the GET stream")
	}
}

// TestE2E_batch: a 2025-03-26 batch is handled message by message.
func TestE2E_batch(t *testing.T) {
	e := newEnv(t, envOptions{demo: demo.Options{JSONResponse: true}})
	sid := rawSession(t, e.url)
	batch := `[{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"cart.pay","arguments":{}}},` +
		`{"jsonrpc":"2.0","id":"b","method":"tools/call","params":{"name":"tasks.update","arguments":{"id":"T1","status":"done"}}}]`
	refused := rawPost(t, e.url, sid, batch, "application/json, text/event-stream")
	refused.Body.Close()
	if refused.StatusCode != http.StatusBadRequest {
		t.Fatalf("a batch in 2025-06-18: status %d, want 400 (batches ended with 2025-03-26)", refused.StatusCode)
	}
	// The batch rule: a batch never carries a method the gateway acts on, so one request
	// cannot fan out past the gate.
	resp := rawPostVersion(t, e.url, sid, batch, "application/json, text/event-stream", "2025-03-26")
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "batches holding tools/call") {
		t.Fatalf("a 2025-03-26 batch of tools/call: %d %s, want 400 naming the rule", resp.StatusCode, body)
	}
	if e.upstream.count("cart.pay")+e.upstream.count("tasks.update") != 0 {
		t.Error("a refused batch reached the upstream")
	}
	// Batches of methods the gateway does not act on pass as they are.
	pings := `[{"jsonrpc":"2.0","id":"p1","method":"ping"},{"jsonrpc":"2.0","id":"p2","method":"ping"}]`
	resp = rawPostVersion(t, e.url, sid, pings, "application/json, text/event-stream", "2025-03-26")
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode/100 != 2 || !strings.Contains(string(body), `"p1"`) || !strings.Contains(string(body), `"p2"`) {
		t.Errorf("a batch of pings: %d %s, want both answered by the upstream", resp.StatusCode, body)
	}
}

// TestE2E_sessionEndFreesState: DELETE ends the session and frees its state.
func TestE2E_sessionEndFreesState(t *testing.T) {
	e := newEnv(t, envOptions{})
	c := e.connect(t, sessionEra)
	c.call(t, "cart.add_item", map[string]any{"sku": "tea"})
	mem := e.store.(*store.Memory)
	if mem.Len() == 0 {
		t.Fatal("no state stored after a transition")
	}
	c.cs.Close()
	deadline := time.Now().Add(3 * time.Second)
	for mem.Len() != 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if mem.Len() != 0 {
		t.Fatalf("%d keys left after the session ended", mem.Len())
	}
}

// counterConfig is a workflow whose every call moves to the next state: after n calls,
// the state must be s<n>, or a transition was lost.
func counterConfig(n int) []byte {
	var states, allowed []string
	for i := 0; i < n; i++ {
		states = append(states, fmt.Sprintf(`"s%d":{"on":{"NEXT":"s%d"}}`, i, i+1))
		allowed = append(allowed, fmt.Sprintf(`"s%d"`, i))
	}
	states = append(states, fmt.Sprintf(`"s%d":{"type":"final"}`, n))
	return []byte(fmt.Sprintf(`{"version":1,"workflows":[{"id":"counter","initial":"s0","key":"session","states":{%s},
	 "tools":{"tasks.update":{"states":[%s],"event":"NEXT"},"users.get":{"states":["s%d"]}}}]}`,
		strings.Join(states, ","), strings.Join(allowed, ","), n))
}

// alternating sends each request to the next of several gateways (replicas behind a
// load balancer with no affinity).
type alternating struct {
	targets []*url.URL
	n       atomic.Int64
}

func (a *alternating) RoundTrip(r *http.Request) (*http.Response, error) {
	t := a.targets[a.n.Add(1)%int64(len(a.targets))]
	r2 := r.Clone(r.Context())
	r2.URL.Scheme, r2.URL.Host, r2.Host = t.Scheme, t.Host, ""
	return http.DefaultTransport.RoundTrip(r2)
}

// TestE2E_redisReplicas: two gateway replicas share a real Redis; one client's calls
// alternate between them, the workflow advances correctly, and 50 concurrent calls in one
// session lose no transition.
func TestE2E_redisReplicas(t *testing.T) {
	const n = 50
	cs, lb := redisReplicas(t, counterConfig(n), demo.Options{})
	ctx := context.Background()
	call := func(name string, args map[string]any) *mcp.CallToolResult {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return res
	}
	if res := call("users.get", map[string]any{"id": "u1"}); metaCode(res) != abi.DenyToolNotAvailable {
		t.Fatalf("users.get before s%d: %q", n, texts(res))
	}
	var wg sync.WaitGroup
	errs := make(chan string, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "tasks.update", Arguments: map[string]any{"id": "T1", "status": "in_progress"}})
			if err != nil {
				errs <- err.Error()
			} else if res.IsError {
				errs <- strings.Join(texts(res), "")
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Errorf("concurrent call failed: %s", e)
	}
	if res := call("users.get", map[string]any{"id": "u1"}); res.IsError {
		t.Fatalf("after %d concurrent calls the workflow is not in s%d: %q", n, n, texts(res))
	}
	if lb.n.Load() < n+2 {
		t.Fatalf("only %d requests went through the replicas", lb.n.Load())
	}
}

// TestE2E_duplicateKeysRefused: a request whose tool name (or handle) is repeated could be
// gated as one value and run as another; it is refused before the upstream sees it.
func TestE2E_duplicateKeysRefused(t *testing.T) {
	e := newEnv(t, envOptions{demo: demo.Options{JSONResponse: true}})
	sid := rawSession(t, e.url)
	for _, body := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"tasks.list","name":"cart.pay","arguments":{}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"cart.pay","arguments":{"cart_id":"a","cart_id":"b"}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/list","method":"tools/call","params":{"name":"cart.pay"}}`,
	} {
		resp := rawPost(t, e.url, sid, body, "application/json, text/event-stream")
		out, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(out), "repeats a member name") {
			t.Errorf("%s: status %d: %s", body, resp.StatusCode, out)
		}
	}
	if e.upstream.count("cart.pay") != 0 {
		t.Fatal("a request with repeated members reached the upstream")
	}
}

// TestE2E_unreadableBodiesRefused: bodies the gateway cannot read byte for byte as the
// server will are refused, never passed on ungated.
func TestE2E_unreadableBodiesRefused(t *testing.T) {
	e := newEnv(t, envOptions{demo: demo.Options{JSONResponse: true}})
	sid := rawSession(t, e.url)
	call := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"cart.pay","arguments":{}}}`
	for _, tc := range []struct {
		name, body, header, value string
		status                    int
	}{
		{"gzip body", call, "Content-Encoding", "gzip", http.StatusUnsupportedMediaType},
		{"utf-16 charset", call, "Content-Type", "application/json; charset=utf-16", http.StatusUnsupportedMediaType},
		{"byte-order mark", "\ufeff" + call, "", "", http.StatusBadRequest},
		{"repeated method, first harmless", `{"jsonrpc":"2.0","id":1,"method":"ping","method":"tools/call","params":{"name":"cart.pay"}}`, "", "", http.StatusBadRequest},
		{"not JSON", `{"jsonrpc":"2.0","id":1,`, "", "", http.StatusBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodPost, e.url, strings.NewReader(tc.body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			req.Header.Set("MCP-Protocol-Version", "2025-06-18")
			req.Header.Set("Mcp-Session-Id", sid)
			if tc.header != "" {
				req.Header.Set(tc.header, tc.value)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d", resp.StatusCode, tc.status)
			}
		})
	}
	if e.upstream.count("cart.pay") != 0 {
		t.Fatal("an unreadable request reached the upstream")
	}
}

// gzipping compresses every upstream answer whose request accepts gzip.
func gzipping(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") || r.Method != http.MethodPost {
			h.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		zw.Write(rec.Body.Bytes())
		zw.Close()
		w.Header().Set("Content-Encoding", "gzip")
		w.Header().Del("Content-Length")
		w.WriteHeader(rec.Code)
		w.Write(buf.Bytes())
	})
}

// TestE2E_compressedUpstream: a client asking for gzip still gets decorated answers, and
// a failed call still does not move the workflow, when the upstream compresses.
func TestE2E_compressedUpstream(t *testing.T) {
	e := newEnv(t, envOptions{upstream: gzipping(demo.Handler(demo.Options{JSONResponse: true}))})
	sid := rawSession(t, e.url)
	post := func(body string) string {
		req, _ := http.NewRequest(http.MethodPost, e.url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Accept-Encoding", "gzip")
		req.Header.Set("MCP-Protocol-Version", "2025-06-18")
		req.Header.Set("Mcp-Session-Id", sid)
		resp, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var r io.Reader = resp.Body
		if resp.Header.Get("Content-Encoding") == "gzip" {
			if r, err = gzip.NewReader(resp.Body); err != nil {
				t.Fatal(err)
			}
		}
		b, _ := io.ReadAll(r)
		return string(b)
	}
	if out := post(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"tasks.update","arguments":{"id":"T1","status":"done"}}}`); !strings.Contains(out, "caused by tasks.update") {
		t.Fatalf("no invalidation block through a compressing upstream: %.300s", out)
	}
	if out := post(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"cart.add_item","arguments":{"sku":"nope"}}}`); !strings.Contains(out, `"isError":true`) {
		t.Fatalf("unknown sku should fail: %.300s", out)
	}
	if out := post(`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"cart.checkout","arguments":{}}}`); !strings.Contains(out, abi.DenyToolNotAvailable) {
		t.Fatalf("a failed add_item moved the workflow: checkout was admitted: %.300s", out)
	}
}

// TestE2E_racingCallsAdmittedOnce: concurrent calls that would each move the workflow are
// admitted one at a time, so only the first cart.pay in state payment runs.
func TestE2E_racingCallsAdmittedOnce(t *testing.T) {
	e := newEnv(t, envOptions{demo: demo.Options{JSONResponse: true}})
	c := e.connect(t, sessionEra)
	c.call(t, "cart.add_item", map[string]any{"sku": "tea"})
	c.call(t, "cart.checkout", nil)
	paid, denied := raceCartPay(t, c.cs, 8)
	if paid != 1 || denied != 7 || e.upstream.count("cart.pay") != 1 {
		t.Fatalf("paid %d, denied %d, upstream ran cart.pay %d times; want 1, 7, 1", paid, denied, e.upstream.count("cart.pay"))
	}
}

// redisReplicas starts two gateway replicas sharing a real Redis in front of one demo
// upstream, and connects one session-era client whose requests alternate between them.
func redisReplicas(t *testing.T, cfg []byte, o demo.Options) (*mcp.ClientSession, *alternating) {
	t.Helper()
	redisURL := storetest.Redis(t)
	ctx := context.Background()
	rt := pluginRuntime(t)
	up := httptest.NewServer(demo.Handler(o))
	t.Cleanup(up.Close)
	upURL, _ := url.Parse(up.URL + "/mcp")
	var targets []*url.URL
	for i := 0; i < 2; i++ {
		st, err := store.NewRedis(ctx, redisURL, store.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		pool, err := wasmrt.NewPool(ctx, rt, cfg, wasmrt.PoolOptions{Size: 8})
		if err != nil {
			t.Fatal(err)
		}
		gw, err := gateway.New(gateway.Options{Upstream: upURL, Plugin: pool, Config: cfg, Store: st})
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(gw)
		t.Cleanup(srv.Close)
		probeUpstream(t, gw, upURL.String())
		u, _ := url.Parse(srv.URL)
		targets = append(targets, u)
	}
	lb := &alternating{targets: targets}
	mc := mcp.NewClient(&mcp.Implementation{Name: "replicas", Version: "1"}, nil)
	cs, err := mc.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: "http://lb/mcp", HTTPClient: &http.Client{Transport: lb}},
		&mcp.ClientSessionOptions{ProtocolVersion: sessionEra})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs, lb
}

// TestE2E_racingCallsAcrossReplicas: the admission lease lives in Redis, so two replicas
// admit racing cart.pay calls one at a time too.
func TestE2E_racingCallsAcrossReplicas(t *testing.T) {
	cs, _ := redisReplicas(t, demo.Config(), demo.Options{JSONResponse: true})
	ctx := context.Background()
	for _, step := range []string{"cart.add_item", "cart.checkout"} {
		args := map[string]any{}
		if step == "cart.add_item" {
			args["sku"] = "tea"
		}
		if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: step, Arguments: args}); err != nil || res.IsError {
			t.Fatalf("%s: %v %v", step, err, res)
		}
	}
	if paid, denied := raceCartPay(t, cs, 8); paid != 1 || denied != 7 {
		t.Fatalf("paid %d, denied %d across two replicas; want 1 and 7", paid, denied)
	}
}

// raceCartPay sends n concurrent cart.pay calls and counts the successes and the gate's
// denials.
func raceCartPay(t *testing.T, cs *mcp.ClientSession, n int) (paid, denied int64) {
	t.Helper()
	var wg sync.WaitGroup
	var p, d atomic.Int64
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "cart.pay", Arguments: map[string]any{}})
			switch {
			case err != nil:
				t.Error(err)
			case !res.IsError:
				p.Add(1)
			case metaCode(res) == abi.DenyToolNotAvailable:
				d.Add(1)
			}
		}()
	}
	wg.Wait()
	return p.Load(), d.Load()
}

// TestE2E_sseEventsPassThrough: in an SSE answer only the response to the request is
// rewritten; comments, progress notifications and server requests pass byte for byte.
func TestE2E_sseEventsPassThrough(t *testing.T) {
	keepalive := ": keepalive\n\n"
	progress := "event: message\nid: 7-1\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":1,\"progress\":0.5}}\n\n"
	request := "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":99,\"method\":\"roots/list\"}\n\n"
	e := newEnv(t, envOptions{upstream: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		io.WriteString(w, keepalive+progress+request)
		io.WriteString(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"done\"}]}}\n\n")
	})})
	resp := rawPost(t, e.url, "s1", `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"tasks.update","arguments":{"id":"T1"}}}`, "application/json, text/event-stream")
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	out := string(body)
	if !strings.HasPrefix(out, keepalive+progress+request) {
		t.Fatalf("events before the response were not passed through verbatim:\n%s", out)
	}
	if !strings.Contains(out, "caused by tasks.update") || !strings.Contains(out, `"text":"done"`) {
		t.Fatalf("the response was not decorated:\n%s", out)
	}
}
