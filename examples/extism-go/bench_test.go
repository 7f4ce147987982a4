package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stategate/stategate/exchange/admission"
	"github.com/stategate/stategate/exchange/exchangetest"
	"github.com/stategate/stategate/host/gateway"
	"github.com/stategate/stategate/host/store"
	"github.com/stategate/stategate/host/wasmrt"
	"github.com/stategate/stategate/internal/testenv"
)

// BenchmarkExchange measures one request through this host (the exchange module on the
// Extism Go SDK) and, as the baseline of the same run, through the Go gateway
// (host/gateway: the exchange natively, the engine module on the project's wazero host).
// Only the benchmark uses host/gateway; the host itself shares no code with it.
//
//	go test ./examples/extism-go -run '^$' -bench Exchange -benchtime 2000x
func BenchmarkExchange(b *testing.B) {
	module := loadModule(b)
	cfg := exchangetest.Config("sample.json")
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		id := strings.SplitN(strings.SplitN(string(body), `"id":`, 2)[1], ",", 2)[0]
		io.WriteString(w, `{"jsonrpc":"2.0","id":`+id+`,"result":{"content":[{"type":"text","text":"ok"}]}}`)
	}))
	defer up.Close()
	hosts := map[string]http.Handler{}
	h, err := New(context.Background(), Options{Module: module, Config: cfg, Upstream: up.URL + "/mcp"})
	if err != nil {
		b.Fatal(err)
	}
	defer h.Close(context.Background())
	hosts["extism-go"] = h
	engine := "../../build/stategate.wasm"
	testenv.NeedFile(b, engine, "run `make build`")
	if wasm, err := readFile(engine); err == nil {
		rt, err := wasmrt.New(context.Background(), wasm, wasmrt.Options{})
		if err != nil {
			b.Fatal(err)
		}
		pool, err := wasmrt.NewPool(context.Background(), rt, cfg, wasmrt.PoolOptions{Size: 1})
		if err != nil {
			b.Fatal(err)
		}
		u, _ := url.Parse(up.URL + "/mcp")
		gw, err := gateway.New(gateway.Options{Upstream: u, Plugin: pool, Config: cfg, Store: store.NewMemory(store.Options{}),
			Origins: admission.OriginPolicy{Loopback: true}})
		if err != nil {
			b.Fatal(err)
		}
		hosts["gateway"] = gw
	}
	requests := map[string]string{
		"tools_call":        `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"tasks.update","arguments":{"id":"T1"}}}`,
		"moving_tools_call": `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"cart.add_item","arguments":{"sku":"A"}}}`,
	}
	for _, name := range []string{"tools_call", "moving_tools_call"} {
		for _, hn := range []string{"gateway", "extism-go"} {
			srv := httptest.NewServer(hosts[hn])
			b.Run(name+"/"+hn, func(b *testing.B) {
				for b.Loop() {
					req, _ := http.NewRequest("POST", srv.URL+"/mcp", strings.NewReader(requests[name]))
					req.Header.Set("Content-Type", "application/json")
					req.Header.Set("Accept", "application/json, text/event-stream")
					req.Header.Set("MCP-Protocol-Version", "2025-06-18")
					req.Header.Set("Mcp-Session-Id", "s1")
					resp, err := http.DefaultClient.Do(req)
					if err != nil {
						b.Fatal(err)
					}
					body, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					if resp.StatusCode != 200 || !strings.Contains(string(body), `"ok"`) {
						b.Fatalf("%d %s", resp.StatusCode, body)
					}
				}
			})
			srv.Close()
		}
	}
}

func readFile(p string) ([]byte, error) { return os.ReadFile(p) }

// BenchmarkExchange_passThrough measures requests the module passes through, a
// notification (answered 202, no body) and a resources/read (answered 256 KB of JSON),
// without a public URL (rewrite false: the host pipes the answer) and with one (rewrite
// true: the answer's head crosses the module for its WWW-Authenticate challenges, and then
// the module says pipe), interleaved in three rounds of one run. With
// STATEGATE_BASELINE_EXCHANGE naming another build of the module (main's, before pipe), each
// round runs it too, as module=baseline.
//
//	STATEGATE_BASELINE_EXCHANGE=/tmp/old.wasm go test ./examples/extism-go -run '^$' -bench Exchange_passThrough -benchtime 500x
func BenchmarkExchange_passThrough(b *testing.B) {
	modules := map[string][]byte{"current": loadModule(b)}
	order := []string{"current"}
	if p := os.Getenv("STATEGATE_BASELINE_EXCHANGE"); p != "" {
		m, err := os.ReadFile(p)
		if err != nil {
			b.Fatal(err)
		}
		modules["baseline"], order = m, []string{"baseline", "current"}
	}
	big := `{"jsonrpc":"2.0","id":3,"result":{"contents":[{"uri":"file:///big","text":"` + strings.Repeat("0123456789abcdef", 16<<10) + `"}]}}`
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if !strings.Contains(string(body), "resources/read") {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, big)
	}))
	defer up.Close()
	urls := map[string]string{}
	for mod, wasm := range modules {
		for name, public := range map[string]string{"no_public_url": "", "public_url": "https://gw.example"} {
			h, err := New(context.Background(), Options{Module: wasm, Config: exchangetest.Config("sample.json"), Upstream: up.URL + "/mcp", PublicURL: public})
			if err != nil {
				b.Fatal(err)
			}
			defer h.Close(context.Background())
			srv := httptest.NewServer(h)
			defer srv.Close()
			urls[mod+"/"+name] = srv.URL + "/mcp"
		}
	}
	requests := []struct{ name, body string }{
		{"notification", `{"jsonrpc":"2.0","method":"notifications/initialized"}`},
		{"resources_read_256KB", `{"jsonrpc":"2.0","id":3,"method":"resources/read","params":{"uri":"file:///big"}}`},
	}
	for range 3 {
		for _, rq := range requests {
			for _, name := range []string{"no_public_url", "public_url"} {
				for _, mod := range order {
					b.Run("module="+mod+"/"+rq.name+"/"+name, func(b *testing.B) {
						for b.Loop() {
							req, _ := http.NewRequest("POST", urls[mod+"/"+name], strings.NewReader(rq.body))
							req.Header.Set("Content-Type", "application/json")
							req.Header.Set("Accept", "application/json, text/event-stream")
							req.Header.Set("MCP-Protocol-Version", "2025-06-18")
							resp, err := http.DefaultClient.Do(req)
							if err != nil {
								b.Fatal(err)
							}
							n, _ := io.Copy(io.Discard, resp.Body)
							resp.Body.Close()
							if resp.StatusCode/100 != 2 || rq.name != "notification" && n != int64(len(big)) {
								b.Fatalf("status %d, %d bytes", resp.StatusCode, n)
							}
						}
					})
				}
			}
		}
	}
}

// BenchmarkExchange_answerSize measures a gated tools/call whose answer is 1 KB or 32 KB of
// JSON (rewritten by the module: http_answer carries it in, and out again), through this
// host two ways in one run: the named exports, whose input and output go through Extism's
// kernel 8 bytes per host call (entry=named_exports), and the module's stdio entry
// (entry=stdio; the default). What to read is each entry's 32 KB/1 KB ratio.
//
//	go test ./examples/extism-go -run '^$' -bench Exchange_answerSize -benchtime 1000x
func BenchmarkExchange_answerSize(b *testing.B) {
	module := loadModule(b)
	cfg := exchangetest.Config("sample.json")
	answers := map[string]string{}
	for name, n := range map[string]int{"1KB": 1 << 10, "32KB": 32 << 10} {
		head := `,"result":{"content":[{"type":"text","text":"`
		answers[name] = head + strings.Repeat("x", n-len(`{"jsonrpc":"2.0","id":7`)-len(head)-len(`"}]}}`)) + `"}]}}`
	}
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		size := r.URL.Query().Get("size")
		id := strings.SplitN(strings.SplitN(string(body), `"id":`, 2)[1], ",", 2)[0]
		io.WriteString(w, `{"jsonrpc":"2.0","id":`+id+answers[size])
	}))
	defer up.Close()
	request := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"tasks.update","arguments":{"id":"T1"}}}`
	urls := map[string]string{}
	for _, entry := range []string{"named_exports", "stdio"} {
		h, err := New(context.Background(), Options{Module: module, Config: cfg, Upstream: up.URL + "/mcp", NamedExports: entry == "named_exports"})
		if err != nil {
			b.Fatal(err)
		}
		defer h.Close(context.Background())
		if (h.stdio != nil) != (entry == "stdio") {
			b.Fatalf("entry %s: the host did not take it (a module without %s?)", entry, stdioEntry)
		}
		srv := httptest.NewServer(h)
		defer srv.Close()
		urls[entry] = srv.URL + "/mcp"
	}
	for range 2 {
		for _, size := range []string{"1KB", "32KB"} {
			for _, entry := range []string{"named_exports", "stdio"} {
				b.Run("entry="+entry+"/answer_"+size, func(b *testing.B) {
					loopTimed(b, func() {
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
							b.Fatalf("status %d, %d bytes", resp.StatusCode, n)
						}
					})
				})
			}
		}
	}
}

// BenchmarkCall_size measures one call of the module's decorate_result export through the
// Extism Go SDK on a tools/call result of 1 KB and of 32 KB (the engine's work on it is
// small: a few µs per KB), so the figure is mostly moving the bytes in and out: through
// Extism's kernel (entry=named_exports, go-pdk's 8 bytes per host call) and through the
// module's stdio entry (entry=stdio), in one run.
//
//	go test ./examples/extism-go -run '^$' -bench Call_size -benchtime 2000x
func BenchmarkCall_size(b *testing.B) {
	module := loadModule(b)
	cfg := exchangetest.Config("sample.json")
	inputs := map[string][]byte{}
	for name, n := range map[string]int{"1KB": 1 << 10, "32KB": 32 << 10} {
		head := `{"tool":"tasks.get","message":{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"`
		inputs[name] = []byte(head + strings.Repeat("x", n-len(head)-len(`"}]}}}`)) + `"}]}}}`)
	}
	hosts := map[string]*Host{}
	for _, entry := range []string{"named_exports", "stdio"} {
		h, err := New(context.Background(), Options{Module: module, Config: cfg, Upstream: "http://127.0.0.1:1/mcp", NamedExports: entry == "named_exports"})
		if err != nil {
			b.Fatal(err)
		}
		defer h.Close(context.Background())
		hosts[entry] = h
	}
	for range 2 {
		for _, size := range []string{"1KB", "32KB"} {
			var want []byte
			for _, entry := range []string{"named_exports", "stdio"} {
				b.Run("entry="+entry+"/result_"+size, func(b *testing.B) {
					loopTimed(b, func() {
						out, err := hosts[entry].invoke("decorate_result", inputs[size])
						if err != nil || len(out) < len(inputs[size]) {
							b.Fatalf("%v: %.200s", err, out)
						}
						if want == nil {
							want = out
						} else if !bytes.Equal(out, want) {
							b.Fatalf("entry %s: the output differs from the other entry's", entry)
						}
					})
				})
			}
		}
	}
}

// loopTimed runs f as b's loop and reports, beside the mean, the median and the least time
// of one iteration (p50-ns/op, min-ns/op): on a machine shared with other work the mean
// moves with the load, the median and the least much less.
func loopTimed(b *testing.B, f func()) {
	var times []time.Duration
	for b.Loop() {
		t0 := time.Now()
		f()
		times = append(times, time.Since(t0))
	}
	slices.Sort(times)
	b.ReportMetric(float64(times[len(times)/2].Nanoseconds()), "p50-ns/op")
	b.ReportMetric(float64(times[0].Nanoseconds()), "min-ns/op")
}
