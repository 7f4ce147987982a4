package testharness

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/stategate/stategate/internal/benchinput"
	"github.com/stategate/stategate/internal/testenv"

	"github.com/stategate/stategate/abi"
	"github.com/stategate/stategate/host/wasmrt"
	"github.com/stategate/stategate/plugin/engine"
	"github.com/tidwall/gjson"
)

// Benchmarks: each export natively and through the TinyGo module on the project's host
// (raw entry), for 10/100/1000-tool lists and 1 KB/100 KB/1 MB results.
//
//	make bench

func sampleConfig(b testing.TB) []byte {
	cfg, err := os.ReadFile(vectorsDir + "/config/sample.json")
	if err != nil {
		b.Fatal(err)
	}
	return cfg
}

type runner struct {
	name string
	call func(fn abi.Function, in []byte) ([]byte, error)
}

func runners(b *testing.B) []runner { return runnersFor(b, sampleConfig(b)) }

func runnersFor(b *testing.B, cfg []byte) []runner {
	eng, err := engine.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	var nbuf []byte // reused like the guest's output buffer, so both sides pay the same
	rs := []runner{{"native", func(fn abi.Function, in []byte) ([]byte, error) {
		nbuf = eng.AppendCall(nbuf[:0], fn, in)
		return nbuf, nil
	}}}
	wasm, err := os.ReadFile(tinyGoWasm)
	if err != nil {
		if testenv.RequireAll() {
			b.Fatalf("%s: %v", tinyGoWasm, err)
		}
		b.Logf("skipping wasm: %v", err)
		return rs
	}
	ctx := context.Background()
	rt, err := wasmrt.New(ctx, wasm, wasmrt.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { rt.Close(ctx) })
	inst, err := rt.Instantiate(ctx, cfg)
	if err != nil {
		b.Fatal(err)
	}
	var buf []byte
	rs = append(rs, runner{"wasm", func(fn abi.Function, in []byte) ([]byte, error) {
		var err error
		buf, err = inst.AppendCall(ctx, buf[:0], fn, in)
		return buf, err
	}})
	return rs
}

func bench(b *testing.B, fn abi.Function, cases []struct {
	name string
	in   []byte
}) {
	benchWith(b, runners(b), fn, cases)
}

func benchWith(b *testing.B, rs []runner, fn abi.Function, cases []struct {
	name string
	in   []byte
}) {
	for _, r := range rs {
		for _, c := range cases {
			b.Run(r.name+"/"+c.name, func(b *testing.B) {
				out, err := r.call(fn, c.in)
				if err != nil {
					b.Fatal(err)
				}
				if strings.HasPrefix(string(out), `{"error"`) || strings.HasPrefix(string(out), `{"needState"`) {
					b.Fatalf("unexpected answer: %.300s", out)
				}
				b.SetBytes(int64(len(c.in)))
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if _, err := r.call(fn, c.in); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

type benchCase = struct {
	name string
	in   []byte
}

func BenchmarkDecorateTools(b *testing.B) {
	bench(b, abi.FuncDecorateTools, []benchCase{
		{"10_tools", benchinput.ToolsList(10)}, {"100_tools", benchinput.ToolsList(100)}, {"1000_tools", benchinput.ToolsList(1000)},
	})
}

// BenchmarkDecorateTools_fromAnnotations: the same lists under stateSync.fromAnnotations,
// once with no record yet (the answer carries the whole record to write) and once with
// the record the list already taught (nothing to write).
func BenchmarkDecorateTools_fromAnnotations(b *testing.B) {
	cfg, err := os.ReadFile(vectorsDir + "/config/annotations.json")
	if err != nil {
		b.Fatal(err)
	}
	eng, err := engine.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	var cases []benchCase
	for _, n := range []int{100, 1000} {
		list := benchinput.ToolsList(n)
		list = list[:strings.LastIndex(string(list), `,"states":`)]
		learning := append(append([]byte(nil), list...), `,"states":{"stategate/annotations/v1/":null}}`...)
		rec := gjson.GetBytes(eng.Call(abi.FuncDecorateTools, learning), "states").Raw
		if rec == "" {
			b.Fatal("the list wrote no record")
		}
		known := append(append([]byte(nil), list...), `,"states":`+rec+`}`...)
		cases = append(cases, benchCase{fmt.Sprintf("%d_tools/learning", n), learning}, benchCase{fmt.Sprintf("%d_tools/known", n), known})
	}
	benchWith(b, runnersFor(b, cfg), abi.FuncDecorateTools, cases)
}

func BenchmarkDecorateResult(b *testing.B) {
	bench(b, abi.FuncDecorateResult, []benchCase{
		{"1KB", benchinput.CallResult(1 << 10)}, {"100KB", benchinput.CallResult(100 << 10)}, {"1MB", benchinput.CallResult(1 << 20)}, {"10MB", benchinput.CallResult(10 << 20)},
	})
}

func BenchmarkCheckLimits(b *testing.B) {
	bench(b, abi.FuncCheckLimits, []benchCase{{"1KB", benchinput.CheckInput()}})
}

// BenchmarkTransition: a bound tool's first call (no snapshot yet), and a call as the
// gateway sends it once the workflow has a snapshot (scope, arguments, outcome).
func BenchmarkTransition(b *testing.B) {
	eng, err := engine.New(sampleConfig(b))
	if err != nil {
		b.Fatal(err)
	}
	const key = "stategate/v1/checkout/session//s1"
	first := `{"tool":"cart.add_item","session":"s1","states":{"` + key + `":null}}`
	snap := gjson.GetBytes(eng.Call(abi.FuncTransition, []byte(first)), "states."+gjson.Escape(key)).Raw
	if snap == "" {
		b.Fatal("the first call wrote no snapshot")
	}
	bench(b, abi.FuncTransition, []benchCase{
		{"bound", []byte(first)},
		{"bound_stored", []byte(`{"session":"s1","principal":"","protocolVersion":"2025-06-18","tool":"cart.add_item","arguments":{"id":"r1","qty":2},"isError":false,"states":{"` + key + `":` + snap + `}}`)},
	})
}

// BenchmarkTransition_statechart: transitions of abi/testdata/config/statechart.json, a
// statechart with compound and parallel states and guards: a guarded array picked by the
// result, one region of a parallel state, and the step that completes it (onDone).
func BenchmarkTransition_statechart(b *testing.B) {
	cfg, err := os.ReadFile(vectorsDir + "/config/statechart.json")
	if err != nil {
		b.Fatal(err)
	}
	const key = `"stategate/v1/order/session//s1"`
	snap := func(state string) string {
		return `{"` + key[1:len(key)-1] + `":{"workflow":"order","fingerprint":"243632d4a03b3e4323f9464733796849","state":` + state + `,"seq":3}}`
	}
	benchWith(b, runnersFor(b, cfg), abi.FuncTransition, []benchCase{
		{"guarded_by_result", []byte(`{"tool":"order.verify","session":"s1","result":{"status":"ok"},"states":` + snap(`"paid"`) + `}`)},
		{"parallel_region", []byte(`{"tool":"order.ship","session":"s1","states":` + snap(`{"fulfilment":{"shipping":"packing","invoicing":"draft"}}`) + `}`)},
		{"parallel_done", []byte(`{"tool":"order.invoice","session":"s1","states":` + snap(`{"fulfilment":{"shipping":"shipped","invoicing":"draft"}}`) + `}`)},
	})
}
