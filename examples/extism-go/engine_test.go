package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stategate/stategate/abi"
	"github.com/stategate/stategate/exchange/exchangetest"
	"github.com/stategate/stategate/internal/testenv"
	"github.com/stategate/stategate/plugin/engine"
	"github.com/stategate/stategate/testharness"
	"github.com/tetratelabs/wazero"
)

// TestEngineExports_vectors runs every golden vector (abi/testdata) through the engine
// exports on this host, of the exchange module and of the engine module
// (build/stategate.wasm), each through the named exports and through the stdio entry
// (plugin/exports): every way answers byte for byte as the native engine.
func TestEngineExports_vectors(t *testing.T) {
	vs, err := testharness.LoadVectors("../../abi/testdata")
	if err != nil {
		t.Fatal(err)
	}
	enginePath := filepath.Join("..", "..", "build", "stategate.wasm")
	testenv.NeedFile(t, enginePath, "run `make build`")
	engineModule, err := os.ReadFile(enginePath)
	if err != nil {
		t.Fatal(err)
	}
	for name, module := range map[string][]byte{"exchange_module": loadModule(t), "engine_module": engineModule} {
		for _, named := range []bool{true, false} {
			t.Run(name+"/"+map[bool]string{false: "entry=stdio", true: "entry=named_exports"}[named], func(t *testing.T) {
				engineVectors(t, module, vs, named)
			})
		}
	}
}

func engineVectors(t *testing.T, module []byte, vs []testharness.Vector, named bool) {
	cache := wazero.NewCompilationCache()
	hosts := map[string]*Host{}
	var err error
	for _, v := range vs {
		h := hosts[string(v.Config)]
		if h == nil {
			if h, err = New(context.Background(), Options{Module: module, Config: v.Config, Upstream: "http://127.0.0.1:1/", Cache: cache, NamedExports: named}); err != nil {
				t.Fatal(err)
			}
			defer h.Close(context.Background())
			if (h.stdio == nil) != named {
				t.Fatalf("NamedExports %v: the host took the other entry (a module without %s?)", named, stdioEntry)
			}
			hosts[string(v.Config)] = h
		}
		var want []byte
		if e, err := engine.New(v.Config); err != nil {
			if want = engine.ConfigError(err); v.Fn.Name() == "check_config" {
				want = engine.CheckConfig(v.Config)
			}
		} else {
			want = e.AppendCall(nil, v.Fn, v.Input)
		}
		got, err := h.invoke(v.Fn.Name(), v.Input)
		if err != nil {
			t.Fatalf("%s: %v", v.Name, err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s:\n got: %s\nwant: %s", v.Name, got, want)
		}
	}
	t.Logf("%d vectors, %d configurations", len(vs), len(hosts))
	if named {
		return
	}
	// A name the module does not export answers UNKNOWN_FUNCTION through the stdio entry.
	h, err := New(context.Background(), Options{Module: module, Config: exchangetest.Config("sample.json"), Upstream: "http://127.0.0.1:1/", Cache: cache})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(context.Background())
	got, err := h.invoke("no_such_function", []byte(`{}`))
	if err != nil || !bytes.Contains(got, []byte(`"code":"`+abi.ErrUnknownExport+`"`)) {
		t.Errorf("no_such_function through the stdio entry: %v %s", err, got)
	}
}
