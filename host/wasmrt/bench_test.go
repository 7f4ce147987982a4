package wasmrt

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/stategate/stategate/abi"
	"github.com/stategate/stategate/internal/benchinput"
	"github.com/stategate/stategate/plugin/engine"
)

// BenchmarkCall measures one plugin call through the raw entry and through the Extism
// exports (a 1 KB check_limits input), beside the native engine: the difference is the
// host's per-call overhead.
func BenchmarkCall(b *testing.B) {
	ctx := context.Background()
	cfg, _ := os.ReadFile("../../abi/testdata/config/sample.json")
	in := benchinput.CheckInput()
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
