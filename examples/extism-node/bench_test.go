package extismnode

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

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
