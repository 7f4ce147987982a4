// Package gateway is the standalone stategate gateway: a Streamable HTTP reverse proxy in
// front of one MCP server that applies the plugin to real traffic of both protocol eras and
// keeps workflow state in a store.
package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stategate/stategate/abi"
	"github.com/stategate/stategate/host"
	"github.com/stategate/stategate/host/store"
	"github.com/stategate/stategate/plugin/engine"
	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
)

// Options configures a Gateway.
type Options struct {
	Upstream     *url.URL
	Plugin       *host.Pool
	Config       []byte // the stategate configuration the plugin runs with
	Store        store.Store
	Logger       *slog.Logger
	MaxBodyBytes int64             // request and buffered response cap (default 16 MiB)
	Transport    http.RoundTripper // default: a keep-alive transport sized for a gateway
}

// Gateway is an http.Handler.
type Gateway struct {
	opts      Options
	log       *slog.Logger
	client    *http.Client
	proxy     *httputil.ReverseProxy
	bound     map[string]bool // tools bound to a workflow: the gate fails closed for these
	fires     map[string]bool // bound tools whose success fires an event
	leaseTTL  time.Duration   // how long a moving call may hold its state keys
	workflows bool
	principal string // request header naming the principal

	known   *knownTools
	streams *streams
	lists   *listCache
	Stats   Stats
}

// Stats counts what the gateway did; every field is read with atomic loads.
type Stats struct {
	Requests, ToolCalls, Denied, Timeouts, Invalidations, Transitions, ListChanged atomic.Int64
	Faults                                                                         [9]atomic.Int64
	PluginReplaced                                                                 atomic.Int64
}

// New returns a Gateway.
func New(opts Options) (*Gateway, error) {
	if opts.Upstream == nil || opts.Plugin == nil || opts.Store == nil {
		return nil, errors.New("gateway: upstream, plugin and store are required")
	}
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = 16 << 20
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if opts.Transport == nil {
		opts.Transport = &http.Transport{
			Proxy:               nil,
			DialContext:         (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			MaxIdleConns:        512,
			MaxIdleConnsPerHost: 256,
			IdleConnTimeout:     90 * time.Second,
			ForceAttemptHTTP2:   false,
		}
	}
	g := &Gateway{
		opts:    opts,
		log:     opts.Logger,
		client:  &http.Client{Transport: opts.Transport, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }},
		bound:   map[string]bool{},
		fires:   map[string]bool{},
		known:   newKnownTools(10000),
		streams: newStreams(),
		lists:   newListCache(64, 64<<20),
	}
	cfg := gjson.ParseBytes(opts.Config)
	cfg.Get("workflows").ForEach(func(_, w gjson.Result) bool {
		g.workflows = true
		w.Get("tools").ForEach(func(k, b gjson.Result) bool {
			g.bound[k.Str] = true
			if b.Get("event").Str != "" {
				g.fires[k.Str] = true
			}
			return true
		})
		return true
	})
	g.principal = cfg.Get("principal.header").Str
	// A lease outlives the longest call it can cover (the upstream's timeout) with room to
	// store the transition; a crashed holder's lease then lapses on its own.
	longest := int64(30000)
	if t := cfg.Get("limits.timeoutMs"); t.Exists() {
		longest = t.Int()
	}
	cfg.Get("limits.tools").ForEach(func(_, v gjson.Result) bool {
		if t := v.Get("timeoutMs").Int(); t > longest {
			longest = t
		}
		return true
	})
	g.leaseTTL = time.Duration(longest)*time.Millisecond + 30*time.Second
	g.proxy = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL = g.target(pr.In.URL)
			pr.Out.Host = ""
			pr.SetXForwarded()
		},
		Transport:     opts.Transport,
		FlushInterval: -1, // SSE: every write goes out at once
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			g.fault(FaultUpstream, err)
			w.WriteHeader(http.StatusBadGateway)
		},
	}
	return g, nil
}

// target maps a request URL to the upstream: an upstream with a path is one MCP endpoint
// (every request goes to it); an upstream without one gets the request's path.
func (g *Gateway) target(in *url.URL) *url.URL {
	u := *g.opts.Upstream
	if u.Path == "" || u.Path == "/" {
		u.Path = in.Path
	}
	u.RawQuery = in.RawQuery
	return &u
}

// ServeHTTP implements http.Handler.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	g.Stats.Requests.Add(1)
	switch r.Method {
	case http.MethodPost:
		g.servePost(w, r)
	case http.MethodDelete:
		rec := &statusRecorder{ResponseWriter: w}
		g.proxy.ServeHTTP(rec, r)
		if sid := r.Header.Get("Mcp-Session-Id"); sid != "" && rec.status/100 == 2 {
			g.endSession(r.Context(), sid)
		}
	case http.MethodGet:
		if sid := r.Header.Get("Mcp-Session-Id"); sid != "" && strings.Contains(r.Header.Get("Accept"), "text/event-stream") {
			g.serveGetStream(w, r, sid)
			return
		}
		g.proxy.ServeHTTP(w, r)
	default:
		g.proxy.ServeHTTP(w, r)
	}
}

func (g *Gateway) endSession(ctx context.Context, sid string) {
	if err := g.opts.Store.Forget(context.WithoutCancel(ctx), sid); err != nil {
		g.log.Warn("forget session", "session", sid, "err", err)
	}
	g.known.forget(sid)
}

// call is one JSON-RPC request the gateway acts on.
type call struct {
	r         *http.Request
	body      []byte
	id        gjson.Result
	method    string
	session   string
	principal string
	version   string
	start     time.Time
	unlock    func() // releases the state keys a moving call holds
}

func (g *Gateway) servePost(w http.ResponseWriter, r *http.Request) {
	// The gateway must read exactly the request the server will read: bodies it cannot
	// read byte for byte (compressed, another charset) are refused, not passed on ungated.
	if ce := r.Header.Get("Content-Encoding"); ce != "" && !strings.EqualFold(ce, "identity") {
		writeRPCError(w, http.StatusUnsupportedMediaType, "null", -32600, "compressed request bodies ("+ce+") are not accepted by the gateway")
		return
	}
	if _, params, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err == nil {
		if cs := params["charset"]; cs != "" && !strings.EqualFold(cs, "utf-8") && !strings.EqualFold(cs, "utf8") {
			writeRPCError(w, http.StatusUnsupportedMediaType, "null", -32600, "request charset "+strconv.Quote(cs)+" is not accepted; send UTF-8")
			return
		}
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, g.opts.MaxBodyBytes+1))
	if err != nil {
		g.fault(FaultClientGone, err)
		return
	}
	if int64(len(body)) > g.opts.MaxBodyBytes {
		writeRPCError(w, http.StatusRequestEntityTooLarge, "null", -32600,
			"request body over the gateway's limit of "+strconv.FormatInt(g.opts.MaxBodyBytes, 10)+" bytes")
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	if len(trimmed) == 0 || (trimmed[0] != '{' && trimmed[0] != '[') || !json.Valid(body) {
		writeRPCError(w, http.StatusBadRequest, "null", -32700, "parse error: the body is not one JSON-RPC message or batch")
		return
	}
	if hasDuplicateKeys(gjson.ParseBytes(body), 0) {
		writeRPCError(w, http.StatusBadRequest, "null", -32600, "request repeats a member name in an object; the gateway and the server could read different values")
		return
	}
	if trimmed[0] == '[' {
		if v := r.Header.Get("MCP-Protocol-Version"); v >= "2025-06-18" {
			writeRPCError(w, http.StatusBadRequest, "null", -32600, "JSON-RPC batches are not part of protocol version "+v)
			return
		}
		g.serveBatch(w, r, body)
		return
	}
	c := &call{r: r, body: body, start: time.Now(),
		session: r.Header.Get("Mcp-Session-Id"), version: r.Header.Get("MCP-Protocol-Version")}
	if g.principal != "" {
		c.principal = r.Header.Get(g.principal)
	}
	m := gjson.GetManyBytes(body, "method", "id", "params.name", "params._meta.io\\.modelcontextprotocol/protocolVersion")
	c.method, c.id = m[0].Str, m[1]
	if c.version == "" {
		c.version = m[3].Str
	}
	// 2026-07-28 requests name their method and target in headers: a disagreement with the
	// body is rejected, so the gate cannot be bypassed by a misleading header.
	if hm := r.Header.Get("Mcp-Method"); hm != "" && hm != c.method {
		writeRPCError(w, http.StatusBadRequest, idRaw(c.id), -32600, "Mcp-Method header "+strconv.Quote(hm)+" does not match the body's method "+strconv.Quote(c.method))
		return
	}
	if hn := r.Header.Get("Mcp-Name"); hn != "" && (c.method == "tools/call" || c.method == "prompts/get") && hn != m[2].Str {
		writeRPCError(w, http.StatusBadRequest, idRaw(c.id), -32600, "Mcp-Name header "+strconv.Quote(hn)+" does not match the body's name "+strconv.Quote(m[2].Str))
		return
	}
	if !c.id.Exists() {
		g.proxy.ServeHTTP(w, r) // a notification or response: nothing to do
		return
	}
	switch c.method {
	case "initialize":
		g.forward(w, c, g.rewriteInitialize)
	case "tools/list":
		g.forward(w, c, g.rewriteToolsList)
	case "tools/call":
		g.serveToolCall(w, c)
	default:
		g.proxy.ServeHTTP(w, r)
	}
}

// rewriter turns the upstream's JSON-RPC response to c into the one the client gets. It
// answers the message unchanged when it cannot do better, and any extra messages to send
// before it (notifications).
type rewriter func(ctx context.Context, c *call, msg []byte) (out []byte, before [][]byte)

// forward sends c upstream and rewrites the response message whose id matches c's, in a
// JSON body or in an SSE stream (every other event passes through as it arrives).
func (g *Gateway) forward(w http.ResponseWriter, c *call, rw rewriter) {
	g.forwardCtx(c.r.Context(), w, c, rw, nil)
}

// upstreamRequest builds the request to the upstream for c.
func (g *Gateway) upstreamRequest(ctx context.Context, c *call) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, g.target(c.r.URL).String(), bytes.NewReader(c.body))
	if err != nil {
		return nil, err
	}
	copyHeaders(req.Header, c.r.Header)
	// The gateway rewrites this answer, so it must see it uncompressed: Go's transport
	// then negotiates gzip itself and decompresses.
	req.Header.Del("Accept-Encoding")
	if !acceptsSSE(c.r) {
		// A client that takes only JSON still gets an answer from servers that insist on
		// both: an SSE answer is collapsed to its response (see collapseSSE).
		req.Header.Set("Accept", "application/json, text/event-stream")
	}
	req.ContentLength = int64(len(c.body))
	if host, _, err := net.SplitHostPort(c.r.RemoteAddr); err == nil {
		req.Header.Set("X-Forwarded-For", host)
	}
	return req, nil
}

// forwardCtx is forward with an explicit upstream context; onTimeout, when set, is the
// result to answer if ctx expires first.
func (g *Gateway) forwardCtx(ctx context.Context, w http.ResponseWriter, c *call, rw rewriter, onTimeout []byte) {
	req, err := g.upstreamRequest(ctx, c)
	if err != nil {
		g.fault(FaultUpstream, err)
		writeRPCError(w, http.StatusBadGateway, idRaw(c.id), -32603, "gateway: "+err.Error())
		return
	}
	resp, err := g.client.Do(req)
	if err != nil {
		if onTimeout != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) && c.r.Context().Err() == nil {
			g.Stats.Timeouts.Add(1)
			g.writeResult(w, c, onTimeout)
			return
		}
		if c.r.Context().Err() != nil {
			g.fault(FaultClientGone, err)
			return
		}
		g.fault(FaultUpstream, err)
		writeRPCError(w, http.StatusBadGateway, idRaw(c.id), -32603, "upstream unavailable: "+err.Error())
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound && c.session != "" {
		g.endSession(ctx, c.session) // the upstream no longer knows the session
	}
	ct := resp.Header.Get("Content-Type")
	h := w.Header()
	copyHeaders(h, resp.Header)
	switch {
	case resp.StatusCode != http.StatusOK:
		w.WriteHeader(resp.StatusCode)
		io.Copy(w, resp.Body)
	case strings.HasPrefix(ct, "text/event-stream") && !acceptsSSE(c.r):
		g.collapseSSE(ctx, w, c, resp, rw, onTimeout)
	case strings.HasPrefix(ct, "text/event-stream"):
		g.forwardSSE(ctx, w, c, resp, rw, onTimeout)
	case strings.HasPrefix(ct, "application/json"):
		msg, err := io.ReadAll(io.LimitReader(resp.Body, g.opts.MaxBodyBytes+1))
		if err != nil {
			if onTimeout != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
				g.Stats.Timeouts.Add(1)
				h.Del("Content-Length")
				g.writeResult(w, c, onTimeout)
				return
			}
			g.fault(FaultUpstream, err)
			writeRPCError(w, http.StatusBadGateway, idRaw(c.id), -32603, "upstream failed mid-answer: "+err.Error())
			return
		}
		if int64(len(msg)) > g.opts.MaxBodyBytes {
			g.fault(FaultUpstreamBody, errors.New("upstream answer over the body limit: passed through"))
			h.Del("Content-Length")
			w.WriteHeader(resp.StatusCode)
			w.Write(msg)
			io.Copy(w, resp.Body)
			return
		}
		out, before := rw(ctx, c, msg)
		h.Del("Content-Length")
		if len(before) > 0 && acceptsSSE(c.r) {
			// Notifications ride on the same response: answer as SSE, notifications first.
			h.Set("Content-Type", "text/event-stream")
			h.Set("Cache-Control", "no-cache")
			w.WriteHeader(http.StatusOK)
			var buf []byte
			for _, n := range before {
				buf = appendEvent(buf, "message", "", n)
			}
			buf = appendEvent(buf, "message", "", out)
			w.Write(buf)
			return
		}
		if len(before) > 0 {
			g.streams.send(c.session, before) // no SSE on this response: use the GET stream
		}
		h.Set("Content-Length", strconv.Itoa(len(out)))
		w.WriteHeader(http.StatusOK)
		w.Write(out)
	default:
		w.WriteHeader(resp.StatusCode)
		io.Copy(w, resp.Body)
	}
}

// forwardSSE streams the upstream's SSE answer: events pass through as they come, and
// the response to c is rewritten (with any notifications written just before it).
func (g *Gateway) forwardSSE(ctx context.Context, w http.ResponseWriter, c *call, resp *http.Response, rw rewriter, onTimeout []byte) {
	h := w.Header()
	h.Del("Content-Length")
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	flush := func() {
		if flusher != nil {
			flusher.Flush()
		}
	}
	flush()
	rd := newSSEReader(resp.Body)
	answered := false
	for {
		ev, err := rd.next()
		if err != nil {
			if !answered && onTimeout != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) && c.r.Context().Err() == nil {
				g.Stats.Timeouts.Add(1)
				w.Write(appendEvent(nil, "message", "", g.resultMessage(c, onTimeout)))
				flush()
			} else if err != io.EOF && !answered {
				if c.r.Context().Err() != nil {
					g.fault(FaultClientGone, err)
				} else {
					g.fault(FaultUpstream, err)
				}
			}
			return
		}
		if !answered && len(ev.data) > 0 && isResponseTo(ev.data, c.id) {
			answered = true
			out, before := rw(ctx, c, ev.data)
			var buf []byte
			for _, n := range before {
				buf = appendEvent(buf, "message", "", n)
			}
			if bytes.Equal(out, ev.data) {
				buf = append(buf, ev.raw...)
			} else {
				buf = appendEvent(buf, ev.name, ev.id, out)
			}
			w.Write(buf)
			flush()
			continue
		}
		w.Write(ev.raw)
		flush()
	}
}

// collapseSSE answers a client that accepts only JSON from an SSE answer: the response to
// c becomes the JSON body; every other message goes to the session's GET stream.
func (g *Gateway) collapseSSE(ctx context.Context, w http.ResponseWriter, c *call, resp *http.Response, rw rewriter, onTimeout []byte) {
	h := w.Header()
	h.Del("Content-Length")
	h.Set("Content-Type", "application/json")
	rd := newSSEReader(resp.Body)
	want := idRaw(c.id)
	for {
		ev, err := rd.next()
		if err != nil {
			if onTimeout != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) && c.r.Context().Err() == nil {
				g.Stats.Timeouts.Add(1)
				g.writeResult(w, c, onTimeout)
				return
			}
			g.fault(FaultUpstream, fmt.Errorf("sse answer ended without a response: %w", err))
			writeRPCError(w, http.StatusBadGateway, want, -32603, "upstream ended its answer without a response")
			return
		}
		if len(ev.data) == 0 {
			continue
		}
		if !isResponseTo(ev.data, c.id) {
			if !g.streams.send(c.session, [][]byte{append([]byte(nil), ev.data...)}) {
				g.fault(FaultUpstreamBody, errors.New("a message for a JSON-only client was dropped: the session has no GET stream"))
			}
			continue
		}
		out, before := rw(ctx, c, ev.data)
		if len(before) > 0 {
			g.streams.send(c.session, before)
		}
		h.Set("Content-Length", strconv.Itoa(len(out)))
		w.WriteHeader(http.StatusOK)
		w.Write(out)
		return
	}
}

// isResponseTo reports whether data is a JSON-RPC response (result or error) to the
// request id: ids compare by value (1.0 and 1, "\u0061" and "a" are the same id).
func isResponseTo(data []byte, id gjson.Result) bool {
	m := gjson.GetManyBytes(data, "id", "method")
	if !m[0].Exists() || m[1].Exists() {
		return false
	}
	got := m[0]
	switch {
	case got.Type != id.Type:
		return false
	case got.Type == gjson.Number:
		return got.Num == id.Num && got.Raw != "" && id.Raw != ""
	case got.Type == gjson.String:
		return got.Str == id.Str
	}
	return got.Raw == id.Raw
}

// rewriteInitialize declares capabilities.tools.listChanged when workflows are configured,
// since the gateway sends notifications/tools/list_changed when a workflow moves.
func (g *Gateway) rewriteInitialize(_ context.Context, c *call, msg []byte) ([]byte, [][]byte) {
	if !g.workflows {
		return msg, nil
	}
	res := gjson.GetBytes(msg, "result")
	if !res.IsObject() || gjson.GetBytes(msg, "result.capabilities.tools.listChanged").Type == gjson.True {
		return msg, nil
	}
	out, err := sjson.SetBytes(msg, "result.capabilities.tools.listChanged", true)
	if err != nil {
		g.fault(FaultDecoratePlugin, err)
		return msg, nil
	}
	return out, nil
}

// writeResult answers c with a tools/call result the gateway made (a denial or a
// timeout), as application/json.
func (g *Gateway) writeResult(w http.ResponseWriter, c *call, result []byte) {
	msg := g.resultMessage(c, result)
	h := w.Header()
	h.Del("Content-Length")
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(msg)))
	w.WriteHeader(http.StatusOK)
	w.Write(msg)
}

// resultMessage wraps result as the JSON-RPC response to c, with its duration in _meta.
func (g *Gateway) resultMessage(c *call, result []byte) []byte {
	msg := make([]byte, 0, len(result)+64)
	msg = append(msg, `{"jsonrpc":"2.0","id":`...)
	msg = append(msg, idRaw(c.id)...)
	msg = append(msg, `,"result":`...)
	msg = append(msg, result...)
	msg = append(msg, '}')
	return withDuration(msg, c.start)
}

// withDuration sets result._meta["dev.stategate/durationMs"] on a JSON-RPC response.
func withDuration(msg []byte, start time.Time) []byte {
	if !gjson.GetBytes(msg, "result").IsObject() {
		return msg
	}
	ms := float64(time.Since(start).Microseconds()) / 1000
	out, err := sjson.SetBytes(msg, "result._meta."+strings.ReplaceAll(abi.MetaDuration, ".", `\.`), ms)
	if err != nil {
		return msg
	}
	return out
}

func (g *Gateway) fault(f Fault, err error, attrs ...any) Policy {
	g.Stats.Faults[f].Add(1)
	p := policyFor(f)
	g.log.Warn("fault", append([]any{"kind", f.String(), "policy", [...]string{"fail_open", "fail_closed", "report", "bad_gateway"}[p], "err", err}, attrs...)...)
	return p
}

// gateUnavailable is the fail-closed denial result.
func gateUnavailable(tool string) []byte {
	return engine.AppendErrorResult(nil, abi.DenyGateUnavailable, gateUnavailableText,
		`{"tool":`+strconv.Quote(tool)+`}`)
}

func writeRPCError(w http.ResponseWriter, status int, id string, code int, message string) {
	body := `{"jsonrpc":"2.0","id":` + id + `,"error":{"code":` + strconv.Itoa(code) + `,"message":` + strconv.Quote(message) + `}}`
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	io.WriteString(w, body)
}

func idRaw(id gjson.Result) string {
	if !id.Exists() {
		return "null"
	}
	return id.Raw
}

func acceptsSSE(r *http.Request) bool {
	return strings.Contains(r.Header.Get("Accept"), "text/event-stream")
}

var hopHeaders = map[string]bool{
	"Connection": true, "Keep-Alive": true, "Proxy-Authenticate": true, "Proxy-Authorization": true,
	"Te": true, "Trailer": true, "Transfer-Encoding": true, "Upgrade": true, "Content-Length": true,
}

func copyHeaders(dst, src http.Header) {
	// Headers named in Connection are hop-by-hop too (RFC 9110 7.6.1).
	var named map[string]bool
	for _, v := range src["Connection"] {
		for _, f := range strings.Split(v, ",") {
			if f = strings.TrimSpace(f); f != "" {
				if named == nil {
					named = map[string]bool{}
				}
				named[http.CanonicalHeaderKey(f)] = true
			}
		}
	}
	for k, v := range src {
		if hopHeaders[k] || named[k] || k == "Proxy-Connection" {
			continue
		}
		dst[k] = append(dst[k][:0:0], v...)
	}
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *statusRecorder) WriteHeader(code int) {
	s.status = code
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

func (s *statusRecorder) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// knownTools remembers each session's last tool list (for invalidation events), bounded.
type knownTools struct {
	mu    sync.Mutex
	max   int
	names map[string][]byte // session -> JSON array of names
	order []string
}

func newKnownTools(max int) *knownTools {
	return &knownTools{max: max, names: map[string][]byte{}}
}

func (k *knownTools) set(session string, names []byte) {
	if len(names) > maxKnownBytes {
		return // a list this large is not worth remembering per session
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if _, ok := k.names[session]; !ok {
		for len(k.order) >= k.max {
			if _, live := k.names[k.order[0]]; live {
				delete(k.names, k.order[0])
			}
			k.order = k.order[1:]
		}
		k.order = append(k.order, session)
	}
	k.names[session] = names
}

// maxKnownBytes bounds one session's remembered tool names (10,000 sessions at most).
const maxKnownBytes = 256 << 10

func (k *knownTools) get(session string) []byte {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.names[session]
}

func (k *knownTools) forget(session string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	delete(k.names, session)
}
