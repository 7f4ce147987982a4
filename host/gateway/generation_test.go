package gateway_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stategate/stategate/host/demo"
	"github.com/stategate/stategate/host/wasmrt"
)

// answered wraps the demo upstream and records when it starts answering slow.wait: the
// gateway cannot have finished a call before its upstream answered it.
type answered struct {
	h    http.Handler
	done atomic.Bool
}

func (a *answered) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	if bytes.Contains(body, []byte(`"slow.wait"`)) {
		w = &markWriter{ResponseWriter: w, mark: &a.done}
	}
	a.h.ServeHTTP(w, r)
}

type markWriter struct {
	http.ResponseWriter
	mark *atomic.Bool
}

func (m *markWriter) WriteHeader(code int) {
	m.mark.Store(true)
	m.ResponseWriter.WriteHeader(code)
}

func (m *markWriter) Write(b []byte) (int, error) {
	m.mark.Store(true)
	return m.ResponseWriter.Write(b)
}

func (m *markWriter) Unwrap() http.ResponseWriter { return m.ResponseWriter }

// slowConfig is the demo configuration with slow.wait's timeout at 30 s instead of 1 s: the
// tests that keep a slow.wait in flight are about what happens meanwhile, and a loaded
// machine can stretch its 400-600 ms past 1 s, when the gateway answers it with a timeout.
func slowConfig(t *testing.T) []byte {
	t.Helper()
	const old = `"slow.wait": {"timeoutMs": 1000}`
	cfg := string(demo.Config())
	if !strings.Contains(cfg, old) {
		t.Fatalf("the demo configuration no longer sets %s", old)
	}
	return []byte(strings.Replace(cfg, old, `"slow.wait": {"timeoutMs": 30000}`, 1))
}

// awaitUpstream waits until tool's call reached the upstream.
func awaitUpstream(t *testing.T, e *env, tool string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); e.upstream.count(tool) == 0; {
		if time.Now().After(deadline) {
			t.Fatalf("%s never reached the upstream", tool)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func callParams(name string) *mcp.CallToolParams {
	return &mcp.CallToolParams{Name: name, Arguments: map[string]any{}}
}

// TestSwap_drainsTheOldGeneration: a configuration swapped in while a call is in flight
// serves the next calls at once; the old generation reports drained only after the
// in-flight call's upstream answered, the call gets its real answer, workflows keep their
// state, and the counters carry over.
func TestSwap_drainsTheOldGeneration(t *testing.T) {
	up := &answered{h: demo.Handler(demo.Options{SlowDelay: 600 * time.Millisecond, JSONResponse: true})}
	cfg := slowConfig(t)
	e := newEnv(t, envOptions{upstream: up, config: cfg})
	pool, err := wasmrt.NewPool(context.Background(), pluginRuntime(t), cfg, wasmrt.PoolOptions{Size: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pool.Close(context.Background()) })
	c := e.connect(t, sessionEra)
	c.call(t, "cart.add_item", map[string]any{"sku": "tea"})
	before := e.gw.Stats.Get(0)
	slow := make(chan bool, 1)
	go func() {
		res, err := c.cs.CallTool(context.Background(), callParams("slow.wait"))
		slow <- err == nil && !res.IsError
	}()
	// In flight on the old generation: it took it before forwarding the call.
	awaitUpstream(t, e, "slow.wait")
	oldCore := e.gw.Core()
	old, drained := e.gw.Swap(pool, cfg)
	if e.gw.Core() == oldCore || old == nil {
		t.Fatal("Swap did not make a new core current")
	}
	c2 := e.connect(t, sessionEra)
	if res := c2.call(t, "countries.list", nil); res.IsError {
		t.Fatal("a call after the swap failed")
	}
	if res := c.call(t, "cart.checkout", nil); res.IsError {
		t.Fatalf("checkout after the swap: %q", texts(res))
	}
	select {
	case <-drained:
		if !up.done.Load() {
			t.Fatal("the old generation drained before its call's upstream answered")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the old generation never drained")
	}
	if ok := <-slow; !ok {
		t.Fatal("the in-flight call failed across the swap")
	}
	if e.gw.Stats.Get(0) <= before {
		t.Fatal("the request counter did not carry over the swap")
	}
}

// TestDrain: Drain waits for the call in flight (it returns only after the call's
// upstream answered), the call gets its real answer, and new MCP requests get 503.
func TestDrain(t *testing.T) {
	up := &answered{h: demo.Handler(demo.Options{SlowDelay: 400 * time.Millisecond, JSONResponse: true})}
	e := newEnv(t, envOptions{upstream: up, config: slowConfig(t)})
	c := e.connect(t, sessionEra)
	slow := make(chan bool, 1)
	go func() {
		res, err := c.cs.CallTool(context.Background(), callParams("slow.wait"))
		slow <- err == nil && !res.IsError
	}()
	awaitUpstream(t, e, "slow.wait")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := e.gw.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if !up.done.Load() {
		t.Fatal("Drain returned before the call in flight was answered")
	}
	if ok := <-slow; !ok {
		t.Fatal("the in-flight call failed while draining")
	}
	resp, err := http.Post(e.url, "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("a request after Drain: %d, want 503", resp.StatusCode)
	}
}
