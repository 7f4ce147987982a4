package traefik_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stategate/stategate/abi"
	"github.com/stategate/stategate/host/demo"
	"github.com/stategate/stategate/httpwasm/entropy"
	"github.com/stategate/stategate/httpwasm/filestate"
	"github.com/tidwall/sjson"
)

// withStateDir is doc with the http-wasm build's state directory set to /state, where
// startTraefik mounts the test's directory.
func withStateDir(t testing.TB, doc []byte) []byte {
	t.Helper()
	out, err := sjson.SetBytes(doc, "httpWasm.stateDir", "/state")
	must(t, err)
	return out
}

func connect(t *testing.T, url string) *mcp.ClientSession {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "traefik-test", Version: "0"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatalf("connect through traefik: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func call(t *testing.T, cs *mcp.ClientSession, name string, args any) *mcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return res
}

func text(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

func metaCode(res *mcp.CallToolResult) string {
	m, _ := res.Meta[abi.MetaError].(map[string]any)
	code, _ := m["code"].(string)
	return code
}

func mustSucceed(t *testing.T, res *mcp.CallToolResult, what string) {
	t.Helper()
	if res.IsError {
		t.Fatalf("%s: isError: %s (%s)", what, text(res), metaCode(res))
	}
}

func mustBeDenied(t *testing.T, res *mcp.CallToolResult, what string) {
	t.Helper()
	if !res.IsError || metaCode(res) != abi.DenyToolNotAvailable {
		t.Fatalf("%s: want denied (%s), got isError=%v code=%q: %s", what, abi.DenyToolNotAvailable, res.IsError, metaCode(res), text(res))
	}
}

// TestWorkflows_goSDK: the official Go SDK client through Traefik running the http-wasm
// build (state in a mounted directory), in front of the demo upstream on the official Go
// SDK: tools/list decorated, a session-keyed workflow gated then advanced, two sessions
// apart; a handle-keyed workflow carried from one session to another by its handle.
func TestWorkflows_goSDK(t *testing.T) {
	for _, sse := range []bool{true, false} {
		name := "json"
		if sse {
			name = "sse"
		}
		t.Run("session_keyed/"+name, func(t *testing.T) {
			up := httptest.NewServer(demo.Handler(demo.Options{JSONResponse: !sse}))
			t.Cleanup(up.Close)
			tr := startTraefik(t, traefikOptions{Config: withStateDir(t, demo.Config()), Upstream: up.URL, StateDir: t.TempDir()})
			cs := connect(t, tr.URL+"/mcp")
			list, err := cs.ListTools(context.Background(), nil)
			if err != nil {
				t.Fatal(err)
			}
			decorated := false
			for _, tool := range list.Tools {
				if tool.Name == "countries.list" && strings.Contains(tool.Description, "[Cache-Control: immutable]") {
					decorated = true
				}
			}
			if !decorated {
				t.Fatalf("tools/list through traefik is not decorated: %+v", list.Tools)
			}
			mustBeDenied(t, call(t, cs, "cart.pay", nil), "cart.pay in empty")
			mustSucceed(t, call(t, cs, "cart.add_item", map[string]any{"sku": "tea"}), "cart.add_item")
			mustSucceed(t, call(t, cs, "cart.checkout", nil), "cart.checkout")
			other := connect(t, tr.URL+"/mcp")
			mustBeDenied(t, call(t, other, "cart.checkout", nil), "cart.checkout in another session")
			mustSucceed(t, call(t, cs, "cart.pay", nil), "cart.pay in payment")
			mustBeDenied(t, call(t, cs, "cart.add_item", map[string]any{"sku": "tea"}), "cart.add_item once confirmed")
		})
	}
	t.Run("handle_keyed", func(t *testing.T) {
		up := httptest.NewServer(demo.Handler(demo.Options{}))
		t.Cleanup(up.Close)
		cfg, err := sjson.SetBytes(demo.Config(), "workflows.0.key", "argument:cart_id")
		must(t, err)
		tr := startTraefik(t, traefikOptions{Config: withStateDir(t, cfg), Upstream: up.URL, StateDir: t.TempDir()})
		first := connect(t, tr.URL+"/mcp")
		created := call(t, first, "cart.create", nil)
		mustSucceed(t, created, "cart.create")
		sc, _ := created.StructuredContent.(map[string]any)
		id, _ := sc["cart_id"].(string)
		if id == "" {
			t.Fatalf("cart.create gave no cart_id: %s", text(created))
		}
		mustBeDenied(t, call(t, first, "cart.checkout", map[string]any{"cart_id": id}), "cart.checkout of an empty cart")
		mustSucceed(t, call(t, first, "cart.add_item", map[string]any{"cart_id": id, "sku": "tea"}), "cart.add_item")
		// Another session (another guest instance, maybe) with the handle: the same state.
		second := connect(t, tr.URL+"/mcp")
		mustSucceed(t, call(t, second, "cart.checkout", map[string]any{"cart_id": id}), "cart.checkout from another session")
		mustBeDenied(t, call(t, first, "cart.add_item", map[string]any{"cart_id": id, "sku": "tea"}), "cart.add_item in payment")
		mustSucceed(t, call(t, first, "cart.pay", map[string]any{"cart_id": id}), "cart.pay")
	})
}

// stepsConfig is a workflow of n steps (s0 to sN) that tool "step" moves one at a time,
// and "finish" runs only at sN: n concurrent steps must land exactly there.
func stepsConfig(n int) []byte {
	var b strings.Builder
	b.WriteString(`{"version":1,"workflows":[{"id":"steps","initial":"s0","key":"session","states":{`)
	var states []string
	for i := 0; i <= n; i++ {
		s := `"s` + itoa(i) + `":{`
		if i < n {
			s += `"on":{"NEXT":"s` + itoa(i+1) + `"}`
		}
		states = append(states, s+"}")
	}
	b.WriteString(strings.Join(states, ","))
	b.WriteString(`},"tools":{"step":{"states":[`)
	var in []string
	for i := 0; i < n; i++ {
		in = append(in, `"s`+itoa(i)+`"`)
	}
	b.WriteString(strings.Join(in, ","))
	b.WriteString(`],"event":"NEXT"},"finish":{"states":["s` + itoa(n) + `"]}}}],"httpWasm":{"stateDir":"/state","leaseWaitMs":60000}}`)
	return []byte(b.String())
}

func itoa(i int) string {
	if i < 10 {
		return string(rune('0' + i))
	}
	return itoa(i/10) + string(rune('0'+i%10))
}

// stepsServer is an upstream on the official Go SDK with tools "step" (slow enough for
// calls to overlap) and "finish", counting the steps it ran.
func stepsServer(t *testing.T, ran *atomic.Int64) string {
	srv := mcp.NewServer(&mcp.Implementation{Name: "steps", Version: "0"}, nil)
	type none struct{}
	mcp.AddTool(srv, &mcp.Tool{Name: "step", Description: "one step"}, func(ctx context.Context, _ *mcp.CallToolRequest, _ none) (*mcp.CallToolResult, any, error) {
		time.Sleep(15 * time.Millisecond)
		ran.Add(1)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "stepped"}}}, nil, nil
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "finish", Description: "at the end"}, func(ctx context.Context, _ *mcp.CallToolRequest, _ none) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "finished"}}}, nil, nil
	})
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{JSONResponse: true}))
	t.Cleanup(hs.Close)
	return hs.URL
}

// TestConcurrentMoves: n moving calls at once in one session, through Traefik's pool of
// guest instances sharing the state directory: every one succeeds, each moves the
// workflow exactly once (the leases serialise them across instances), so the state is sN
// (finish runs, a further step is denied), and the upstream ran each step once.
func TestConcurrentMoves(t *testing.T) {
	const n = 24
	var ran atomic.Int64
	up := stepsServer(t, &ran)
	state := t.TempDir()
	tr := startTraefik(t, traefikOptions{Config: stepsConfig(n), Upstream: up, StateDir: state})
	cs := connect(t, tr.URL+"/mcp")
	var wg sync.WaitGroup
	var failed atomic.Int64
	errs := make(chan string, n)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "step"})
			switch {
			case err != nil:
				failed.Add(1)
				errs <- err.Error()
			case res.IsError:
				failed.Add(1)
				errs <- metaCode(res) + ": " + text(res)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Errorf("a concurrent step failed: %s", e)
	}
	if got := ran.Load(); got != n-failed.Load() {
		t.Errorf("the upstream ran %d steps for %d successful calls", got, n-failed.Load())
	}
	mustSucceed(t, call(t, cs, "finish", nil), "finish after "+itoa(n)+" steps (a lost or doubled transition leaves another state)")
	mustBeDenied(t, call(t, cs, "step", nil), "a step past the last state")
	instances := readInstances(t, state)
	t.Logf("%d steps moved the workflow %d times; guest instances started on the state directory: %s", n, n, instances)
}

// readInstances reads the instance counter the guests keep in the state directory.
func readInstances(t *testing.T, dir string) string {
	b, err := os.ReadFile(filepath.Join(dir, filestate.ValueFile(entropy.InstanceKey)))
	must(t, err)
	return string(b)
}
