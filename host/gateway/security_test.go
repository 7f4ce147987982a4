package gateway_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/tidwall/gjson"

	"github.com/stategate/stategate/abi"
	"github.com/stategate/stategate/exchange/admission"
	"github.com/stategate/stategate/exchange/jsonrpc"
	"github.com/stategate/stategate/host/demo"
	"github.com/stategate/stategate/host/gateway"
)

// Regression tests for the adversarial review (issue 9), each through the gateway with
// real parts: the official Go SDK as the upstream (and as the client where a client's
// behaviour is the point) and the built plugin.

// TestSecurity_onceOnlyStepWithUnfaithfulIDs: a cart.pay whose id the upstream does not
// echo faithfully (the Go SDK turns 1.5 into 1, invalid UTF-8 into U+FFFD) still records
// its outcome: the workflow reaches confirmed and a second cart.pay is refused. Before the
// fix the answer was not matched, no transition was stored, a JSON-only client got a 502
// for a payment that went through, and a second cart.pay was admitted.
func TestSecurity_onceOnlyStepWithUnfaithfulIDs(t *testing.T) {
	for _, id := range []string{`1.5`, `12345678901234567890`, `1e20`, "\"\xff\"", `"\u0063art"`} {
		t.Run(id, func(t *testing.T) {
			e := newEnv(t, envOptions{demo: demo.Options{JSONResponse: true}})
			sid := rawSession(t, e.url)
			for i, step := range []string{
				`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"cart.add_item","arguments":{"sku":"tea"}}}`,
				`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"cart.checkout","arguments":{}}}`,
			} {
				if body := postJSON(t, e.url, sid, step); gjson.Get(body, "result.isError").Bool() {
					t.Fatalf("step %d failed: %s", i, body)
				}
			}
			pay := `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"cart.pay","arguments":{}}}`
			resp := rawPost(t, e.url, sid, pay, "application/json")
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || gjson.GetBytes(body, "result.isError").Bool() || !gjson.GetBytes(body, "result").Exists() {
				t.Fatalf("cart.pay with id %s: %d %s", id, resp.StatusCode, body)
			}
			if got := gjson.GetBytes(body, "id").Raw; got != id {
				t.Errorf("answer id %s; want the client's %s byte for byte", got, id)
			}
			again := postJSON(t, e.url, sid, `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"cart.pay","arguments":{}}}`)
			if code := gjson.Get(again, "result._meta."+gjson.Escape(abi.MetaError)+".code").Str; code != abi.DenyToolNotAvailable {
				t.Errorf("second cart.pay: %s; want %s (the workflow is confirmed)", again, abi.DenyToolNotAvailable)
			}
			if n := e.upstream.count("cart.pay"); n != 1 {
				t.Errorf("cart.pay reached the upstream %d times; want once", n)
			}
		})
	}
}

func postJSON(t *testing.T, url, sid, body string) string {
	t.Helper()
	resp := rawPost(t, url, sid, body, "application/json")
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// TestSecurity_dnsRebinding: on a loopback listener the gateway validates Host and Origin
// as the MCP specification asks servers to; a rebinding page is refused with 403 and
// reaches nothing. Before the fix the gateway accepted any Host and Origin and rewrote Host
// to the upstream's, so the upstream's own check always passed.
func TestSecurity_dnsRebinding(t *testing.T) {
	e := newEnv(t, envOptions{gateway: gateway.Options{Origins: admission.OriginPolicy{Loopback: true}}})
	call := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"tasks.list","arguments":{}}}`
	for _, tc := range []struct {
		name, host, origin string
		status             int
	}{
		{"rebinding host", "attacker.example:8080", "", http.StatusForbidden},
		{"foreign origin", "", "http://attacker.example", http.StatusForbidden},
		{"null origin", "", "null", http.StatusForbidden},
		{"loopback origin", "", "http://localhost:6274", http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodPost, e.url, strings.NewReader(call))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			req.Header.Set("MCP-Protocol-Version", "2026-07-28")
			if tc.host != "" {
				req.Host = tc.host
			}
			if tc.origin != "" {
				req.Header.Set("Origin", tc.origin)
			}
			before := e.upstream.count("tasks.list")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if (resp.StatusCode == http.StatusForbidden) != (tc.status == http.StatusForbidden) {
				t.Errorf("status %d, want %s", resp.StatusCode, map[bool]string{true: "403", false: "the upstream's answer"}[tc.status == http.StatusForbidden])
			}
			if reached := e.upstream.count("tasks.list") > before; reached != (tc.status == http.StatusOK) {
				t.Errorf("reached the upstream: %v", reached)
			}
		})
	}
}

// TestSecurity_hostileBytesKeepTheLimits: bytes a client controls (session id, principal)
// reach the engine through one JSON encoder; before, Go string quoting made the engine input
// invalid JSON and the limits check failed open, so an oversized array went through.
func TestSecurity_hostileBytesKeepTheLimits(t *testing.T) {
	cfg := []byte(`{"version":1,"principal":{"header":"X-Auth-Subject"},"limits":{"maxArraySize":3}}`)
	e := newEnv(t, envOptions{config: cfg})
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"tasks.list","arguments":{"ids":[1,2,3,4]}}}`
	req, _ := http.NewRequest(http.MethodPost, e.url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28\xfe")
	req.Header.Set("Mcp-Session-Id", "s\xff\x80")
	req.Header.Set("X-Auth-Subject", "alice\xc3")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	out, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if code := gjson.GetBytes(out, "result._meta."+gjson.Escape(abi.MetaError)+".code").Str; code != abi.DenyArrayTooLarge {
		t.Errorf("oversized array with hostile header bytes: %d %s; want %s", resp.StatusCode, out, abi.DenyArrayTooLarge)
	}
	if e.upstream.count("tasks.list") != 0 {
		t.Error("the oversized call reached the upstream")
	}
}

// slowPay is an official-SDK upstream with the checkout tools, whose cart.pay blocks until
// release is closed, and counts the payments that went through.
type slowPay struct {
	release chan struct{}
	mu      sync.Mutex
	paid    int
}

func (s *slowPay) handler() http.Handler {
	srv := mcp.NewServer(&mcp.Implementation{Name: "slow-pay", Version: "1"}, nil)
	ok := func(text string) *mcp.CallToolResult {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}
	}
	type noArgs struct{}
	mcp.AddTool(srv, &mcp.Tool{Name: "cart.add_item"}, func(context.Context, *mcp.CallToolRequest, noArgs) (*mcp.CallToolResult, any, error) {
		return ok("added"), nil, nil
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "cart.checkout"}, func(context.Context, *mcp.CallToolRequest, noArgs) (*mcp.CallToolResult, any, error) {
		return ok("checked out"), nil, nil
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "cart.pay"}, func(ctx context.Context, _ *mcp.CallToolRequest, _ noArgs) (*mcp.CallToolResult, any, error) {
		select {
		case <-s.release:
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		}
		s.mu.Lock()
		s.paid++
		s.mu.Unlock()
		return ok("paid"), nil, nil
	})
	return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{JSONResponse: true})
}

// TestSecurity_timedOutMovingCallKeepsItsLease: a cart.pay that outlives its timeout is
// answered TOOL_TIMEOUT, but keeps running upstream and keeps its lease: a second cart.pay
// meanwhile is refused (retryable), and once the first one finishes the workflow records
// it. Before the fix the lease was released at the timeout and the second cart.pay ran
// while the first was still running.
func TestSecurity_timedOutMovingCallKeepsItsLease(t *testing.T) {
	cfg := []byte(`{"version":1,"workflows":[{"id":"checkout","initial":"empty","key":"session",
	  "states":{"empty":{"on":{"ADD_ITEM":"has_items"}},"has_items":{"on":{"CHECKOUT":"payment"}},
	    "payment":{"on":{"PAY":"confirmed"}},"confirmed":{"type":"final"}},
	  "tools":{"cart.add_item":{"states":["empty","has_items"],"event":"ADD_ITEM"},
	    "cart.checkout":{"states":["has_items"],"event":"CHECKOUT"},"cart.pay":{"states":["payment"],"event":"PAY"}}}],
	  "limits":{"tools":{"cart.pay":{"timeoutMs":300}}}}`)
	up := &slowPay{release: make(chan struct{})}
	e := newEnv(t, envOptions{config: cfg, upstream: up.handler(), gateway: gateway.Options{LeaseWait: 200 * time.Millisecond}})
	c := e.connect(t, sessionEra)
	c.call(t, "cart.add_item", nil)
	c.call(t, "cart.checkout", nil)
	first := c.call(t, "cart.pay", nil)
	if code := metaCode(first); code != abi.DenyToolTimeout {
		t.Fatalf("slow cart.pay: %v; want %s", texts(first), abi.DenyToolTimeout)
	}
	second := c.call(t, "cart.pay", nil)
	if code := metaCode(second); code != abi.DenyGateUnavailable {
		t.Fatalf("cart.pay while the first still runs: %v (%s); want %s", texts(second), code, abi.DenyGateUnavailable)
	}
	close(up.release)
	deadline := time.Now().Add(5 * time.Second)
	var third *mcp.CallToolResult
	for time.Now().Before(deadline) {
		if third = c.call(t, "cart.pay", nil); metaCode(third) == abi.DenyToolNotAvailable {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if metaCode(third) != abi.DenyToolNotAvailable || !strings.Contains(strings.Join(texts(third), " "), "confirmed") {
		t.Errorf("after the first payment finished: %v; want the workflow confirmed", texts(third))
	}
	up.mu.Lock()
	defer up.mu.Unlock()
	if up.paid != 1 {
		t.Errorf("%d payments went through; want exactly 1", up.paid)
	}
}

// TestSecurity_slowBodyIsCutOff: a request body must arrive within the body timeout, so
// slow-body connections do not pile up.
func TestSecurity_slowBodyIsCutOff(t *testing.T) {
	e := newEnv(t, envOptions{gateway: gateway.Options{BodyTimeout: 200 * time.Millisecond}})
	u, _ := url.Parse(e.url)
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /mcp HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"jsonrpc\":", u.Host)
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer to a stalled body: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("stalled body: status %d, want 400", resp.StatusCode)
	}
}

// TestSecurity_upstreamDownIsAJSONRPCError: with the upstream down, pass-through methods
// get a JSON-RPC error too (not a bare 502), and no answer reveals the upstream's address.
func TestSecurity_upstreamDownIsAJSONRPCError(t *testing.T) {
	e := newEnv(t, envOptions{})
	addr := strings.TrimPrefix(e.upstreamSrv.URL, "http://")
	e.upstreamSrv.Close()
	for _, body := range []string{
		`{"jsonrpc":"2.0","id":7,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"tasks.list","arguments":{}}}`,
		`{"jsonrpc":"2.0","id":9,"method":"tools/list"}`,
	} {
		resp := rawPostVersion(t, e.url, "", body, "application/json, text/event-stream", "2026-07-28")
		out, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		id := gjson.Get(body, "id").Raw
		if resp.StatusCode != http.StatusBadGateway || gjson.GetBytes(out, "error.code").Int() != jsonrpc.CodeInternal || gjson.GetBytes(out, "id").Raw != id {
			t.Errorf("%s with the upstream down: %d %s; want 502 and a JSON-RPC error for id %s", body, resp.StatusCode, out, id)
		}
		if strings.Contains(string(out), addr) {
			t.Errorf("answer reveals the upstream's address %s: %s", addr, out)
		}
	}
}
