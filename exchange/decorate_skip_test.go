package exchange

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stategate/stategate/plugin/engine"
	"github.com/stategate/stategate/plugin/jsonx"
)

// durationMs is the member whose value differs between any two answers.
var durationMs = regexp.MustCompile(`"dev\.stategate/durationMs":[0-9.e+-]+`)

// TestDecorateSkipped: for every configuration of the exchange tests and the golden
// vectors whose facts say decorate_result changes nothing, a core that skips it answers
// every call byte for byte as a core that calls it, and stores the same state.
func TestDecorateSkipped(t *testing.T) {
	files, _ := filepath.Glob("exchangetest/configs/*.json")
	more, _ := filepath.Glob("../abi/testdata/config/*.json")
	big := strings.Repeat("y", 70<<10)
	answers := []string{
		`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"ok"}]}}`,
		"\n {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"ok\"}],\"structuredContent\":{\"status\":\"ok\"}}}\r\n\t ",
		`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"` + big + `"}]}}`,
		`{"jsonrpc":"2.0","id":1,"result":{"content":[],"isError":true}}`,
		`{"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"no"}}`,
		`{"jsonrpc":"2.0","id":1,"result":{"content":[],"content":[{"type":"text","text":"x"}]}}`,
		`{"jsonrpc":"2.0","id":1,"result":` + strings.Repeat(`{"a":`, 300) + `1` + strings.Repeat(`}`, 300) + `}`,
	}
	checked, forwarded := 0, 0
	for _, f := range append(files, more...) {
		cfg, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		e, err := engine.New(cfg)
		if err != nil {
			continue
		}
		skipping := New(Options{Plugin: enginePlugin{e}, State: newTestState(false), Config: cfg, MaxBodyBytes: 1 << 20})
		if skipping.facts.Decorates {
			continue
		}
		checked++
		calling := New(Options{Plugin: enginePlugin{e}, State: newTestState(false), Config: cfg, MaxBodyBytes: 1 << 20})
		calling.facts.Decorates = true
		tools := []string{"tasks.update", "x"}
		for tool := range skipping.facts.Bound {
			tools = append(tools, tool)
		}
		for _, tool := range tools {
			for i, ans := range answers {
				call := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":` + string(jsonx.AppendString(nil, tool)) + `,"arguments":{"id":"r1","order_id":"o1","cart":"c1"}}}`)
				var outs [2]string
				for k, c := range []*Core{skipping, calling} {
					h := http.Header{}
					h.Set("Mcp-Session-Id", "s1")
					h.Set("MCP-Protocol-Version", "2025-06-18")
					ex := c.Admit(context.Background(), h, call)
					if ex.Verdict != Forward {
						outs[k] = "not forwarded: " + durationMs.ReplaceAllString(string(ex.Body), "D")
						ex.Close()
						continue
					}
					forwarded++
					out, before := ex.Answer().RewriteJSON(context.Background(), []byte(ans))
					outs[k] = durationMs.ReplaceAllString(string(out), "D") + " " + strings.Repeat("+", len(before))
					ex.Close()
				}
				if outs[0] != outs[1] {
					t.Fatalf("%s, %s, answer %d: skipping decorate_result answered\n%.400s\ncalling it\n%.400s", f, tool, i, outs[0], outs[1])
				}
			}
		}
		if a, b := skipping.opts.State.(*testState), calling.opts.State.(*testState); !sameVals(a, b) {
			t.Errorf("%s: the stored states differ", f)
		}
	}
	if checked < 3 || forwarded < 100 {
		t.Errorf("only %d configurations decorate nothing, %d calls forwarded", checked, forwarded)
	}
}

func sameVals(a, b *testState) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(a.vals) != len(b.vals) {
		return false
	}
	for k, v := range a.vals {
		if string(b.vals[k]) != string(v) {
			return false
		}
	}
	return true
}
