package wasmrt

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stategate/stategate/internal/benchinput"
	"github.com/stategate/stategate/internal/testenv"

	"github.com/stategate/stategate/abi"
	"github.com/stategate/stategate/plugin/engine"
)

// A tiny Wasm encoder for fixture modules: enough for exports with trivial bodies.

type fixtureFunc struct {
	export  string
	params  []byte // value types: 0x7f i32, 0x7e i64
	results []byte
	body    []byte // instructions without the final end
}

type fixtureImport struct{ module, name string }

func uleb(n int) []byte {
	var b []byte
	for {
		c := byte(n & 0x7f)
		n >>= 7
		if n != 0 {
			b = append(b, c|0x80)
			continue
		}
		return append(b, c)
	}
}

func str(s string) []byte { return append(uleb(len(s)), s...) }

func section(id byte, items ...[]byte) []byte {
	content := uleb(len(items))
	for _, it := range items {
		content = append(content, it...)
	}
	return append(append([]byte{id}, uleb(len(content))...), content...)
}

func fixture(funcs []fixtureFunc, imports []fixtureImport) []byte {
	m := []byte{0, 'a', 's', 'm', 1, 0, 0, 0}
	var types, fnIdx, exports, codes, imps [][]byte
	// imports: all of type () -> ()
	types = append(types, []byte{0x60, 0, 0})
	for _, im := range imports {
		imps = append(imps, append(append(str(im.module), str(im.name)...), 0x00, 0x00))
	}
	for i, f := range funcs {
		t := append([]byte{0x60}, uleb(len(f.params))...)
		t = append(t, f.params...)
		t = append(t, uleb(len(f.results))...)
		t = append(t, f.results...)
		types = append(types, t)
		fnIdx = append(fnIdx, uleb(i+1))
		exports = append(exports, append(str(f.export), append([]byte{0x00}, uleb(len(imports)+i)...)...))
		body := append([]byte{0x00}, f.body...)
		body = append(body, 0x0b)
		codes = append(codes, append(uleb(len(body)), body...))
	}
	exports = append(exports, append(str("memory"), 0x02, 0x00))
	m = append(m, section(1, types...)...)
	if len(imps) > 0 {
		m = append(m, section(2, imps...)...)
	}
	m = append(m, section(3, fnIdx...)...)
	m = append(m, section(5, []byte{0x00, 0x01})...) // one memory, min 1 page
	m = append(m, section(7, exports...)...)
	m = append(m, section(10, codes...)...)
	return m
}

const (
	tI32 = 0x7f
	tI64 = 0x7e
)

var (
	unreachable = []byte{0x00}
	zeroI32     = []byte{0x41, 0x00}
	zeroI64     = []byte{0x42, 0x00}
)

// trapping is a guest that exports the whole ABI and traps in every call.
func trapping() []fixtureFunc {
	fs := []fixtureFunc{}
	for _, fn := range abi.Required {
		fs = append(fs, fixtureFunc{export: fn.Name(), results: []byte{tI32}, body: unreachable})
	}
	return append(fs,
		fixtureFunc{export: abi.ExportRawAlloc, params: []byte{tI32}, results: []byte{tI32}, body: []byte{0x41, 0x10}},
		fixtureFunc{export: abi.ExportRawCall, params: []byte{tI32, tI32, tI32}, results: []byte{tI64}, body: unreachable},
		fixtureFunc{export: abi.ExportInitialize},
	)
}

func TestNew_checksExports(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name    string
		mutate  func([]fixtureFunc) []fixtureFunc
		imports []fixtureImport
		want    []string
	}{
		{
			name:   "complete module loads",
			mutate: func(fs []fixtureFunc) []fixtureFunc { return fs },
		},
		{
			name: "missing export is named",
			mutate: func(fs []fixtureFunc) []fixtureFunc {
				return fs[1:] // drops decorate_tools
			},
			want: []string{"module[fixture.wasm] function[decorate_tools]: not exported"},
		},
		{
			name: "wrong signature is shown",
			mutate: func(fs []fixtureFunc) []fixtureFunc {
				fs[1] = fixtureFunc{export: fs[1].export, params: []byte{tI32}, results: []byte{tI32}, body: unreachable}
				return fs
			},
			want: []string{"function[decorate_result]: signature (i32)->(i32), want ()->(i32)"},
		},
		{
			name: "command module without _initialize is refused",
			mutate: func(fs []fixtureFunc) []fixtureFunc {
				return fs[:len(fs)-1]
			},
			want: []string{"function[_initialize]: not exported: build the plugin as a reactor"},
		},
		{
			name:    "unknown import module is named",
			mutate:  func(fs []fixtureFunc) []fixtureFunc { return fs },
			imports: []fixtureImport{{"env", "surprise"}},
			want:    []string{"import[env.surprise]: unknown module"},
		},
		{
			name:    "unknown extism function is named",
			mutate:  func(fs []fixtureFunc) []fixtureFunc { return fs },
			imports: []fixtureImport{{abi.ExtismModule, "teleport"}},
			want:    []string{"import[extism:host/env.teleport]: not provided by this host"},
		},
		{
			name:    "extism function with the wrong signature is named",
			mutate:  func(fs []fixtureFunc) []fixtureFunc { return fs },
			imports: []fixtureImport{{abi.ExtismModule, "alloc"}},
			want:    []string{"import[extism:host/env.alloc]: signature ()->(), host has (i64)->(i64)"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rt, err := New(ctx, fixture(tc.mutate(trapping()), tc.imports), Options{Name: "fixture.wasm"})
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				rt.Close(ctx)
				return
			}
			if err == nil {
				rt.Close(ctx)
				t.Fatal("module loaded; want an error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestCall_trapDiscardsInstance(t *testing.T) {
	ctx := context.Background()
	rt, err := New(ctx, fixture(trapping(), nil), Options{Name: "trap.wasm"})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close(ctx)
	in, err := rt.Instantiate(ctx, []byte(`{"version":1}`))
	if err != nil {
		t.Fatal(err)
	}
	_, err = in.Call(ctx, abi.FuncCheckLimits, []byte(`{"tool":"x"}`))
	if !errors.Is(err, ErrTrapped) {
		t.Fatalf("error %v does not wrap ErrTrapped", err)
	}
	if !strings.Contains(err.Error(), "function[check_limits]") || !in.Trapped() {
		t.Fatalf("trap not attributed: %v (trapped=%v)", err, in.Trapped())
	}
	if _, err := in.Call(ctx, abi.FuncCheckLimits, nil); !errors.Is(err, ErrTrapped) {
		t.Fatalf("a trapped instance answered again: %v", err)
	}
	// The Extism path traps the same way.
	in2, _ := rt.Instantiate(ctx, nil)
	if _, err := in2.CallExtism(ctx, abi.FuncDecorateTools, []byte(`{}`)); !errors.Is(err, ErrTrapped) {
		t.Fatalf("extism path: %v", err)
	}
}

func builtPlugin(t testing.TB) []byte {
	wasm, err := os.ReadFile("../../build/stategate.wasm")
	if err != nil {
		testenv.Missing(t, fmt.Errorf("build/stategate.wasm: %w (run make build)", err))
	}
	return wasm
}

func TestInstance_matchesNativeEngine(t *testing.T) {
	ctx := context.Background()
	rt, err := New(ctx, builtPlugin(t), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close(ctx)
	cfg, _ := os.ReadFile("../../abi/testdata/config/sample.json")
	eng, err := engine.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	in, err := rt.Instantiate(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	big := `{"tool":"tasks.update","message":{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"` + strings.Repeat("x", 3<<20) + `"}]}}}`
	inputs := []string{
		`{"tool":"cart.pay","session":"s1","states":{"stategate/v1/checkout/session//s1":null}}`,
		``, `null`, `{`, strings.Repeat("[", 100000), big, `{"tool":"` + strings.Repeat("é", 5000) + `"}`,
	}
	for _, input := range inputs {
		for _, fn := range abi.Functions {
			want := eng.Call(fn, []byte(input))
			got, err := in.Call(ctx, fn, []byte(input))
			if err != nil {
				t.Fatalf("%s on %.40q: %v", fn.Name(), input, err)
			}
			if string(got) != string(want) {
				t.Fatalf("%s on %.40q:\n wasm %.300s\n native %.300s", fn.Name(), input, got, want)
			}
		}
	}
}

func TestInstance_missingConfig(t *testing.T) {
	ctx := context.Background()
	rt, err := New(ctx, builtPlugin(t), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close(ctx)
	in, err := rt.Instantiate(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	out, err := in.Call(ctx, abi.FuncCheckLimits, []byte(`{"tool":"x"}`))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), abi.ErrConfigMissing) {
		t.Fatalf("got %s", out)
	}
}

func TestInstance_deadline(t *testing.T) {
	ctx := context.Background()
	rt, err := New(ctx, builtPlugin(t), Options{Interruptible: true})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close(ctx)
	cfg, _ := os.ReadFile("../../abi/testdata/config/sample.json")
	in, err := rt.Instantiate(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	// A large document and an already-expired deadline: the call is abandoned, the
	// instance reported trapped (to be replaced), and no output is trusted.
	dctx, cancel := context.WithDeadline(ctx, time.Now().Add(-time.Second))
	defer cancel()
	big := `{"tool":"tasks.update","message":{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"` + strings.Repeat("y", 8<<20) + `"}]}}}`
	if _, err := in.Call(dctx, abi.FuncDecorateResult, []byte(big)); err == nil {
		t.Fatal("an expired deadline did not stop the call")
	}
	if !in.Trapped() {
		t.Fatal("instance not marked for replacement after an interrupted call")
	}
}

// TestInstance_largeResultsSteadyMemory: a stream of 10 MB results keeps the guest's memory
// steady after the first call and never traps. With buffers released after each large
// call, TinyGo's heap fragmented until the memory doubled to its 256 MB limit and the guest
// trapped on the twelfth call.
func TestInstance_largeResultsSteadyMemory(t *testing.T) {
	ctx := context.Background()
	cfg, err := os.ReadFile("../../abi/testdata/config/sample.json")
	if err != nil {
		t.Fatal(err)
	}
	in := benchinput.CallResult(10 << 20)
	rt, err := New(ctx, builtPlugin(t), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close(ctx)
	inst, err := rt.Instantiate(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	var out []byte
	var warm uint32
	for i := 0; i < 12; i++ {
		if out, err = inst.AppendCall(ctx, out[:0], abi.FuncDecorateResult, in); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		if !bytes.Contains(out, []byte(`"truncated":{"originalBytes"`)) {
			t.Fatalf("call %d: not truncated: %.200s", i, out)
		}
		if i == 1 {
			warm = inst.mem.Size()
		}
	}
	if got := inst.mem.Size(); got != warm {
		t.Errorf("memory grew from %d MB after the second call to %d MB after the twelfth", warm>>20, got>>20)
	}
}
