package exchange

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"testing"

	"github.com/stategate/stategate/abi"
	answ "github.com/stategate/stategate/exchange/answer"
	"github.com/stategate/stategate/exchange/jsonrpc"
	"github.com/stategate/stategate/exchange/session"
	"github.com/stategate/stategate/exchange/sse"
	"github.com/stategate/stategate/plugin/engine"
	"github.com/tidwall/gjson"
)

func testCore(t testing.TB) *Core {
	cfg, err := os.ReadFile("exchangetest/configs/sample.json")
	if err != nil {
		t.Fatal(err)
	}
	e, err := engine.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return New(Options{Plugin: enginePlugin{e}, State: newTestState(false), Config: cfg, MaxBodyBytes: 1 << 16})
}

func fuzzSeeds(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"cart.add_item","arguments":{"sku":"A1"}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"ping","method":"tools/call","params":{"name":"cart.pay"}}`,
		`[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":2,"method":"tools/call"}]`,
		`{"jsonrpc":"2.0","id":1.5,"method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":"\ud800","method":"initialize","params":{}}`,
		`{"jsonrpc":"2.0","method":"tools/call","params":{"name":"cart.pay","arguments":[1]}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"tasks.update","arguments":{"ids":[1,2,3]}}}`,
	} {
		f.Add(s, "2025-06-18", "s1", "")
		f.Add(s, "2025-03-26", "", "tools/call")
		f.Add(s, "2025-06-18", session.Prefix+"AAAA", "")
	}
}

// FuzzAdmit: admission never panics, answers valid JSON, never passes on (ungated) a
// message that a last-member-wins server reads as a method the core acts on, and never lets
// a request with a gateway session it did not issue go on.
func FuzzAdmit(f *testing.F) {
	fuzzSeeds(f)
	c := testCore(f)
	f.Fuzz(func(t *testing.T, body, version, sid, method string) {
		h := http.Header{}
		h.Set("MCP-Protocol-Version", version)
		h.Set("Mcp-Session-Id", sid)
		h.Set("Mcp-Method", method)
		ex := c.Admit(context.Background(), h, []byte(body))
		if session.IsGateway(h.Get("Mcp-Session-Id")) && ex.Verdict != Reply {
			// The core issued no session here: every id of its form is unknown (404).
			t.Fatalf("an unknown gateway session went on (verdict %v): %s", ex.Verdict, body)
		}
		switch ex.Verdict {
		case Reply:
			if !json.Valid(ex.Body) {
				t.Fatalf("reply is not JSON: %s", ex.Body)
			}
		case Forward:
			if !json.Valid(ex.Body) || !actsOn(ex.Method) || !jsonrpc.EchoSafe(gjson.GetBytes(ex.Body, "id")) {
				t.Fatalf("forwarded %s (method %q)", ex.Body, ex.Method)
			}
			ex.Close()
		case Pass:
			var one struct {
				Method any `json:"method"`
			}
			var many []struct {
				Method any `json:"method"`
			}
			if json.Unmarshal([]byte(body), &one) == nil {
				if m, _ := one.Method.(string); actsOn(m) {
					t.Fatalf("passed ungated: %s", body)
				}
			} else if json.Unmarshal([]byte(body), &many) == nil {
				for _, e := range many {
					if m, _ := e.Method.(string); actsOn(m) {
						t.Fatalf("batch passed ungated: %s", body)
					}
				}
			}
		}
	})
}

// FuzzAnswer: whatever the upstream answers, as JSON or as an event stream cut anywhere,
// rewriting never panics; every event that goes on holds one JSON value or no data (issue
// 38: nothing a client could read otherwise); and an event stream that holds no answer
// passes byte for byte unless the core withheld something of it, counted as a fault.
func FuzzAnswer(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"ok"}]}}`,
		"event: message\r\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\r\n\r\n",
		"data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\"}\r\r: c\n\n",
		`{"jsonrpc":"2.0","id":1,"result":{"isError":true,"isError":false}}`,
		"data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\"}\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n",
		"\xEF\xBB\xBFdata: [{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}]\n\n",
	} {
		f.Add(s, uint8(7))
	}
	c := testCore(f)
	call := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"tasks.update","arguments":{}}}`)
	f.Fuzz(func(t *testing.T, answer string, cut uint8) {
		ex := c.Admit(context.Background(), http.Header{}, call)
		if ex.Verdict != Forward {
			t.Fatalf("seed call not forwarded: %s", ex.Body)
		}
		out, _ := ex.Answer().RewriteJSON(context.Background(), []byte(answer))
		if json.Valid([]byte(answer)) && !json.Valid(out) {
			t.Fatalf("a JSON answer became invalid: %s -> %s", answer, out)
		}
		ex.Close()
		ex = c.Admit(context.Background(), http.Header{}, call)
		rw := ex.Answer().SSE(context.Background(), 1<<16)
		at := int(cut) % (len(answer) + 1)
		withheld := c.Stats.Faults(abi.FaultUpstreamBody)
		got := string(rw.Feed([]byte(answer[:at]), false)) + string(rw.Feed([]byte(answer[at:]), true))
		withheld = c.Stats.Faults(abi.FaultUpstreamBody) - withheld
		if !ex.answered && got != answer && withheld == 0 && "\xEF\xBB\xBF"+got != answer {
			t.Fatalf("a stream without the answer changed:\n%q\n%q", answer, got)
		}
		if len(answer) <= 1<<16 {
			for rest := []byte(got); ; {
				ev, r, ok := sse.Next(rest, true)
				if !ok {
					break
				}
				if data, has := sse.Data(ev); has && answ.Unreadable(data) {
					t.Fatalf("an event that is not one message went on: %q\nfrom %q", ev, answer)
				}
				rest = r
			}
		}
		ex.Close()
	})
}
