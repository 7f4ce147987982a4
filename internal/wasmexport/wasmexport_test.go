package wasmexport

import (
	"context"
	"slices"
	"testing"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
)

// module is (module (func $a (result i32) i32.const 1) (func $b (result i32) i32.const 2)
// (memory 1) (export "a" (func $a)) (export "b" (func $b)) (export "memory" (memory 0))).
var module = []byte{
	0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00,
	0x01, 0x05, 0x01, 0x60, 0x00, 0x01, 0x7f, // type: () -> i32
	0x03, 0x03, 0x02, 0x00, 0x00, // func: two of type 0
	0x05, 0x03, 0x01, 0x00, 0x01, // memory: min 1
	0x07, 0x12, 0x03, 0x01, 'a', 0x00, 0x00, 0x01, 'b', 0x00, 0x01, 0x06, 'm', 'e', 'm', 'o', 'r', 'y', 0x02, 0x00,
	0x0a, 0x0b, 0x02, 0x04, 0x00, 0x41, 0x01, 0x0b, 0x04, 0x00, 0x41, 0x02, 0x0b, // code
}

// call compiles the module with wazero (which validates it) and calls each export.
func call(t *testing.T, m []byte, names ...string) []uint64 {
	t.Helper()
	ctx := context.Background()
	r := wazero.NewRuntime(ctx)
	defer r.Close(ctx)
	mod, err := r.Instantiate(ctx, m)
	if err != nil {
		t.Fatalf("instantiate: %v", err)
	}
	var out []uint64
	for _, n := range names {
		f := mod.ExportedFunction(n)
		if f == nil {
			t.Fatalf("no export %q (exports %v)", n, exports(mod))
		}
		res, err := f.Call(ctx)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, res[0])
	}
	return out
}

func exports(m api.Module) []string {
	var out []string
	for n := range m.ExportedFunctionDefinitions() {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

func TestAlias(t *testing.T) {
	m, err := Alias(module, "b", "c")
	if err != nil {
		t.Fatal(err)
	}
	if got := call(t, m, "a", "b", "c"); !slices.Equal(got, []uint64{1, 2, 2}) {
		t.Errorf("a, b, c = %v, want 1, 2, 2", got)
	}
	same, err := Alias(module, "b", "a") // a exists: unchanged
	if err != nil || !slices.Equal(same, module) {
		t.Errorf("Alias onto an existing export changed the module (%v)", err)
	}
}

func TestPoint(t *testing.T) {
	m, err := Point(module, "a", "b")
	if err != nil {
		t.Fatal(err)
	}
	if got := call(t, m, "a", "b"); !slices.Equal(got, []uint64{2, 2}) {
		t.Errorf("a, b = %v, want 2, 2", got)
	}
	if m, err = Point(module, "z", "a"); err != nil {
		t.Fatal(err)
	}
	if got := call(t, m, "z", "a", "b"); !slices.Equal(got, []uint64{1, 1, 2}) {
		t.Errorf("z, a, b = %v, want 1, 1, 2", got)
	}
}

func TestPoint_errors(t *testing.T) {
	for _, tc := range []struct {
		name, export, target string
		module               []byte
	}{
		{"not wasm", "a", "b", []byte("hello, world")},
		{"no such target", "a", "nope", module},
		{"target not a function", "a", "memory", module},
		{"name not a function", "memory", "a", module},
		{"truncated", "a", "b", module[:30]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Point(tc.module, tc.export, tc.target); err == nil {
				t.Error("no error")
			}
		})
	}
}
