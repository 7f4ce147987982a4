package main_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/http-wasm/http-wasm-host-go/api"
	"github.com/http-wasm/http-wasm-host-go/handler"
	wasm "github.com/http-wasm/http-wasm-host-go/handler/nethttp"
	"github.com/stategate/stategate/host/demo"
	"github.com/stategate/stategate/internal/testenv"
	"github.com/tetratelabs/wazero"
	"github.com/tidwall/sjson"
)

// The built module (`make build.httpwasm`), run here in http-wasm-host-go v0.7.0, the
// library Traefik v3.6.12 runs its wasm plugins with, configured as Traefik configures it
// (wall clock, _start then _initialize, a mounted state directory, no random source).
var modulePath = filepath.Join("..", "build", "stategate-httpwasm.wasm")

func loadModule(t testing.TB) []byte {
	t.Helper()
	testenv.NeedFile(t, modulePath, "run `make build.httpwasm`")
	b, err := os.ReadFile(modulePath)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// logs collects what the guest logs.
type logs struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *logs) IsEnabled(api.LogLevel) bool { return true }
func (l *logs) Log(_ context.Context, _ api.LogLevel, msg string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b.WriteString(msg + "\n")
}
func (l *logs) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// guest is the module as middleware in front of next, with its runtime (for its memory).
type guest struct {
	h   http.Handler
	rt  wazero.Runtime
	log *logs
}

// newGuest loads the module with cfg; stateDir ("" none) is mounted at /state.
func newGuest(t testing.TB, cfg []byte, stateDir string, next http.Handler) (*guest, error) {
	t.Helper()
	ctx := context.Background()
	rt := wazero.NewRuntime(ctx)
	mc := wazero.NewModuleConfig().WithSysWalltime().WithStartFunctions("_start", "_initialize")
	if stateDir != "" {
		mc = mc.WithFSConfig(wazero.NewFSConfig().WithDirMount(stateDir, "/state"))
	}
	l := &logs{}
	mw, err := wasm.NewMiddleware(ctx, loadModule(t), handler.GuestConfig(cfg), handler.ModuleConfig(mc), handler.Logger(l),
		handler.Runtime(func(context.Context) (wazero.Runtime, error) { return rt, nil }))
	if err != nil {
		return &guest{log: l}, err
	}
	t.Cleanup(func() { mw.Close(ctx) })
	return &guest{h: mw.NewHandler(ctx, next), rt: rt, log: l}, nil
}

func withStateDir(t testing.TB, doc []byte) []byte {
	out, err := sjson.SetBytes(doc, "httpWasm.stateDir", "/state")
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestLoad_refusals: a configuration the build cannot honour fails the load (the host's
// NewMiddleware fails, as Traefik's and Dapr's do) with the reason in the host's log.
func TestLoad_refusals(t *testing.T) {
	for _, tc := range []struct {
		name, cfg, want string
	}{
		{"workflows_without_state_dir", string(demo.Config()), "workflows (their tools are gated and moved) need state shared by every guest instance"},
		{"health_without_state_dir", `{"version":1,"health":{}}`, "tool health need state"},
		{"annotations_without_state_dir", `{"version":1,"stateSync":{"fromAnnotations":true}}`, "stateSync.fromAnnotations (the listed annotations)"},
		{"cache_without_state_dir", `{"version":1,"cache":{"maxEntries":10}}`, "the response cache"},
		{"not_json", `version: 1`, "not a JSON object"},
		{"engine_refuses", `{"version":2}`, "configuration refused: version"},
		{"unknown_option", `{"version":1,"httpWasm":{"statedir":"/state"}}`, "httpWasm.statedir: unknown field"},
		{"state_dir_not_mounted", `{"version":1,"httpWasm":{"stateDir":"/nowhere"}}`, "httpWasm.stateDir: filestate: directory[/nowhere]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, err := newGuest(t, []byte(tc.cfg), "", http.NotFoundHandler())
			if err == nil {
				t.Fatal("the module loaded a configuration it cannot honour")
			}
			if !strings.Contains(g.log.String(), tc.want) {
				t.Fatalf("load failed (%v) without saying %q; the guest logged:\n%s", err, tc.want, g.log.String())
			}
		})
	}
}

// TestInProcess: the module in http-wasm-host-go in front of the demo upstream: a list
// decorated, a call denied without reaching the upstream, a workflow advanced.
func TestInProcess(t *testing.T) {
	var calls sync.Map
	up := demo.Handler(demo.Options{JSONResponse: true})
	counting := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if strings.Contains(string(b), `"cart.pay"`) {
			calls.Store("cart.pay", true)
		}
		r.Body = io.NopCloser(strings.NewReader(string(b)))
		up.ServeHTTP(w, r)
	})
	g, err := newGuest(t, withStateDir(t, demo.Config()), t.TempDir(), counting)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(g.h)
	t.Cleanup(srv.Close)
	sid := initialize(t, srv.URL)
	list := rpc(t, srv.URL, sid, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	if !strings.Contains(list, "[Cache-Control: immutable]") {
		t.Fatalf("tools/list not decorated: %s", list)
	}
	denied := rpc(t, srv.URL, sid, `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"cart.pay","arguments":{}}}`)
	if !strings.Contains(denied, "TOOL_NOT_AVAILABLE") {
		t.Fatalf("cart.pay in empty not denied: %s", denied)
	}
	if _, ok := calls.Load("cart.pay"); ok {
		t.Fatal("the denied call reached the upstream")
	}
	for i, call := range []string{`"cart.add_item","arguments":{"sku":"tea"}`, `"cart.checkout"`, `"cart.pay"`} {
		out := rpc(t, srv.URL, sid, `{"jsonrpc":"2.0","id":`+string(rune('4'+i))+`,"method":"tools/call","params":{"name":`+call+`}}`)
		if strings.Contains(out, `"isError":true`) {
			t.Fatalf("%s: %s\nguest log:\n%s", call, out, g.log.String())
		}
	}
}

func initialize(t testing.TB, url string) string {
	t.Helper()
	req, _ := http.NewRequest("POST", url+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	sid := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != 200 || sid == "" {
		t.Fatalf("initialize: %d %q %s", resp.StatusCode, sid, b)
	}
	rpcWith(t, url, sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return sid
}

func rpc(t testing.TB, url, sid, body string) string {
	t.Helper()
	return rpcWith(t, url, sid, body)
}

func rpcWith(t testing.TB, url, sid, body string) string {
	req, _ := http.NewRequest("POST", url+"/mcp", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}
