// Command extism-go is a whole stategate gateway as a host of the exchange module
// (build/stategate-exchange.wasm) on the official Extism Go SDK: an HTTP listener, an HTTP
// client, a map with compare-and-set, and a loop of calls (abi/ABI.md, "The exchange
// exports"). It shares no code with host/gateway: every MCP rule is the module's.
package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	extism "github.com/extism/go-sdk"
	"github.com/tetratelabs/wazero"
)

// Host serves clients through the module, sending what it decides to upstream.
type Host struct {
	upstream *url.URL
	client   *http.Client
	maxBody  int64
	// bodyTimeout bounds how long a request body may take to arrive.
	bodyTimeout time.Duration

	mu     sync.Mutex // one plugin instance; calls are serialised
	plugin *extism.Plugin
	stdio  *stdio // the module's stdin and stdout, for its stdio entry; nil: the named exports

	state     sync.Mutex
	store     map[string]string
	streamsMu sync.Mutex
	streams   map[string]map[chan []byte]bool // session -> its standing streams' channels
}

// Options configure a Host.
type Options struct {
	Module   []byte // build/stategate-exchange.wasm
	Config   []byte // the stategate configuration
	Upstream string // the MCP server's URL
	// PublicURL is the origin clients reach this host at (scheme://host[:port]): OAuth
	// discovery documents and challenges name it ("" : they pass unchanged).
	PublicURL string
	// Cache keeps the module's compiled code across hosts (nil: compiled for this one).
	Cache wazero.CompilationCache
	// BodyTimeout bounds how long a request body may take to arrive (default 30 s, as the
	// Go gateway): a slow client is answered 400 and its connection closed.
	BodyTimeout time.Duration
	// NamedExports calls the named exports (http_request, ...) with their input and output
	// through Extism's kernel even when the module has the stdio entry: what a host that
	// cannot give the module its stdin and stdout does (and the benchmark's baseline).
	NamedExports bool
}

// New loads the module with the stategate configuration.
func New(ctx context.Context, o Options) (*Host, error) {
	u, err := url.Parse(o.Upstream)
	if err != nil {
		return nil, err
	}
	// A redirect is the client's to follow: the forward is sent once, as given (abi/ABI.md).
	noRedirect := func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	h := &Host{upstream: u, client: &http.Client{CheckRedirect: noRedirect}, maxBody: 16 << 20, bodyTimeout: o.BodyTimeout, store: map[string]string{}}
	if h.bodyTimeout <= 0 {
		h.bodyTimeout = 30 * time.Second
	}
	get := extism.NewHostFunctionWithStack("state_get", func(_ context.Context, p *extism.CurrentPlugin, stack []uint64) {
		in, _ := p.ReadBytes(stack[0])
		stack[0], _ = p.WriteBytes(h.get(in))
	}, []extism.ValueType{extism.ValueTypePTR}, []extism.ValueType{extism.ValueTypePTR})
	cas := extism.NewHostFunctionWithStack("state_cas", func(_ context.Context, p *extism.CurrentPlugin, stack []uint64) {
		in, _ := p.ReadBytes(stack[0])
		stack[0], _ = p.WriteBytes(h.cas(in))
	}, []extism.ValueType{extism.ValueTypePTR}, []extism.ValueType{extism.ValueTypePTR})
	exchange, _ := json.Marshal(struct { // the exchange options (abi/ABI.md)
		Loopback  bool   `json:"loopback"`
		Upstream  string `json:"upstream,omitempty"`
		PublicURL string `json:"publicUrl,omitempty"`
	}{true, o.Upstream, o.PublicURL})
	manifest := extism.Manifest{Wasm: []extism.Wasm{extism.WasmData{Data: o.Module}},
		Config: map[string]string{"config": string(o.Config), "exchange": string(exchange)}}
	rc := wazero.NewRuntimeConfig()
	if o.Cache != nil {
		rc = rc.WithCompilationCache(o.Cache)
	}
	// The module reads a real clock (lease expiry) and real randomness (session ids).
	mc := wazero.NewModuleConfig().WithSysWalltime().WithSysNanotime().WithRandSource(rand.Reader)
	// Its stdin and stdout carry the calls' input and output (stdioEntry).
	sio := &stdio{}
	mc = mc.WithStdin(sio).WithStdout(sio)
	h.plugin, err = extism.NewPlugin(ctx, manifest, extism.PluginConfig{EnableWasi: true, ModuleConfig: mc, RuntimeConfig: rc},
		[]extism.HostFunction{get, cas})
	if err == nil && !o.NamedExports && h.plugin.FunctionExists(stdioEntry) {
		h.stdio = sio
	}
	return h, err
}

// invoke runs export fn on in and answers a copy of its output: through the stdio entry
// when the host uses it, else through Extism's kernel.
func (h *Host) invoke(fn string, in []byte) ([]byte, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.stdio != nil {
		h.stdio.in, h.stdio.out = in, h.stdio.out[:0]
		rc, _, err := h.plugin.Call(stdioEntry, []byte(fn))
		h.stdio.in = nil
		if err == nil && rc != 0 {
			err = errors.New(stdioEntry + ": the module's stdout refused its output")
		}
		return bytes.Clone(h.stdio.out), err
	}
	_, out, err := h.plugin.Call(fn, in)
	return bytes.Clone(out), err
}

// stdioEntry is the module's stdio entry (abi.ExportStdioCall): its Extism input names the
// export to run, whose input the module reads from its WASI stdin and whose output it
// writes to its WASI stdout. wazero's fd_read and fd_write copy those straight into and
// out of the module's memory, one host call each, where go-pdk's Input and Output take one
// call per 8 bytes through Extism's kernel. The Go SDK gives a host no other way into the
// module: Plugin.Memory is the kernel's memory, and Call runs exports without parameters.
const stdioEntry = "stategate_stdio"

// stdio is the module's stdin (the call's input, then EOF) and stdout (the call's output).
type stdio struct {
	in  []byte
	out []byte
}

func (s *stdio) Read(p []byte) (int, error) {
	if len(s.in) == 0 {
		return 0, io.EOF
	}
	n := copy(p, s.in)
	s.in = s.in[n:]
	return n, nil
}

func (s *stdio) Write(p []byte) (int, error) {
	s.out = append(s.out, p...)
	return len(p), nil
}

// Close frees the plugin.
func (h *Host) Close(ctx context.Context) error { return h.plugin.Close(ctx) }

// get answers state_get: ["k1", ...] -> [value-or-null, ...].
func (h *Host) get(in []byte) []byte {
	var keys []string
	if json.Unmarshal(in, &keys) != nil {
		return []byte(`{"error":"bad input"}`)
	}
	h.state.Lock()
	out := make([]*string, len(keys))
	for i, k := range keys {
		if v, ok := h.store[k]; ok {
			out[i] = &v
		}
	}
	h.state.Unlock()
	b, _ := json.Marshal(out)
	return b
}

// cas answers state_cas: set key to next only if it holds prev (null: absent).
func (h *Host) cas(in []byte) []byte {
	var r struct {
		Key        string
		Prev, Next *string
	}
	if json.Unmarshal(in, &r) != nil {
		return []byte(`{"error":"bad input"}`)
	}
	h.state.Lock()
	defer h.state.Unlock()
	cur, ok := h.store[r.Key]
	if ok != (r.Prev != nil) || ok && cur != *r.Prev {
		return []byte("false")
	}
	if r.Next == nil {
		delete(h.store, r.Key)
	} else {
		h.store[r.Key] = *r.Next
	}
	return []byte("true")
}

// call runs an export on head and body, and splits its output the same way.
func (h *Host) call(fn string, head any, body []byte) (map[string]json.RawMessage, []byte, error) {
	hb, _ := json.Marshal(head)
	out, err := h.invoke(fn, append(append(hb, '\n'), body...))
	if err != nil {
		return nil, nil, err
	}
	line, rest, _ := bytes.Cut(out, []byte("\n"))
	var m map[string]json.RawMessage
	if err := json.Unmarshal(line, &m); err != nil {
		return nil, nil, err
	}
	h.notify(m)
	return m, rest, nil
}

func str(m map[string]json.RawMessage, k string) string {
	var s string
	json.Unmarshal(m[k], &s)
	return s
}

func num(m map[string]json.RawMessage, k string) int {
	var n int
	json.Unmarshal(m[k], &n)
	return n
}

func pairs(m map[string]json.RawMessage, k string) [][2]string {
	var p [][2]string
	json.Unmarshal(m[k], &p)
	return p
}

func ServeHTTPError(w http.ResponseWriter, err error) {
	http.Error(w, "stategate module: "+err.Error(), http.StatusInternalServerError)
}

// ServeHTTP is the loop: http_request, then answer, wait, stream or forward.
func (h *Host) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// A body must arrive within bodyTimeout: slow-body connections do not pile up. One
	// that does not is refused and its connection closed (the deadline stays).
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Now().Add(h.bodyTimeout))
	body, err := io.ReadAll(io.LimitReader(r.Body, h.maxBody+1))
	if err != nil {
		w.Header().Set("Connection", "close")
		write(w, http.StatusBadRequest, [][2]string{{"Content-Type", "application/json"}},
			[]byte(`{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"the request body could not be read in time"}}`))
		return
	}
	_ = rc.SetReadDeadline(time.Time{})
	hdr := [][2]string{{"Host", r.Host}}
	for k, vs := range r.Header {
		for _, v := range vs {
			hdr = append(hdr, [2]string{k, v})
		}
	}
	req := map[string]any{"method": r.Method, "path": r.URL.RequestURI(), "headers": hdr, "waitedMs": 0}
	for {
		d, out, err := h.call("http_request", req, body)
		if err != nil {
			ServeHTTPError(w, err)
			return
		}
		switch str(d, "do") {
		case "answer":
			write(w, num(d, "status"), pairs(d, "headers"), out)
		case "wait":
			time.Sleep(time.Duration(num(d, "afterMs")) * time.Millisecond)
			req["waitedMs"] = req["waitedMs"].(int) + num(d, "afterMs")
			continue
		case "stream":
			h.stream(w, r, str(d, "session"))
		case "forward":
			h.forward(w, r, d, out)
		}
		return
	}
}

func write(w http.ResponseWriter, status int, hdr [][2]string, body []byte) {
	for _, p := range hdr {
		w.Header().Add(p[0], p[1])
	}
	if status != 0 {
		w.WriteHeader(status)
	}
	if len(body) == 0 && status == 0 {
		return // nothing to write yet (an answer read whole): writing would send a 200 head
	}
	w.Write(body)
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
}

// chunk is one read of the upstream's answer.
type chunk struct {
	resp *http.Response
	b    []byte
	err  error
}

// forward sends the module's request upstream; with an exchange, feeds it the answer. An
// answer the upstream breaks off once the client has its head (passed through, or piped)
// aborts the client's connection with http.ErrAbortHandler, as httputil.ReverseProxy does:
// ended cleanly, a cut answer would look complete.
func (h *Host) forward(w http.ResponseWriter, r *http.Request, d map[string]json.RawMessage, body []byte) {
	u := *h.upstream
	if p, err := url.Parse(str(d, "path")); err == nil {
		if u.Path == "" || u.Path == "/" || string(d["origin"]) == "true" { // origin: a discovery document
			u.Path = p.Path
		}
		u.RawQuery = p.RawQuery
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
	req, _ := http.NewRequestWithContext(ctx, str(d, "method"), u.String(), bytes.NewReader(body))
	for _, p := range pairs(d, "headers") {
		if !strings.EqualFold(p[0], "Host") && !strings.EqualFold(p[0], "Content-Length") {
			req.Header.Add(p[0], p[1])
		}
	}
	if len(body) == 0 {
		req.Body = nil
	}
	id, rewrite := num(d, "exchange"), string(d["rewrite"]) == "true"
	chunks := make(chan chunk, 4)
	go func() { // the upstream's answer, read by chunks
		defer close(chunks)
		resp, err := h.client.Do(req)
		if err != nil {
			chunks <- chunk{err: err}
			return
		}
		defer resp.Body.Close()
		chunks <- chunk{resp: resp}
		for {
			buf := make([]byte, 32<<10)
			n, err := resp.Body.Read(buf)
			if n > 0 || err != nil {
				chunks <- chunk{b: buf[:n], err: err}
			}
			if err != nil {
				return
			}
		}
	}()
	var timeout <-chan time.Time
	if ms := num(d, "timeoutMs"); ms > 0 && rewrite {
		t := time.NewTimer(time.Duration(ms) * time.Millisecond)
		defer t.Stop()
		timeout = t.C
	}
	var resp *http.Response
	var inject chan []byte // the session's notifications, once its standing stream is open
	for {
		select {
		case ev := <-inject:
			write(w, 0, nil, ev)
		case c, ok := <-chunks:
			if !ok {
				cancel()
				return
			}
			if c.resp != nil {
				resp = c.resp
				if !rewrite {
					hdr := w.Header()
					for k, vs := range resp.Header {
						if k != "Connection" && k != "Transfer-Encoding" && k != "Keep-Alive" {
							hdr[k] = vs
						}
					}
					w.WriteHeader(resp.StatusCode)
				}
				continue
			}
			if !rewrite {
				switch {
				case c.err == nil:
					write(w, 0, nil, c.b)
				case c.err == io.EOF:
					w.Write(c.b)
				default: // the upstream broke off: abort the client's connection, never end its answer
					write(w, 0, nil, c.b)
					cancel()
					panic(http.ErrAbortHandler)
				}
				continue
			}
			out, more := h.answer(w, id, resp, c)
			if sid := str(d, "stream"); sid != "" && inject == nil && num(out, "status") == 200 {
				ch, leave := h.subscribe(sid)
				defer leave()
				inject = ch
			}
			if !more {
				go h.drain(cancel, id, resp, chunks)
				return
			}
			if string(out["pipe"]) == "true" {
				rewrite = false // the module has the head: the rest of the body goes as it comes
			}
		case <-timeout:
			d, out, err := h.call("http_timeout", map[string]any{"exchange": id}, nil)
			if err == nil {
				write(w, num(d, "status"), pairs(d, "headers"), out)
			}
			if err != nil || string(d["abandon"]) == "true" {
				cancel()
				return
			}
			go h.drain(cancel, id, resp, chunks) // the module records what the upstream did
			return
		case <-r.Context().Done():
			if rewrite {
				d, _, err := h.call("http_answer", map[string]any{"exchange": id, "error": "cancelled"}, nil)
				if err == nil && string(d["abandon"]) == "false" {
					go h.drain(cancel, id, resp, chunks) // a moving call's outcome is still recorded
					return
				}
			}
			cancel()
			go h.drain(func() {}, 0, resp, chunks)
			return
		}
	}
}

// answer feeds one chunk to http_answer and writes its output; more is false once it ended.
func (h *Host) answer(w http.ResponseWriter, id int, resp *http.Response, c chunk) (out map[string]json.RawMessage, more bool) {
	head := map[string]any{"exchange": id}
	switch {
	case resp == nil:
		head["error"] = "broken"
		var op *net.OpError
		if errors.As(c.err, &op) && op.Op == "dial" {
			head["error"] = "unreachable"
		}
	case c.err != nil && c.err != io.EOF:
		head["error"] = "broken"
	default:
		var hdr [][2]string
		for k, vs := range resp.Header {
			for _, v := range vs {
				hdr = append(hdr, [2]string{k, v})
			}
		}
		head["status"], head["headers"], head["more"] = resp.StatusCode, hdr, c.err == nil
	}
	d, body, err := h.call("http_answer", head, c.b)
	if err != nil {
		return nil, false
	}
	if w != nil {
		write(w, num(d, "status"), pairs(d, "headers"), body)
	}
	return d, string(d["end"]) != "true"
}

// drain feeds the rest of an answer nobody waits for any more (outputs go nowhere).
func (h *Host) drain(cancel func(), id int, resp *http.Response, chunks chan chunk) {
	defer cancel()
	for c := range chunks {
		if c.resp != nil {
			resp = c.resp
			continue
		}
		if id != 0 {
			if _, more := h.answer(nil, id, resp, c); !more {
				id = 0
			}
		}
	}
}

// subscribe registers a standing stream of session: notifications come on ch until leave,
// which forgets the session once its last stream has left.
func (h *Host) subscribe(session string) (ch chan []byte, leave func()) {
	ch = make(chan []byte, 64)
	h.streamsMu.Lock()
	defer h.streamsMu.Unlock()
	if h.streams == nil {
		h.streams = map[string]map[chan []byte]bool{}
	}
	if h.streams[session] == nil {
		h.streams[session] = map[chan []byte]bool{}
	}
	h.streams[session][ch] = true
	return ch, func() {
		h.streamsMu.Lock()
		defer h.streamsMu.Unlock()
		delete(h.streams[session], ch)
		if len(h.streams[session]) == 0 {
			delete(h.streams, session)
		}
	}
}

func (h *Host) stream(w http.ResponseWriter, r *http.Request, session string) {
	ch, leave := h.subscribe(session)
	defer leave()
	write(w, 200, [][2]string{{"Content-Type", "text/event-stream"}, {"Cache-Control", "no-cache"}}, nil)
	for {
		select {
		case ev := <-ch:
			write(w, 0, nil, ev)
		case <-r.Context().Done():
			return
		}
	}
}

// notify writes the events of an output's "notify" on the streams they address.
func (h *Host) notify(m map[string]json.RawMessage) {
	var ns []struct {
		To, Except *string
		Event      string
	}
	if json.Unmarshal(m["notify"], &ns) != nil {
		return
	}
	h.streamsMu.Lock()
	defer h.streamsMu.Unlock()
	for _, n := range ns {
		for session, subs := range h.streams {
			if n.To != nil && session != *n.To || n.Except != nil && session == *n.Except {
				continue
			}
			for ch := range subs {
				select {
				case ch <- []byte(n.Event):
				default:
				}
			}
		}
	}
}
