package exchange

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stategate/stategate/abi"
	"github.com/stategate/stategate/plugin/engine"
	"github.com/stategate/stategate/plugin/jsonx"
)

// olderPlugin is the engine as a module that does not know check_limits' settle (it
// ignores the member, so answers no settled), counting the transitions it is asked for.
type olderPlugin struct {
	e           *engine.Engine
	strip       bool
	transitions *atomic.Int64
}

func (p olderPlugin) Call(_ context.Context, fn abi.Function, in []byte) ([]byte, error) {
	if fn == abi.FuncTransition {
		p.transitions.Add(1)
	}
	if p.strip && fn == abi.FuncCheckLimits {
		in = bytes.Replace(in, []byte(`,"settle":true`), nil, 1)
	}
	return p.e.Call(fn, in), nil
}

// TestSettledAtAdmission: for every configuration of the exchange tests and the golden
// vectors, a core whose module answers check_limits' settled answers every call, through
// runs of calls that move the workflows, byte for byte as a core whose module does not,
// stores the same state, and calls transition after fewer of them (not after a success
// it settled).
func TestSettledAtAdmission(t *testing.T) {
	files, _ := filepath.Glob("exchangetest/configs/*.json")
	more, _ := filepath.Glob("../abi/testdata/config/*.json")
	answers := []string{
		// Failures first: a success may move the workflow to where the tool is denied.
		`{"jsonrpc":"2.0","id":1,"result":{"content":[],"isError":true}}`,
		`{"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"no"}}`,
		`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"ok"}],"structuredContent":{"status":"failed"}}}`,
		`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"ok"}]}}`,
		`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"ok"}],"structuredContent":{"status":"ok"}}}`,
	}
	var settling, older atomic.Int64
	forwarded := 0
	for _, f := range append(files, more...) {
		cfg, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		e, err := engine.New(cfg)
		if err != nil {
			continue
		}
		cores := [2]*Core{
			New(Options{Plugin: olderPlugin{e: e, transitions: &settling}, State: newTestState(true), Config: cfg, MaxBodyBytes: 1 << 20}),
			New(Options{Plugin: olderPlugin{e: e, strip: true, transitions: &older}, State: newTestState(true), Config: cfg, MaxBodyBytes: 1 << 20}),
		}
		tools := []string{"tasks.update", "x"}
		for tool := range cores[0].facts.Bound {
			tools = append(tools, tool)
		}
		for round := 0; round < 6; round++ {
			for _, tool := range tools {
				for i, ans := range answers {
					call := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":` + string(jsonx.AppendString(nil, tool)) + `,"arguments":{"id":"r1","order_id":"o1","cart":"c1","sku":"tea","amount":50}}}`)
					var outs [2]string
					for k, c := range cores {
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
						t.Fatalf("%s, %s, answer %d: with settled\n%.400s\nwithout\n%.400s", f, tool, i, outs[0], outs[1])
					}
					if a, b := cores[0].opts.State.(*testState), cores[1].opts.State.(*testState); !sameVals(a, b) {
						t.Fatalf("%s, %s, answer %d: the stored states differ", f, tool, i)
					}
				}
			}
		}
	}
	t.Logf("%d calls forwarded; transition called %d times with settled, %d without", forwarded, settling.Load(), older.Load())
	if forwarded < 200 || older.Load()-settling.Load() < 20 || settling.Load() == 0 {
		t.Errorf("%d calls forwarded; transition called %d times with settled, %d without", forwarded, settling.Load(), older.Load())
	}
}
