package main

import (
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/stategate/stategate/exchange/exchangetest"
	"github.com/stategate/stategate/internal/testenv"
	"github.com/tetratelabs/wazero"
)

// modulePath is the exchange module, built by `make build.exchange`.
var modulePath = filepath.Join("..", "..", "build", "stategate-exchange.wasm")

func loadModule(t testing.TB) []byte {
	t.Helper()
	testenv.NeedFile(t, modulePath, "run `make build.exchange`")
	b, err := os.ReadFile(modulePath)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestExchangeSuite runs every case of the exchange suite through this host: the module's
// exchange on the Extism Go SDK, with the bytes the Go gateway gives, through the module's
// stdio entry (what the host uses) and through the named exports (a host without stdio).
func TestExchangeSuite(t *testing.T) {
	for _, named := range []bool{false, true} {
		t.Run(map[bool]string{false: "entry=stdio", true: "entry=named_exports"}[named], func(t *testing.T) {
			exchangeSuite(t, named)
		})
	}
}

func exchangeSuite(t *testing.T, named bool) {
	module := loadModule(t)
	cache := wazero.NewCompilationCache()
	exchangetest.RunOptions(t, func(t *testing.T, cfg []byte, o exchangetest.HostOptions) exchangetest.Host {
		sh, upstream := exchangetest.NewHTTPHost(t)
		h, err := New(context.Background(), Options{Module: module, Config: cfg, Upstream: upstream, Cache: cache, PublicURL: o.PublicURL, NamedExports: named})
		if err != nil {
			t.Fatal(err)
		}
		if (h.stdio == nil) != named {
			t.Fatalf("NamedExports %v: the host took the other entry (a module without %s?)", named, stdioEntry)
		}
		t.Cleanup(func() { h.Close(context.Background()) })
		srv := httptest.NewServer(h)
		t.Cleanup(srv.Close)
		sh.URL = srv.URL + "/mcp"
		return sh
	})
}
