package gateway_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/stategate/stategate/host/gateway"
	"github.com/stategate/stategate/host/store"
	"github.com/stategate/stategate/host/wasmrt"
)

// BenchmarkGatewayList measures the gateway's own work for one tools/list of 1000 tools,
// without sockets (BenchmarkGatewayCall's set-up): the upstream's list changes on every
// request, by one tool's description (one_changed: the memo of decorated tools decorates
// that tool alone) or wholly (uncached). The upstream row is the in-process upstream
// alone, the floor under the others.
//
//	go test ./host/gateway -run '^$' -bench GatewayList -benchmem
func BenchmarkGatewayList(b *testing.B) {
	for _, row := range []struct {
		name     string
		one, raw bool
	}{
		{"upstream", true, true},
		{"one_changed", true, false},
		{"uncached", false, false},
	} {
		b.Run(row.name, func(b *testing.B) {
			ctx := context.Background()
			up := newChangingList(1000, row.one)
			var h http.Handler = up
			if !row.raw {
				pool, err := wasmrt.NewPool(ctx, pluginRuntime(b), pathsConfig, wasmrt.PoolOptions{Size: 4})
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { pool.Close(ctx) })
				u, _ := url.Parse("http://upstream.test/mcp")
				g, err := gateway.New(gateway.Options{Upstream: u, Plugin: pool, Config: pathsConfig,
					Store: store.NewMemory(store.Options{}), Transport: handlerTransport{up}})
				if err != nil {
					b.Fatal(err)
				}
				h = g
			}
			send := func(sid, body string) *httptest.ResponseRecorder {
				r := httptest.NewRequest(http.MethodPost, "http://gateway.test/mcp", strings.NewReader(body))
				r.Header.Set("Content-Type", "application/json")
				r.Header.Set("Accept", "application/json, text/event-stream")
				if sid != "" {
					r.Header.Set("Mcp-Session-Id", sid)
				}
				w := httptest.NewRecorder()
				h.ServeHTTP(w, r)
				return w
			}
			sid := send("", `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}`).Header().Get("Mcp-Session-Id")
			send(sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
			a, c := send(sid, listBody), send(sid, listBody)
			if a.Code != http.StatusOK || c.Code != http.StatusOK || a.Body.String() == c.Body.String() || !strings.Contains(c.Body.String(), "records.op999") {
				b.Fatalf("%s: %d %d: the list did not change, or is not there", row.name, a.Code, c.Code)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				send(sid, listBody)
			}
		})
	}
}
