package gateway_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stategate/stategate/host/demo"
	"github.com/stategate/stategate/host/gateway"
	"github.com/stategate/stategate/host/store"
	"github.com/stategate/stategate/host/wasmrt"
)

// BenchmarkGatewayCall measures the gateway's own work for one tools/call, without
// sockets: the request goes to ServeHTTP directly and the upstream is a handler behind a
// RoundTripper (the MCP server of BenchmarkGatewayPaths' list rows, answering in process).
// What is left is what the gateway adds to a proxy: the flow, the engine calls, the store,
// the header conversions, the worker; its allocations are exact (run with -benchmem), its
// time far steadier than the socket rows' on a busy machine.
//
//	go test ./host/gateway -run '^$' -bench GatewayCall -benchmem
func BenchmarkGatewayCall(b *testing.B) {
	for _, row := range []struct {
		name, body string
		config     []byte
	}{
		{"ungated", ungatedCallBody, pathsConfig},
		{"gated_memory", gatedCallBody, pathsConfig},
		// the demo's configuration (limits, a Cache-Control default, a workflow the call is
		// not in): the decorating row of the peers benchmark (testharness/peers)
		{"decorating", ungatedCallBody, demo.Config()},
	} {
		b.Run(row.name, func(b *testing.B) {
			ctx := context.Background()
			pool, err := wasmrt.NewPool(ctx, pluginRuntime(b), row.config, wasmrt.PoolOptions{Size: 4})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { pool.Close(ctx) })
			up, _ := url.Parse("http://upstream.test/mcp")
			g, err := gateway.New(gateway.Options{Upstream: up, Plugin: pool, Config: row.config,
				Store: store.NewMemory(store.Options{}), Transport: handlerTransport{newChangingList(10, true)}})
			if err != nil {
				b.Fatal(err)
			}
			send := func(sid, body string) *httptest.ResponseRecorder {
				r := httptest.NewRequest(http.MethodPost, "http://gateway.test/mcp", strings.NewReader(body))
				r.Header.Set("Content-Type", "application/json")
				r.Header.Set("Accept", "application/json, text/event-stream")
				if sid != "" {
					r.Header.Set("Mcp-Session-Id", sid)
				}
				w := httptest.NewRecorder()
				g.ServeHTTP(w, r)
				return w
			}
			sid := send("", `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}`).Header().Get("Mcp-Session-Id")
			send(sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
			send(sid, listBody)
			if w := send(sid, row.body); w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `"ok"`) {
				b.Fatalf("%s: %d %s", row.name, w.Code, w.Body)
			}
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := processCPU()
			for i := 0; i < b.N; i++ {
				send(sid, row.body)
			}
			b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op")
		})
	}
}

// handlerTransport answers every request with its handler, in process.
type handlerTransport struct{ h http.Handler }

func (t handlerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	w := httptest.NewRecorder()
	t.h.ServeHTTP(w, r)
	resp := w.Result()
	resp.Request = r
	return resp, nil
}

// processCPU is the CPU time the process has used (user and system): on a machine shared
// with other work, the work a benchmark's loop did, whatever the wait for a core.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
