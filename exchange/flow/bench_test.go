package flow_test

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stategate/stategate/exchange"
	"github.com/stategate/stategate/exchange/admission"
	"github.com/stategate/stategate/exchange/cache"
	"github.com/stategate/stategate/exchange/exchangetest"
	"github.com/stategate/stategate/exchange/flow"
	"github.com/stategate/stategate/exchange/kvstate"
	"github.com/stategate/stategate/plugin/engine"
)

// BenchmarkFlow_answerSize measures, natively, the exchange's own work for a decorating
// tools/call (the sample configuration's tasks.update: an invalidation block, a response
// limit) whose answer is 1 KB or 32 KB: the request through the flow, the answer fed whole,
// the engine in process. It is the exchange module's work on examples/extism-go's
// BenchmarkExchange_answerSize without the Wasm and the host's I/O, so a profile of it
// (-cpuprofile) shows the core's passes over the answer.
//
//	go test ./exchange/flow -run '^$' -bench Flow_answerSize -benchmem
func BenchmarkFlow_answerSize(b *testing.B) {
	cfg := exchangetest.Config("sample.json")
	e, err := engine.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	st := &kvstate.State{KV: kv{}}
	core := exchange.New(exchange.Options{Plugin: engineCalls{e}, State: st, Config: cfg,
		NewCache: func(l cache.Limits) cache.Cache { return cache.NewMemory(l, nil) }})
	f := flow.New(flow.Options{Core: core, Busy: st.TakeBusy, Origins: admission.OriginPolicy{Loopback: true}})
	request := []byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"tasks.update","arguments":{"id":"T1"}}}`)
	hdr := flow.Headers{{"Host", "127.0.0.1"}, {"Content-Type", "application/json"},
		{"Accept", "application/json, text/event-stream"}, {"Mcp-Protocol-Version", "2025-06-18"}, {"Mcp-Session-Id", "s1"}}
	upHdr := flow.Headers{{"Content-Type", "application/json"}}
	for _, size := range []struct {
		name string
		n    int
	}{{"1KB", 1 << 10}, {"32KB", 32 << 10}} {
		head := `{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"`
		answer := head + strings.Repeat("x", size.n-len(head)-len(`"}]}}`)) + `"}]}}`
		b.Run("answer_"+size.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(answer)))
			cpu0 := processCPU()
			for b.Loop() {
				d := f.Request(context.Background(), flow.Request{Method: "POST", Path: "/mcp", Headers: hdr, Body: request})
				if d.Do != flow.DoForward || d.Open == nil {
					b.Fatalf("decision %q %s", d.Do, d.Body)
				}
				out := d.Open.Answer(200, upHdr, []byte(answer), false)
				if !out.End || out.Status != 200 || len(out.Body) < len(answer) || !strings.Contains(string(out.Body), "Cache invalidated") {
					b.Fatalf("%d %.300s", out.Status, out.Body)
				}
			}
			b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op")
		})
	}
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
