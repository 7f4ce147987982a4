package main

import (
	"bytes"
	"context"
	"testing"

	"github.com/stategate/stategate/plugin/engine"
	"github.com/stategate/stategate/testharness"
	"github.com/tetratelabs/wazero"
)

// TestEngineExports_vectors runs every golden vector (abi/testdata) through the exchange
// module's engine exports on this host: they answer byte for byte as the native engine.
func TestEngineExports_vectors(t *testing.T) {
	module := loadModule(t)
	vs, err := testharness.LoadVectors("../../abi/testdata")
	if err != nil {
		t.Fatal(err)
	}
	cache := wazero.NewCompilationCache()
	hosts := map[string]*Host{}
	for _, v := range vs {
		h := hosts[string(v.Config)]
		if h == nil {
			if h, err = New(context.Background(), Options{Module: module, Config: v.Config, Upstream: "http://127.0.0.1:1/", Cache: cache}); err != nil {
				t.Fatal(err)
			}
			defer h.Close(context.Background())
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
		_, got, err := h.plugin.Call(v.Fn.Name(), v.Input)
		if err != nil {
			t.Fatalf("%s: %v", v.Name, err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s:\n got: %s\nwant: %s", v.Name, got, want)
		}
	}
	t.Logf("%d vectors, %d configurations", len(vs), len(hosts))
}
