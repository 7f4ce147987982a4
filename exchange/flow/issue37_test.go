package flow_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stategate/stategate/exchange"
	"github.com/stategate/stategate/exchange/admission"
	"github.com/stategate/stategate/exchange/cache"
	"github.com/stategate/stategate/exchange/exchangetest"
	"github.com/stategate/stategate/exchange/flow"
	"github.com/stategate/stategate/exchange/kvstate"
	"github.com/stategate/stategate/exchange/oauth"
	"github.com/stategate/stategate/plugin/engine"
)

func issue37Host(t *testing.T, cfg string) *host {
	e, err := engine.New([]byte(cfg))
	if err != nil {
		t.Fatal(err)
	}
	st := &kvstate.State{KV: kv{}}
	core := exchange.New(exchange.Options{Plugin: engineCalls{e}, State: st, Config: []byte(cfg),
		NewCache: func(l cache.Limits) cache.Cache { return cache.NewMemory(l, nil) }})
	return &host{f: flow.New(flow.Options{Core: core, Busy: st.TakeBusy, Origins: admission.OriginPolicy{Loopback: true},
		OAuth: &oauth.Map{Public: "", EndpointPath: "/mcp"}})}
}

func hdrs(method, name string, extra ...string) map[string]exchangetest.Values {
	h := map[string]exchangetest.Values{
		"Accept": {"application/json, text/event-stream"}, "Content-Type": {"application/json"},
		"MCP-Protocol-Version": {"2026-07-28"}, "Mcp-Method": {method},
	}
	if name != "" {
		h["Mcp-Name"] = exchangetest.Values{name}
	}
	for i := 0; i+1 < len(extra); i += 2 {
		h[extra[i]] = append(h[extra[i]], extra[i+1])
	}
	return h
}

func up(body string) *exchangetest.Answer {
	return &exchangetest.Answer{Status: 200, ContentType: "application/json", Body: body}
}

const inputRequired = `{"jsonrpc":"2.0","id":{{id}},"result":{"resultType":"input_required","inputRequests":{"c":{"method":"elicitation/create","params":{"mode":"form","message":"ok?","requestedSchema":{"type":"object","properties":{}}}}},"requestState":"s1"}}`

// TestProbe_inputRequiredFreesTheProbe: the probe of an auto-disabled unit answered
// input_required learnt nothing of the tool; it is freed (outcome incomplete), so the
// client's retry carrying the user's answer probes instead of waiting for the claim to
// lapse (found by review).
func TestProbe_inputRequiredFreesTheProbe(t *testing.T) {
	h := issue37Host(t, `{"version":1,"health":{"autoDisableThreshold":1,"retryAfterMs":1}}`)
	do := func(s exchangetest.Step) exchangetest.Got { return h.Do(t, s) }
	do(exchangetest.Step{Headers: hdrs("tools/list", ""), Body: `{"jsonrpc":"2.0","id":0,"method":"tools/list"}`,
		Upstream: up(`{"jsonrpc":"2.0","id":{{id}},"result":{"tools":[{"name":"pay","inputSchema":{"type":"object"}}],"ttlMs":0,"cacheScope":"public"}}`)})
	g := do(exchangetest.Step{Headers: hdrs("tools/call", "pay"), Body: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"pay","arguments":{}}}`,
		Upstream: up(`{"jsonrpc":"2.0","id":{{id}},"error":{"code":-32603,"message":"down"}}`)})
	if !g.UpstreamCalled {
		t.Fatalf("first call: %s", g.Body)
	}
	time.Sleep(20 * time.Millisecond)
	g = do(exchangetest.Step{Headers: hdrs("tools/call", "pay"), Body: `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"pay","arguments":{}}}`,
		Upstream: up(inputRequired)})
	if !g.UpstreamCalled || !strings.Contains(g.Body, "input_required") {
		t.Fatalf("the probe did not reach the server: %s", g.Body)
	}
	g = do(exchangetest.Step{Headers: hdrs("tools/call", "pay"), Body: `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"pay","arguments":{},"inputResponses":{"c":{"action":"accept","content":{}}},"requestState":"s1"}}`,
		Upstream: up(`{"jsonrpc":"2.0","id":{{id}},"result":{"content":[{"type":"text","text":"paid"}]}}`)})
	if !g.UpstreamCalled || !strings.Contains(g.Body, "paid") {
		t.Errorf("the retry after an input_required probe was refused (the probe's claim held): %s", g.Body)
	}
}

const paramList = `{"jsonrpc":"2.0","id":{{id}},"result":{"tools":[{"name":"sql","inputSchema":{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"},"n":{"type":"integer","x-mcp-header":"N"}}}}],"ttlMs":0,"cacheScope":"public"}}`

func listParams(t *testing.T, h *host) {
	g := h.Do(t, exchangetest.Step{Headers: hdrs("tools/list", ""), Body: `{"jsonrpc":"2.0","id":0,"method":"tools/list"}`, Upstream: up(paramList)})
	if g.Status != 200 {
		t.Fatal(g.Body)
	}
}

func call(t *testing.T, h *host, args string, extra ...string) exchangetest.Got {
	return h.Do(t, exchangetest.Step{Headers: hdrs("tools/call", "sql", extra...),
		Body:     `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"sql","arguments":` + args + `}}`,
		Upstream: up(`{"jsonrpc":"2.0","id":{{id}},"result":{"content":[]}}`)})
}

// Sanity: a plain mismatch is refused.
func TestParamHeaders_mismatchAndCase(t *testing.T) {
	h := issue37Host(t, `{"version":1}`)
	listParams(t, h)
	g := call(t, h, `{"region":"eu"}`, "Mcp-Param-Region", "us")
	if g.UpstreamCalled {
		t.Fatal("plain mismatch reached the server")
	}
	g = call(t, h, `{"region":"us"}`, "mcp-param-region", "us")
	if !g.UpstreamCalled {
		t.Fatalf("lowercase header name refused: %s", g.Body)
	}
}

// A member differing from the declared property only in case: Go's encoding/json (the go-sdk
// decodes typed tool inputs with it) reads the last case-insensitive match.
func TestParamHeaders_caseVariantArgumentIsRefused(t *testing.T) {
	h := issue37Host(t, `{"version":1}`)
	listParams(t, h)
	g := call(t, h, `{"region":"us-west1","REGION":"eu-evil"}`, "Mcp-Param-Region", "us-west1")
	if g.UpstreamCalled {
		t.Errorf("case-variant argument passes the Mcp-Param check; upstream got %s", g.UpstreamBody)
	}
	g = call(t, h, `{"REGION":"eu-evil"}`)
	if g.UpstreamCalled {
		t.Errorf("case-variant argument without header passes strict check; upstream got %s", g.UpstreamBody)
	}
}

// Numbers compare exactly (beyond 2^53 too), and only the JSON number grammar mirrors one.
func TestParamHeaders_numbersCompareExactly(t *testing.T) {
	h := issue37Host(t, `{"version":1}`)
	listParams(t, h)
	g := call(t, h, `{"n":9007199254740993}`, "Mcp-Param-N", "9007199254740992")
	if g.UpstreamCalled {
		t.Errorf("header 9007199254740992 accepted for body 9007199254740993; upstream got %s", g.UpstreamBody)
	}
	for _, hv := range []string{"0x1p4", "+16", "1_6", " 16", "16.", "016"} {
		if g = call(t, h, `{"n":16}`, "Mcp-Param-N", hv); g.UpstreamCalled {
			t.Errorf("header %q accepted for body 16: only the JSON number grammar mirrors a number", hv)
		}
	}
	for _, hv := range []string{"16", "16.0", "1.6e1", "160e-1"} {
		if g = call(t, h, `{"n":16}`, "Mcp-Param-N", hv); !g.UpstreamCalled {
			t.Errorf("header %q refused for body 16: %s", hv, g.Body)
		}
	}
}

// Two principals' lists differ: the last list decides for everyone.
func TestParamHeaders_perCredentialScope(t *testing.T) {
	h := issue37Host(t, `{"version":1,"principal":{"header":"X-Auth-Subject"}}`)
	plain := `{"jsonrpc":"2.0","id":{{id}},"result":{"tools":[{"name":"sql","inputSchema":{"type":"object","properties":{"region":{"type":"string"}}}}],"ttlMs":0,"cacheScope":"private"}}`
	hb := hdrs("tools/list", "", "X-Auth-Subject", "bob")
	h.Do(t, exchangetest.Step{Headers: hb, Body: `{"jsonrpc":"2.0","id":0,"method":"tools/list"}`, Upstream: up(plain)})
	ha := hdrs("tools/list", "", "X-Auth-Subject", "alice")
	h.Do(t, exchangetest.Step{Headers: ha, Body: `{"jsonrpc":"2.0","id":0,"method":"tools/list"}`, Upstream: up(paramList)})
	g := call(t, h, `{"region":"us"}`, "X-Auth-Subject", "bob")
	if !g.UpstreamCalled {
		t.Errorf("bob, whose list declares no header, is refused: %s", g.Body)
	}
}

// A case-variant retry member: not taken for a retry, so served from the cache.
func TestRetry_caseVariantMembersAreRefused(t *testing.T) {
	h := issue37Host(t, `{"version":1,"stateSync":{"defaults":{"cacheControl":"no-store"},"policies":[{"match":"catalog.*","cacheControl":"immutable"}]},"cache":{"scope":"shared"}}`)
	h.Do(t, exchangetest.Step{Headers: hdrs("tools/list", ""), Body: `{"jsonrpc":"2.0","id":0,"method":"tools/list"}`,
		Upstream: up(`{"jsonrpc":"2.0","id":{{id}},"result":{"tools":[{"name":"catalog.get","inputSchema":{"type":"object"}}],"ttlMs":0,"cacheScope":"public"}}`)})
	g := h.Do(t, exchangetest.Step{Headers: hdrs("tools/call", "catalog.get"), Body: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"catalog.get","arguments":{"a":1},"InputResponses":{"c":{"action":"accept","content":{"secret":"x"}}},"RequestState":"s"}}`,
		Upstream: up(`{"jsonrpc":"2.0","id":{{id}},"result":{"content":[{"type":"text","text":"for-user-input"}]}}`)})
	if g.UpstreamCalled || g.Status != 400 {
		t.Errorf("a retry whose members differ in case reached the server (%d): %s", g.Status, g.Body)
	}
	g = h.Do(t, exchangetest.Step{Headers: hdrs("tools/call", "catalog.get"), Body: `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"catalog.get","arguments":{"a":1}}}`,
		Upstream: up(`{"jsonrpc":"2.0","id":{{id}},"result":{"content":[{"type":"text","text":"fresh"}]}}`)})
	if !g.UpstreamCalled || strings.Contains(g.Body, "for-user-input") {
		t.Errorf("the plain call after a case-variant retry was not sent to the server: %s", g.Body)
	}
}

// resources/read: Mcp-Name is checked against "uri"; a "URI" member (read by case-insensitive
// decoders, last wins) is not looked at.
func TestMcpName_uriCaseVariantIsRefused(t *testing.T) {
	h := issue37Host(t, `{"version":1}`)
	g := h.Do(t, exchangetest.Step{Headers: hdrs("resources/read", "file:///public"),
		Body:     `{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"file:///public","URI":"file:///secret"}}`,
		Upstream: up(`{"jsonrpc":"2.0","id":{{id}},"result":{"contents":[]}}`)})
	if g.UpstreamCalled {
		t.Errorf("uri case variant passes the Mcp-Name check: %s", g.UpstreamBody)
	}
}

// TestParamHeaders_perCredentialScopeBothWays: a mismatched header of alice's, whose list
// declares Region, is refused though bob, whose list does not, listed last.
func TestParamHeaders_perCredentialScopeBothWays(t *testing.T) {
	h := issue37Host(t, `{"version":1,"principal":{"header":"X-Auth-Subject"}}`)
	plain := `{"jsonrpc":"2.0","id":{{id}},"result":{"tools":[{"name":"sql","inputSchema":{"type":"object","properties":{"region":{"type":"string"}}}}],"ttlMs":0,"cacheScope":"private"}}`
	h.Do(t, exchangetest.Step{Headers: hdrs("tools/list", "", "X-Auth-Subject", "alice"), Body: `{"jsonrpc":"2.0","id":0,"method":"tools/list"}`, Upstream: up(paramList)})
	h.Do(t, exchangetest.Step{Headers: hdrs("tools/list", "", "X-Auth-Subject", "bob"), Body: `{"jsonrpc":"2.0","id":0,"method":"tools/list"}`, Upstream: up(plain)})
	if g := call(t, h, `{"region":"us"}`, "X-Auth-Subject", "alice", "Mcp-Param-Region", "eu"); g.UpstreamCalled {
		t.Errorf("alice's mismatched header reached the server after bob listed: %s", g.UpstreamBody)
	}
	if g := call(t, h, `{"region":"us"}`, "X-Auth-Subject", "bob"); !g.UpstreamCalled {
		t.Errorf("bob's call was refused: %s", g.Body)
	}
}
