package ops_test

import (
	"context"
	"net/http/httptest"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stategate/stategate/exchange/events"
	"github.com/stategate/stategate/host/demo"
	"github.com/stategate/stategate/host/gateway"
	"github.com/stategate/stategate/host/ops"
	"github.com/stategate/stategate/host/store"
	"github.com/stategate/stategate/host/wasmrt"
	"github.com/stategate/stategate/internal/testenv"
)

// TestBus_slowSubscriberDoesNotHoldCalls: a subscriber that never reads is on the bus
// while the official SDK client makes more calls than its buffer holds: every call
// completes (a bus that waited would stall the 101st), the subscriber loses the rest and
// the loss is counted, and a subscriber that reads gets every event.
func TestBus_slowSubscriberDoesNotHoldCalls(t *testing.T) {
	testenv.NeedFile(t, "../../build/stategate.wasm", "run `make build`")
	wasm, err := os.ReadFile("../../build/stategate.wasm")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	rt, err := wasmrt.New(ctx, wasm, wasmrt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close(ctx)
	pool, err := wasmrt.NewPool(ctx, rt, demo.Config(), wasmrt.PoolOptions{Size: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close(ctx)
	up := httptest.NewServer(demo.Handler(demo.Options{JSONResponse: true}))
	defer up.Close()
	u, _ := url.Parse(up.URL + "/mcp")
	bus := ops.NewBus()
	stalled := bus.Subscribe(ops.Filter{})
	defer stalled.Close()
	reader := bus.Subscribe(ops.Filter{Type: events.EventToolCalled})
	got := make(chan int)
	go func() {
		n := 0
		for range reader.C {
			n++
		}
		got <- n
	}()
	gw, err := gateway.New(gateway.Options{Upstream: u, Plugin: pool, Config: demo.Config(), Store: store.NewMemory(store.Options{}), Publisher: bus})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gw)
	defer srv.Close()
	cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "slow", Version: "1"}, nil).Connect(cctx, &mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	const calls = ops.SubscriberBuffer + 30
	for i := range calls {
		res, err := cs.CallTool(cctx, &mcp.CallToolParams{Name: "countries.list", Arguments: map[string]any{}})
		if err != nil || res.IsError {
			t.Fatalf("call %d with a stalled subscriber: %v", i, err)
		}
	}
	if d := bus.Dropped(); d != 30 {
		t.Fatalf("dropped %d events, want 30 (the stalled subscriber's overflow)", d)
	}
	reader.Close()
	if n := <-got; n != calls {
		t.Fatalf("the reading subscriber got %d tool_called events, want %d", n, calls)
	}
}
