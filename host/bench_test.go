package host

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/stategate/stategate/abi"
	"github.com/stategate/stategate/plugin/engine"
)

// BenchmarkCall measures one plugin call through the raw entry and through the Extism
// exports (a 1 KB check_limits input), beside the native engine: the difference is the
// host's per-call overhead.
func BenchmarkCall(b *testing.B) {
	ctx := context.Background()
	cfg, _ := os.ReadFile("../abi/testdata/config/sample.json")
	in := []byte(`{"tool":"orders.submit","arguments":{"customer":"c-42","items":["sku-0000","sku-0001","sku-0002","sku-0003","sku-0004","sku-0005","sku-0006","sku-0007","sku-0008","sku-0009","sku-0010","sku-0011","sku-0012","sku-0013","sku-0014","sku-0015","sku-0016","sku-0017","sku-0018","sku-0019","sku-0020","sku-0021","sku-0022","sku-0023","sku-0024","sku-0025","sku-0026","sku-0027","sku-0028","sku-0029","sku-0030","sku-0031","sku-0032","sku-0033","sku-0034","sku-0035","sku-0036","sku-0037","sku-0038","sku-0039","sku-0040","sku-0041","sku-0042","sku-0043","sku-0044","sku-0045","sku-0046","sku-0047","sku-0048","sku-0049","sku-0050","sku-0051","sku-0052","sku-0053","sku-0054","sku-0055","sku-0056","sku-0057","sku-0058","sku-0059"],"note":"leave at the door"},"session":"s1"}`)
	eng, err := engine.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	// The smallest round trip: an input the engine rejects at once, so the time is the
	// host's (alloc, copy in, call, copy out) and the guest's entry.
	b.Run("wasm/roundtrip_minimal", func(b *testing.B) {
		rt, err := New(ctx, builtPlugin(b), Options{})
		if err != nil {
			b.Fatal(err)
		}
		defer rt.Close(ctx)
		inst, err := rt.Instantiate(ctx, cfg)
		if err != nil {
			b.Fatal(err)
		}
		var buf []byte
		for i := 0; i < b.N; i++ {
			if buf, err = inst.AppendCall(ctx, buf[:0], abi.FuncCheckLimits, []byte(`1`)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("native", func(b *testing.B) {
		b.SetBytes(int64(len(in)))
		for i := 0; i < b.N; i++ {
			eng.Call(abi.FuncCheckLimits, in)
		}
	})
	wasm := builtPlugin(b)
	for _, c := range []struct {
		name          string
		interruptible bool
		extism        bool
		deadline      bool
	}{
		{"wasm/raw", false, false, false},
		{"wasm/raw_interruptible_deadline", true, false, true},
		{"wasm/raw_interruptible", true, false, false},
		{"wasm/raw_deadline", false, false, true},
		{"wasm/extism", false, true, false},
	} {
		b.Run(c.name, func(b *testing.B) {
			rt, err := New(ctx, wasm, Options{Interruptible: c.interruptible})
			if err != nil {
				b.Fatal(err)
			}
			defer rt.Close(ctx)
			inst, err := rt.Instantiate(ctx, cfg)
			if err != nil {
				b.Fatal(err)
			}
			var buf []byte
			b.SetBytes(int64(len(in)))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				cctx := ctx
				var cancel context.CancelFunc
				if c.deadline {
					cctx, cancel = context.WithTimeout(ctx, time.Second)
				}
				if c.extism {
					_, err = inst.CallExtism(cctx, abi.FuncCheckLimits, in)
				} else {
					buf, err = inst.AppendCall(cctx, buf[:0], abi.FuncCheckLimits, in)
				}
				if cancel != nil {
					cancel()
				}
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
