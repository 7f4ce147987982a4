package gateway_test

import (
	"context"
	"net/http/httptest"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stategate/stategate/host/gateway"
	"github.com/stategate/stategate/host/store"
	"github.com/stategate/stategate/host/store/storetest"
	"github.com/stategate/stategate/host/wasmrt"
)

// countingStore counts the store round trips the gateway makes.
type countingStore struct {
	store.Store
	trips atomic.Int64
}

func (s *countingStore) Get(ctx context.Context, key string) ([]byte, error) {
	s.trips.Add(1)
	return s.Store.Get(ctx, key)
}

func (s *countingStore) CompareAndSwap(ctx context.Context, session, key string, old, new []byte) (bool, error) {
	s.trips.Add(1)
	return s.Store.CompareAndSwap(ctx, session, key, old, new)
}

// BenchmarkHealth: an ungated tools/call (a tool no workflow binds) through the gateway
// with tool health off and on, on the memory store and on a real Redis, in one run.
// Reported: p50-us, p99-us and store-trips/op (Get and CompareAndSwap calls per call).
//
//	go test ./host/gateway -run '^$' -bench Health -benchtime 2000x
func BenchmarkHealth(b *testing.B) {
	up := httptest.NewServer(bigUpstream(10))
	b.Cleanup(up.Close)
	upURL, _ := url.Parse(up.URL + "/mcp")
	redisURL := storetest.Redis(b)
	configs := []struct{ name, cfg string }{
		{"health_off", `{"version":1}`},
		{"health_on", `{"version":1,"health":{"autoDisableThreshold":3}}`},
	}
	stores := []struct {
		name string
		open func() store.Store
	}{
		{"memory", func() store.Store { return store.NewMemory(store.Options{}) }},
		{"redis", func() store.Store {
			st, err := store.NewRedis(context.Background(), redisURL, store.Options{})
			if err != nil {
				b.Fatal(err)
			}
			return st
		}},
	}
	const body = `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"records.op1","arguments":{"id":"r1"}}}`
	for _, s := range stores {
		for _, c := range configs {
			b.Run(s.name+"/"+c.name, func(b *testing.B) {
				ctx := context.Background()
				pool, err := wasmrt.NewPool(ctx, pluginRuntime(b), []byte(c.cfg), wasmrt.PoolOptions{Size: 4})
				if err != nil {
					b.Fatal(err)
				}
				defer pool.Close(ctx)
				st := &countingStore{Store: s.open()}
				defer st.Close()
				gw, err := gateway.New(gateway.Options{Upstream: upURL, Plugin: pool, Config: []byte(c.cfg), Store: st})
				if err != nil {
					b.Fatal(err)
				}
				srv := httptest.NewServer(gw)
				defer srv.Close()
				sid := benchSession(b, srv.URL+"/mcp")
				post(b, srv.URL+"/mcp", sid, listBody) // pins the tools once
				for i := 0; i < 20; i++ {
					post(b, srv.URL+"/mcp", sid, body)
				}
				st.trips.Store(0)
				d := make([]time.Duration, 0, b.N)
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					start := time.Now()
					post(b, srv.URL+"/mcp", sid, body)
					d = append(d, time.Since(start))
				}
				b.StopTimer()
				reportPercentiles(b, d)
				b.ReportMetric(float64(st.trips.Load())/float64(b.N), "store-trips/op")
			})
		}
	}
}
