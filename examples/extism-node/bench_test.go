package extismnode

import (
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stategate/stategate/exchange/exchangetest"
)

// BenchmarkNodeHost measures one request through gateway.mjs (the exchange module under
// @extism/extism in node) with the requests examples/extism-go's BenchmarkExchange uses, so
// the figures read beside that benchmark's (the Go gateway and the Go SDK host).
//
//	go test ./examples/extism-node -run '^$' -bench NodeHost -benchtime 2000x
func BenchmarkNodeHost(b *testing.B) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		id := strings.SplitN(strings.SplitN(string(body), `"id":`, 2)[1], ",", 2)[0]
		_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":`+id+`,"result":{"content":[{"type":"text","text":"ok"}]}}`)
	}))
	defer up.Close()
	gw := startGateway(b, up.URL+"/mcp", exchangetest.Config("sample.json"))
	requests := map[string]string{
		"tools_call":        `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"tasks.update","arguments":{"id":"T1"}}}`,
		"moving_tools_call": `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"cart.add_item","arguments":{"sku":"A"}}}`,
	}
	for _, name := range []string{"tools_call", "moving_tools_call"} {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				req, _ := http.NewRequest("POST", gw, strings.NewReader(requests[name]))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Accept", "application/json, text/event-stream")
				req.Header.Set("MCP-Protocol-Version", "2025-06-18")
				req.Header.Set("Mcp-Session-Id", "s1")
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					b.Fatalf("HTTP %d", resp.StatusCode)
				}
			}
		})
	}
}

// BenchmarkNodeHost_answerSize is examples/extism-go's BenchmarkExchange_answerSize on
// gateway.mjs: a gated tools/call answered with 1 KB or 32 KB of JSON, through the module's
// raw entry (entry=raw, what gateway.mjs uses) and through the named exports
// (entry=named_exports, --named-exports), in one run.
//
//	go test ./examples/extism-node -run '^$' -bench NodeHost_answerSize -benchtime 1000x
func BenchmarkNodeHost_answerSize(b *testing.B) {
	answers := map[string]string{}
	for name, n := range map[string]int{"1KB": 1 << 10, "32KB": 32 << 10} {
		head := `,"result":{"content":[{"type":"text","text":"`
		answers[name] = head + strings.Repeat("x", n-len(`{"jsonrpc":"2.0","id":7`)-len(head)-len(`"}]}}`)) + `"}]}}`
	}
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		id := strings.SplitN(strings.SplitN(string(body), `"id":`, 2)[1], ",", 2)[0]
		_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":`+id+answers[r.URL.Query().Get("size")])
	}))
	defer up.Close()
	cfg := exchangetest.Config("sample.json")
	urls := map[string]string{
		"raw":           startGateway(b, up.URL+"/mcp", cfg),
		"named_exports": startGateway(b, up.URL+"/mcp", cfg, "--named-exports"),
	}
	request := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"tasks.update","arguments":{"id":"T1"}}}`
	for range 2 {
		for _, size := range []string{"1KB", "32KB"} {
			for _, entry := range []string{"named_exports", "raw"} {
				b.Run("entry="+entry+"/answer_"+size, func(b *testing.B) {
					var times []time.Duration
					for b.Loop() {
						t0 := time.Now()
						req, _ := http.NewRequest("POST", urls[entry]+"?size="+size, strings.NewReader(request))
						req.Header.Set("Content-Type", "application/json")
						req.Header.Set("Accept", "application/json, text/event-stream")
						req.Header.Set("MCP-Protocol-Version", "2025-06-18")
						req.Header.Set("Mcp-Session-Id", "s1")
						resp, err := http.DefaultClient.Do(req)
						if err != nil {
							b.Fatal(err)
						}
						n, _ := io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
						if resp.StatusCode != 200 || n < int64(len(answers[size])) {
							b.Fatalf("HTTP %d, %d bytes", resp.StatusCode, n)
						}
						times = append(times, time.Since(t0))
					}
					slices.Sort(times)
					b.ReportMetric(float64(times[len(times)/2].Nanoseconds()), "p50-ns/op")
					b.ReportMetric(float64(times[0].Nanoseconds()), "min-ns/op")
				})
			}
		}
	}
}
