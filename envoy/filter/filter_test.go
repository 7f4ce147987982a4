package filter

import (
	"strings"
	"testing"

	"github.com/proxy-wasm/proxy-wasm-go-sdk/proxywasm/types"
	"github.com/tidwall/gjson"
)

const sessionKey = "stategate/v1/checkout/session//s1"

var holdHeaders = []byte(`{"holdRequestHeaders":true}`)

// filterCase is one behaviour of the filter, run in both modes.
type filterCase struct {
	name     string
	config   []byte // nil: the sample configuration
	vmConfig []byte
	run      func(t *testing.T, e *env)
}

// TestFilter runs every case twice: the filter as native Go, and the built .wasm on
// wazero, both under proxytest's Envoy emulation.
func TestFilter(t *testing.T) {
	for _, r := range runners {
		t.Run(r.name, func(t *testing.T) {
			for _, tc := range filterCases {
				t.Run(tc.name, func(t *testing.T) {
					cfg := tc.config
					if cfg == nil {
						cfg = sampleConfig
					}
					tc.run(t, newEnv(t, r.vm(t), cfg, tc.vmConfig))
				})
			}
		})
	}
}

var filterCases = []filterCase{
	{name: "tools_list_json_is_decorated", run: func(t *testing.T, e *env) {
		o := e.do(roundTrip{headers: session("s1"), body: []string{rpc(1, "tools/list", `{}`)},
			respHeaders: jsonResp, respBody: []string{toolsListResult}})
		if !o.upstreamCalled {
			t.Fatal("tools/list was not forwarded")
		}
		if _, ok := header(o.reqHeaders, "accept-encoding"); ok {
			t.Error("accept-encoding was not removed: the upstream could compress what the filter must read")
		}
		if _, ok := header(o.respHeaders, "content-length"); ok {
			t.Error("content-length was kept on a rewritten body")
		}
		got := strings.Join(toolNames(o.respBody), ",")
		if got != "cart.view,cart.add_item,countries.list" {
			t.Errorf("visible tools = %s; want the tools of state empty only", got)
		}
		if d := gjson.Get(o.respBody, `result.tools.#(name=="countries.list").description`).Str; !strings.Contains(d, "[Cache-Control: immutable]") {
			t.Errorf("countries.list description = %q; want the immutable tag", d)
		}
		if c := gjson.Get(o.respBody, "result.nextCursor").Str; c != "c2" {
			t.Errorf("nextCursor = %q; want it passed through", c)
		}
		if n := counter(t, e, "stategate.lists_decorated"); n != 1 {
			t.Errorf("lists_decorated = %d", n)
		}
	}},
	{name: "tools_list_sse_rewrites_only_the_answer", run: func(t *testing.T, e *env) {
		progress := "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":1,\"progress\":1}}\n\n"
		other := "id: 7\ndata: {\"jsonrpc\":\"2.0\",\"id\":99,\"result\":{\"tools\":[{\"name\":\"cart.pay\"}]}}\n\n"
		answer := "event: message\nid: 8\ndata: " + toolsListResult + "\n\n"
		o := e.do(roundTrip{headers: session("s1"), body: []string{rpc(1, "tools/list", "")},
			respHeaders: sseResp, respBody: []string{progress + other + answer}})
		if !strings.HasPrefix(o.respBody, progress+other) {
			t.Errorf("events before the answer were changed:\n%s", o.respBody)
		}
		msgs := sseMessages(t, o.respBody)
		if len(msgs) != 3 {
			t.Fatalf("got %d events; want 3:\n%s", len(msgs), o.respBody)
		}
		if got := strings.Join(toolNames(msgs[2]), ","); got != "cart.view,cart.add_item,countries.list" {
			t.Errorf("answer tools = %s", got)
		}
		if !strings.Contains(o.respBody, "event: message\nid: 8\ndata: {") {
			t.Errorf("the answer event lost its fields:\n%s", o.respBody)
		}
	}},
	{name: "tools_list_stateless_era_marks_instead_of_hiding", run: func(t *testing.T, e *env) {
		hdrs := [][2]string{{"content-type", "application/json"}, {"mcp-protocol-version", "2026-07-28"}, {"mcp-method", "tools/list"}}
		o := e.do(roundTrip{headers: hdrs, body: []string{rpc(1, "tools/list", "")}, respHeaders: jsonResp, respBody: []string{toolsListResult}})
		if n := len(toolNames(o.respBody)); n != 5 {
			t.Errorf("got %d tools; the 2026-07-28 list must not depend on state", n)
		}
		if d := gjson.Get(o.respBody, `result.tools.#(name=="cart.pay").description`).Str; !strings.Contains(d, "[Workflow checkout: available only in state payment]") {
			t.Errorf("cart.pay description = %q; want the workflow mark", d)
		}
	}},
	{name: "tools_call_allowed_is_forwarded_with_timeout", vmConfig: holdHeaders, run: func(t *testing.T, e *env) {
		body := call(3, "cart.add_item", `{"sku":"A1"}`)
		o := e.do(roundTrip{headers: session("s1"), body: []string{body}, respHeaders: jsonResp, respBody: []string{okResult(3, "added")}})
		if !o.upstreamCalled || o.reqBody != body {
			t.Fatalf("allowed call not forwarded unchanged: called=%v body=%s", o.upstreamCalled, o.reqBody)
		}
		if v, _ := header(o.reqHeaders, "x-envoy-upstream-rq-timeout-ms"); v != "30000" {
			t.Errorf("upstream timeout header = %q; want the configured 30000", v)
		}
		// The visible tools changed: with the headers held, the JSON answer becomes an event
		// stream with the notification first, as the gateway answers it.
		msgs := sseMessages(t, o.respBody)
		if ct, _ := header(o.respHeaders, "content-type"); ct != "text/event-stream" || len(msgs) != 2 ||
			gjson.Get(msgs[0], "method").Str != "notifications/tools/list_changed" {
			t.Fatalf("answer (%s) is not list_changed then the result:\n%s", ct, o.respBody)
		}
		if got := gjson.Get(msgs[1], "result.content.0.text").Str; !strings.HasPrefix(got, "[System: Cache invalidated for cart.view") {
			t.Errorf("result not decorated: %s", o.respBody)
		}
		if v, _ := sharedData(t, sessionKey); gjson.Get(v, "state").Str != "has_items" {
			t.Errorf("stored state = %s; want has_items", v)
		}
		if n := counter(t, e, "stategate.calls_allowed"); n != 1 {
			t.Errorf("calls_allowed = %d", n)
		}
		// Events become metrics: the call's outcome and the committed transition.
		if n := counter(t, e, "stategate.tool_calls.success"); n != 1 {
			t.Errorf("tool_calls.success = %d", n)
		}
		if n := counter(t, e, "stategate.events.workflow_transitioned"); n != 1 {
			t.Errorf("events.workflow_transitioned = %d", n)
		}
	}},
	{name: "tools_call_denied_answers_locally", run: func(t *testing.T, e *env) {
		o := e.do(roundTrip{headers: session("s1"), body: []string{call(4, "cart.pay", `{}`)}, respHeaders: jsonResp, respBody: []string{okResult(4, "paid")}})
		if o.local == nil || o.upstreamCalled {
			t.Fatal("a call outside its state reached the upstream")
		}
		if o.local.StatusCode != 200 {
			t.Errorf("status = %d; a denial is a tools/call result", o.local.StatusCode)
		}
		if ct, _ := header(o.local.Headers, "content-type"); ct != "application/json" {
			t.Errorf("content-type = %q", ct)
		}
		body := string(o.local.Data)
		if gjson.Get(body, "id").Int() != 4 || gjson.Get(body, "result.isError").Type != gjson.True {
			t.Errorf("denial = %s", body)
		}
		if c := gjson.Get(body, `result._meta.dev\.stategate/error.code`).Str; c != "TOOL_NOT_AVAILABLE" {
			t.Errorf("code = %q", c)
		}
		if !strings.Contains(gjson.Get(body, "result.content.0.text").Str, "Available now: cart.add_item") {
			t.Errorf("the model is not told what it can do: %s", body)
		}
		if n := counter(t, e, "stategate.calls_denied"); n != 1 {
			t.Errorf("calls_denied = %d", n)
		}
		if n := counter(t, e, "stategate.tool_calls.denied"); n != 1 {
			t.Errorf("tool_calls.denied = %d", n)
		}
	}},
	{name: "post_headers_go_on_at_once_by_default", run: func(t *testing.T, e *env) {
		o := e.do(roundTrip{headers: session("s1"), body: []string{call(4, "cart.pay", `{}`)}})
		if o.reqActions[0] != types.ActionContinue {
			t.Errorf("headers action = %v; without holdRequestHeaders Envoy would stall on a pause", o.reqActions[0])
		}
		if o.reqActions[1] != types.ActionPause || o.local == nil {
			t.Errorf("the denied body was not held and answered locally: %v", o.reqActions)
		}
	}},
	{name: "hold_request_headers_pauses_posts_only", vmConfig: holdHeaders, run: func(t *testing.T, e *env) {
		o := e.do(roundTrip{headers: session("s1"), body: []string{call(4, "cart.pay", `{}`)}})
		if o.reqActions[0] != types.ActionPause || o.local == nil {
			t.Errorf("actions = %v; a held POST is answered before its headers go upstream", o.reqActions)
		}
		if o := e.do(roundTrip{method: "GET", headers: [][2]string{{"accept", "text/event-stream"}}}); o.reqActions[0] != types.ActionContinue {
			t.Error("a GET was held")
		}
	}},
	{name: "tools_call_array_too_large_is_denied", run: func(t *testing.T, e *env) {
		ids := strings.TrimSuffix(strings.Repeat("1,", 101), ",")
		o := e.do(roundTrip{headers: session("s1"), body: []string{call(5, "tasks.update", `{"ids":[`+ids+`]}`)}})
		if o.local == nil {
			t.Fatal("an oversized array reached the upstream")
		}
		body := string(o.local.Data)
		if c := gjson.Get(body, `result._meta.dev\.stategate/error.code`).Str; c != "ARRAY_TOO_LARGE" {
			t.Errorf("code = %q: %s", c, body)
		}
		if p := gjson.Get(body, `result._meta.dev\.stategate/error.details.path`).Str; p != "ids" {
			t.Errorf("path = %q", p)
		}
	}},
	{name: "chunked_request_body_is_buffered_until_the_end", run: func(t *testing.T, e *env) {
		body := call(6, "cart.pay", `{"note":"`+strings.Repeat("x", 300)+`"}`)
		chunks := []string{body[:5], body[5:40], body[40:200], body[200:]}
		o := e.do(roundTrip{headers: session("s1"), body: chunks})
		for i, a := range o.reqActions[1:] {
			if a != types.ActionPause {
				t.Errorf("callback %d = %v; a tools/call is held until complete", i, a)
			}
		}
		if o.local == nil || gjson.GetBytes(o.local.Data, `result._meta.dev\.stategate/error.code`).Str != "TOOL_NOT_AVAILABLE" {
			t.Fatalf("chunked denial not answered: %+v", o.local)
		}
	}},
	{name: "chunked_sse_response_is_reassembled", run: func(t *testing.T, e *env) {
		progress := "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":1,\"progress\":1}}\r\n\r\n"
		answer := "event: message\r\ndata: " + toolsListResult + "\r\n\r\n"
		stream := progress + answer
		cut1, cut2 := len(progress)-1, len(progress)+30 // inside a CRLF, and inside the data
		o := e.do(roundTrip{headers: session("s1"), body: []string{rpc(1, "tools/list", "")}, respHeaders: sseResp,
			respBody: []string{stream[:cut1], stream[cut1:cut2], stream[cut2:]}})
		for i, a := range o.respActions {
			if a != types.ActionContinue {
				t.Errorf("response callback %d = %v; SSE is streamed, never paused", i, a)
			}
		}
		if !strings.HasPrefix(o.respBody, progress) {
			t.Errorf("notification changed:\n%q", o.respBody)
		}
		msgs := sseMessages(t, o.respBody)
		if len(msgs) != 2 || strings.Join(toolNames(msgs[1]), ",") != "cart.view,cart.add_item,countries.list" {
			t.Errorf("answer not rewritten:\n%s", o.respBody)
		}
	}},
	{name: "sse_answer_to_a_json_only_client_is_collapsed_when_held", vmConfig: holdHeaders, run: func(t *testing.T, e *env) {
		progress := "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":1,\"progress\":1}}\n\n"
		stream := progress + "data: " + toolsListResult + "\n\n"
		o := e.do(roundTrip{headers: jsonOnly(session("s1")), body: []string{rpc(1, "tools/list", "")}, respHeaders: sseResp,
			respBody: []string{stream[:len(progress)+20], stream[len(progress)+20:]}})
		if o.respActions[0] != types.ActionPause {
			t.Errorf("response headers = %v; held until the answer is read", o.respActions[0])
		}
		if ct, _ := header(o.respHeaders, "content-type"); ct != "application/json" {
			t.Errorf("content-type = %q", ct)
		}
		if names := strings.Join(toolNames(o.respBody), ","); names != "cart.view,cart.add_item,countries.list" {
			t.Errorf("answer not collapsed and rewritten:\n%s", o.respBody)
		}
	}},
	{name: "sse_answer_to_a_json_only_client_streams_without_held_headers", run: func(t *testing.T, e *env) {
		stream := "data: " + toolsListResult + "\n\n"
		o := e.do(roundTrip{headers: jsonOnly(session("s1")), body: []string{rpc(1, "tools/list", "")}, respHeaders: sseResp, respBody: []string{stream}})
		if ct, _ := header(o.respHeaders, "content-type"); ct != "text/event-stream" || o.respActions[0] != types.ActionContinue {
			t.Errorf("content-type = %q, headers %v; the head went as the upstream gave it", ct, o.respActions[0])
		}
		if msgs := sseMessages(t, o.respBody); len(msgs) != 1 || len(toolNames(msgs[0])) != 3 {
			t.Errorf("stream not rewritten:\n%s", o.respBody)
		}
	}},
	{name: "chunked_json_response_is_buffered", run: func(t *testing.T, e *env) {
		r := toolsListResult
		o := e.do(roundTrip{headers: session("s1"), body: []string{rpc(1, "tools/list", "")}, respHeaders: jsonResp,
			respBody: []string{r[:10], r[10:100], r[100:]}})
		if o.respActions[1] != types.ActionPause || o.respActions[2] != types.ActionPause {
			t.Errorf("actions = %v; a JSON answer is buffered", o.respActions)
		}
		if n := len(toolNames(o.respBody)); n != 3 {
			t.Errorf("got %d tools:\n%s", n, o.respBody)
		}
	}},
	{name: "malformed_json_rpc_is_a_parse_error", run: func(t *testing.T, e *env) {
		o := e.do(roundTrip{headers: session("s1"), body: []string{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":`}})
		assertRPCError(t, o, 400, -32700, "parse error")
	}},
	{name: "tools_call_without_a_string_name_is_invalid_params", run: func(t *testing.T, e *env) {
		o := e.do(roundTrip{headers: session("s1"), body: []string{rpc(2, "tools/call", `{"name":7}`)}})
		assertRPCError(t, o, 200, -32602, "params.name")
	}},
	{name: "duplicate_members_are_refused", run: func(t *testing.T, e *env) {
		body := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"cart.view","name":"cart.pay"}}`
		o := e.do(roundTrip{headers: session("s1"), body: []string{body}})
		assertRPCError(t, o, 400, -32600, "repeats a member name")
	}},
	{name: "mcp_method_header_must_match_the_body", run: func(t *testing.T, e *env) {
		hdrs := append(session("s1"), [2]string{"mcp-method", "tools/list"})
		o := e.do(roundTrip{headers: hdrs, body: []string{call(2, "cart.pay", "")}})
		assertRPCError(t, o, 400, -32020, "Mcp-Method header")
	}},
	{name: "batch_with_tools_call_is_refused", run: func(t *testing.T, e *env) {
		o := e.do(roundTrip{headers: session("s1"), body: []string{"[" + call(1, "cart.pay", "") + "," + rpc(2, "ping", "") + "]"}})
		assertRPCError(t, o, 400, -32600, "batch")
	}},
	{name: "oversized_body_is_a_clear_error", vmConfig: []byte(`{"maxRequestBodyBytes":1024}`), run: func(t *testing.T, e *env) {
		body := call(9, "bulk.import", `{"rows":["`+strings.Repeat("r", 2000)+`"]}`)
		o := e.do(roundTrip{headers: session("s1"), body: []string{body[:600], body[600:1200], body[1200:]}})
		assertRPCError(t, o, 413, -32600, "limit of 1024 bytes")
		if id := gjson.GetBytes(o.local.Data, "id").Int(); id != 9 {
			t.Errorf("id = %d; the error answers the request's id when it was seen", id)
		}
	}},
	{name: "other_methods_pass_unchanged", vmConfig: holdHeaders, run: func(t *testing.T, e *env) {
		body := `{"jsonrpc":"2.0","method":"notifications/initialized","params":{"x":"` + strings.Repeat("y", 200) + `"}}`
		o := e.do(roundTrip{headers: session("s1"), body: []string{body[:60], body[60:]}})
		// The whole body is read first (the method is decided on the complete message, as
		// the server reads it), then released unchanged.
		if o.reqActions[2] != types.ActionContinue || !o.upstreamCalled || o.reqBody != body {
			t.Errorf("actions = %v body %q; a method the filter does not act on passes unchanged", o.reqActions, o.reqBody)
		}
		if v, ok := header(o.reqHeaders, "accept-encoding"); !ok || v != "gzip" {
			t.Error("headers of an untouched request were changed (holdRequestHeaders)")
		}
	}},
	{name: "initialize_advertises_list_changed", run: func(t *testing.T, e *env) {
		for _, tc := range []struct{ name, result string }{
			{"tools_object", `{"protocolVersion":"2025-06-18","capabilities":{"tools":{},"logging":{}},"serverInfo":{"name":"up","version":"1"}}`},
			{"no_tools", `{"protocolVersion":"2025-06-18","capabilities":{"logging":{}},"serverInfo":{"name":"up","version":"1"}}`},
			{"no_capabilities", `{"protocolVersion":"2025-06-18","serverInfo":{"name":"up","version":"1"}}`},
			{"list_changed_false", `{"capabilities":{"tools":{"listChanged":false}}}`},
		} {
			o := e.do(roundTrip{headers: session(""), body: []string{rpc(1, "initialize", `{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"c","version":"1"}}`)},
				respHeaders: append(jsonResp, [2]string{"mcp-session-id", "s9"}), respBody: []string{`{"jsonrpc":"2.0","id":1,"result":` + tc.result + `}`}})
			if gjson.Get(o.respBody, "result.capabilities.tools.listChanged").Type != gjson.True {
				t.Errorf("%s: listChanged not advertised: %s", tc.name, o.respBody)
			}
			if !gjson.Valid(o.respBody) || gjson.Get(o.respBody, "result.serverInfo.name").Str != gjson.Get(`{"r":`+tc.result+`}`, "r.serverInfo.name").Str {
				t.Errorf("%s: other members changed: %s", tc.name, o.respBody)
			}
		}
		o := e.do(roundTrip{headers: session(""), body: []string{rpc(1, "initialize", `{}`)}, respHeaders: sseResp,
			respBody: []string{"data: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"capabilities\":{}}}\n\n"}})
		if msgs := sseMessages(t, o.respBody); len(msgs) != 1 || gjson.Get(msgs[0], "result.capabilities.tools.listChanged").Type != gjson.True {
			t.Errorf("SSE initialize not amended: %s", o.respBody)
		}
	}},
	{name: "initialize_without_workflows_is_untouched", config: []byte(`{"version":1}`), run: func(t *testing.T, e *env) {
		result := `{"jsonrpc":"2.0","id":1,"result":{"capabilities":{"tools":{}}}}`
		o := e.do(roundTrip{headers: session(""), body: []string{rpc(1, "initialize", `{}`)}, respHeaders: jsonResp, respBody: []string{result}})
		if o.respBody != result {
			t.Errorf("initialize changed without workflows: %s", o.respBody)
		}
	}},
	{name: "get_sse_stream_is_never_buffered", run: func(t *testing.T, e *env) {
		events := []string{"data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\"}\n\n", ": keepalive\n\n", "data: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"tools\":[]}}\n\n"}
		o := e.do(roundTrip{method: "GET", headers: [][2]string{{"accept", "text/event-stream"}, {"mcp-session-id", "s1"}},
			respHeaders: sseResp, respBody: events})
		if o.reqActions[0] != types.ActionContinue {
			t.Error("GET request headers paused")
		}
		for i, a := range o.respActions {
			if a != types.ActionContinue {
				t.Errorf("response callback %d = %v", i, a)
			}
		}
		if o.respBody != strings.Join(events, "") {
			t.Errorf("GET stream changed:\n%s", o.respBody)
		}
	}},
	{name: "session_advances_through_checkout_across_requests", run: func(t *testing.T, e *env) {
		step := func(id int, tool string, sse bool) outcome {
			x := roundTrip{headers: session("s1"), body: []string{call(id, tool, `{}`)}, respHeaders: jsonResp, respBody: []string{okResult(id, "ok")}}
			if sse {
				x.respHeaders, x.respBody = sseResp, []string{"data: " + okResult(id, "ok") + "\n\n"}
			}
			return e.do(x)
		}
		list := func() string {
			return strings.Join(toolNames(e.do(roundTrip{headers: session("s1"), body: []string{rpc(1, "tools/list", "")},
				respHeaders: jsonResp, respBody: []string{toolsListResult}}).respBody), ",")
		}
		if o := step(10, "cart.checkout", false); o.local == nil {
			t.Fatal("cart.checkout allowed in state empty")
		}
		if o := step(11, "cart.add_item", true); !o.upstreamCalled {
			t.Fatal("cart.add_item denied in state empty")
		} else if msgs := sseMessages(t, o.respBody); len(msgs) != 2 || gjson.Get(msgs[0], "method").Str != "notifications/tools/list_changed" {
			t.Errorf("no list_changed before the result although the visible set changed:\n%s", o.respBody)
		} else if gjson.Get(msgs[1], "id").Int() != 11 {
			t.Errorf("result event = %s", msgs[1])
		}
		if got := list(); got != "cart.view,cart.add_item,cart.checkout,countries.list" {
			t.Errorf("tools in has_items = %s", got)
		}
		if o := step(12, "cart.add_item", true); len(sseMessages(t, o.respBody)) != 1 {
			t.Errorf("list_changed sent although the visible set did not change:\n%s", o.respBody)
		}
		if o := step(13, "cart.checkout", true); !o.upstreamCalled {
			t.Fatal("cart.checkout denied in has_items")
		}
		if got := list(); got != "cart.view,cart.pay,countries.list" {
			t.Errorf("tools in payment = %s", got)
		}
		if o := step(14, "cart.pay", false); !o.upstreamCalled {
			t.Fatal("cart.pay denied in payment")
		}
		v, _ := sharedData(t, sessionKey)
		// seq counts writes: add_item, checkout, pay (the second add_item changed nothing).
		if gjson.Get(v, "state").Str != "confirmed" || gjson.Get(v, "seq").Int() != 3 {
			t.Errorf("stored snapshot = %s; want confirmed at seq 3", v)
		}
		o := step(15, "cart.add_item", false)
		if o.local == nil || !strings.Contains(gjson.GetBytes(o.local.Data, "result.content.0.text").Str, "final state") {
			t.Errorf("a finished workflow allowed another call: %+v", o.local)
		}
		if n := counter(t, e, "stategate.list_changed"); n != 3 {
			t.Errorf("list_changed = %d; want 3 (empty->has_items, has_items->payment, payment->confirmed)", n)
		}
	}},
	{name: "failed_call_does_not_advance", run: func(t *testing.T, e *env) {
		e.do(roundTrip{headers: session("s1"), body: []string{call(1, "cart.add_item", `{}`)}, respHeaders: jsonResp,
			respBody: []string{`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"out of stock"}],"isError":true}}`}})
		if v, ok := sharedData(t, sessionKey); ok && v != "" {
			t.Errorf("a failed call stored state: %s", v)
		}
	}},
	{name: "delete_clears_the_session", run: func(t *testing.T, e *env) {
		e.do(roundTrip{headers: session("s1"), body: []string{call(1, "cart.add_item", `{}`)}, respHeaders: jsonResp, respBody: []string{okResult(1, "ok")}})
		e.do(roundTrip{headers: session("s2"), body: []string{call(1, "cart.add_item", `{}`)}, respHeaders: jsonResp, respBody: []string{okResult(1, "ok")}})
		o := e.do(roundTrip{method: "DELETE", headers: [][2]string{{"mcp-session-id", "s1"}}, respHeaders: [][2]string{{":status", "204"}}})
		if !o.upstreamCalled {
			t.Error("DELETE was not forwarded")
		}
		if v, ok := sharedData(t, sessionKey); !ok || v != "" {
			t.Errorf("s1 key = %q (exists %v); want an empty tombstone (shared data has no delete)", v, ok)
		}
		if v, _ := sharedData(t, "stategate/v1/checkout/session//s2"); gjson.Get(v, "state").Str != "has_items" {
			t.Errorf("another session was cleared: %s", v)
		}
		if o := e.do(roundTrip{headers: session("s1"), body: []string{call(2, "cart.checkout", `{}`)}}); o.local == nil {
			t.Error("cart.checkout allowed after the session was deleted")
		}
		// The tombstoned key is written again by CAS, not created: the bound is not charged.
		e.do(roundTrip{headers: session("s1"), body: []string{call(3, "cart.add_item", `{}`)}, respHeaders: jsonResp, respBody: []string{okResult(3, "ok")}})
		if v, _ := sharedData(t, sessionKey); gjson.Get(v, "state").Str != "has_items" {
			t.Errorf("state after re-adding = %s", v)
		}
	}},
	{name: "principal_scopes_state", config: []byte(strings.Replace(string(sampleConfig), `"version": 1,`, `"version": 1, "principal": {"header": "X-User"},`, 1)), run: func(t *testing.T, e *env) {
		alice := append(session("s1"), [2]string{"x-user", "alice"})
		bob := append(session("s1"), [2]string{"x-user", "bob"})
		e.do(roundTrip{headers: alice, body: []string{call(1, "cart.add_item", `{}`)}, respHeaders: jsonResp, respBody: []string{okResult(1, "ok")}})
		if o := e.do(roundTrip{headers: alice, body: []string{call(2, "cart.checkout", `{}`)}}); o.local != nil {
			t.Errorf("alice denied: %s", o.local.Data)
		}
		if o := e.do(roundTrip{headers: bob, body: []string{call(3, "cart.checkout", `{}`)}}); o.local == nil {
			t.Error("bob's call used alice's state under the same session id")
		}
	}},
	{name: "concurrent_writers_retry_with_compare_and_set", run: func(t *testing.T, e *env) {
		// Two requests of one session admitted against the same state (another Envoy
		// worker, or two streams); the second to answer must re-read and run transition
		// on the state the first wrote, so nothing advances twice.
		h := e.host
		req := func(id int, tool string) uint32 {
			c := h.InitializeHttpContext()
			h.CallOnRequestHeaders(c, append([][2]string{{":method", "POST"}, {":path", "/mcp"}}, session("s1")...), false)
			if a := h.CallOnRequestBody(c, []byte(call(id, tool, `{}`)), true); a != types.ActionContinue {
				t.Fatalf("request %d (%s) not forwarded", id, tool)
			}
			return c
		}
		resp := func(c uint32, id int) {
			h.CallOnResponseHeaders(c, jsonResp, false)
			h.CallOnResponseBody(c, []byte(okResult(id, "ok")), true)
			completeStream(h, e.vm, c)
		}
		// Both create the key: the second create must not overwrite the first.
		a, b := req(1, "cart.add_item"), req(2, "cart.add_item")
		resp(b, 2)
		resp(a, 1)
		if v, _ := sharedData(t, sessionKey); gjson.Get(v, "seq").Int() != 1 || gjson.Get(v, "state").Str != "has_items" {
			t.Errorf("snapshot = %s; want has_items at seq 1", v)
		}
		// Both check out from has_items: the loser re-reads payment, where CHECKOUT is ignored.
		a, b = req(3, "cart.checkout"), req(4, "cart.checkout")
		resp(b, 4)
		resp(a, 3)
		if v, _ := sharedData(t, sessionKey); gjson.Get(v, "seq").Int() != 2 || gjson.Get(v, "state").Str != "payment" {
			t.Errorf("snapshot = %s; want payment at seq 2 (one checkout applied)", v)
		}
		if n := counter(t, e, "stategate.cas_conflicts"); n != 2 {
			t.Errorf("cas_conflicts = %d; want 2", n)
		}
	}},
	{name: "key_bound_fails_closed", vmConfig: []byte(`{"maxStateKeys":1}`), run: func(t *testing.T, e *env) {
		e.do(roundTrip{headers: session("s1"), body: []string{call(1, "cart.add_item", `{}`)}, respHeaders: jsonResp, respBody: []string{okResult(1, "ok")}})
		o := e.do(roundTrip{headers: session("s2"), body: []string{call(2, "cart.add_item", `{}`)}})
		if o.local == nil {
			t.Fatal("a call whose state could not be stored was run")
		}
		if c := gjson.GetBytes(o.local.Data, `result._meta.dev\.stategate/error.code`).Str; c != "GATE_UNAVAILABLE" {
			t.Errorf("code = %q", c)
		}
		if gjson.GetBytes(o.local.Data, `result._meta.dev\.stategate/error.retryable`).Type != gjson.True {
			t.Error("GATE_UNAVAILABLE must be retryable")
		}
		if n := counter(t, e, "stategate.fault.gate_store"); n != 1 {
			t.Errorf("fault.gate_store = %d", n)
		}
		// Existing keys still work, and ungated tools are unaffected.
		if o := e.do(roundTrip{headers: session("s1"), body: []string{call(3, "cart.checkout", `{}`)}}); o.local != nil {
			t.Errorf("s1 denied: %s", o.local.Data)
		}
		if o := e.do(roundTrip{headers: session("s2"), body: []string{call(4, "cart.view", `{}`)}}); o.local != nil {
			t.Errorf("ungated tool denied: %s", o.local.Data)
		}
	}},
	{name: "unknown_tool_names_are_logged_once_a_listing_ends", run: func(t *testing.T, e *env) {
		warned := func() string {
			var out []string
			for _, l := range e.host.GetWarnLogs() {
				if strings.Contains(l, "the upstream does not list") {
					out = append(out, l)
				}
			}
			return strings.Join(out, "\n")
		}
		e.do(roundTrip{headers: session("s1"), body: []string{rpc(1, "tools/list", "")}, respHeaders: jsonResp, respBody: []string{toolsListResult}})
		if w := warned(); w != "" {
			t.Fatalf("warned after the first page of a listing: %s", w)
		}
		for id := 2; id < 4; id++ { // the last page, twice: a listing is checked once
			last := `{"jsonrpc":"2.0","id":` + itoa(id) + `,"result":{"tools":[{"name":"tasks.update","inputSchema":{"type":"object"}}]}}`
			e.do(roundTrip{headers: session("s1"), body: []string{rpc(id, "tools/list", `{"cursor":"c2"}`)}, respHeaders: jsonResp, respBody: []string{last}})
		}
		w := warned()
		if strings.Count(w, "config names tool[bulk.import]") != 1 || !strings.Contains(w, `limits.tools["bulk.import"] (limit)`) || strings.Contains(w, "tool[cart.pay]") {
			t.Errorf("warnings:\n%s", w)
		}
		if n := counter(t, e, "stategate.events.config_unknown_tool"); n == 0 {
			t.Error("stategate.events.config_unknown_tool = 0")
		}
	}},
	{name: "decoration_fails_open_on_a_malformed_answer", run: func(t *testing.T, e *env) {
		bad := `{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"cart.pay"`
		o := e.do(roundTrip{headers: session("s1"), body: []string{rpc(1, "tools/list", "")}, respHeaders: jsonResp, respBody: []string{bad}})
		if o.respBody != bad {
			t.Errorf("malformed answer changed: %s", o.respBody)
		}
		if n := counter(t, e, "stategate.fault.upstream_body"); n != 1 {
			t.Errorf("fault.upstream_body = %d", n)
		}
		if len(e.host.GetWarnLogs()) == 0 {
			t.Error("fault not logged")
		}
	}},
	{name: "oversized_answer_passes_unchanged", vmConfig: []byte(`{"maxResponseBodyBytes":64}`), run: func(t *testing.T, e *env) {
		o := e.do(roundTrip{headers: session("s1"), body: []string{rpc(1, "tools/list", "")}, respHeaders: jsonResp, respBody: []string{toolsListResult[:50], toolsListResult[50:]}})
		if o.respBody != toolsListResult {
			t.Errorf("oversized answer changed: %s", o.respBody)
		}
		if n := counter(t, e, "stategate.fault.response_too_large"); n != 1 {
			t.Errorf("fault.response_too_large = %d", n)
		}
	}},
	{name: "upstream_timeout_answers_the_timeout_result", run: func(t *testing.T, e *env) {
		o := e.do(roundTrip{headers: session("s1"), body: []string{call(21, "cart.view", `{}`)},
			respHeaders: [][2]string{{":status", "504"}, {"content-type", "text/plain"}, {"content-length", "24"}}, respBody: []string{"upstream request timeout"}})
		if s, _ := header(o.respHeaders, ":status"); s != "200" {
			t.Errorf(":status = %s", s)
		}
		if c := gjson.Get(o.respBody, `result._meta.dev\.stategate/error.code`).Str; c != "TOOL_TIMEOUT" || gjson.Get(o.respBody, "id").Int() != 21 {
			t.Errorf("timeout answer = %s", o.respBody)
		}
	}},
}

func assertRPCError(t *testing.T, o outcome, status uint32, code int64, msg string) {
	t.Helper()
	if o.local == nil {
		t.Fatalf("not answered locally (upstream called: %v)", o.upstreamCalled)
	}
	if o.local.StatusCode != status {
		t.Errorf("status = %d; want %d", o.local.StatusCode, status)
	}
	body := string(o.local.Data)
	if c := gjson.Get(body, "error.code").Int(); c != code {
		t.Errorf("code = %d; want %d: %s", c, code, body)
	}
	if m := gjson.Get(body, "error.message").Str; !strings.Contains(m, msg) {
		t.Errorf("message = %q; want it to mention %q", m, msg)
	}
}
