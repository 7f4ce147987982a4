package flow_test

import (
	"context"
	"testing"

	"github.com/stategate/stategate/exchange"
	"github.com/stategate/stategate/exchange/exchangetest"
	"github.com/stategate/stategate/exchange/flow"
	"github.com/stategate/stategate/exchange/kvstate"
	"github.com/stategate/stategate/plugin/engine"
)

// TestForwarded_keepHead: a host that sends the upstream's head as it comes (Envoy without
// held headers) gets it on the first Answer, and the answer keeps its content type: JSON
// stays JSON, an event stream for a client that takes only JSON is not collapsed.
func TestForwarded_keepHead(t *testing.T) {
	const list = `{"jsonrpc":"2.0","id":1,"result":{"tools":[]}}`
	cases := []struct {
		name, ct, body  string
		keepHead        bool
		wantStartAtHead bool
		wantCT          string
	}{
		{name: "json_held", ct: "application/json", body: list, wantCT: "application/json"},
		{name: "json_kept", ct: "application/json", body: list, keepHead: true, wantStartAtHead: true, wantCT: "application/json"},
		{name: "sse_collapsed_when_held", ct: "text/event-stream", body: "data: " + list + "\n\n", wantCT: "application/json"},
		{name: "sse_kept", ct: "text/event-stream", body: "data: " + list + "\n\n", keepHead: true, wantStartAtHead: true, wantCT: "text/event-stream"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e, err := engine.New(exchangetest.Config("sample.json"))
			if err != nil {
				t.Fatal(err)
			}
			core := exchange.New(exchange.Options{Plugin: engineCalls{e}, State: &kvstate.State{KV: kv{}}})
			f := flow.New(flow.Options{Core: core})
			req := flow.Headers{{"Content-Type", "application/json"}, {"Accept", "application/json"}}
			ex := core.Admit(context.Background(), req, []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
			if ex.Verdict != exchange.Forward {
				t.Fatalf("verdict %v", ex.Verdict)
			}
			o := f.Forwarded(ex, c.keepHead)
			up := flow.Headers{{"Content-Type", c.ct}}
			head := o.Answer(200, up, nil, true)
			if head.Start != c.wantStartAtHead {
				t.Fatalf("head Start = %v", head.Start)
			}
			out := o.Answer(200, up, []byte(c.body), false)
			start := head
			if !head.Start {
				start = out
			}
			if !start.Start || !out.End {
				t.Fatalf("outputs %+v, %+v", head, out)
			}
			if ct := start.Headers.Get("Content-Type"); ct != c.wantCT {
				t.Errorf("content type %q; want %q", ct, c.wantCT)
			}
			if len(head.Body)+len(out.Body) == 0 {
				t.Error("no body")
			}
		})
	}
}
