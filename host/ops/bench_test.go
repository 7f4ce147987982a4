package ops_test

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stategate/stategate/host/demo"
	"github.com/stategate/stategate/host/gateway"
	"github.com/stategate/stategate/host/ops"
	"github.com/stategate/stategate/host/store"
	"github.com/stategate/stategate/host/wasmrt"
	"github.com/stategate/stategate/internal/testenv"
)

// BenchmarkOpsCost measures what the operations surface costs a tools/call: two gateways
// on the same plugin and upstream, one plain, one with metrics (reporter, publisher and
// request histogram), the bus, the admin listener and one SSE subscriber reading the
// stream. Calls alternate between them in one loop, so both see the same machine; the
// report gives each p50 and their ratio (the bound: within 1.05x).
//
//	go test ./host/ops -run '^$' -bench OpsCost -benchtime 2000x
func BenchmarkOpsCost(b *testing.B) {
	testenv.NeedFile(b, "../../build/stategate.wasm", "run `make build`")
	wasm, err := os.ReadFile("../../build/stategate.wasm")
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	rt, err := wasmrt.New(ctx, wasm, wasmrt.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer rt.Close(ctx)
	up := httptest.NewServer(demo.Handler(demo.Options{JSONResponse: true}))
	defer up.Close()
	upURL, _ := url.Parse(up.URL + "/mcp")
	newGW := func(o gateway.Options) *gateway.Gateway {
		pool, err := wasmrt.NewPool(ctx, rt, demo.Config(), wasmrt.PoolOptions{Size: 4})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { pool.Close(ctx) })
		o.Upstream, o.Plugin, o.Config, o.Store = upURL, pool, demo.Config(), store.NewMemory(store.Options{})
		gw, err := gateway.New(o)
		if err != nil {
			b.Fatal(err)
		}
		return gw
	}
	off := httptest.NewServer(newGW(gateway.Options{}))
	defer off.Close()

	bus := ops.NewBus()
	var gwOn *gateway.Gateway
	metrics := ops.NewMetrics(func(n string) bool { return gwOn.Listed(n) }, nil)
	bus.OnDrop = metrics.Dropped
	pub := ops.Publishers{metrics, bus}
	gwOn = newGW(gateway.Options{Publisher: pub, Reporter: metrics})
	on := httptest.NewServer(metrics.Instrument(gwOn))
	defer on.Close()
	app := ops.NewApp(pub, metrics.AppState)
	app.Health(nil, "bench")
	admin := httptest.NewServer(ops.NewAdmin(ops.AdminOptions{Token: "t", App: app, Bus: bus, Metrics: metrics}))
	defer admin.Close()
	req, _ := http.NewRequest("GET", admin.URL+"/admin/events", nil)
	req.Header.Set("Authorization", "Bearer t")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	received := 0
	go func() {
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "data: ") {
				received++
			}
		}
	}()

	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 8}}
	post := func(u, sid, body string) string {
		req, _ := http.NewRequest(http.MethodPost, u, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("MCP-Protocol-Version", "2025-06-18")
		if sid != "" {
			req.Header.Set("Mcp-Session-Id", sid)
		}
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			b.Fatalf("status %d", resp.StatusCode)
		}
		return resp.Header.Get("Mcp-Session-Id")
	}
	session := func(u string) string {
		sid := post(u, "", `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}`)
		post(u, sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
		post(u, sid, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
		return sid
	}
	const call = `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"users.get","arguments":{"id":"u1"}}}`
	offURL, onURL := off.URL+"/mcp", on.URL+"/mcp"
	offSID, onSID := session(offURL), session(onURL)
	post(offURL, offSID, call)
	post(onURL, onSID, call)
	latOff := make([]time.Duration, 0, b.N)
	latOn := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	measure := func(u, sid string, lat *[]time.Duration) {
		start := time.Now()
		post(u, sid, call)
		*lat = append(*lat, time.Since(start))
	}
	for i := 0; i < b.N; i++ { // alternating which goes first, so neither gains from order
		if i%2 == 0 {
			measure(offURL, offSID, &latOff)
			measure(onURL, onSID, &latOn)
		} else {
			measure(onURL, onSID, &latOn)
			measure(offURL, offSID, &latOff)
		}
	}
	b.StopTimer()
	p50 := func(d []time.Duration) float64 {
		sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
		return float64(d[len(d)/2].Nanoseconds()) / 1000
	}
	a, c := p50(latOff), p50(latOn)
	b.ReportMetric(a, "p50-off-us")
	b.ReportMetric(c, "p50-on-us")
	b.ReportMetric(c/a, "p50-ratio")
}
