//go:build cgo

package mosnhost

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"

	"mosn.io/proxy-wasm-go-host/proxywasm/common"
	v1 "mosn.io/proxy-wasm-go-host/proxywasm/v1"
	"mosn.io/proxy-wasm-go-host/wasmer"

	"github.com/stategate/stategate/internal/wasmexport"
)

// Options configure a Proxy.
type Options struct {
	// Module is the compiled filter (Compile).
	Module *Module
	// PluginConfig is the stategate configuration (Envoy's plugin `configuration`),
	// VMConfig the filter's settings (`vm_config.configuration`).
	PluginConfig, VMConfig []byte
	// Upstream is the origin requests go on to (http://127.0.0.1:3001); each keeps the path
	// the filter leaves it.
	Upstream string
	// Transport carries requests to the upstream; nil: a transport of the proxy's own.
	Transport http.RoundTripper
	// Log receives the guest's log lines; nil drops them.
	Log func(level int32, msg string)
}

// Proxy is one VM of the filter in mosn's host and the HTTP proxy around it. Streams take
// the VM in turns, one callback at a time, as one Envoy worker does.
type Proxy struct {
	o        Options
	upstream *url.URL
	ins      common.WasmInstance
	root     *imports

	mu      sync.Mutex // the VM's callbacks, the ids
	next    int32
	shared  sharedData
	metrics metrics
}

const rootID int32 = 1

// Module is a filter compiled by mosn's wasmer VM; each Proxy is an instance of it.
type Module struct{ mod common.WasmModule }

// Compile compiles a built filter (build/stategate-envoy.wasm, build/stategate-envoy-go.wasm)
// after the export shims (package notes).
func Compile(wasm []byte) (*Module, error) {
	module, err := wasmexport.Alias(wasm, "_initialize", "_start")
	if err != nil {
		return nil, fmt.Errorf("mosnhost: shim[_start]: %w", err)
	}
	if module, err = wasmexport.Alias(module, "proxy_on_memory_allocate", "malloc"); err != nil {
		return nil, fmt.Errorf("mosnhost: shim[malloc]: %w", err)
	}
	mod := wasmer.NewWasmerVM().NewModule(module)
	if mod == nil {
		return nil, errors.New("mosnhost: wasmer did not compile the module")
	}
	return &Module{mod: mod}, nil
}

// New instantiates the module in mosn's wasmer VM with the shims the filter needs (package
// notes), starts it and configures the plugin; an error names the step that failed.
func New(o Options) (*Proxy, error) {
	up, err := url.Parse(o.Upstream)
	if err != nil || up.Scheme == "" || up.Host == "" {
		return nil, fmt.Errorf("mosnhost: upstream[%s]: want an absolute http URL", o.Upstream)
	}
	if o.Module == nil {
		return nil, errors.New("mosnhost: no module")
	}
	if o.Transport == nil {
		o.Transport = &http.Transport{DisableCompression: true, MaxIdleConnsPerHost: 16}
	}
	p := &Proxy{o: o, upstream: up, next: rootID + 1, shared: sharedData{m: map[string]*sharedItem{}, cas: 0}}
	p.root = &imports{p: p}
	ins := o.Module.mod.NewInstance()
	v1.RegisterImports(ins)
	// mosn knows the ABI's old name for a local response, Envoy's ABI the new one: the same
	// eight i32 parameters, so the old implementation serves under the new name.
	if err := ins.RegisterFunc("env", "proxy_send_local_response", v1.ProxySendHttpResponse); err != nil {
		return nil, fmt.Errorf("mosnhost: shim[proxy_send_local_response]: %w", err)
	}
	for _, f := range []struct {
		module, name string
		f            any
	}{
		{"wasi_snapshot_preview1", "poll_oneoff", pollOneoff},
		{"env", "proxy_get_buffer_bytes", getBufferBytes},
		{"env", "proxy_get_shared_data", p.getSharedData},
	} {
		if err := ins.RegisterFunc(f.module, f.name, f.f); err != nil {
			return nil, fmt.Errorf("mosnhost: shim[%s]: %w", f.name, err)
		}
	}
	if err := ins.Start(); err != nil {
		return nil, fmt.Errorf("mosnhost: start: %w", err)
	}
	p.ins = ins
	if _, err := p.call(p.root, "proxy_on_context_create", rootID, 0); err != nil {
		return nil, fmt.Errorf("mosnhost: proxy_on_context_create: %w", err)
	}
	if ok, err := p.call(p.root, "proxy_on_vm_start", rootID, int32(len(o.VMConfig))); err != nil || ok != 1 {
		return nil, fmt.Errorf("mosnhost: proxy_on_vm_start: %d %v", ok, err)
	}
	if ok, err := p.call(p.root, "proxy_on_configure", rootID, int32(len(o.PluginConfig))); err != nil || ok != 1 {
		return nil, fmt.Errorf("mosnhost: proxy_on_configure (the configuration was refused): %d %v", ok, err)
	}
	return p, nil
}

// call runs one export with the stream's imports, the VM held; the result is the export's
// own (mosn's ABIContext would answer its import handler's Wait() instead).
func (p *Proxy) call(im *imports, name string, args ...int32) (int32, error) {
	f, err := p.ins.GetExportsFunc(name)
	if err != nil {
		return 0, err
	}
	in := make([]any, len(args))
	for i, a := range args {
		in[i] = a
	}
	p.ins.Lock(&v1.ABIContext{Imports: im, Instance: p.ins})
	defer p.ins.Unlock()
	res, err := f.Call(in...)
	if err != nil {
		return 0, fmt.Errorf("export[%s]: %w", name, err)
	}
	if r, ok := res.(int32); ok {
		return r, nil
	}
	return 0, nil
}

// MemoryBytes is the size of the guest's linear memory.
func (p *Proxy) MemoryBytes() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	mem, err := p.ins.GetExportsMem("memory")
	if err != nil {
		return -1
	}
	return len(mem)
}

// Metric is the value of the counter the filter defined as name (stategate.calls_denied).
func (p *Proxy) Metric(name string) int64 {
	p.metrics.mu.Lock()
	defer p.metrics.mu.Unlock()
	for i, n := range p.metrics.names {
		if n == name {
			return p.metrics.values[i]
		}
	}
	return 0
}

// Response is what a client gets.
type Response struct {
	Status int
	Header [][2]string // lower-case names, one pair per field line
	Body   []byte
}

// Exchange takes one request (method, path and query, header field lines, body) through
// the filter and, when the filter lets it go, through the upstream and back.
func (p *Proxy) Exchange(method, path, authority string, header [][2]string, body []byte) Response {
	p.mu.Lock()
	id := p.next
	p.next++
	p.mu.Unlock()
	s := &imports{p: p, reqHeaders: &headerMap{}, reqBody: &common.CommonBuffer{}}
	s.reqHeaders.pairs = append(s.reqHeaders.pairs, [2]string{":method", method}, [2]string{":path", path},
		[2]string{":authority", authority}, [2]string{":scheme", "http"})
	for _, kv := range header {
		s.reqHeaders.pairs = append(s.reqHeaders.pairs, [2]string{strings.ToLower(kv[0]), kv[1]})
	}
	_, _ = s.reqBody.Write(body)

	p.mu.Lock()
	defer p.mu.Unlock()
	defer func() {
		_, _ = p.call(s, "proxy_on_done", id)
		_, _ = p.call(s, "proxy_on_log", id)
		_, _ = p.call(s, "proxy_on_delete", id)
	}()
	if _, err := p.call(s, "proxy_on_context_create", id, rootID); err != nil {
		return failed(err)
	}
	act, err := p.call(s, "proxy_on_request_headers", id, int32(len(s.reqHeaders.pairs)), eos(len(body) == 0))
	if err == nil && s.local == nil && len(body) > 0 {
		act, err = p.call(s, "proxy_on_request_body", id, int32(len(body)), 1)
	}
	switch {
	case err != nil:
		return failed(err)
	case s.local != nil:
		return *s.local
	case act != int32(v1.ActionContinue):
		return Response{Status: http.StatusInternalServerError, Body: []byte("mosnhost: the filter paused the request at its end and never resumed it\n")}
	}

	// Upstream: the request as the filter left it (the unlock lets other streams use the
	// VM meanwhile, as Envoy's worker does while a request is upstream).
	p.mu.Unlock()
	answer, err := p.forward(s.reqHeaders, s.reqBody.Bytes())
	p.mu.Lock()
	if err != nil {
		return Response{Status: http.StatusServiceUnavailable, Header: [][2]string{{"content-type", "text/plain"}},
			Body: []byte("upstream connect error or disconnect/reset before headers: " + err.Error())}
	}
	s.respHeaders, s.respBody = &headerMap{pairs: answer.Header}, &common.CommonBuffer{}
	_, _ = s.respBody.Write(answer.Body)
	_, err = p.call(s, "proxy_on_response_headers", id, int32(len(answer.Header)), eos(len(answer.Body) == 0))
	if err == nil && s.local == nil && len(answer.Body) > 0 {
		_, err = p.call(s, "proxy_on_response_body", id, int32(len(answer.Body)), 1)
	}
	switch {
	case err != nil:
		return failed(err)
	case s.local != nil:
		return *s.local
	}
	out := Response{Status: http.StatusBadGateway, Body: append([]byte(nil), s.respBody.Bytes()...)}
	for _, kv := range s.respHeaders.pairs {
		if kv[0] == ":status" {
			out.Status, _ = strconv.Atoi(kv[1])
			continue
		}
		out.Header = append(out.Header, kv)
	}
	return out
}

func eos(b bool) int32 {
	if b {
		return 1
	}
	return 0
}

// failed is Envoy's answer for a VM that trapped, with failure_policy FAIL_CLOSED.
func failed(err error) Response {
	return Response{Status: http.StatusServiceUnavailable, Header: [][2]string{{"content-type", "text/plain"}},
		Body: []byte("mosnhost: the filter failed: " + err.Error())}
}

// forward sends the request to the upstream and reads its answer whole.
func (p *Proxy) forward(h *headerMap, body []byte) (Response, error) {
	method, _ := h.Get(":method")
	path, _ := h.Get(":path")
	authority, _ := h.Get(":authority")
	req, err := http.NewRequest(method, p.upstream.Scheme+"://"+p.upstream.Host+path, bytes.NewReader(body))
	if err != nil {
		return Response{}, err
	}
	req.Host = authority // Envoy keeps :authority
	for _, kv := range h.pairs {
		switch kv[0] {
		case ":method", ":path", ":authority", ":scheme", "content-length", "host", "transfer-encoding", "connection":
			continue
		}
		req.Header.Add(kv[0], kv[1])
	}
	resp, err := p.o.Transport.RoundTrip(req)
	if err != nil {
		return Response{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return Response{}, err
	}
	out := Response{Status: resp.StatusCode, Body: b, Header: [][2]string{{":status", strconv.Itoa(resp.StatusCode)}}}
	names := make([]string, 0, len(resp.Header))
	for k := range resp.Header {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		for _, v := range resp.Header[k] {
			out.Header = append(out.Header, [2]string{strings.ToLower(k), v})
		}
	}
	if resp.ContentLength >= 0 && resp.Header.Get("Content-Length") == "" {
		out.Header = append(out.Header, [2]string{"content-length", strconv.FormatInt(resp.ContentLength, 10)})
	}
	return out, nil
}

// ServeHTTP is the proxy.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, "mosnhost: reading the request: "+err.Error(), http.StatusBadRequest)
		return
	}
	var header [][2]string
	names := make([]string, 0, len(r.Header))
	for k := range r.Header {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		for _, v := range r.Header[k] {
			header = append(header, [2]string{k, v})
		}
	}
	if len(body) > 0 || (r.ContentLength == 0 && r.Method == http.MethodPost) {
		header = append(header, [2]string{"content-length", strconv.Itoa(len(body))})
	}
	out := p.Exchange(r.Method, r.URL.RequestURI(), r.Host, header, body)
	for _, kv := range out.Header {
		switch kv[0] {
		case "content-length", "transfer-encoding", "connection":
			continue
		}
		w.Header().Add(kv[0], kv[1])
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(out.Body)))
	w.WriteHeader(out.Status)
	_, _ = w.Write(out.Body)
}
