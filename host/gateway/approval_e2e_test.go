package gateway_test

import (
	"bytes"
	"context"
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
	"github.com/stategate/stategate/exchange/approval"
	"github.com/stategate/stategate/host/gateway"
	"github.com/stategate/stategate/host/store"
	"github.com/stategate/stategate/host/wasmrt"
)

// approvalConfig asks a person before catalog.list runs (a tool the server runs without
// asking anything itself) and leaves the rest as mrtrConfig has it.
var approvalConfig = strings.Replace(mrtrConfig, `"cache": {"scope": "shared"},`,
	`"approvals": [{"match": "catalog.list", "by": "user", "message": "List the catalog?"}, {"match": "catalog.price", "by": "operator", "timeoutMs": 1000}, {"match": "orders.ship", "by": "user"}, {"match": "stock.reserve", "by": "user"}],`, 1)

// recording keeps the last tools/call body the upstream received.
type recording struct {
	http.Handler
	mu   sync.Mutex
	last []byte
}

func (r *recording) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	if bytes.Contains(body, []byte(`"tools/call"`)) {
		r.mu.Lock()
		r.last = body
		r.mu.Unlock()
	}
	req.Body = io.NopCloser(bytes.NewReader(body))
	r.Handler.ServeHTTP(w, req)
}

// approvalGateways starts n gateways in front of one mrtrServer, sharing one store (n
// replicas).
func approvalGateways(t *testing.T, n int) (*mrtrServer, *recording, []*mrtrClient) {
	t.Helper()
	srv := newMRTRServer()
	rec := &recording{Handler: srv}
	up := httptest.NewServer(rec)
	t.Cleanup(up.Close)
	ctx := context.Background()
	st := store.NewMemory(store.Options{})
	u, _ := url.Parse(up.URL)
	var clients []*mrtrClient
	for range n {
		pool, err := wasmrt.NewPool(ctx, pluginRuntime(t), []byte(approvalConfig), wasmrt.PoolOptions{Size: 2})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { pool.Close(ctx) })
		gw, err := gateway.New(gateway.Options{Upstream: u, Plugin: pool, Config: []byte(approvalConfig), Store: st,
			Origins: admission.OriginPolicy{Loopback: true}})
		if err != nil {
			t.Fatal(err)
		}
		front := httptest.NewServer(gw)
		t.Cleanup(front.Close)
		clients = append(clients, &mrtrClient{t: t, url: front.URL + "/mcp"})
	}
	return srv, rec, clients
}

// deniedCode is the dev.stategate/error code of a refused call's result ("" for none).
func deniedCode(r map[string]any) string {
	meta, _ := r["_meta"].(map[string]any)
	e, _ := meta["dev.stategate/error"].(map[string]any)
	code, _ := e["code"].(string)
	return code
}

// question asks for catalog.list with args and returns the gateway's requestState.
func question(t *testing.T, c *mrtrClient, args map[string]any, extra map[string]string) string {
	t.Helper()
	_, r := c.call(map[string]any{"name": "catalog.list", "arguments": args}, extra)
	if r["resultType"] != "input_required" {
		t.Fatalf("catalog.list without a yes: %s; want input_required", mustJSON(r))
	}
	reqs, _ := r["inputRequests"].(map[string]any)
	form, _ := reqs[approval.InputKey].(map[string]any)
	params, _ := form["params"].(map[string]any)
	if form["method"] != "elicitation/create" || !strings.Contains(params["message"].(string), "List the catalog?") ||
		!strings.Contains(params["message"].(string), "Tool: catalog.list") {
		t.Fatalf("the question: %s", mustJSON(r))
	}
	s, _ := r["requestState"].(string)
	if !strings.HasPrefix(s, approval.Prefix) {
		t.Fatalf("requestState %q", s)
	}
	return s
}

func yesNo(action string, yes bool) map[string]any {
	return map[string]any{approval.InputKey: map[string]any{"action": action, "content": map[string]any{approval.Field: yes}}}
}

// TestApproval_userOn2026Wire: a tool configured for a user's approval is answered
// input_required by the gateway itself (the server never sees the call); the retry with an
// accepting answer and the gateway's requestState runs the tool once, and the server sees
// neither the gateway's requestState nor its inputResponses; a second use, another
// argument, another credential, a forged or foreign state, a decline, a cancel, a
// 2025-11-25 client and an operator's approval never reach the server; another replica
// on the same store accepts a state the first issued, and refuses it once used.
func TestApproval_userOn2026Wire(t *testing.T) {
	srv, rec, cs := approvalGateways(t, 2)
	a, b := cs[0], cs[1]
	args := map[string]any{"q": "tea"}
	upstream := func() int { return srv.count(srv.hits, "catalog.list") }

	s := question(t, a, args, nil)
	if upstream() != 0 {
		t.Fatalf("the question reached the server (%d calls)", upstream())
	}

	refused := func(name string, c *mrtrClient, params map[string]any, extra map[string]string, code string) {
		t.Helper()
		before := upstream()
		_, r := c.call(params, extra)
		if got := deniedCode(r); got != code || upstream() != before {
			t.Errorf("%s: code %q (want %q), server calls %d -> %d: %s", name, got, code, before, upstream(), mustJSON(r))
		}
	}
	retry := func(state string, args map[string]any, resp map[string]any) map[string]any {
		return map[string]any{"name": "catalog.list", "arguments": args, "requestState": state, "inputResponses": resp}
	}

	refused("another argument", a, retry(s, map[string]any{"q": "coffee"}, yesNo("accept", true)), nil, abi.DenyApprovalInvalid)
	refused("another credential", a, retry(s, args, yesNo("accept", true)), map[string]string{"Authorization": "Bearer other"}, abi.DenyApprovalInvalid)
	refused("forged", a, retry(s[:len(s)-2]+"AA", args, yesNo("accept", true)), nil, abi.DenyApprovalInvalid)
	refused("approve false", a, retry(s, args, yesNo("accept", false)), nil, abi.DenyApprovalDeclined)
	refused("cancel", a, retry(s, args, map[string]any{approval.InputKey: map[string]any{"action": "cancel"}}), nil, abi.DenyApprovalCancelled)
	refused("no answer", a, retry(s, args, map[string]any{}), nil, abi.DenyApprovalInvalid)

	// The yes, on the other replica: forwarded once, without the gateway's members.
	_, r := b.call(retry(s, args, yesNo("accept", true)), nil)
	if resultText(r) != "tea, coffee\n" || upstream() != 1 {
		t.Fatalf("the accepted retry: %s (server calls %d)", mustJSON(r), upstream())
	}
	rec.mu.Lock()
	sent := string(rec.last)
	rec.mu.Unlock()
	if strings.Contains(sent, "requestState") || strings.Contains(sent, approval.InputKey) || strings.Contains(sent, "inputResponses") {
		t.Errorf("the server saw the gateway's approval members: %s", sent)
	}
	if !strings.Contains(sent, `"q":"tea"`) {
		t.Errorf("the server did not get the call's arguments: %s", sent)
	}
	refused("second use, other replica", a, retry(s, args, yesNo("accept", true)), nil, abi.DenyApprovalInvalid)
	refused("second use, same replica", b, retry(s, args, yesNo("accept", true)), nil, abi.DenyApprovalInvalid)

	// A decline of a fresh question.
	s2 := question(t, b, args, nil)
	refused("decline", b, retry(s2, args, yesNo("decline", false)), nil, abi.DenyApprovalDeclined)

	// A state another gateway (another key) signed, and a 2025-11-25 client.
	_, _, other := approvalGateways(t, 1)
	s3 := question(t, other[0], args, nil)
	refused("another gateway's state", a, retry(s3, args, yesNo("accept", true)), nil, abi.DenyApprovalInvalid)
	refused("2025-11-25 client", a, map[string]any{"name": "catalog.list", "arguments": args}, map[string]string{"MCP-Protocol-Version": "2025-11-25"}, abi.DenyApprovalRequired)
	refused("operator approval nobody gave (held 1 s)", a, map[string]any{"name": "catalog.price", "arguments": map[string]any{"sku": "tea"}}, nil, abi.DenyApprovalRequired)
	// The workflow's refusal wins: nobody is asked about a call that could not run.
	refused("gated out", a, map[string]any{"name": "orders.ship", "arguments": map[string]any{"order_id": "o1"}}, nil, abi.DenyToolNotAvailable)
	if n := srv.count(srv.hits, "catalog.price") + srv.count(srv.hits, "orders.ship"); n != 0 {
		t.Errorf("catalog.price or orders.ship reached the server %d times", n)
	}
	// A tool without an approval is not asked by the gateway (the server asks itself).
	if _, r := a.call(map[string]any{"name": "orders.pay", "arguments": map[string]any{"order_id": "o1", "amount": 5}}, map[string]string{"Mcp-Param-Order": "o1"}); r["resultType"] != "input_required" || strings.Contains(mustJSON(r), approval.InputKey) {
		t.Errorf("orders.pay (the server's own question): %s", mustJSON(r))
	}
}

// TestApproval_serverAsksToo: a tool with a user's approval whose server asks for input
// itself once the gateway let the call through. Round 1: the gateway asks (its requestState);
// round 2: the yes is forwarded, the server answers input_required and its requestState
// comes back to the client as the gateway's continuation; round 3, on the other replica:
// the retry with the continuation and the server's inputResponses is forwarded with the
// server's own state, exactly, and the person is not asked again. A tampered
// continuation, one for other arguments, another credential or another tool, and a replay
// are refused and reach no server.
func TestApproval_serverAsksToo(t *testing.T) {
	srv, rec, cs := approvalGateways(t, 2)
	a, b := cs[0], cs[1]
	const tool = "stock.reserve"
	args := map[string]any{"sku": "tea"}
	hits := func() int { return srv.count(srv.hits, tool) }
	call := func(c *mrtrClient, state string, args, resp map[string]any, extra map[string]string) map[string]any {
		t.Helper()
		p := map[string]any{"name": tool, "arguments": args}
		if state != "" {
			p["requestState"], p["inputResponses"] = state, resp
		}
		_, r := c.call(p, extra)
		return r
	}
	last := func() string {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		return string(rec.last)
	}

	// Round 1: the gateway asks.
	r := call(a, "", args, nil, nil)
	s1, _ := r["requestState"].(string)
	if r["resultType"] != "input_required" || !strings.HasPrefix(s1, approval.Prefix) || hits() != 0 {
		t.Fatalf("round 1: %s (server calls %d)", mustJSON(r), hits())
	}
	// Round 2: the yes goes through; the server asks, its state comes back wrapped.
	r = call(a, s1, args, yesNo("accept", true), nil)
	cont, _ := r["requestState"].(string)
	reqs, _ := r["inputRequests"].(map[string]any)
	if r["resultType"] != "input_required" || reqs["confirm"] == nil || reqs[approval.InputKey] != nil || !strings.HasPrefix(cont, approval.ContPrefix) || hits() != 1 {
		t.Fatalf("round 2: %s (server calls %d)", mustJSON(r), hits())
	}
	if sent := last(); strings.Contains(sent, "requestState") || strings.Contains(sent, "inputResponses") {
		t.Errorf("round 2: the server saw the gateway's members: %s", sent)
	}
	server := srv.state(tool, json.RawMessage(`{"sku":"tea"}`))
	confirm := map[string]any{"confirm": map[string]any{"action": "accept", "content": map[string]any{"ok": true}}}

	refused := func(name string, c *mrtrClient, tl, state string, args map[string]any, extra map[string]string) {
		t.Helper()
		before := hits()
		_, r := c.call(map[string]any{"name": tl, "arguments": args, "requestState": state, "inputResponses": confirm}, extra)
		if got := deniedCode(r); got != abi.DenyApprovalInvalid || hits() != before || srv.count(srv.hits, "catalog.list") != 0 {
			t.Errorf("%s: code %q, server calls %d -> %d: %s", name, got, before, hits(), mustJSON(r))
		}
	}
	refused("tampered", a, tool, cont[:len(cont)-2]+"AA", args, nil)
	refused("forged payload", a, tool, approval.ContPrefix+cont[len(approval.ContPrefix)+1:], args, nil)
	refused("other arguments", a, tool, cont, map[string]any{"sku": "coffee"}, nil)
	refused("another credential", b, tool, cont, args, map[string]string{"Authorization": "Bearer other"})
	refused("another tool", a, "catalog.list", cont, args, nil)
	refused("the yes again", a, tool, s1, args, nil)

	// Round 3, on the other replica: forwarded with the server's own state; done.
	r = call(b, cont, args, confirm, nil)
	if resultText(r) != "reserved\n" || srv.count(srv.runs, tool) != 1 || hits() != 2 {
		t.Fatalf("round 3: %s (server calls %d, runs %d)", mustJSON(r), hits(), srv.count(srv.runs, tool))
	}
	sent := last()
	if !strings.Contains(sent, `"requestState":"`+server+`"`) || !strings.Contains(sent, `"confirm"`) || strings.Contains(sent, approval.ContPrefix) || strings.Contains(sent, approval.InputKey) {
		t.Errorf("round 3: the server got %s; want its own requestState %q and inputResponses", sent, server)
	}
	refused("replayed, same replica", b, tool, cont, args, nil)
	refused("replayed, other replica", a, tool, cont, args, nil)
}

// TestApproval_serverAsksTwiceOrTooMuch: a server that asks twice after the yes gets each
// of its states back through a continuation of the continuation, and the person is asked
// once; a server's state over approval.MaxCarried passes to the client untouched, and the
// retry carrying it is asked again by the gateway (nothing reaches the server).
func TestApproval_serverAsksTwiceOrTooMuch(t *testing.T) {
	srv, rec, cs := approvalGateways(t, 2)
	a, b := cs[0], cs[1]
	const tool = "stock.reserve"
	call := func(c *mrtrClient, args map[string]any, state string, resp map[string]any) map[string]any {
		t.Helper()
		p := map[string]any{"name": tool, "arguments": args}
		if state != "" {
			p["requestState"], p["inputResponses"] = state, resp
		}
		_, r := c.call(p, nil)
		return r
	}
	accept := func(key string) map[string]any {
		return map[string]any{key: map[string]any{"action": "accept", "content": map[string]any{"ok": true}}}
	}
	state := func(r map[string]any, prefix string) string {
		t.Helper()
		s, _ := r["requestState"].(string)
		if r["resultType"] != "input_required" || !strings.HasPrefix(s, prefix) {
			t.Fatalf("want input_required with a %q state: %s", prefix, mustJSON(r))
		}
		return s
	}

	twice := map[string]any{"sku": "tea", "twice": true}
	s1 := state(call(a, twice, "", nil), approval.Prefix)
	c1 := state(call(a, twice, s1, yesNo("accept", true)), approval.ContPrefix)
	c2 := state(call(b, twice, c1, accept("confirm")), approval.ContPrefix)
	rec.mu.Lock()
	sent := string(rec.last)
	rec.mu.Unlock()
	if !strings.Contains(sent, `"requestState":"`+srv.state(tool, json.RawMessage(`{"sku":"tea","twice":true}`))+`"`) {
		t.Errorf("round 3: the server got %s", sent)
	}
	if r := call(a, twice, c2, accept("again")); resultText(r) != "reserved\n" {
		t.Fatalf("round 4: %s", mustJSON(r))
	}
	rec.mu.Lock()
	sent = string(rec.last)
	rec.mu.Unlock()
	if !strings.Contains(sent, `"requestState":"`+srv.state(tool+"/2", json.RawMessage(`{"sku":"tea","twice":true}`))+`"`) {
		t.Errorf("round 4: the server got %s", sent)
	}
	if r := call(a, twice, c1, accept("confirm")); deniedCode(r) != abi.DenyApprovalInvalid {
		t.Errorf("the first continuation again: %s", mustJSON(r))
	}

	big := map[string]any{"sku": "tea", "big": true}
	s1 = state(call(a, big, "", nil), approval.Prefix)
	r := call(a, big, s1, yesNo("accept", true))
	if s, _ := r["requestState"].(string); len(s) != 17<<10 || strings.Trim(s, "b") != "" {
		t.Fatalf("a state over the bound was not passed untouched: %.200s", mustJSON(r))
	}
	before := srv.count(srv.hits, tool)
	if s := state(call(b, big, r["requestState"].(string), accept("confirm")), approval.Prefix); s == "" || srv.count(srv.hits, tool) != before {
		t.Errorf("the retry with the server's own state: server calls %d -> %d", before, srv.count(srv.hits, tool))
	}
}
