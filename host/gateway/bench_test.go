package gateway_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stategate/stategate/exchange/listcache"
	"github.com/stategate/stategate/host/demo"
	"github.com/stategate/stategate/host/gateway"
	"github.com/stategate/stategate/host/store"
	"github.com/stategate/stategate/host/wasmrt"
)

// Gateway benchmarks: tools/call and tools/list (1000 tools) straight to the upstream, through
// a do-nothing httputil.ReverseProxy, and through the gateway, in one run. Latency
// percentiles are reported as p50-us and p99-us; the Parallel variants measure throughput.
//
//	go test ./host/gateway -run '^$' -bench Gateway -benchtime 2000x

// bigUpstream is an MCP server (official SDK, JSON responses) with the demo tools plus
// n extra tools.
func bigUpstream(n int) http.Handler {
	srv := demo.NewServer(demo.Options{})
	type in struct {
		ID string `json:"id" jsonschema:"record id"`
	}
	for i := 0; i < n; i++ {
		mcp.AddTool(srv, &mcp.Tool{Name: fmt.Sprintf("records.op%d", i), Description: fmt.Sprintf("Operation %d on records. Returns the affected records.", i)},
			func(context.Context, *mcp.CallToolRequest, in) (*mcp.CallToolResult, any, error) {
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil, nil
			})
	}
	return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{JSONResponse: true})
}

type target struct {
	name string
	url  string
	// stream: the session's GET stream is held open (the gateway's copy of the list
	// answers a session's tools/list only while it relays that stream).
	stream bool
}

func benchTargets(b *testing.B) []target {
	up := httptest.NewServer(bigUpstream(1000 - 13))
	b.Cleanup(up.Close)
	upURL, _ := url.Parse(up.URL + "/mcp")
	rp := httptest.NewServer(&httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(&url.URL{Scheme: "http", Host: upURL.Host})
			pr.Out.Host = ""
		},
		FlushInterval: -1,
	})
	b.Cleanup(rp.Close)
	rt := pluginRuntime(b)
	ctx := context.Background()
	pool, err := wasmrt.NewPool(ctx, rt, demo.Config(), wasmrt.PoolOptions{Size: 8})
	if err != nil {
		b.Fatal(err)
	}
	gw, err := gateway.New(gateway.Options{Upstream: upURL, Plugin: pool, Config: demo.Config(), Store: store.NewMemory(store.Options{})})
	if err != nil {
		b.Fatal(err)
	}
	gs := httptest.NewServer(gw)
	b.Cleanup(gs.Close)
	// The same gateway with a response cache in which users.get is immutable: its
	// tools_call row is a cache hit (the gate and the limits still run).
	cached := []byte(strings.Replace(string(demo.Config()), `"policies": [`,
		`"policies": [{"match": "users.get", "cacheControl": "immutable"},`, 1))
	cached = []byte(strings.Replace(string(cached), `"version": 1,`, `"version": 1, "cache": {},`, 1))
	cpool, err := wasmrt.NewPool(ctx, rt, cached, wasmrt.PoolOptions{Size: 8})
	if err != nil {
		b.Fatal(err)
	}
	cgw, err := gateway.New(gateway.Options{Upstream: upURL, Plugin: cpool, Config: cached, Store: store.NewMemory(store.Options{})})
	if err != nil {
		b.Fatal(err)
	}
	cs := httptest.NewServer(cgw)
	b.Cleanup(cs.Close)
	probeUpstream(b, cgw, upURL.String())
	// The same gateway with its copy of the upstream's list on: its tools_list row is
	// answered from the copy (the decoration still runs).
	lpool, err := wasmrt.NewPool(ctx, rt, demo.Config(), wasmrt.PoolOptions{Size: 8})
	if err != nil {
		b.Fatal(err)
	}
	lgw, err := gateway.New(gateway.Options{Upstream: upURL, Plugin: lpool, Config: demo.Config(), Store: store.NewMemory(store.Options{}),
		ListCache: &listcache.Config{}})
	if err != nil {
		b.Fatal(err)
	}
	lup := httptest.NewServer(declaresListChanged(bigUpstream(1000 - 13)))
	b.Cleanup(lup.Close)
	lupURL, _ := url.Parse(lup.URL + "/mcp")
	lgw, err = gateway.New(gateway.Options{Upstream: lupURL, Plugin: lpool, Config: demo.Config(), Store: store.NewMemory(store.Options{}),
		ListCache: &listcache.Config{}})
	if err != nil {
		b.Fatal(err)
	}
	ls := httptest.NewServer(lgw)
	b.Cleanup(ls.Close)
	return []target{{name: "direct", url: up.URL + "/mcp"}, {name: "reverseproxy", url: rp.URL + "/mcp"}, {name: "gateway", url: gs.URL + "/mcp"},
		{name: "gateway_cache_hit", url: cs.URL + "/mcp"}, {name: "gateway_list_copy", url: ls.URL + "/mcp", stream: true}}
}

// declaresListChanged makes h's initialize result declare capabilities.tools.listChanged
// (the demo server declares tools without it, and the gateway keeps no copy of a session's
// list whose server would not tell it of a change). The benchmark's list never changes.
func declaresListChanged(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost { // the GET stream: as it comes
			h.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		body := rec.Body.Bytes()
		if bytes.Contains(body, []byte(`"protocolVersion"`)) {
			body = bytes.Replace(body, []byte(`"tools":{}`), []byte(`"tools":{"listChanged":true}`), 1)
		}
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.Header().Del("Content-Length")
		w.WriteHeader(rec.Code)
		w.Write(body)
	})
}

// holdStream opens session sid's GET stream and holds it until the benchmark ends.
func holdStream(b *testing.B, url, sid string) {
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2025-06-18")
	req.Header.Set("Mcp-Session-Id", sid)
	resp, err := benchClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		b.Fatalf("GET stream: %d", resp.StatusCode)
	}
	b.Cleanup(func() { cancel(); resp.Body.Close() })
}

var benchClient = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}

func post(b *testing.B, url, sid, body string) int {
	status, n := postTo(b, url, sid, body, io.Discard)
	if status != http.StatusOK && status != http.StatusAccepted {
		b.Fatalf("status %d", status)
	}
	return int(n)
}

// postBody posts body and returns the answer, which must be a 200.
func postBody(b *testing.B, url, sid, body string) string {
	var out strings.Builder
	if status, _ := postTo(b, url, sid, body, &out); status != http.StatusOK {
		b.Fatalf("status %d: %s", status, out.String())
	}
	return out.String()
}

// postTo posts one JSON-RPC message in session sid, copies the answer to w and returns
// the status and the answer's length.
func postTo(b *testing.B, url, sid, body string, w io.Writer) (int, int64) {
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2025-06-18")
	req.Header.Set("Mcp-Session-Id", sid)
	resp, err := benchClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	n, _ := io.Copy(w, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, n
}

func benchSession(b *testing.B, url string) string {
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := benchClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	sid := resp.Header.Get("Mcp-Session-Id")
	post(b, url, sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return sid
}

const (
	callBody = `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"users.get","arguments":{"id":"u1"}}}`
	listBody = `{"jsonrpc":"2.0","id":8,"method":"tools/list"}`
)

func reportPercentiles(b *testing.B, d []time.Duration) {
	if len(d) == 0 {
		return
	}
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	b.ReportMetric(float64(d[len(d)/2].Microseconds()), "p50-us")
	b.ReportMetric(float64(d[len(d)*99/100].Microseconds()), "p99-us")
}

func BenchmarkGateway(b *testing.B) {
	targets := benchTargets(b)
	for _, req := range []struct{ name, body string }{{"tools_call", callBody}, {"tools_list_1000", listBody}} {
		for _, tg := range targets {
			b.Run(req.name+"/"+tg.name, func(b *testing.B) {
				sid := benchSession(b, tg.url)
				if tg.stream {
					holdStream(b, tg.url, sid)
				}
				post(b, tg.url, sid, req.body) // warm
				lat := make([]time.Duration, 0, b.N)
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					start := time.Now()
					post(b, tg.url, sid, req.body)
					lat = append(lat, time.Since(start))
				}
				b.StopTimer()
				reportPercentiles(b, lat)
			})
		}
	}
}

var seq atomic.Int64

func BenchmarkGatewayParallel(b *testing.B) {
	targets := benchTargets(b)
	for _, tg := range targets {
		b.Run("tools_call/"+tg.name, func(b *testing.B) {
			sid := benchSession(b, tg.url)
			b.SetParallelism(8)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					id := seq.Add(1)
					post(b, tg.url, sid, strings.Replace(callBody, `"id":7`, fmt.Sprintf(`"id":%d`, id), 1))
				}
			})
		})
	}
}
