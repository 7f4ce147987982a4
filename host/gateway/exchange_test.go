package gateway_test

import (
	"context"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/stategate/stategate/exchange/admission"
	"github.com/stategate/stategate/exchange/exchangetest"
	"github.com/stategate/stategate/host/gateway"
	"github.com/stategate/stategate/host/store"
	"github.com/stategate/stategate/host/wasmrt"
)

// TestExchangeSuite runs the exchange-level conformance suite through the gateway: a real
// net/http client, the gateway with the built plugin, and an upstream that answers each
// step as the case says.
func TestExchangeSuite(t *testing.T) {
	rt := pluginRuntime(t)
	exchangetest.RunHolding(t, func(t *testing.T, cfg []byte, o exchangetest.HostOptions) exchangetest.Host {
		h, upstream := exchangetest.NewHTTPHost(t)
		ctx := context.Background()
		pool, err := wasmrt.NewPool(ctx, rt, cfg, wasmrt.PoolOptions{Size: 2})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { pool.Close(ctx) })
		u, _ := url.Parse(upstream)
		gw, err := gateway.New(gateway.Options{Upstream: u, Plugin: pool, Config: cfg, Store: store.NewMemory(store.Options{}),
			Origins: admission.OriginPolicy{Loopback: true}, PublicURL: o.PublicURL})
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(gw)
		t.Cleanup(srv.Close)
		h.URL = srv.URL + "/mcp"
		return h
	})
}
