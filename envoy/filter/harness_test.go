package filter

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"unsafe"

	"github.com/stategate/stategate/internal/testenv"

	"github.com/proxy-wasm/proxy-wasm-go-sdk/proxywasm"
	"github.com/proxy-wasm/proxy-wasm-go-sdk/proxywasm/proxytest"
	"github.com/proxy-wasm/proxy-wasm-go-sdk/proxywasm/types"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tidwall/gjson"
)

// The artifact users deploy, built by `make build.envoy` (TinyGo), and the same filter
// from standard Go, built by `make build.envoy.go` (the fallback, and the benchmarks'
// baseline).
var (
	wasmPath   = filepath.Join("..", "..", "build", "stategate-envoy.wasm")
	wasmGoPath = filepath.Join("..", "..", "build", "stategate-envoy-go.wasm")
)

var sampleConfig = mustRead(filepath.Join("..", "..", "abi", "testdata", "config", "sample.json"))

func mustRead(path string) []byte {
	b, err := os.ReadFile(path)
	if err != nil {
		panic(err)
	}
	return b
}

// wasmModule is one built filter, loaded once on wazero through proxytest. One instance
// serves every test: the host state (headers, bodies, shared data, metrics) lives in each
// emulator, and the filter resets its own state in OnVMStart and OnPluginStart.
type wasmModule struct {
	path, make string
	once       sync.Once
	vm         types.VMContext
	err        error
}

func (m *wasmModule) context(tb testing.TB) types.VMContext {
	tb.Helper()
	m.once.Do(func() {
		var b []byte
		if b, m.err = os.ReadFile(m.path); m.err != nil {
			return
		}
		if m.vm, m.err = proxytest.NewWasmVMContext(withModuleName(b, guestName)); m.err == nil {
			m.err = registerOnDelete(m.vm)
		}
	})
	if m.err != nil {
		if os.IsNotExist(m.err) {
			testenv.Missing(tb, fmt.Errorf("%s is missing: run `%s`", m.path, m.make))
		}
		tb.Fatalf("loading %s: %v", m.path, m.err)
	}
	return m.vm
}

// Envoy ends every stream with proxy_on_log, proxy_on_done and proxy_on_delete, and the
// guest SDK drops the stream's context on proxy_on_delete. proxytest's wasm wrapper calls
// only proxy_on_log, so under it the guest keeps every stream's context for the life of
// the instance: about 2 KB a request, which over a benchmark's thousands of requests makes
// each collection scan a heap Envoy never has. The harness calls proxy_on_delete itself,
// as Envoy does, through the wazero module proxytest instantiated; the module is found by
// name, which the harness gives it (the built modules have none).
const guestName = "stategate-envoy"

// onDelete maps a wasm VM context to its module's proxy_on_delete.
var onDelete sync.Map // types.VMContext -> api.Function

// withModuleName returns wasm with a name section naming the module name.
func withModuleName(wasm []byte, name string) []byte {
	sub := append(uleb(nil, len(name)), name...)
	payload := append(append([]byte{4}, "name"...), 0) // section name, then subsection 0: module name
	payload = append(uleb(payload, len(sub)), sub...)
	out := append(append([]byte(nil), wasm...), 0) // custom section
	out = uleb(out, len(payload))
	return append(out, payload...)
}

func uleb(dst []byte, n int) []byte {
	for {
		b := byte(n & 0x7f)
		if n >>= 7; n == 0 {
			return append(dst, b)
		}
		dst = append(dst, b|0x80)
	}
}

// registerOnDelete finds the guest module behind vm (proxytest keeps its wazero runtime
// unexported) and records its proxy_on_delete.
func registerOnDelete(vm types.VMContext) error {
	f := reflect.ValueOf(vm).Elem().FieldByName("runtime")
	if !f.IsValid() {
		return fmt.Errorf("proxytest's wasm VM context has no runtime field: update registerOnDelete")
	}
	rt, ok := reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem().Interface().(wazero.Runtime)
	if !ok {
		return fmt.Errorf("proxytest's runtime field is a %s, not a wazero.Runtime", f.Type())
	}
	mod := rt.Module(guestName)
	if mod == nil {
		return fmt.Errorf("module %q not found in proxytest's runtime", guestName)
	}
	del := mod.ExportedFunction("proxy_on_delete")
	if del == nil {
		return fmt.Errorf("module exports no proxy_on_delete")
	}
	onDelete.Store(vm, del)
	return nil
}

// completeStream ends stream id as Envoy does: proxy_on_log (proxytest), then
// proxy_on_delete (the guest drops its context).
func completeStream(host proxytest.HostEmulator, vm types.VMContext, id uint32) {
	host.CompleteHttpContext(id)
	if del, ok := onDelete.Load(vm); ok {
		if _, err := del.(api.Function).Call(context.Background(), uint64(id)); err != nil {
			panic(fmt.Sprintf("proxy_on_delete(%d): %v", id, err))
		}
	}
}

var (
	wasmTinyGo = &wasmModule{path: wasmPath, make: "make build.envoy"}
	wasmGo     = &wasmModule{path: wasmGoPath, make: "make build.envoy.go"}
)

// runner is one way of running the filter: native Go, or a built .wasm.
type runner struct {
	name string
	vm   func(testing.TB) types.VMContext
}

var runners = []runner{
	{"native", func(testing.TB) types.VMContext { return NewVMContext() }},
	{"wasm", wasmTinyGo.context},
	{"wasm_go", wasmGo.context},
}

// env is one Envoy worker as proxytest emulates it: a VM with the filter configured.
type env struct {
	t    testing.TB
	vm   types.VMContext
	host proxytest.HostEmulator
}

func newEnv(t testing.TB, vm types.VMContext, config, vmConfig []byte) *env {
	t.Helper()
	opt := proxytest.NewEmulatorOption().WithVMContext(vm).WithPluginConfiguration(config)
	if vmConfig != nil {
		opt = opt.WithVMConfiguration(vmConfig)
	}
	host, reset := proxytest.NewHostEmulator(opt)
	t.Cleanup(reset)
	if host.StartVM() != types.OnVMStartStatusOK {
		t.Fatalf("StartVM failed: %v", host.GetCriticalLogs())
	}
	if host.StartPlugin() != types.OnPluginStartStatusOK {
		t.Fatalf("StartPlugin failed: %v", host.GetCriticalLogs())
	}
	return &env{t: t, vm: vm, host: host}
}

// roundTrip is one HTTP request through the filter and, when the upstream is called, its
// response. Bodies are lists of chunks: one body callback each.
type roundTrip struct {
	method      string
	path        string      // "": /mcp
	headers     [][2]string // besides :method, :path
	body        []string
	respHeaders [][2]string // nil: no response (e.g. denied locally)
	respBody    []string
}

// outcome is what the filter did.
type outcome struct {
	local          *proxytest.LocalHttpResponse // answered locally
	upstreamCalled bool
	reqActions     []types.Action
	reqHeaders     [][2]string // as forwarded
	reqBody        string      // as forwarded (the last continued buffer)
	respActions    []types.Action
	respHeaders    [][2]string // as sent downstream
	respBody       string      // every continued chunk, concatenated
}

func (e *env) do(x roundTrip) outcome {
	e.t.Helper()
	h := e.host
	id := h.InitializeHttpContext()
	defer completeStream(h, e.vm, id)
	method := x.method
	if method == "" {
		method = "POST"
	}
	path := x.path
	if path == "" {
		path = "/mcp"
	}
	hdrs := append([][2]string{{":method", method}, {":path", path}, {":authority", "mcp.example"}}, x.headers...)
	var o outcome
	act := h.CallOnRequestHeaders(id, hdrs, len(x.body) == 0)
	o.reqActions = append(o.reqActions, act)
	for i, c := range x.body {
		act = h.CallOnRequestBody(id, []byte(c), i == len(x.body)-1)
		o.reqActions = append(o.reqActions, act)
	}
	if o.local = h.GetSentLocalResponse(id); o.local != nil {
		return o
	}
	o.upstreamCalled = act == types.ActionContinue
	o.reqHeaders = h.GetCurrentRequestHeaders(id)
	o.reqBody = string(h.GetCurrentRequestBody(id))
	if !o.upstreamCalled || x.respHeaders == nil {
		return o
	}
	act = h.CallOnResponseHeaders(id, x.respHeaders, len(x.respBody) == 0)
	o.respActions = append(o.respActions, act)
	for i, c := range x.respBody {
		act = h.CallOnResponseBody(id, []byte(c), i == len(x.respBody)-1)
		o.respActions = append(o.respActions, act)
		if act == types.ActionContinue {
			o.respBody += string(h.GetCurrentResponseBody(id))
		}
	}
	o.respHeaders = h.GetCurrentResponseHeaders(id) // held headers may change with the body
	return o
}

// sharedData reads the emulated host's shared data (the test runs on the host side in
// both modes).
func sharedData(t *testing.T, key string) (string, bool) {
	t.Helper()
	v, _, err := proxywasm.GetSharedData(key)
	if err != nil {
		return "", false
	}
	return string(v), true
}

func counter(t *testing.T, e *env, name string) uint64 {
	t.Helper()
	v, err := e.host.GetCounterMetric(name)
	if err != nil {
		t.Fatalf("metric %s: %v", name, err)
	}
	return v
}

func header(hdrs [][2]string, name string) (string, bool) {
	for _, h := range hdrs {
		if strings.EqualFold(h[0], name) {
			return h[1], true
		}
	}
	return "", false
}

// Request and response builders.

func rpc(id int, method, params string) string {
	s := `{"jsonrpc":"2.0","id":` + itoa(id) + `,"method":"` + method + `"`
	if params != "" {
		s += `,"params":` + params
	}
	return s + "}"
}

func call(id int, tool, args string) string {
	p := `{"name":"` + tool + `"`
	if args != "" {
		p += `,"arguments":` + args
	}
	return rpc(id, "tools/call", p+"}")
}

func session(id string) [][2]string {
	return [][2]string{{"content-type", "application/json"}, {"accept", "application/json, text/event-stream"},
		{"mcp-session-id", id}, {"mcp-protocol-version", "2025-06-18"}, {"accept-encoding", "gzip"}}
}

var jsonResp = [][2]string{{":status", "200"}, {"content-type", "application/json"}, {"content-length", "999"}}
var sseResp = [][2]string{{":status", "200"}, {"content-type", "text/event-stream"}}

func okResult(id int, text string) string {
	return `{"jsonrpc":"2.0","id":` + itoa(id) + `,"result":{"content":[{"type":"text","text":"` + text + `"}]}}`
}

func itoa(n int) string {
	return string(appendInt(nil, n))
}

func appendInt(dst []byte, n int) []byte {
	if n < 0 {
		dst = append(dst, '-')
		n = -n
	}
	if n >= 10 {
		dst = appendInt(dst, n/10)
	}
	return append(dst, byte('0'+n%10))
}

const toolsListResult = `{"jsonrpc":"2.0","id":1,"result":{"tools":[` +
	`{"name":"cart.view","description":"Show the cart","inputSchema":{"type":"object"}},` +
	`{"name":"cart.add_item","description":"Add an item","inputSchema":{"type":"object"}},` +
	`{"name":"cart.checkout","description":"Start checkout","inputSchema":{"type":"object"}},` +
	`{"name":"cart.pay","description":"Pay","inputSchema":{"type":"object"}},` +
	`{"name":"countries.list","description":"List countries","inputSchema":{"type":"object"}}],"nextCursor":"c2"}}`

// toolNames returns the tool names of a tools/list response.
func toolNames(msg string) []string {
	var out []string
	for _, t := range gjson.Get(msg, "result.tools").Array() {
		out = append(out, t.Get("name").Str)
	}
	return out
}

// sseMessages returns the data of each SSE event of body, in order.
func sseMessages(t *testing.T, body string) []string {
	t.Helper()
	var out []string
	for _, ev := range strings.Split(strings.ReplaceAll(body, "\r\n", "\n"), "\n\n") {
		if strings.TrimSpace(ev) == "" {
			continue
		}
		var data []string
		for _, line := range strings.Split(ev, "\n") {
			if v, ok := strings.CutPrefix(line, "data:"); ok {
				data = append(data, strings.TrimPrefix(v, " "))
			}
		}
		out = append(out, strings.Join(data, "\n"))
	}
	return out
}

// jsonOnly returns h with an accept header that takes only JSON.
func jsonOnly(h [][2]string) [][2]string {
	out := make([][2]string, len(h))
	for i, kv := range h {
		if kv[0] == "accept" {
			kv[1] = "application/json"
		}
		out[i] = kv
	}
	return out
}
