package gateway_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/stategate/stategate/abi"
	"github.com/stategate/stategate/exchange/admission"
	"github.com/stategate/stategate/host/gateway"
	"github.com/stategate/stategate/host/store"
	"github.com/stategate/stategate/host/wasmrt"
)

// mrtrServer is a 2026-07-28 MCP server over the raw wire (no SDK speaks multi round-trip
// requests yet) that asks the user for input before it acts, as SEP-2322 has it: a call
// without the input is answered input_required with an integrity-protected requestState
// bound to the call; the retry carrying inputResponses and that state runs the tool.
type mrtrServer struct {
	key  []byte
	mu   sync.Mutex
	runs map[string]int // tool -> times it ran to completion
	hits map[string]int // tool -> times it was called at all
}

func newMRTRServer() *mrtrServer {
	return &mrtrServer{key: []byte("server-secret"), runs: map[string]int{}, hits: map[string]int{}}
}

func (s *mrtrServer) count(m map[string]int, tool string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return m[tool]
}

// state is the requestState for a call of tool with args: an HMAC over both.
func (s *mrtrServer) state(tool string, args json.RawMessage) string {
	mac := hmac.New(sha256.New, s.key)
	mac.Write([]byte(tool))
	mac.Write([]byte{0})
	mac.Write(args)
	return base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

func (s *mrtrServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params struct {
			Name           string                     `json:"name"`
			Arguments      json.RawMessage            `json:"arguments"`
			InputResponses map[string]json.RawMessage `json:"inputResponses"`
			RequestState   string                     `json:"requestState"`
		} `json:"params"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || r.Header.Get("MCP-Protocol-Version") != "2026-07-28" {
		http.Error(w, "bad request", 400)
		return
	}
	answer := func(result string) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"jsonrpc":"2.0","id":`+string(req.ID)+`,"result":`+result+`}`)
	}
	switch req.Method {
	case "tools/list":
		answer(`{"tools":[
			{"name":"catalog.list","description":"All products.","inputSchema":{"type":"object"}},
			{"name":"catalog.price","description":"A product's price.","inputSchema":{"type":"object","properties":{"sku":{"type":"string"}}}},
			{"name":"orders.pay","description":"Pay an order.","inputSchema":{"type":"object","properties":{"order_id":{"type":"string","x-mcp-header":"Order"},"amount":{"type":"integer"}}}},
			{"name":"orders.ship","description":"Ship a paid order.","inputSchema":{"type":"object","properties":{"order_id":{"type":"string"}}}}
		],"ttlMs":0,"cacheScope":"public"}`)
		return
	case "tools/call":
	default:
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"jsonrpc":"2.0","id":`+string(req.ID)+`,"error":{"code":-32601,"message":"method not found"}}`)
		return
	}
	tool := req.Params.Name
	s.mu.Lock()
	s.hits[tool]++
	s.mu.Unlock()
	ask := func(key, message string) {
		answer(`{"resultType":"input_required","inputRequests":{"` + key + `":{"method":"elicitation/create","params":{"mode":"form","message":"` + message +
			`","requestedSchema":{"type":"object","properties":{"ok":{"type":"boolean"}},"required":["ok"]}}}},"requestState":"` + s.state(tool, req.Params.Arguments) + `"}`)
	}
	accepted := func(key string) bool {
		var in struct {
			Action string `json:"action"`
		}
		_ = json.Unmarshal(req.Params.InputResponses[key], &in)
		return in.Action == "accept" && hmac.Equal([]byte(req.Params.RequestState), []byte(s.state(tool, req.Params.Arguments)))
	}
	switch tool {
	case "catalog.list":
		s.ran(tool)
		answer(`{"content":[{"type":"text","text":"tea, coffee"}],"structuredContent":["tea","coffee"]}`)
	case "catalog.price":
		if !accepted("currency") {
			ask("currency", "Show prices in EUR?")
			return
		}
		s.ran(tool)
		answer(`{"content":[{"type":"text","text":"4 EUR"}],"structuredContent":4}`)
	case "orders.pay":
		if !accepted("confirm") {
			ask("confirm", "Pay this order?")
			return
		}
		s.ran(tool)
		answer(`{"resultType":"complete","content":[{"type":"text","text":"paid"}]}`)
	case "stock.reserve": // unlisted: the approval tests' tool that asks after the gateway did
		args := string(req.Params.Arguments)
		if !accepted("confirm") && !(strings.Contains(args, "twice") && req.Params.RequestState == s.state(tool+"/2", req.Params.Arguments)) {
			if strings.Contains(args, "big") { // a requestState over what the gateway carries
				answer(`{"resultType":"input_required","inputRequests":{"confirm":{"method":"elicitation/create","params":{"mode":"form","message":"Reserve?","requestedSchema":{"type":"object"}}}},"requestState":"` + strings.Repeat("b", 17<<10) + `"}`)
				return
			}
			ask("confirm", "Reserve the last one?")
			return
		}
		if strings.Contains(args, "twice") && req.Params.RequestState != s.state(tool+"/2", req.Params.Arguments) {
			// Asks a second time, with another state.
			answer(`{"resultType":"input_required","inputRequests":{"again":{"method":"elicitation/create","params":{"mode":"form","message":"Sure?","requestedSchema":{"type":"object"}}}},"requestState":"` + s.state(tool+"/2", req.Params.Arguments) + `"}`)
			return
		}
		s.ran(tool)
		answer(`{"resultType":"complete","content":[{"type":"text","text":"reserved"}]}`)
	case "orders.ship":
		s.ran(tool)
		answer(`{"resultType":"complete","content":[{"type":"text","text":"shipped"}]}`)
	default:
		answer(`{"content":[{"type":"text","text":"unknown tool"}],"isError":true}`)
	}
}

func (s *mrtrServer) ran(tool string) {
	s.mu.Lock()
	s.runs[tool]++
	s.mu.Unlock()
}

const mrtrConfig = `{
  "version": 1,
  "names": {"separator": "."},
  "stateSync": {
    "defaults": {"cacheControl": "no-store"},
    "policies": [
      {"match": "catalog.*", "cacheControl": "immutable"},
      {"match": "orders.pay", "invalidates": ["catalog.*"]}
    ]
  },
  "cache": {"scope": "shared"},
  "workflows": [{
    "id": "order", "initial": "open", "key": "argument:order_id",
    "states": {"open": {"on": {"PAY": "paid"}}, "paid": {"on": {"SHIP": "shipped"}}, "shipped": {"type": "final"}},
    "tools": {"orders.pay": {"states": ["open"], "event": "PAY"}, "orders.ship": {"states": ["paid"], "event": "SHIP"}}
  }]
}`

// mrtrClient speaks the 2026-07-28 wire to the gateway.
type mrtrClient struct {
	t   *testing.T
	url string
	id  int
}

// call sends a tools/call (params holds name, arguments and anything else) with the
// headers a 2026-07-28 client sends, plus extra; it returns the HTTP status and the
// answer's result (or error) as JSON.
func (c *mrtrClient) call(params map[string]any, extra map[string]string) (int, map[string]any) {
	c.t.Helper()
	c.id++
	method := "tools/call"
	if params == nil {
		method = "tools/list"
	}
	msg := map[string]any{"jsonrpc": "2.0", "id": c.id, "method": method}
	if params != nil {
		msg["params"] = params
	}
	body, _ := json.Marshal(msg)
	req, _ := http.NewRequest("POST", c.url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", method)
	if params != nil {
		req.Header.Set("Mcp-Name", params["name"].(string))
	}
	for k, v := range extra {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	raw, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(raw, &out); err != nil {
		c.t.Fatalf("answer is not JSON (%d): %s", resp.StatusCode, raw)
	}
	if r, ok := out["result"].(map[string]any); ok {
		return resp.StatusCode, r
	}
	return resp.StatusCode, map[string]any{"error": out["error"]}
}

func resultText(r map[string]any) string {
	var b strings.Builder
	content, _ := r["content"].([]any)
	for _, c := range content {
		if m, ok := c.(map[string]any); ok {
			b.WriteString(m["text"].(string))
			b.WriteString("\n")
		}
	}
	return b.String()
}

func cacheHit(r map[string]any) bool {
	meta, _ := r["_meta"].(map[string]any)
	c, _ := meta[abi.MetaCache].(map[string]any)
	return c["hit"] == true
}

// TestMRTR_endToEnd: the gateway in front of a server that asks the user for input before
// it acts, over the raw 2026-07-28 wire, with a handle-keyed workflow, the response cache
// and invalidation configured together. An input_required answer moves nothing, gets no
// block and is never cached; the retry with inputResponses and requestState is admitted in
// the unchanged state, runs once, moves the workflow once and purges what it invalidates;
// a retry is never answered from the cache nor stored; Mcp-Param-Order must match.
func TestMRTR_endToEnd(t *testing.T) {
	srv := newMRTRServer()
	up := httptest.NewServer(srv)
	t.Cleanup(up.Close)
	ctx := context.Background()
	pool, err := wasmrt.NewPool(ctx, pluginRuntime(t), []byte(mrtrConfig), wasmrt.PoolOptions{Size: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pool.Close(ctx) })
	u, _ := url.Parse(up.URL)
	gw, err := gateway.New(gateway.Options{Upstream: u, Plugin: pool, Config: []byte(mrtrConfig), Store: store.NewMemory(store.Options{}),
		Origins: admission.OriginPolicy{Loopback: true}})
	if err != nil {
		t.Fatal(err)
	}
	front := httptest.NewServer(gw)
	t.Cleanup(front.Close)
	c := &mrtrClient{t: t, url: front.URL + "/mcp"}

	if _, list := c.call(nil, nil); !strings.Contains(mustJSON(list), "[Cache-Control: immutable]") {
		t.Fatalf("tools/list not decorated: %s", mustJSON(list))
	}
	accept := func(key string) map[string]any {
		return map[string]any{key: map[string]any{"action": "accept", "content": map[string]any{"ok": true}}}
	}

	// The cache works for plain calls.
	c.call(map[string]any{"name": "catalog.list", "arguments": map[string]any{}}, nil)
	if _, r := c.call(map[string]any{"name": "catalog.list", "arguments": map[string]any{}}, nil); !cacheHit(r) || srv.count(srv.hits, "catalog.list") != 1 {
		t.Fatalf("second catalog.list: hit %v, upstream calls %d; want a cache hit and 1", cacheHit(r), srv.count(srv.hits, "catalog.list"))
	}

	// An immutable tool that asks first: its input_required answer is never stored, a
	// retry never served from the cache nor stored.
	price := map[string]any{"name": "catalog.price", "arguments": map[string]any{"sku": "tea"}}
	for i := 0; i < 2; i++ {
		if _, r := c.call(price, nil); r["resultType"] != "input_required" || cacheHit(r) {
			t.Fatalf("catalog.price #%d: %s; want input_required from the server", i+1, mustJSON(r))
		}
	}
	state := srv.state("catalog.price", json.RawMessage(`{"sku":"tea"}`))
	retry := map[string]any{"name": "catalog.price", "arguments": map[string]any{"sku": "tea"}, "inputResponses": accept("currency"), "requestState": state}
	for i := 0; i < 2; i++ {
		if _, r := c.call(retry, nil); !strings.Contains(resultText(r), "4 EUR") || cacheHit(r) {
			t.Fatalf("catalog.price retry #%d: %s; want the server's price, not a cache hit", i+1, mustJSON(r))
		}
	}
	if n := srv.count(srv.hits, "catalog.price"); n != 4 {
		t.Fatalf("the server was called %d times for catalog.price, want 4 (nothing answered from the cache)", n)
	}
	if _, r := c.call(price, nil); r["resultType"] != "input_required" {
		t.Fatalf("a plain call after the retries got %s; want the server's input_required (a retry's answer is never stored)", mustJSON(r))
	}

	// The workflow: orders.ship needs state paid.
	order := map[string]string{"Mcp-Param-Order": "O1"}
	ship := map[string]any{"name": "orders.ship", "arguments": map[string]any{"order_id": "O1"}}
	pay := map[string]any{"name": "orders.pay", "arguments": map[string]any{"order_id": "O1", "amount": 10}}
	if _, r := c.call(ship, nil); r["isError"] != true || !strings.Contains(resultText(r), "in state open") {
		t.Fatalf("orders.ship before paying: %s; want a refusal in state open", mustJSON(r))
	}
	_, r := c.call(pay, order)
	if r["resultType"] != "input_required" || strings.Contains(resultText(r), "Cache invalidated") {
		t.Fatalf("orders.pay: %s; want the server's input_required with no invalidation block", mustJSON(r))
	}
	if _, r := c.call(ship, nil); r["isError"] != true || !strings.Contains(resultText(r), "in state open") {
		t.Fatalf("orders.ship after input_required: %s; want a refusal in state open (nothing moved)", mustJSON(r))
	}
	// A mismatched Mcp-Param header is refused before the server runs.
	payRetry := map[string]any{"name": "orders.pay", "arguments": map[string]any{"order_id": "O1", "amount": 10},
		"inputResponses": accept("confirm"), "requestState": r["requestState"]}
	if st, e := c.call(payRetry, map[string]string{"Mcp-Param-Order": "O2"}); st != 400 || !strings.Contains(mustJSON(e), "-32020") {
		t.Fatalf("a mismatched Mcp-Param-Order: %d %s; want 400 and -32020", st, mustJSON(e))
	}
	if st, e := c.call(payRetry, nil); st != 400 || !strings.Contains(mustJSON(e), "missing") {
		t.Fatalf("a missing Mcp-Param-Order: %d %s; want 400 and -32020", st, mustJSON(e))
	}
	if n := srv.count(srv.hits, "orders.pay"); n != 1 {
		t.Fatalf("the server was called %d times for orders.pay, want 1 (refused calls never reach it)", n)
	}
	// The retry completes: it moves the workflow and purges the catalog.
	if _, r := c.call(payRetry, order); !strings.Contains(resultText(r), "[System: Cache invalidated for catalog.* — caused by orders.pay]") || !strings.Contains(resultText(r), "paid") {
		t.Fatalf("orders.pay retry: %s; want the server's result with the invalidation block", mustJSON(r))
	}
	if _, r := c.call(map[string]any{"name": "catalog.list", "arguments": map[string]any{}}, nil); cacheHit(r) || srv.count(srv.hits, "catalog.list") != 2 {
		t.Fatalf("catalog.list after the payment: hit %v, upstream calls %d; want the purged entry fetched again", cacheHit(r), srv.count(srv.hits, "catalog.list"))
	}
	if _, r := c.call(payRetry, order); r["isError"] != true || !strings.Contains(resultText(r), "in state paid") {
		t.Fatalf("the same retry again: %s; want a refusal in state paid (a once-only step runs once)", mustJSON(r))
	}
	if n := srv.count(srv.runs, "orders.pay"); n != 1 {
		t.Fatalf("orders.pay ran %d times, want 1", n)
	}
	if _, r := c.call(ship, nil); !strings.Contains(resultText(r), "shipped") {
		t.Fatalf("orders.ship after paying: %s; want it to run", mustJSON(r))
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
