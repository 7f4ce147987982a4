package flow_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stategate/stategate/exchange"
	"github.com/stategate/stategate/exchange/admission"
	"github.com/stategate/stategate/exchange/exchangetest"
	"github.com/stategate/stategate/exchange/flow"
	"github.com/stategate/stategate/exchange/kvstate"
	"github.com/stategate/stategate/plugin/engine"
)

// TestTimeout_afterTheAnswerAddsNoSecondAnswer: a stream that ran on after the answer to
// the request went by (rewritten) reaches the call's timeout: the stream ends there, with
// no TOOL_TIMEOUT answer for the same request, which a client could read as well (issue 38:
// one request, one answer).
func TestTimeout_afterTheAnswerAddsNoSecondAnswer(t *testing.T) {
	cfg := exchangetest.Config("sample.json")
	e, err := engine.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	st := &kvstate.State{KV: kv{}}
	core := exchange.New(exchange.Options{Plugin: engineCalls{e}, State: st, Config: cfg})
	fl := flow.New(flow.Options{Core: core, Busy: st.TakeBusy, Origins: admission.OriginPolicy{Loopback: true}})
	h := flow.Headers{{"Host", "127.0.0.1"}, {"Content-Type", "application/json"}, {"Accept", "application/json, text/event-stream"},
		{"MCP-Protocol-Version", "2025-06-18"}, {"Mcp-Session-Id", "s1"}}
	d := fl.Request(context.Background(), flow.Request{Method: "POST", Path: "/mcp", Headers: h,
		Body: []byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{}}}`)})
	if d.Open == nil {
		t.Fatalf("not forwarded: %q", d.Do)
	}
	out := d.Open.Answer(200, flow.Headers{{"Content-Type", "text/event-stream"}},
		[]byte("data: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"hi\"}]}}\n\n"), true)
	if !strings.Contains(string(out.Body), `"id":7,"result"`) {
		t.Fatalf("the answer did not go by: %q", out.Body)
	}
	to, _ := d.Open.Timeout()
	if strings.Contains(string(to.Body), `"id":7`) || !to.End {
		t.Fatalf("a second answer to request 7 after its answer: %q (end %v)", to.Body, to.End)
	}
}
